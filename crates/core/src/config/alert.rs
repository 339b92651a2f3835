//! When dead letters become an alert: more than a threshold of one cause
//! within a window, or any dead letter of a cause that always needs a human
//! (`auth`: a revoked or wrong provider key fails every job until someone
//! fixes it). One alert per cause per window; its delivery id is the same on
//! every retry, so the receiver can dedup.
//!
//! A budget alert: a tenant's (or a user's) tokens today passed a share of
//! its quota (`QUOTA_ALERT_SHARE`, default 0.8), once per quota and day.
//!
//! An alert's body is onejob's JSON (`ALERT_FORMAT=onejob`, signed) or a
//! Slack incoming webhook's message (`ALERT_FORMAT=slack`: `text` and
//! `blocks`), made from the same alert ([`slack_message`]).

use serde_json::{Value, json};

use crate::upstream::providers::is_base_url;

/// When to alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertPolicy {
    /// Alert when a cause has more than this many dead letters in a window.
    pub threshold: u32,
    /// The window, in milliseconds.
    pub window_ms: u64,
    /// The body's format (`ALERT_FORMAT`).
    pub format: AlertFormat,
    /// A budget alert when a quota's use today passes this share of it, in
    /// thousandths (`QUOTA_ALERT_SHARE=0.8` is 800; 0 turns it off).
    pub quota_share_permille: u32,
}

/// Where alerts go (`ALERT_WEBHOOK_URL`) and the key they are signed with
/// (`ALERT_SECRET`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertWebhook {
    /// The receiver's URL.
    pub url: String,
    /// The signing key (optional for `ALERT_FORMAT=slack`: Slack's URL is the secret).
    pub secret: Option<String>,
}

impl AlertWebhook {
    /// The alert webhook of `ALERT_WEBHOOK_URL` and `ALERT_SECRET` (as read:
    /// `None` unset or blank): none without a URL; an http(s) URL with no
    /// credentials, query or fragment; signed unless Slack's.
    pub fn configure(url: Option<String>, secret: Option<String>, format: AlertFormat) -> Result<Option<Self>, String> {
        match (url, secret) {
            (None, _) => Ok(None),
            (Some(url), _) if !is_base_url(&url) => {
                Err("ALERT_WEBHOOK_URL must be an http(s) URL with no credentials, query or fragment".into())
            }
            (Some(url), Some(secret)) => Ok(Some(Self { url, secret: Some(secret) })),
            (Some(url), None) if format == AlertFormat::Slack => Ok(Some(Self { url, secret: None })),
            (Some(_), None) => {
                Err("ALERT_WEBHOOK_URL is set but ALERT_SECRET (the key alerts are signed with) is not".into())
            }
        }
    }
}

/// The format of an alert's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AlertFormat {
    /// onejob's JSON, signed with `ALERT_SECRET` (`OneJob-Signature`).
    #[default]
    OneJob,
    /// A Slack incoming webhook's message (`{"text", "blocks"}`); Slack's
    /// URL is the secret, so `ALERT_SECRET` is optional.
    Slack,
}

impl AlertFormat {
    /// `ALERT_FORMAT`'s value (`onejob` or `slack`), if it is one.
    pub fn from_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "onejob" => Some(Self::OneJob),
            "slack" => Some(Self::Slack),
            _ => None,
        }
    }
}

/// `QUOTA_ALERT_SHARE` (a decimal in `0..=1`, like `0.8`; `0` turns budget
/// alerts off) in thousandths.
pub fn parse_share(text: &str) -> Option<u32> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 3 {
        return None;
    }
    let whole: u32 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    let fraction: u32 = format!("{fraction:0<3}").parse().ok()?;
    let permille = whole.checked_mul(1000)?.checked_add(fraction)?;
    (permille <= 1000).then_some(permille)
}

