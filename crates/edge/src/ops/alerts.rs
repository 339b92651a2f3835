//! Alerts: dead letters (one per cause and window) and budgets (one per
//! tenant or user, quota and day), each one POST to `ALERT_WEBHOOK_URL`
//! (see [`onejob_core::config::alert`]), sent once however many callers ask for it:
//! the alert is written to D1 under its delivery id first, then claimed,
//! sent and marked. The body is onejob's signed JSON, or a Slack
//! incoming webhook's message (`ALERT_FORMAT=slack`).

use onejob_core::config::alert::{self, AlertFormat, BudgetAlert, sending};
use wasm_bindgen::JsValue;
use worker::{Env, Fetch, Result};

use crate::env::clock::now_ms;
use crate::env::config::{AlertWebhook, Config};
use crate::error::EdgeError;
use crate::ops::dead_letters::dead_letters;

/// Alerts about `error_class` if its dead letters call for one (see
/// [`onejob_core::config::alert`]), in the window of the letter recorded at
/// `recorded_ms` ([`alert::window_of_letter`]): one signed POST per cause and
/// window to `ALERT_WEBHOOK_URL`, its delivery id the same on every retry.
/// `Err` when the receiver did not take it (the dead-letter message is
/// retried, and the same alert with it).
pub async fn alert_if_due(env: &Env, config: &Config, error_class: &str, recorded_ms: u64) -> Result<()> {
    let Some(webhook) = &config.alert_webhook else { return Ok(()) };
    let policy = config.settings.alerts;
    let db = super::database(env).await?;
    let (window, window_start) = alert::window_of_letter(policy, recorded_ms);
    let count = db
        .prepare(
            "SELECT COUNT(*) AS n FROM dead_letters
             WHERE error_class = ?1 AND last_seen_ms >= ?2 AND replayed_ms IS NULL",
        )
        .bind(&[error_class.into(), JsValue::from(window_start as f64)])?
        .first::<u32>(Some("n"))
        .await?
        .unwrap_or(0);
    if !alert::should_alert(policy, error_class, count) {
        return Ok(());
    }
    let samples = dead_letters(env, None, Some(error_class), 5).await?;
    let (delivery_id, body) = onejob_core::operators::dead_letters::alert(policy, error_class, count, window, &samples);
    deliver(env, config, webhook, &delivery_id, error_class, &body).await
}

/// A budget alert (a quota's use today passed `QUOTA_ALERT_SHARE`), sent
/// once per quota and day. Errors are logged: the meter has moved on.
pub async fn budget_alert(env: &Env, config: &Config, due: &BudgetAlert) {
    let Some(webhook) = &config.alert_webhook else { return };
    let body = due.body().to_string();
    if let Err(error) = deliver(env, config, webhook, &due.delivery_id(), "budget", &body).await {
        worker::console_warn!("onejob: a budget alert was not delivered: {error}");
    }
}

/// Writes the alert `body` under `delivery_id` (the first writer's body
/// wins), claims its sending and sends it, once.
async fn deliver(
    env: &Env,
    config: &Config,
    webhook: &AlertWebhook,
    delivery_id: &str,
    cause: &str,
    body: &str,
) -> Result<()> {
    let db = super::database(env).await?;
    let now = now_ms();
    // The first caller to get here writes the alert; every later one
    // (and every retry) sends that same body under the same id.
    db.prepare(sending::WRITE).bind(&[delivery_id.into(), cause.into(), body.into()])?.run().await?;
    // Claim the sending (one sender at a time; a lost claim is taken over).
    let claimed = db
        .prepare(sending::CLAIM)
        .bind(&[delivery_id.into(), JsValue::from(now as f64)])?
        .run()
        .await?
        .meta()?
        .and_then(|m| m.changes)
        .unwrap_or(0);
    if claimed == 0 {
        return Ok(());
    }
    let body = db
        .prepare(sending::BODY)
        .bind(&[delivery_id.into()])?
        .first::<String>(Some("body"))
        .await?
        .unwrap_or_else(|| body.to_owned());
    let sent = post_alert(webhook, config.settings.alerts.format, delivery_id, &body).await;
    let mark = sending::mark(sent.is_ok());
    db.prepare(mark).bind(&[delivery_id.into(), JsValue::from(now_ms() as f64)])?.run().await?;
    sent
}

/// POSTs an alert: onejob's JSON, signed (`OneJob-Signature: sha256=<hex
/// HMAC-SHA256 of "<timestamp>.<body>">`, with `OneJob-Timestamp` and
/// `OneJob-Delivery`), or, for Slack, its message made from that JSON
/// (signed too when `ALERT_SECRET` is set; Slack ignores the headers).
async fn post_alert(webhook: &AlertWebhook, format: AlertFormat, delivery_id: &str, body: &str) -> Result<()> {
    let body = alert::body_in(format, body)?;
    let request = crate::effects::webhook::signed_post(&webhook.url, webhook.secret.as_deref(), delivery_id, &body)?;
    let response = Fetch::Request(request).send().await?;
    if (200..300).contains(&response.status_code()) {
        worker::console_log!("onejob: alert {delivery_id} delivered");
        Ok(())
    } else {
        Err(EdgeError::Refused { by: "alert receiver", status: response.status_code() }.into())
    }
}
