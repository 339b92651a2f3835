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

use crate::identity::canonical::{self, Json, Numbers, RustNumbers};
use crate::identity::fingerprint::Fingerprint;
use crate::identity::key::IdempotencyKey;
use crate::identity::random::RandomSource;

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
        let Json::Object(members) =
            canonical::parse(text.as_bytes()).map_err(|e: canonical::CanonicalError| e.describe())?
        else {
            return Err("not a JSON object".into());
        };
        let why = |(name, problem): Unreadable| [name, problem].concat();
        let mut record = Self::from_members(&members, numbers).map_err(why)?;
        record.request = match field(&members, "request").map_err(why)? {
            Json::Object(request) => {
                let body = check_request(request).map_err(why)?;
                let text = |name| str_field::<()>(request, name).unwrap_or_default().to_owned();
                Some(SavedRequest {
                    url: text("url"),
                    method: text("method"),
                    headers: field::<()>(request, "headers").map(headers).unwrap_or_default(),
                    body: body.map(str::to_owned),
                })
            }
            _ => None,
        };
        Ok(record)
    }

    /// A stored record as the browser SDK reads it: the record (its
    /// `request` left out) and its request's stored text, exactly as it was
    /// written (what a reload re-sends, and what each save writes back, so it
    /// is never serialised again); `None` when [`IntentRecord::from_json_with`]
    /// would refuse it (the SDK drops it; it has no use for the reason).
    pub fn read_stored<'t>(text: &'t str, numbers: &dyn Numbers) -> Option<(Self, Option<&'t str>)> {
        let Ok(Json::Object(members)) = canonical::parse::<()>(text.as_bytes()) else { return None };
        let record = Self::from_members::<()>(&members, numbers).ok()?;
        let request = match field::<()>(&members, "request").ok()? {
            Json::Object(request) => {
                check_request::<()>(request).ok()?;
                Some(canonical::member_source(text, "request")?)
            }
            _ => None,
        };
        Some((record, request))
    }

    /// The record's fields but its request, from a stored record's members;
    /// its `request` must be an object or null (checked here, read by the caller).
    fn from_members<E: Why>(members: &Members<'_>, numbers: &dyn Numbers) -> Result<Self, E> {
        let state = match str_field(members, "state")? {
            "pending" => IntentState::Pending,
            "delivered" => IntentState::Delivered,
            "gave_up" => IntentState::GaveUp,
            _ => return Err(E::why("state", " must be pending, delivered or gave_up")),
        };
        if !matches!(field(members, "request")?, Json::Null | Json::Object(_)) {
            return Err(E::why("request", " must be an object or null"));
        }
        let attempts =
            u32::try_from(whole(members, "attempts", numbers)?).map_err(|_| E::why("attempts", " out of range"))?;
        Ok(Self {
            intent: str_field(members, "intent")?.to_owned(),
            key: IdempotencyKey::parse(str_field(members, "key")?).map_err(|_| E::why("key", " malformed"))?,
            fingerprint: Fingerprint::parse(str_field(members, "fingerprint")?)
                .ok_or_else(|| E::why("fingerprint", " malformed"))?,
            state,
            attempts,
            created_ms: whole(members, "created_ms", numbers)?,
            updated_ms: whole(members, "updated_ms", numbers)?,
            expires_ms: whole(members, "expires_ms", numbers)?,
            request: None,
        })
    }
}

/// A JSON object's members, as the reader gives them.
type Members<'j> = [(Cow<'j, str>, Json<'j>)];

/// What makes a stored record unreadable: the member at fault, and what is
/// wrong with it (the two make the reason [`IntentRecord::from_json_with`] gives).
type Unreadable = (&'static str, &'static str);

/// What a reader of stored records makes of a fault: [`Unreadable`], or
/// nothing (`()`, [`IntentRecord::read_stored`]: then the texts are not even linked).
trait Why {
    fn why(name: &'static str, problem: &'static str) -> Self;
}

impl Why for Unreadable {
    fn why(name: &'static str, problem: &'static str) -> Self {
        (name, problem)
    }
}

impl Why for () {
    fn why(_: &'static str, _: &'static str) -> Self {}
}

/// Checks a stored request's members (a string `url` and `method`, `headers`
/// as `[name, value]` pairs of strings, `body` a string or null); returns its body.
fn check_request<'a, E: Why>(request: &'a Members<'_>) -> Result<Option<&'a str>, E> {
    str_field(request, "url")?;
    str_field(request, "method")?;
    let Json::Array(pairs) = field(request, "headers")? else {
        return Err(E::why("request.headers", " must be an array"));
    };
    if !pairs
        .iter()
        .all(|pair| matches!(pair, Json::Array(two) if matches!(two.as_slice(), [Json::String(_), Json::String(_)])))
    {
        return Err(E::why("request.headers", " entries must be [name, value]"));
    }
    match field(request, "body")? {
        Json::Null => Ok(None),
        Json::String(body) => Ok(Some(body)),
        _ => Err(E::why("request.body", " must be a string or null")),
    }
}