/// The quota a budget alert is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetAlert {
    /// The tenant id.
    pub tenant: String,
    /// The user, for a user's quota.
    pub user: Option<String>,
    /// Tokens allowed per day.
    pub limit: u64,
    /// Tokens used today, after the count that passed the share.
    pub used: u64,
    /// The share passed, in thousandths.
    pub share_permille: u32,
    /// The quota day (days since the epoch).
    pub day: u64,
}

impl BudgetAlert {
    /// The budget alert a meter's answer to an add made due: only with an
    /// alert answered and a limit (the user's meter's is the user's quota).
    pub fn due(
        answer: &crate::config::quota::MeterAnswer,
        meter: &crate::config::quota::MeterRef,
        tenant: &str,
        share_permille: u32,
        now_ms: u64,
    ) -> Option<Self> {
        let limit = meter.limit.filter(|_| answer.alert == Some(true))?;
        Some(Self {
            tenant: tenant.to_owned(),
            user: meter.user.clone(),
            limit,
            used: answer.used.unwrap_or_default(),
            share_permille,
            day: crate::config::quota::day_of(now_ms),
        })
    }

    /// `tenant_tokens_per_day` or `user_tokens_per_day`.
    pub fn quota(&self) -> &'static str {
        if self.user.is_some() { "user_tokens_per_day" } else { "tenant_tokens_per_day" }
    }

    /// One per tenant (and user), quota and day, the same on every retry.
    pub fn delivery_id(&self) -> String {
        let whom = match &self.user {
            Some(user) => crate::identity::digest::framed_sha256_hex(&[
                b"onejob/budget/v1",
                self.tenant.as_bytes(),
                user.as_bytes(),
            ]),
            None => crate::identity::digest::framed_sha256_hex(&[b"onejob/budget/v1", self.tenant.as_bytes()]),
        };
        format!("onejob-budget-{}-{}-{}", &whom[..16], self.quota(), self.day)
    }

    /// onejob's JSON body of the alert.
    pub fn body(&self) -> Value {
        json!({
            "type": "onejob.budget",
            "delivery_id": self.delivery_id(),
            "tenant": self.tenant,
            "user": self.user,
            "quota": self.quota(),
            "limit": self.limit,
            "used": self.used,
            "share": f64::from(self.share_permille) / 1000.0,
            "day_start_ms": self.day * crate::config::quota::DAY_MS,
            "day_end_ms": (self.day + 1) * crate::config::quota::DAY_MS,
        })
    }
}

/// The body an alert is sent with in `format`: onejob's JSON as it is, or
/// Slack's message made from it ([`slack_message`]).
pub fn body_in(format: AlertFormat, body: &str) -> Result<String, serde_json::Error> {
    match format {
        AlertFormat::OneJob => Ok(body.to_owned()),
        AlertFormat::Slack => Ok(slack_message(&serde_json::from_str(body)?).to_string()),
    }
}

/// The Slack incoming-webhook message of an alert whose onejob body is
/// `alert` (a dead-letter or a budget alert): a one-line `text` (the
/// notification) and `blocks` (a section and the delivery id as context).
pub fn slack_message(alert: &Value) -> Value {
    let text = |name: &str| alert.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
    let number = |name: &str| alert.get(name).and_then(Value::as_u64).unwrap_or_default();
    let (headline, details) = match alert.get("type").and_then(Value::as_str) {
        Some("onejob.budget") => {
            let whom = match alert.get("user").and_then(Value::as_str) {
                Some(user) => format!("user `{user}` of tenant `{}`", text("tenant")),
                None => format!("tenant `{}`", text("tenant")),
            };
            let share = alert.get("share").and_then(Value::as_f64).unwrap_or_default();
            (
                format!("onejob: {whom} has used {:.0}% of its daily token quota", share * 100.0),
                format!(
                    "*{}* of *{}* tokens used today (`{}`); new jobs are refused once it is spent, until 00:00 UTC.",
                    number("used"),
                    number("limit"),
                    text("quota")
                ),
            )
        }
        _ => {
            let samples = alert.get("samples").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let tenants: Vec<String> = samples
                .iter()
                .filter_map(|s| s.get("tenant").and_then(Value::as_str).map(|t| format!("`{t}`")))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            (
                format!("onejob: {} dead letters of cause {}", number("count"), text("cause")),
                format!(
                    "*{}* jobs died of `{}` in this window (threshold {}){}. See the console's Dead letters.",
                    number("count"),
                    text("cause"),
                    number("threshold"),
                    if tenants.is_empty() { String::new() } else { format!("; tenants {}", tenants.join(", ")) }
                ),
            )
        }
    };
    json!({
        "text": headline,
        "blocks": [
            { "type": "section", "text": { "type": "mrkdwn", "text": format!("*{headline}*\n{details}") } },
            { "type": "context", "elements": [{ "type": "mrkdwn", "text": format!("delivery `{}`", text("delivery_id")) }] },
        ],
    })
}

