//! The client side of identity: which idempotency key an intent uses.
//!
//! An intent is named by the app (`"triage:ticket-8812"`) or, when unnamed,
//! identified by the request's fingerprint. While it is unresolved, every
//! submission reuses its key: double clicks, retries and reloads all become
//! attempts of one job. Once its result was delivered, the next identical
//! submission is a new intent with a new key (a legitimate repeat). Records
//! expire with the server's retention: after that the server has forgotten
//! the key, so reusing it would run the request again anyway.

use serde::{Deserialize, Serialize};

use crate::fingerprint::Fingerprint;
use crate::key::IdempotencyKey;
use crate::random::RandomSource;

/// Where an intent stands on the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntentState {
    /// Submitted; no final answer delivered yet. Its key is reused.
    Pending,
    /// A final answer was delivered to the app.
    Delivered,
    /// The client stopped retrying; the job may still finish on the server,
    /// so the key is kept and `resume()` asks again.
    GaveUp,
}

/// The request as it must be re-sent after a reload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedRequest {
    /// Absolute URL.
    pub url: String,
    /// HTTP method.
    pub method: String,
    /// Headers worth re-sending (never the credential: the SDK adds it).
    pub headers: Vec<(String, String)>,
    /// The body as text, if any.
    pub body: Option<String>,
}

/// What the client remembers about one intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentRecord {
    /// The intent's id: the app's name, or `fp:<fingerprint>`.
    pub intent: String,
    /// The key every submission of this intent sends.
    pub key: IdempotencyKey,
    /// The fingerprint of the request first submitted.
    pub fingerprint: Fingerprint,
    /// Where it stands.
    pub state: IntentState,
    /// Requests sent so far, across reloads.
    pub attempts: u32,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// After this the record is dropped (the server's retention).
    pub expires_ms: u64,
    /// What to re-send on `resume()`.
    pub request: Option<SavedRequest>,
}

/// The id of an unnamed intent: its request's fingerprint.
pub fn intent_id(name: Option<&str>, fingerprint: &Fingerprint) -> String {
    match name {
        Some(name) if !name.is_empty() => name.to_owned(),
        _ => format!("fp:{fingerprint}"),
    }
}

/// Whether a stored record still governs its intent at `now_ms`.
pub fn is_live(record: &IntentRecord, now_ms: u64) -> bool {
    now_ms < record.expires_ms
}

/// The record a new submission should use: the stored one while it is
/// unresolved and live (same key), else a fresh one with a new key. Returns
/// the record and whether it is new.
pub fn submit(
    stored: Option<IntentRecord>,
    intent: &str,
    fingerprint: Fingerprint,
    request: Option<SavedRequest>,
    now_ms: u64,
    retention_ms: u64,
    rng: &mut dyn RandomSource,
) -> (IntentRecord, bool) {
    match stored {
        Some(record) if record.state != IntentState::Delivered && is_live(&record, now_ms) => (record, false),
        _ => {
            let record = IntentRecord {
                intent: intent.to_owned(),
                key: IdempotencyKey::new_v4(rng),
                fingerprint,
                state: IntentState::Pending,
                attempts: 0,
                created_ms: now_ms,
                updated_ms: now_ms,
                expires_ms: now_ms.saturating_add(retention_ms),
                request,
            };
            (record, true)
        }
    }
}

impl IntentRecord {
    /// Counts one request sent.
    pub fn record_attempt(&mut self, now_ms: u64) {
        self.attempts += 1;
        self.state = IntentState::Pending;
        self.updated_ms = now_ms;
    }

    /// The app got a final answer: the next identical submission is new.
    pub fn mark_delivered(&mut self, now_ms: u64) {
        self.state = IntentState::Delivered;
        self.updated_ms = now_ms;
        self.request = None; // nothing left to re-send; keeps storage small
    }

    /// Retries stopped without a final answer; keep the key for `resume()`.
    pub fn mark_gave_up(&mut self, now_ms: u64) {
        self.state = IntentState::GaveUp;
        self.updated_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::fingerprint::Body;
    use crate::random::SplitMix64;

    const DAY: u64 = 86_400_000;

    fn fp(body: &str) -> Fingerprint {
        Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(body.as_bytes())).unwrap()
    }

    #[test]
    fn unresolved_intents_reuse_their_key() {
        let mut rng = SplitMix64::new(1);
        let (first, is_new) = submit(None, "triage:1", fp("{}"), None, 0, DAY, &mut rng);
        assert!(is_new);
        let (again, is_new) = submit(Some(first.clone()), "triage:1", fp("{}"), None, 10, DAY, &mut rng);
        assert!(!is_new);
        assert_eq!(again.key, first.key);
        let mut gave_up = first.clone();
        gave_up.mark_gave_up(20);
        let (after_giving_up, is_new) = submit(Some(gave_up), "triage:1", fp("{}"), None, 30, DAY, &mut rng);
        assert!(!is_new, "a job we stopped waiting for may still finish: same key");
        assert_eq!(after_giving_up.key, first.key);
    }

    #[test]
    fn delivered_or_expired_intents_get_a_new_key() {
        let mut rng = SplitMix64::new(2);
        let (mut first, _) = submit(None, "x", fp("{}"), None, 0, DAY, &mut rng);
        first.mark_delivered(5);
        let (second, is_new) = submit(Some(first.clone()), "x", fp("{}"), None, 6, DAY, &mut rng);
        assert!(is_new);
        assert_ne!(second.key, first.key);
        let (third, is_new) = submit(Some(second.clone()), "x", fp("{}"), None, DAY + 6, DAY, &mut rng);
        assert!(is_new, "expired with the server's retention");
        assert_ne!(third.key, second.key);
    }

    #[test]
    fn unnamed_intents_are_identified_by_fingerprint() {
        let f = fp(r#"{"a":1}"#);
        assert_eq!(intent_id(None, &f), format!("fp:{f}"));
        assert_eq!(intent_id(Some(""), &f), format!("fp:{f}"));
        assert_eq!(intent_id(Some("named"), &f), "named");
        assert_eq!(intent_id(None, &fp(r#"{ "a" : 1.0 }"#)), intent_id(None, &f));
    }

    #[test]
    fn records_round_trip_and_count_attempts() {
        let mut rng = SplitMix64::new(3);
        let request = SavedRequest {
            url: "https://x/v1/y".into(),
            method: "POST".into(),
            headers: vec![],
            body: Some("{}".into()),
        };
        let (mut r, _) = submit(None, "x", fp("{}"), Some(request), 0, DAY, &mut rng);
        r.record_attempt(1);
        r.record_attempt(2);
        assert_eq!(r.attempts, 2);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<IntentRecord>(&text).unwrap(), r);
        r.mark_delivered(3);
        assert_eq!(r.request, None);
        assert!(serde_json::from_str::<IntentRecord>(r#"{"intent":"x","key":"short"}"#).is_err());
    }
}
