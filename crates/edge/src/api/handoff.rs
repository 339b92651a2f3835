//! The typed payloads between the stateless gateway and a `Ledger` (the
//! call that carries them: [`crate::api::ledger::LedgerCall`]), so neither
//! side reads the other's headers and the gateway does not depend on the
//! Ledger's code.
//!
//! A submission travels as one body: the struct's JSON, length-prefixed
//! (u32, big-endian), followed by the request's bytes as they arrived.

use onejob_core::fingerprint::Fingerprint;
use onejob_core::key::{IdempotencyKey, StorageId};
use onejob_core::keyless::Keyless;
use onejob_core::telemetry::trace::Propagation;
use serde::{Deserialize, Serialize};

/// A background job's queue message: which Ledger runs it. The request
/// itself stays in the Ledger (messages stay far below the queue's limit).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobMessage {
    pub tenant: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub key: String,
}

/// Who a job belongs to and what it asked for (for the operators' index).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobMeta {
    pub tenant: String,
    #[serde(default)]
    pub user: Option<String>,
    pub key: String,
    /// The model the request asked for.
    #[serde(default)]
    pub model: Option<String>,
    /// Tokens of this job already counted against its quotas.
    #[serde(default)]
    pub metered: u64,
}

/// An operator's request about one job, as the admin API hands it over.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperatorRequest {
    pub key: String,
    /// The admin's name, for the audit.
    pub by: String,
    /// The operator request's own idempotency key.
    pub request: String,
    /// Resolve: `succeeded` or `retry`.
    #[serde(default)]
    pub action: Option<String>,
    /// Resolve as succeeded: the response to record.
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub body: Option<serde_json::Value>,
    /// Effect actions: the effect's name.
    #[serde(default)]
    pub effect: Option<String>,
}

/// What a dead letter records about a dead job (the core decides it).
pub use onejob_core::ledger::dead_letter::DeadFacts;

/// A keyed request the gateway has authenticated and validated. Its key and
/// fingerprint are the core's validated types (checked again when the
/// message is read back, so a malformed one never reaches the Ledger's
/// decisions), and nothing downstream parses them again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Submission {
    pub tenant: String,
    /// The user of a user token: jobs are scoped by tenant and user.
    #[serde(default)]
    pub user: Option<String>,
    pub key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    /// Path and query, as sent upstream.
    pub target: String,
    pub content_type: String,
    /// How long a duplicate may wait for a running request.
    pub wait_ms: u64,
    /// Provider headers the caller sent ([`PROVIDER_HEADERS`]), passed on.
    #[serde(default)]
    pub provider_headers: Vec<(String, String)>,
    /// `Prefer: respond-async`: run by the queue consumer, answered `202`.
    #[serde(default)]
    pub background: bool,
    /// `POST /onejob/v1/run/{type}`: the job type and its (valid) input;
    /// the body is the chat request rendered from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunOf>,
    /// A request that carried no `Idempotency-Key`: its key was derived
    /// (`keyless-…`, [`onejob_core::keyless`]) and it is admitted under this
    /// mode (`coalesce` or `window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyless: Option<Keyless>,
    /// The generation of the job it runs (set by the Ledger from the job:
    /// a keyless job that replaced an ended one calls its provider under
    /// a key of its own).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// The request's trace, when telemetry is on: each attempt sends a
    /// `traceparent` of its own span (and the caller's `tracestate`) upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Propagation>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Submission {
    /// Where its job lives: the storage id of (tenant, user, key).
    pub fn storage_id(&self) -> StorageId {
        StorageId::of(&self.tenant, self.user.as_deref(), &self.key)
    }

    /// The `Idempotency-Key` its provider gets: derived from the storage
    /// id and the job's generation, never the client's key.
    pub fn upstream_key(&self) -> String {
        self.storage_id().upstream_key_of(self.generation)
    }

    /// The job's queue message.
    pub fn message(&self) -> JobMessage {
        JobMessage { tenant: self.tenant.clone(), user: self.user.clone(), key: self.key.to_string() }
    }
}

/// The job type a submission runs, and its input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOf {
    pub job_type: String,
    pub input: serde_json::Value,
}

/// A request body's `model`, read alone (only an object has one: serde
/// would read `["gpt-x"]` by position).
pub fn model_of(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct ModelOnly {
        model: Option<String>,
    }
    if body.trim_ascii_start().first() != Some(&b'{') {
        return None;
    }
    serde_json::from_slice::<ModelOnly>(body).ok().and_then(|m| m.model)
}

