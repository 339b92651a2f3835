//! The client side of identity: which idempotency key an intent uses.
//!
//! An intent is named by the app (`"triage:ticket-8812"`) or, when unnamed,
//! identified by the request's fingerprint. While it is unresolved, every
//! submission reuses its key: double clicks, retries and reloads all become
//! attempts of one job. Once its result was delivered, the next identical
//! submission is a new intent with a new key (a legitimate repeat). Records
//! expire with the server's retention: after that the server has forgotten
//! the key, so reusing it would run the request again anyway.

use std::borrow::Cow;

use crate::canonical::{self, Json, Numbers, RustNumbers};
use crate::fingerprint::Fingerprint;
use crate::key::IdempotencyKey;
use crate::random::RandomSource;

/// Where an intent stands on the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
        _ => ["fp:", fingerprint.as_str()].concat(),
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

/// The stored JSON form of a record, the only one: written and read without
/// serde's generic machinery (the browser SDK persists records on every
/// attempt, and this keeps its wasm small). The form is fixed, so records in
/// users' storage stay readable; a test pins it.
impl IntentRecord {
    /// The record as JSON text.
    pub fn to_json(&self) -> String {
        let request = self.request.as_ref().map(SavedRequest::to_json);
        self.to_json_with(request.as_deref())
    }

    /// The record as JSON text, with its request already serialised by
    /// [`SavedRequest::to_json`] (`None`: no request). A client saves a record
    /// on every attempt; the request, body included, is serialised once per
    /// submission and reused. Same text as [`IntentRecord::to_json`].
    pub fn to_json_with(&self, request_json: Option<&str>) -> String {
        let mut out = String::with_capacity(256 + request_json.map_or(0, str::len));
        out.push('{');
        push_str_field(&mut out, "intent", &self.intent);
        push_str_field(&mut out, "key", self.key.as_str());
        push_str_field(&mut out, "fingerprint", self.fingerprint.as_str());
        push_str_field(&mut out, "state", self.state.as_str());
        for (name, value) in [
            ("attempts", u64::from(self.attempts)),
            ("created_ms", self.created_ms),
            ("updated_ms", self.updated_ms),
            ("expires_ms", self.expires_ms),
        ] {
            push_name(&mut out, name);
            canonical::push_u64(&mut out, value);
            out.push(',');
        }
        push_name(&mut out, "request");
        out.push_str(request_json.unwrap_or("null"));
        out.push('}');
        out
    }

    /// Reads a record written by [`IntentRecord::to_json`]; `Err` says what is wrong.
    pub fn from_json(text: &str) -> Result<Self, String> {
        Self::from_json_with(text, &RustNumbers)
    }

    /// [`IntentRecord::from_json`], with numbers read by `numbers` (whole
    /// numbers written as digits, what [`IntentRecord::to_json`] writes, need none).
    pub fn from_json_with(text: &str, numbers: &dyn Numbers) -> Result<Self, String> {
        let Json::Object(members) = canonical::parse(text.as_bytes()).map_err(|e| e.describe())? else {
            return Err("not a JSON object".into());
        };
        let request = match field(&members, "request")? {
            Json::Null => None,
            Json::Object(request) => Some(SavedRequest {
                url: string(request, "url")?,
                method: string(request, "method")?,
                headers: headers(field(request, "headers")?)?,
                body: match field(request, "body")? {
                    Json::Null => None,
                    Json::String(body) => Some(body.clone().into_owned()),
                    _ => return Err("request.body must be a string or null".into()),
                },
            }),
            _ => return Err("request must be an object or null".into()),
        };
        let state = match string(&members, "state")?.as_str() {
            "pending" => IntentState::Pending,
            "delivered" => IntentState::Delivered,
            "gave_up" => IntentState::GaveUp,
            other => {
                let mut message = String::from("unknown state ");
                canonical::write_string(other, &mut message);
                return Err(message);
            }
        };
        Ok(Self {
            intent: string(&members, "intent")?,
            key: IdempotencyKey::parse(&string(&members, "key")?).map_err(|_| String::from("malformed key"))?,
            fingerprint: Fingerprint::parse(&string(&members, "fingerprint")?).ok_or("malformed fingerprint")?,
            state,
            attempts: u32::try_from(whole(&members, "attempts", numbers)?).map_err(|_| "attempts out of range")?,
            created_ms: whole(&members, "created_ms", numbers)?,
            updated_ms: whole(&members, "updated_ms", numbers)?,
            expires_ms: whole(&members, "expires_ms", numbers)?,
            request,
        })
    }
}

impl SavedRequest {
    /// The request as stored inside a record (see [`IntentRecord::to_json_with`]).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64 + self.url.len() + self.body.as_ref().map_or(0, String::len));
        out.push('{');
        push_str_field(&mut out, "url", &self.url);
        push_str_field(&mut out, "method", &self.method);
        push_name(&mut out, "headers");
        out.push('[');
        for (i, (name, value)) in self.headers.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('[');
            canonical::write_string(name, &mut out);
            out.push(',');
            canonical::write_string(value, &mut out);
            out.push(']');
        }
        out.push_str("],");
        push_name(&mut out, "body");
        match &self.body {
            Some(body) => canonical::write_string(body, &mut out),
            None => out.push_str("null"),
        }
        out.push('}');
        out
    }
}

