//! Telemetry: OpenTelemetry traces of job requests and structured log
//! lines of job transitions, decided here and performed by the edge.
//!
//! - [`trace`]: W3C Trace Context (`traceparent`, `tracestate`), and the ids
//!   of a request's spans (drawn from the randomness passed in; a child's
//!   derived from its parent, so the attempt that calls a provider and the
//!   attempt span exported later agree without storing anything).
//! - [`answer`]: what the edge reads of a traced request's answer (replay
//!   source, stream, the body the spans need, the provider's name), and
//!   the isolate's export queue.
//! - [`build`]: the spans of one request, after its answer, from the job's
//!   own record (attempts, effects) with the GenAI semantic conventions'
//!   attribute names (`gen_ai.provider.name`, `gen_ai.request.model`,
//!   `gen_ai.usage.input_tokens`, …) and onejob's (`onejob.job.state`,
//!   `onejob.attempt`, `onejob.replayed`, `onejob.key.digest`).
//! - [`span`]: a span and its OTLP/HTTP JSON encoding, in bounded batches.
//! - [`config`]: the `OTEL_*` settings, as the specification names them.
//! - [`log`]: one JSON line per transition and per attempt.
//!
//! What is never exported: an idempotency key (only [`key_digest`]), a
//! tenant's or a provider's key, a prompt or a completion (unless a
//! deployment sets `OTEL_CAPTURE_CONTENT=true`).

pub mod answer;
pub mod build;
pub mod config;
pub mod export;
pub mod job_log;
pub mod log;
pub mod span;
pub mod trace;

use crate::identity::digest;
use crate::identity::key::StorageId;

/// The digest of a job's key that telemetry and logs carry instead of the
/// key: the first 16 hex digits of SHA-256 over the job's storage id (so
/// tenant, user and key; two tenants' same key differ). An operator finds
/// a key's digest with the same function; the digest does not give the key back.
pub fn key_digest(storage_id: &StorageId) -> String {
    let mut digest = digest::framed_sha256_hex(&[b"onejob/key-digest/v1", storage_id.as_str().as_bytes()]);
    digest.truncate(16);
    digest
}

/// `text` cut to at most `max` bytes on a character boundary (a captured
/// prompt or completion).
pub fn truncated(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests;