/// Causes that alert at their first dead letter (by their audit name):
/// `auth` ([`crate::retry::classify::ErrorClass::Auth`]).
pub fn alerts_at_once(error_class: &str) -> bool {
    // A revoked key stops every job; an effect that did not happen (a mail
    // not sent, a row not written) is a promise broken to one customer.
    error_class == "auth" || error_class == "effect"
}

/// Whether `count` dead letters of `error_class` in the current window call
/// for an alert.
pub fn should_alert(policy: AlertPolicy, error_class: &str, count: u32) -> bool {
    alerts_at_once(error_class) || count > policy.threshold
}

/// The window `now_ms` falls in (its number since the epoch).
pub fn window_of(policy: AlertPolicy, now_ms: u64) -> u64 {
    now_ms / policy.window_ms.max(1)
}

/// The window a dead letter's alert is decided in: the one the letter was
/// recorded in (`recorded_ms`), whatever the time of the check. Its number,
/// and its start (the letters that count were last seen from then on, the
/// one just recorded included). A check that took its own time instead
/// would, for a letter recorded just before a window's end and checked
/// just after, count in a window the letter is not in: a cause that alerts
/// at its first letter (`auth`, `effect`) would not alert at all.
pub fn window_of_letter(policy: AlertPolicy, recorded_ms: u64) -> (u64, u64) {
    let window = window_of(policy, recorded_ms);
    (window, window * policy.window_ms.max(1))
}

/// The alert's delivery id: one per cause and window, the same on retries.
pub fn delivery_id(error_class: &str, window: u64) -> String {
    format!("onejob-alert-{error_class}-{window}")
}

/// How an alert is sent once, whoever asks and however often (D1's
/// `alerts` table, keyed by the alert's delivery id): the first caller's
/// body is written ([`sending::WRITE`]), the sending claimed by one caller
/// at a time ([`sending::CLAIM`]; a claim older than [`sending::CLAIM_LOST_MS`]
/// is presumed lost), the body kept read back ([`sending::BODY`]), sent, and
/// marked ([`sending::mark`]).
pub mod sending {
    /// A claim this old (ms) was lost with its sender: another may claim.
    pub const CLAIM_LOST_MS: u64 = 30_000;

    /// Writes the alert (`?1` delivery id, `?2` cause, `?3` body); the first
    /// writer's body wins.
    pub const WRITE: &str =
        "INSERT INTO alerts (delivery_id, cause, body) VALUES (?1, ?2, ?3) ON CONFLICT (delivery_id) DO NOTHING";

    /// Claims the sending of `?1` at `?2` (now): changes a row only when it
    /// is unsent and unclaimed, or its claim was lost.
    pub const CLAIM: &str = "UPDATE alerts SET claimed_ms = ?2
             WHERE delivery_id = ?1 AND sent_ms IS NULL AND (claimed_ms IS NULL OR claimed_ms < ?2 - 30000)";

    /// The body kept under `?1`.
    pub const BODY: &str = "SELECT body FROM alerts WHERE delivery_id = ?1";

