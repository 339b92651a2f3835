//! The KV read-through cache of finished results. It only ever speeds up a
//! replay: a miss, an unreadable entry or a fingerprint mismatch falls through
//! to the Ledger, which alone decides.

use onejob_core::fingerprint::Fingerprint;
use onejob_core::protocol::header;
use serde::{Deserialize, Serialize};
use worker::{Env, Headers, Response, Result};

use crate::http;

/// Stored beside the body as the KV entry's metadata.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CachedMeta {
    pub fingerprint: String,
    pub status: u16,
    pub content_type: String,
    pub state: String,
    pub attempt: u32,
}

/// The cached replay of a finished job, if KV has one for this very request.
pub async fn replay(env: &Env, storage_id: &str, fingerprint: &Fingerprint, key: &str) -> Option<Response> {
    let kv = env.kv("RESULTS").ok()?;
    let (body, meta) = kv.get(storage_id).bytes_with_metadata::<CachedMeta>().await.ok()?;
    let (body, meta) = (body?, meta?);
    if meta.fingerprint != fingerprint.as_str() {
        return None; // same key, other request: the Ledger answers 422
    }
    build(body, &meta, key).ok()
}

fn build(body: Vec<u8>, meta: &CachedMeta, key: &str) -> Result<Response> {
    let headers = Headers::new();
    headers.set("Content-Type", &meta.content_type)?;
    headers.set(header::IDEMPOTENCY_KEY, key)?;
    headers.set(header::JOB_STATE, &meta.state)?;
    headers.set(header::ATTEMPT, &meta.attempt.to_string())?;
    headers.set(header::IDEMPOTENT_REPLAYED, "true")?;
    http::with_cors(Response::from_bytes(body)?.with_status(meta.status).with_headers(headers))
}
