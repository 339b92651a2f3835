//! Dead-letter alerts: one signed POST per cause and window to
//! `ALERT_WEBHOOK_URL` (see [`onejob_core::alert`]), sent once however many
//! dead letters ask for it.

use onejob_core::alert;
use wasm_bindgen::JsValue;
use worker::{Env, Fetch, Result};

use crate::env::clock::now_ms;
use crate::env::config::{AlertWebhook, Config};
use crate::error::EdgeError;
use crate::ops::dead_letters::dead_letters;

/// Alerts about `error_class` if its dead letters call for one (see
/// [`onejob_core::alert`]): one signed POST per cause and window to
/// `ALERT_WEBHOOK_URL`, its delivery id the same on every retry. `Err` when
/// the receiver did not take it (the dead-letter message is retried, and
/// the same alert with it).
pub async fn alert_if_due(env: &Env, config: &Config, error_class: &str) -> Result<()> {
    let Some(webhook) = &config.alert_webhook else { return Ok(()) };
    let policy = config.settings.alerts;
    let db = super::database(env).await?;
    let now = now_ms();
    let window = alert::window_of(policy, now);
    let window_start = window * policy.window_ms;
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
    let delivery_id = alert::delivery_id(error_class, window);
    let samples = dead_letters(env, None, Some(error_class), 5).await?;
    let body = serde_json::json!({
        "type": "onejob.dead_letters",
        "delivery_id": delivery_id,
        "cause": error_class,
        "count": count,
        "threshold": policy.threshold,
        "window_start_ms": window_start,
        "window_end_ms": window_start + policy.window_ms,
        "samples": samples.iter().map(|l| serde_json::json!({
            "tenant": l.tenant, "key": l.key, "last_status": l.last_status, "detail": l.detail, "attempts": l.attempts,
        })).collect::<Vec<_>>(),
    })
    .to_string();
    // The first dead letter to get here writes the alert; every later one
    // (and every retry) sends that same body under the same id.
    db.prepare(
        "INSERT INTO alerts (delivery_id, cause, body) VALUES (?1, ?2, ?3) ON CONFLICT (delivery_id) DO NOTHING",
    )
    .bind(&[delivery_id.as_str().into(), error_class.into(), body.as_str().into()])?
    .run()
    .await?;
    // Claim the sending (one sender at a time; a claim older than 30 s is
    // presumed lost).
    let claimed = db
        .prepare(
            "UPDATE alerts SET claimed_ms = ?2
             WHERE delivery_id = ?1 AND sent_ms IS NULL AND (claimed_ms IS NULL OR claimed_ms < ?2 - 30000)",
        )
        .bind(&[delivery_id.as_str().into(), JsValue::from(now as f64)])?
        .run()
        .await?
        .meta()?
        .and_then(|m| m.changes)
        .unwrap_or(0);
    if claimed == 0 {
        return Ok(());
    }
    let body = db
        .prepare("SELECT body FROM alerts WHERE delivery_id = ?1")
        .bind(&[delivery_id.as_str().into()])?
        .first::<String>(Some("body"))
        .await?
        .unwrap_or(body);
    let sent = post_alert(webhook, &delivery_id, &body).await;
    let mark = match sent {
        Ok(()) => "UPDATE alerts SET sent_ms = ?2 WHERE delivery_id = ?1",
        Err(_) => "UPDATE alerts SET claimed_ms = NULL WHERE delivery_id = ?1 AND ?2 > 0",
    };
    db.prepare(mark).bind(&[delivery_id.as_str().into(), JsValue::from(now_ms() as f64)])?.run().await?;
    sent
}

/// POSTs an alert, signed: `OneJob-Signature: sha256=<hex HMAC-SHA256 of
/// "<timestamp>.<body>">`, with `OneJob-Timestamp` and `OneJob-Delivery`.
async fn post_alert(webhook: &AlertWebhook, delivery_id: &str, body: &str) -> Result<()> {
    let request = crate::effects::webhook::signed_post(&webhook.url, Some(&webhook.secret), delivery_id, body)?;
    let response = Fetch::Request(request).send().await?;
    if (200..300).contains(&response.status_code()) {
        worker::console_log!("onejob: alert {delivery_id} delivered");
        Ok(())
    } else {
        Err(EdgeError::Refused { by: "alert receiver", status: response.status_code() }.into())
    }
}