/// The `[name, value]` pairs of a stored request's `headers`, once [`check_request`] has checked them.
fn headers(value: &Json<'_>) -> Vec<(String, String)> {
    let Json::Array(pairs) = value else { return Vec::new() };
    pairs
        .iter()
        .filter_map(|pair| match pair {
            Json::Array(two) => match two.as_slice() {
                [Json::String(name), Json::String(value)] => Some((name.to_string(), value.to_string())),
                _ => None,
            },
            _ => None,
        })
        .collect()
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

fn field<'a, 'j, E: Why>(members: &'a Members<'j>, name: &'static str) -> Result<&'a Json<'j>, E> {
    members.iter().find(|(n, _)| n == name).map(|(_, v)| v).ok_or_else(|| E::why(name, " is missing"))
}

fn str_field<'a, E: Why>(members: &'a Members<'_>, name: &'static str) -> Result<&'a str, E> {
    match field(members, name)? {
        Json::String(s) => Ok(s),
        _ => Err(E::why(name, " must be a string")),
    }
}

fn whole<E: Why>(members: &Members<'_>, name: &'static str, numbers: &dyn Numbers) -> Result<u64, E> {
    const MAX_SAFE: u64 = 9_007_199_254_740_991;
    let not_whole = || E::why(name, " must be a whole number");
    let Json::Number(literal) = field(members, name)? else { return Err(not_whole()) };
    if literal.len() <= 16 && literal.bytes().all(|b| b.is_ascii_digit()) {
        let n = literal.bytes().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        return if n <= MAX_SAFE { Ok(n) } else { Err(not_whole()) };
    }
    match numbers.value(literal) {
        Some(n) if n.fract() == 0.0 && (0.0..=MAX_SAFE as f64).contains(&n) => Ok(n as u64),
        _ => Err(not_whole()),
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::Body;
    use crate::identity::random::SplitMix64;

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

    #[test]
    fn a_stored_record_reads_with_its_request_as_written() {
        let mut rng = SplitMix64::new(11);
        let (record, _) = submit(None, "x", fp("{}"), None, 7, DAY, &mut rng);
        // The request as a client wrote it (JSON.stringify's form, escapes and all).
        let request = r#"{"url":"https://gw.test/v1/y","method":"POST","headers":[["X-A","\"1\""]],"body":"{\"a\":\"\u00e9\n\"}"}"#;
        let text = record.to_json_with(Some(request));
        let (read, kept) = IntentRecord::read_stored(&text, &RustNumbers).unwrap();
        assert_eq!(read, record);
        assert_eq!(kept, Some(request), "the request's text, not a re-serialisation");
        // What the detailed reader gives, for the same text.
        let full = IntentRecord::from_json(&text).unwrap();
        assert_eq!(full.request.unwrap().body.as_deref(), Some("{\"a\":\"\u{e9}\n\"}"));
        assert_eq!(IntentRecord::read_stored(&record.to_json(), &RustNumbers), Some((record.clone(), None)));
        // Members in any order, with white space: the request as it stands.
        let spaced = format!(
            "{{ \"request\" : {{ \"body\" : null, \"headers\" : [], \"method\" : \"GET\", \"url\" : \"u\" }} ,{}",
            &record.to_json()[1..].replace(",\"request\":null", "")
        );
        let (_, kept) = IntentRecord::read_stored(&spaced, &RustNumbers).unwrap();
        assert_eq!(kept, Some(r#"{ "body" : null, "headers" : [], "method" : "GET", "url" : "u" }"#));
    }

    #[test]
    fn what_the_detailed_reader_refuses_the_stored_reader_refuses() {
        let mut rng = SplitMix64::new(12);
        let (record, _) = submit(None, "x", fp("{}"), None, 7, DAY, &mut rng);
        let good = record.to_json_with(Some(r#"{"url":"u","method":"POST","headers":[],"body":null}"#));
        let mut bad: Vec<String> = ["", "[]", "{", r#"{"intent":"x"}"#, "{not json"].map(String::from).to_vec();
        for (from, to) in [
            (r#""attempts":0"#, r#""attempts":1.5"#),
            (r#""attempts":0"#, r#""attempts":4294967296"#),
            (r#""pending""#, r#""lost""#),
            (r#""key":""#, r#""key":" "#),
            (r#""fingerprint":""#, r#""fingerprint":"0"#),
            (r#""created_ms":7"#, r#""created_ms":"7""#),
            (r#""url":"u""#, r#""url":1"#),
            (r#""method":"POST","#, ""),
            (r#""headers":[]"#, r#""headers":{}"#),
            (r#""headers":[]"#, r#""headers":[["a"]]"#),
            (r#""headers":[]"#, r#""headers":[["a",1]]"#),
            (r#""body":null"#, r#""body":{}"#),
            (r#""request":{"#, r#""request":[{"#),
        ] {
            assert!(good.contains(from), "{from}");
            bad.push(good.replacen(from, to, 1));
        }
        assert!(IntentRecord::read_stored(&good, &RustNumbers).is_some());
        for text in &bad {
            assert!(IntentRecord::from_json(text).is_err(), "{text}");
            assert!(IntentRecord::read_stored(text, &RustNumbers).is_none(), "{text}");
        }
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
