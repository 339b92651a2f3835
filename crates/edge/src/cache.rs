//! The KV read-through cache of finished results. It only ever speeds up a
//! replay: a miss, an unreadable entry or a fingerprint mismatch falls through
//! to the Ledger, which alone decides. Only finished (terminal) results are
//! cached, by the Ledger when it first replays one; the gateway looks here
//! first only when `RESULT_CACHE` says so (by default, for a retry:
//! [`onejob_core::config::result_cache`]).
//!
//! May import: `env`, `http` (a job's result) and the core.

use onejob_core::config::result_cache;
use onejob_core::job::JobState;
use onejob_core::operators::savings::Spent;
use serde::{Deserialize, Serialize};
use worker::Env;

use crate::env::binding;
use crate::http::JobResult;

/// Stored beside the body as the KV entry's metadata.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CachedMeta {
    fingerprint: String,
    status: u16,
    content_type: String,
    state: JobState,
    attempt: Option<u32>,
    /// What the job's calls used, counted as saved by each replay from here
    /// (absent in entries written before savings were counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spent: Option<Spent>,
}

/// The cached result of a finished job, if KV has one for this very
/// request, and what its calls used.
pub async fn lookup(env: &Env, storage_id: &str, fingerprint: &str) -> Option<(JobResult, Spent)> {
    let kv = env.kv(binding::RESULTS).ok()?;
    let (body, meta) = kv.get(storage_id).bytes_with_metadata::<CachedMeta>().await.ok()?;
    let (body, meta) = (body?, meta?);
    if !result_cache::serves(&meta.fingerprint, meta.state.is_terminal(), fingerprint) {
        return None;
    }
    let result = JobResult {
        status: meta.status,
        content_type: meta.content_type,
        body,
        state: meta.state,
        attempt: meta.attempt,
        retry_after_ms: None,
    };
    Some((result, meta.spent.unwrap_or_default()))
}

/// Writes a finished result, kept for `ttl_s`: as long as the job. A job
/// that ends sooner than KV's shortest expiry is not cached, or KV would
/// replay it after the Ledger has deleted it.
pub async fn store(
    env: &Env,
    storage_id: &str,
    fingerprint: &str,
    result: &JobResult,
    ttl_s: u64,
    spent: Option<Spent>,
) {
    if !result_cache::keeps(ttl_s) {
        return;
    }
    let Ok(kv) = env.kv(binding::RESULTS) else { return };
    let meta = CachedMeta {
        fingerprint: fingerprint.to_owned(),
        status: result.status,
        content_type: result.content_type.clone(),
        state: result.state,
        attempt: result.attempt,
        spent,
    };
    let put = kv.put_bytes(storage_id, &result.body).and_then(|p| p.metadata(meta)).map(|p| p.expiration_ttl(ttl_s));
    if let Ok(put) = put
        && let Err(error) = put.execute().await
    {
        worker::console_warn!("onejob: caching a result in KV failed: {error}");
    }
}