impl IntentState {
    /// The state's name as stored (`pending`, `delivered`, `gave_up`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::GaveUp => "gave_up",
        }
    }
}

fn push_name(out: &mut String, name: &str) {
    canonical::write_string(name, out);
    out.push(':');
}

fn push_str_field(out: &mut String, name: &str, value: &str) {
    push_name(out, name);
    canonical::write_string(value, out);
    out.push(',');
}

fn field<'a, 'j>(members: &'a [(Cow<'j, str>, Json<'j>)], name: &str) -> Result<&'a Json<'j>, String> {
    members.iter().find(|(n, _)| n == name).map(|(_, v)| v).ok_or_else(|| ["missing field ", name].concat())
}

fn string(members: &[(Cow<'_, str>, Json<'_>)], name: &str) -> Result<String, String> {
    match field(members, name)? {
        Json::String(s) => Ok(s.clone().into_owned()),
        _ => Err([name, " must be a string"].concat()),
    }
}

/// A whole number JavaScript can hold exactly (timestamps, counts).
fn whole(members: &[(Cow<'_, str>, Json<'_>)], name: &str, numbers: &dyn Numbers) -> Result<u64, String> {
    const MAX_SAFE: u64 = 9_007_199_254_740_991;
    let not_whole = || [name, " must be a whole number"].concat();
    let Json::Number(literal) = field(members, name)? else { return Err(not_whole()) };
    // Digits only (what `to_json` writes): read exactly, no float involved.
    if literal.len() <= 16 && literal.bytes().all(|b| b.is_ascii_digit()) {
        let n = literal.bytes().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        return if n <= MAX_SAFE { Ok(n) } else { Err(not_whole()) };
    }
    match numbers.value(literal) {
        Some(n) if n.fract() == 0.0 && (0.0..=MAX_SAFE as f64).contains(&n) => Ok(n as u64),
        _ => Err(not_whole()),
    }
}

fn headers(value: &Json<'_>) -> Result<Vec<(String, String)>, String> {
    let Json::Array(pairs) = value else { return Err("request.headers must be an array".into()) };
    pairs
        .iter()
        .map(|pair| match pair {
            Json::Array(two) => match two.as_slice() {
                [Json::String(name), Json::String(value)] => {
                    Ok((name.clone().into_owned(), value.clone().into_owned()))
                }
                _ => Err("request.headers entries must be [name, value]".to_owned()),
            },
            _ => Err("request.headers entries must be [name, value]".to_owned()),
        })
        .collect()
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
        assert_eq!(IntentRecord::from_json(&r.to_json()).unwrap(), r);
        r.mark_delivered(3);
        assert_eq!(r.request, None);
        assert!(IntentRecord::from_json(r#"{"intent":"x","key":"short"}"#).is_err());
    }

    #[test]
    fn the_stored_form_round_trips_and_is_pinned() {
        let mut rng = SplitMix64::new(9);
        let request = SavedRequest {
            url: "https://gw.test/v1/chat/completions".into(),
            method: "POST".into(),
            headers: vec![
                ("Content-Type".into(), "application/json".into()),
                ("X-Note".into(), "a \"quoted\" \u{1F600}".into()),
            ],
            body: Some(r#"{"model":"m","messages":[]}"#.into()),
        };
        let (mut with_request, _) =
            submit(None, "triage:\n1", fp("{}"), Some(request), 1_796_000_000_000, DAY, &mut rng);
        with_request.record_attempt(1_796_000_000_123);
        let (mut without, _) = submit(None, "y", fp("[]"), None, 5, DAY, &mut rng);
        without.mark_gave_up(6);
        for record in [&with_request, &without] {
            assert_eq!(&IntentRecord::from_json(&record.to_json()).unwrap(), record);
            // Valid JSON, whatever reads it.
            assert!(serde_json::from_str::<serde_json::Value>(&record.to_json()).is_ok());
        }
        // Records already in users' localStorage must stay readable: the form is fixed.
        assert_eq!(without.to_json(), PINNED_WITHOUT_REQUEST);
        assert_eq!(IntentRecord::from_json(PINNED_WITHOUT_REQUEST).unwrap(), without);
    }

    const PINNED_WITHOUT_REQUEST: &str = r#"{"intent":"y","key":"b689b544-e52b-4c43-a060-3197d68ce9c8","fingerprint":"bc4698faa4307e302d29822f3e725916235645d61d95252e42bbdb091f5b89ae","state":"gave_up","attempts":0,"created_ms":5,"updated_ms":6,"expires_ms":86400005,"request":null}"#;

    #[test]
    fn unreadable_records_are_errors_not_panics() {
        for bad in ["", "[]", "{", r#"{"intent":"x"}"#, r#"{"intent":1}"#] {
            assert!(IntentRecord::from_json(bad).is_err(), "{bad:?}");
        }
        let mut rng = SplitMix64::new(10);
        let good = submit(None, "x", fp("{}"), None, 0, DAY, &mut rng).0.to_json();
        let tampered = good.replace("\"attempts\":0", "\"attempts\":1.5");
        assert!(IntentRecord::from_json(&tampered).unwrap_err().contains("attempts"));
        let tampered = good.replace("\"pending\"", "\"lost\"");
        assert!(IntentRecord::from_json(&tampered).unwrap_err().contains("state"));
    }
}
