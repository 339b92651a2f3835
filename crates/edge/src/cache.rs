//! The KV read-through cache of finished results. It only ever speeds up a
//! replay: a miss, an unreadable entry or a fingerprint mismatch falls through
//! to the Ledger, which alone decides.

use onejob_core::fingerprint::Fingerprint;
use serde::{Deserialize, Serialize};
use worker::{Env, Response};

use crate::http::{self, JobHeaders};

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
    let job = JobHeaders { key, state: &meta.state, attempt: Some(meta.attempt), replayed: true };
    http::job_result(meta.status, &meta.content_type, body, &job).ok()
}
