//! The operators' dead letters (one row per dead background job, kept in
//! D1 by the edge): a row as operators see it, the list grouped by cause
//! with each cause's hourly trend, and the dead-letter alert made of a
//! cause's count and its latest rows ([`crate::config::alert`] says when one is due).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::alert::{self, AlertPolicy};
use crate::operators::route::JobName;

/// Milliseconds in an hour (a trend's bucket).
const HOUR_MS: u64 = 3_600_000;
/// Hours in a cause's trend.
const TREND_HOURS: usize = 24;

/// One dead letter, as operators see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The tenant id.
    pub tenant: String,
    /// The user of a user token's job ('' for the tenant's own).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// The job's idempotency key (the table's `job_key`).
    #[serde(rename = "key", alias = "job_key")]
    pub key: String,
    /// Why the job died (its error class).
    pub error_class: String,
    /// The last attempt's status.
    pub last_status: Option<u16>,
    /// What went wrong, credentials redacted.
    pub detail: String,
    /// Attempts made.
    pub attempts: u32,
    /// When it was first recorded.
    pub first_seen_ms: u64,
    /// When it was last recorded.
    pub last_seen_ms: u64,
}

impl From<DeadLetter> for JobName {
    /// The job a dead letter names, as a replay of its cause targets it
    /// (an empty user: the tenant's own job).
    fn from(letter: DeadLetter) -> JobName {
        JobName { tenant: letter.tenant, user: (!letter.user.is_empty()).then_some(letter.user), key: letter.key }
    }
}

/// A cause's dead letters: how many, when last, and a 24 h trend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    /// The cause.
    pub error_class: String,
    /// Its dead letters.
    pub count: usize,
    /// The latest one's `last_seen_ms`.
    pub last_seen_ms: u64,
    /// Dead letters per hour over the last 24 hours, oldest first.
    pub trend: Vec<u32>,
}

/// `GET admin/dead-letters`'s answer: the letters grouped by cause
/// ([`groups`], at `now_ms`), and each of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLettersAnswer {
    /// By cause, the largest first.
    pub groups: Vec<Group>,
    /// Every letter listed, newest first.
    pub entries: Vec<DeadLetter>,
}

impl DeadLettersAnswer {
    /// The answer listing `letters` at `now_ms`.
    pub fn of(letters: Vec<DeadLetter>, now_ms: u64) -> Self {
        Self { groups: groups(&letters, now_ms), entries: letters }
    }
}