/// The caller's headers that are passed to the provider: they choose the
/// API's version and betas, not who pays.
pub const PROVIDER_HEADERS: [&str; 3] = ["anthropic-version", "anthropic-beta", "openai-beta"];

/// `GET /onejob/v1/jobs/{key}` (and `…/stream?from=N`) for one tenant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobQuery {
    pub key: String,
    /// For a stream: the number of events the reader already has.
    #[serde(default)]
    pub from: Option<u64>,
    /// For a stream: number the events with `id:` lines.
    #[serde(default)]
    pub ids: bool,
}

/// The body of a submission: header, then the request bytes.
pub fn encode(submission: &Submission, request_body: &[u8]) -> Vec<u8> {
    // A struct of strings and a number always serialises.
    let header = serde_json::to_vec(submission).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + header.len() + request_body.len());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(request_body);
    out
}

/// Splits a submission's body back into the struct and the request bytes.
pub fn decode(mut bytes: Vec<u8>) -> Option<(Submission, Vec<u8>)> {
    let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let header = bytes.get(4..4usize.checked_add(len)?)?;
    let submission = serde_json::from_slice(header).ok()?;
    let body = bytes.split_off(4 + len);
    Some((submission, body))
}

#[cfg(test)]
pub(crate) mod tests {
    use onejob_core::fingerprint::{Body, Fingerprint};
    use onejob_core::key::IdempotencyKey;

    use super::{Submission, decode, encode};

    /// A valid submission of a user's chat request (shared by the api's tests).
    pub(crate) fn submission() -> Submission {
        Submission {
            tenant: "dev".into(),
            user: Some("alice".into()),
            key: IdempotencyKey::parse("test-0123456789abcdef").unwrap(),
            fingerprint: Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap(),
            target: "/v1/chat/completions".into(),
            content_type: "application/json".into(),
            wait_ms: 30_000,
            provider_headers: Vec::new(),
            background: false,
            run: None,
            keyless: None,
            generation: 0,
            trace: None,
        }
    }

    /// A hand-off whose header is `header` (JSON), followed by `body`.
    fn hand_off(header: &serde_json::Value, body: &[u8]) -> Vec<u8> {
        let header = serde_json::to_vec(header).unwrap();
        let mut bytes = (header.len() as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(body);
        bytes
    }

    #[test]
    fn a_submission_travels_with_its_typed_key_and_fingerprint() {
        let sent = submission();
        let (read, body) = decode(encode(&sent, b"{\"model\":\"m\"}")).unwrap();
        assert_eq!(
            (read.key, read.fingerprint, body),
            (sent.key.clone(), sent.fingerprint.clone(), b"{\"model\":\"m\"}".to_vec())
        );
        assert_eq!(read.user.as_deref(), Some("alice"));
        // The provider's key is derived from the typed key: never empty.
        assert!(sent.storage_id().upstream_key().len() > "onejob-".len());
        assert_eq!(sent.upstream_key(), sent.storage_id().upstream_key());
        assert!(read.keyless.is_none() && read.generation == 0);
    }

    #[test]
    fn a_keyless_submission_travels_with_its_mode_and_generation() {
        let mut sent = submission();
        sent.keyless = Some(onejob_core::keyless::Keyless::Window { window_ms: 2_000 });
        sent.generation = 3;
        let (read, _) = decode(encode(&sent, b"{}")).unwrap();
        assert_eq!(read.keyless, sent.keyless);
        assert_eq!(read.generation, 3);
        assert_ne!(read.upstream_key(), read.storage_id().upstream_key(), "a renewed job's provider key is its own");
    }

    #[test]
    fn a_submission_with_a_malformed_key_or_fingerprint_is_not_read() {
        let good = serde_json::to_value(submission()).unwrap();
        for (field, bad) in [("key", "short"), ("key", ""), ("fingerprint", "abc"), ("fingerprint", "")] {
            let mut header = good.clone();
            header[field] = serde_json::Value::from(bad);
            assert!(decode(hand_off(&header, b"{}")).is_none(), "{field}: {bad:?}");
        }
        assert!(decode(hand_off(&good, b"{}")).is_some());
        assert!(decode(vec![0, 0]).is_none());
    }
}