    /// What follows a send of `?1` at `?2` (now): marked sent when the
    /// receiver took it, else its claim released for the next try.
    pub fn mark(delivered: bool) -> &'static str {
        match delivered {
            true => "UPDATE alerts SET sent_ms = ?2 WHERE delivery_id = ?1",
            false => "UPDATE alerts SET claimed_ms = NULL WHERE delivery_id = ?1 AND ?2 > 0",
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn a_letter_recorded_at_a_window_s_end_is_counted_in_that_window_whenever_checked() {
        let policy =
            AlertPolicy { threshold: 10, window_ms: 900_000, format: AlertFormat::OneJob, quota_share_permille: 800 };
        let recorded = 2 * 900_000 - 1; // the last millisecond of window 1
        let (window, since) = window_of_letter(policy, recorded);
        assert_eq!((window, since), (1, 900_000));
        assert!(since <= recorded, "the letter itself counts");
        // The check runs a moment later, in window 2: the letter's window still decides.
        assert_eq!(window_of(policy, recorded + 2), 2);
        assert_eq!(delivery_id("auth", window), "onejob-alert-auth-1");
    }

    #[test]
    fn an_alert_is_sent_as_onejobs_json_or_as_slacks_message() {
        let body = r#"{"type":"onejob.dead_letters","cause":"auth","count":1}"#;
        assert_eq!(body_in(AlertFormat::OneJob, body).unwrap(), body);
        let slack: Value = serde_json::from_str(&body_in(AlertFormat::Slack, body).unwrap()).unwrap();
        assert_eq!(slack, slack_message(&serde_json::from_str(body).unwrap()));
        assert!(body_in(AlertFormat::Slack, "not json").is_err());
        assert_eq!(body_in(AlertFormat::OneJob, "not json").unwrap(), "not json");
    }

    #[test]
    fn a_meters_alert_answer_is_a_budget_alert_of_its_quota() {
        use crate::config::quota::{DAY_MS, MeterAnswer, MeterRef};
        let user = MeterRef { name: "user\u{1f}acme\u{1f}u1".into(), limit: Some(10), user: Some("u1".into()) };
        let alerted = MeterAnswer { allowed: None, alert: Some(true), used: Some(9) };
        let due = BudgetAlert::due(&alerted, &user, "acme", 800, 3 * DAY_MS + 5).unwrap();
        assert_eq!(
            due,
            BudgetAlert {
                tenant: "acme".into(),
                user: Some("u1".into()),
                limit: 10,
                used: 9,
                share_permille: 800,
                day: 3
            }
        );
        assert_eq!(due.quota(), "user_tokens_per_day");
        let quiet = MeterAnswer { alert: Some(false), ..alerted };
        assert_eq!(BudgetAlert::due(&quiet, &user, "acme", 800, 0), None);
        let unlimited = MeterRef { limit: None, ..user };
        assert_eq!(BudgetAlert::due(&alerted, &unlimited, "acme", 800, 0), None);
    }

    #[test]
    fn an_alert_webhook_needs_a_plain_url_and_a_secret_unless_slacks() {
        let url = || Some("https://alerts.example/hook".to_owned());
        let secret = || Some("s3cret".to_owned());
        assert_eq!(AlertWebhook::configure(None, secret(), AlertFormat::OneJob), Ok(None));
        assert_eq!(
            AlertWebhook::configure(url(), secret(), AlertFormat::OneJob),
            Ok(Some(AlertWebhook { url: "https://alerts.example/hook".into(), secret: Some("s3cret".into()) }))
        );
        assert_eq!(
            AlertWebhook::configure(url(), None, AlertFormat::Slack),
            Ok(Some(AlertWebhook { url: "https://alerts.example/hook".into(), secret: None }))
        );
        let refused = AlertWebhook::configure(url(), None, AlertFormat::OneJob).unwrap_err();
        assert!(refused.contains("ALERT_SECRET"), "{refused}");
        for bad in ["ftp://alerts.example", "https://user:pw@alerts.example", "https://a.example/h?x=1"] {
            let refused = AlertWebhook::configure(Some(bad.into()), secret(), AlertFormat::Slack).unwrap_err();
            assert!(refused.starts_with("ALERT_WEBHOOK_URL must be"), "{bad}: {refused}");
        }
    }

    const POLICY: AlertPolicy =
        AlertPolicy { threshold: 10, window_ms: 900_000, format: AlertFormat::OneJob, quota_share_permille: 800 };

    #[test]
    fn threshold_or_a_cause_that_needs_a_human() {
        assert!(!should_alert(POLICY, "unavailable", 10));
        assert!(should_alert(POLICY, "unavailable", 11));
        assert!(should_alert(POLICY, "auth", 1));
    }

    #[test]
    fn one_delivery_id_per_cause_and_window() {
        let w = window_of(POLICY, 1_800_000);
        assert_eq!(w, 2);
        assert_eq!(window_of(POLICY, 2_699_999), 2);
        assert_eq!(delivery_id("unavailable", w), "onejob-alert-unavailable-2");
        assert_ne!(delivery_id("unavailable", w), delivery_id("auth", w));
    }

    #[test]
    fn formats_and_shares_are_read_strictly() {
        assert_eq!(AlertFormat::from_name("Slack"), Some(AlertFormat::Slack));
        assert_eq!(AlertFormat::from_name("onejob"), Some(AlertFormat::OneJob));
        assert_eq!(AlertFormat::from_name("teams"), None);
        assert_eq!(parse_share("0.8"), Some(800));
        assert_eq!(parse_share(".95"), Some(950));
        assert_eq!(parse_share("1"), Some(1000));
        assert_eq!(parse_share("0"), Some(0));
        for bad in ["", ".", "1.5", "-0.2", "0.8125", "80%", "abc"] {
            assert_eq!(parse_share(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_budget_alert_is_one_per_quota_and_day_and_reads_in_slack() {
        let alert =
            BudgetAlert { tenant: "acme".into(), user: None, limit: 1000, used: 812, share_permille: 800, day: 20_000 };
        let user = BudgetAlert { user: Some("u-1".into()), ..alert.clone() };
        assert_ne!(alert.delivery_id(), user.delivery_id());
        assert_ne!(alert.delivery_id(), BudgetAlert { day: 20_001, ..alert.clone() }.delivery_id());
        assert!(alert.delivery_id().ends_with("-tenant_tokens_per_day-20000"));
        let body = alert.body();
        assert_eq!(body["type"], "onejob.budget");
        assert_eq!(body["share"], 0.8);
        let slack = slack_message(&body);
        assert_eq!(slack["text"], "onejob: tenant `acme` has used 80% of its daily token quota");
        assert_eq!(slack["blocks"][0]["type"], "section");
        assert!(slack["blocks"][0]["text"]["text"].as_str().unwrap().contains("*812* of *1000*"));
        assert!(slack["blocks"][1]["elements"][0]["text"].as_str().unwrap().contains(&alert.delivery_id()));
    }

    #[test]
    fn a_dead_letter_alert_reads_in_slack_without_keys() {
        let body = json!({
            "type": "onejob.dead_letters", "delivery_id": "onejob-alert-auth-2", "cause": "auth", "count": 3, "threshold": 10,
            "samples": [{ "tenant": "acme", "key": "secret-key-123", "attempts": 1 }, { "tenant": "acme", "key": "k2" }],
        });
        let slack = slack_message(&body);
        assert_eq!(slack["text"], "onejob: 3 dead letters of cause auth");
        let text = slack.to_string();
        assert!(text.contains("`acme`"));
        assert!(!text.contains("secret-key-123"), "a channel sees no idempotency key");
    }

    #[test]
    fn an_alert_is_marked_sent_once_taken_and_its_claim_released_otherwise() {
        use super::sending::{CLAIM, CLAIM_LOST_MS, mark};
        assert!(mark(true).contains("SET sent_ms = ?2"));
        assert!(mark(false).contains("SET claimed_ms = NULL"));
        assert!(!mark(false).contains("sent_ms"), "a failed send leaves it unsent");
        assert!(CLAIM.contains(&format!("?2 - {CLAIM_LOST_MS}")), "the claim's SQL and its constant agree");
    }
}