/// Groups dead letters by cause, with each cause's hourly trend up to
/// `now_ms`; the largest group first (then by name).
pub fn groups(letters: &[DeadLetter], now_ms: u64) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for letter in letters {
        let index = match groups.iter().position(|g| g.error_class == letter.error_class) {
            Some(index) => index,
            None => {
                groups.push(Group {
                    error_class: letter.error_class.clone(),
                    count: 0,
                    last_seen_ms: 0,
                    trend: vec![0; TREND_HOURS],
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[index];
        group.count += 1;
        group.last_seen_ms = group.last_seen_ms.max(letter.last_seen_ms);
        let hours_ago = now_ms.saturating_sub(letter.last_seen_ms) / HOUR_MS;
        if hours_ago < TREND_HOURS as u64 {
            group.trend[TREND_HOURS - 1 - hours_ago as usize] += 1;
        }
    }
    groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.error_class.cmp(&b.error_class)));
    groups
}

/// A dead-letter alert: its delivery id (the same on every retry) and its
/// body (onejob's JSON): the cause, its count in `window`, and `samples`
/// (its latest dead letters).
pub fn alert(policy: AlertPolicy, cause: &str, count: u32, window: u64, samples: &[DeadLetter]) -> (String, String) {
    let delivery_id = alert::delivery_id(cause, window);
    let window_start = window * policy.window_ms;
    let body = json!({
        "type": "onejob.dead_letters",
        "delivery_id": delivery_id,
        "cause": cause,
        "count": count,
        "threshold": policy.threshold,
        "window_start_ms": window_start,
        "window_end_ms": window_start + policy.window_ms,
        "samples": samples.iter().map(|l| json!({
            "tenant": l.tenant, "key": l.key, "last_status": l.last_status, "detail": l.detail, "attempts": l.attempts,
        })).collect::<Vec<Value>>(),
    })
    .to_string();
    (delivery_id, body)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::config::alert::AlertFormat;

    const NOW: u64 = 100 * HOUR_MS;

    #[test]
    fn a_dead_letter_names_its_job_an_empty_user_none() {
        let tenants = letter("timeout", "k1", NOW);
        assert_eq!(JobName::from(tenants), JobName { tenant: "acme".into(), user: None, key: "k1".into() });
        let users = DeadLetter { user: "u1".into(), ..letter("timeout", "k2", NOW) };
        assert_eq!(JobName::from(users), JobName { tenant: "acme".into(), user: Some("u1".into()), key: "k2".into() });
    }

    fn letter(class: &str, key: &str, last_seen_ms: u64) -> DeadLetter {
        DeadLetter {
            tenant: "acme".into(),
            user: String::new(),
            key: key.into(),
            error_class: class.into(),
            last_status: Some(503),
            detail: "the provider answered 503".into(),
            attempts: 3,
            first_seen_ms: last_seen_ms,
            last_seen_ms,
        }
    }

    #[test]
    fn dead_letters_group_by_cause_largest_first_with_an_hourly_trend() {
        let letters = [
            letter("auth", "a", NOW - 10),
            letter("unavailable", "b", NOW - 2 * HOUR_MS),
            letter("unavailable", "c", NOW - 30 * HOUR_MS),
            letter("unavailable", "d", NOW),
            letter("timeout", "e", NOW - HOUR_MS),
        ];
        let groups = groups(&letters, NOW);
        let order: Vec<&str> = groups.iter().map(|g| g.error_class.as_str()).collect();
        assert_eq!(order, ["unavailable", "auth", "timeout"]);
        let unavailable = &groups[0];
        assert_eq!((unavailable.count, unavailable.last_seen_ms), (3, NOW));
        assert_eq!(unavailable.trend.len(), 24);
        assert_eq!((unavailable.trend[23], unavailable.trend[21]), (1, 1));
        assert_eq!(unavailable.trend.iter().sum::<u32>(), 2, "older than 24 h: counted, not in the trend");
        assert_eq!(groups[2].trend[22], 1);
        assert!(super::groups(&[], NOW).is_empty());
    }

    #[test]
    fn a_row_reads_its_job_key_and_shows_a_user_only_when_there_is_one() {
        let row = json!({"tenant": "acme", "user": "", "job_key": "k1", "error_class": "auth", "last_status": null,
                         "detail": "x", "attempts": 1, "first_seen_ms": 1, "last_seen_ms": 2});
        let letter: DeadLetter = serde_json::from_value(row).unwrap();
        assert_eq!(letter.key, "k1");
        let shown = serde_json::to_value(&letter).unwrap();
        assert_eq!(shown["key"], "k1");
        assert!(shown.get("user").is_none());
    }

    #[test]
    fn the_alert_names_its_window_and_samples() {
        let policy =
            AlertPolicy { threshold: 2, window_ms: 600_000, format: AlertFormat::OneJob, quota_share_permille: 0 };
        let (id, body) = alert(policy, "unavailable", 3, 7, &[letter("unavailable", "k", NOW)]);
        assert_eq!(id, "onejob-alert-unavailable-7");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["type"], "onejob.dead_letters");
        assert_eq!(body["delivery_id"], id.as_str());
        assert_eq!((body["count"].as_u64(), body["threshold"].as_u64()), (Some(3), Some(2)));
        assert_eq!(
            (body["window_start_ms"].as_u64(), body["window_end_ms"].as_u64()),
            (Some(4_200_000), Some(4_800_000))
        );
        assert_eq!(
            body["samples"],
            json!([{ "tenant": "acme", "key": "k", "last_status": 503, "detail": "the provider answered 503", "attempts": 3 }])
        );
    }

    #[test]
    fn the_dead_letters_answer_lists_the_groups_then_every_letter() {
        let letters = vec![letter("timeout", "k1", NOW), letter("timeout", "k2", NOW), letter("quota", "k3", NOW)];
        let answer = DeadLettersAnswer::of(letters.clone(), NOW);
        assert_eq!(answer.groups, groups(&letters, NOW));
        assert_eq!(answer.entries, letters);
        let json = serde_json::to_value(&answer).unwrap();
        assert_eq!(json["groups"][0]["error_class"], "timeout");
        assert_eq!(json["entries"].as_array().map(Vec::len), Some(3));
    }
}
