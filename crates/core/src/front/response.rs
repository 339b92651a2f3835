//! Which headers the worker's responses carry: CORS on every one, a
//! preflight's answer, a problem's retry hints, a job's result (its key,
//! state, attempt, whether it is replayed, when to ask again), a live
//! stream's and a background job's `202`. The edge sets what these return.

use crate::job::JobState;
use crate::upstream::sse;
use crate::wire::{PROBLEM_CONTENT_TYPE, Problem, header};

/// Headers to set, by name, in order.
pub type HeaderList = Vec<(&'static str, String)>;

/// Request headers a preflight always allows.
pub const ALWAYS_ALLOWED: &str = "Authorization, Content-Type, Idempotency-Key, Prefer";
/// The most header names a preflight may ask for.
const MAX_REQUESTED_HEADERS: usize = 64;
/// The longest `Access-Control-Request-Headers` a preflight may send.
const MAX_REQUESTED_BYTES: usize = 4096;

/// The CORS headers every response carries, so a browser app on another
/// origin can call the gateway and read onejob's headers.
pub fn cors() -> HeaderList {
    vec![("Access-Control-Allow-Origin", "*".to_owned()), ("Access-Control-Expose-Headers", header::EXPOSED.join(", "))]
}

/// The answer to a CORS preflight. The official SDKs send headers of their
/// own (`x-stainless-*`, `anthropic-version`, …), so the gateway allows what
/// the browser asks for (`requested`), once each name is checked to be a
/// header name.
pub fn preflight(requested: Option<&str>) -> HeaderList {
    let allowed = requested
        .and_then(valid_header_list)
        .map_or_else(|| ALWAYS_ALLOWED.to_owned(), |list| format!("{ALWAYS_ALLOWED}, {list}"));
    vec![
        ("Access-Control-Allow-Methods", "GET, POST, OPTIONS".to_owned()),
        ("Access-Control-Allow-Headers", allowed),
        // Browsers cap it (Chromium: 2 h); one preflight per origin and header set.
        ("Access-Control-Max-Age", "86400".to_owned()),
        ("Vary", "Access-Control-Request-Headers".to_owned()),
    ]
}

/// `Access-Control-Request-Headers` normalised, if it is a bounded list of
/// valid header names (RFC 9110 tokens).
fn valid_header_list(requested: &str) -> Option<String> {
    let names: Vec<&str> = requested.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    let is_token = |name: &&str| name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    let bounded = requested.len() <= MAX_REQUESTED_BYTES && names.len() <= MAX_REQUESTED_HEADERS;
    (bounded && names.iter().all(is_token)).then(|| names.join(", "))
}

/// `Retry-After` (whole seconds, at least 1) and `retry-after-ms` for a wait of `ms`.
pub fn retry_after(ms: u64) -> HeaderList {
    vec![(header::RETRY_AFTER, ms.div_ceil(1000).max(1).to_string()), (header::RETRY_AFTER_MS, ms.to_string())]
}

/// `x-should-retry`'s value.
fn should_retry(retry: bool) -> String {
    if retry { "true" } else { "false" }.to_owned()
}

/// A problem+json response's headers: retryable kinds say
/// `x-should-retry: true` and, when known, when ([`retry_after`]).
pub fn problem(problem: &Problem) -> HeaderList {
    let mut headers = vec![
        ("Content-Type", PROBLEM_CONTENT_TYPE.to_owned()),
        (header::SHOULD_RETRY, should_retry(problem.kind.should_retry())),
    ];
    headers.extend(problem.retry_after_ms.map(retry_after).unwrap_or_default());
    headers
}

/// The headers of an answer about the job `key` in `state`.
pub fn about_job(key: &str, state: JobState) -> HeaderList {
    vec![(header::IDEMPOTENCY_KEY, key.to_owned()), (header::JOB_STATE, state.as_str().to_owned())]
}

/// `202 Accepted` for the background job `key`: where to follow it, when to look.
pub fn accepted(key: &str, state: JobState) -> HeaderList {
    let mut headers = vec![
        ("Location", format!("/onejob/v1/jobs/{key}")),
        (header::RETRY_AFTER, "1".to_owned()),
        ("Preference-Applied", "respond-async".to_owned()),
    ];
    headers.extend(about_job(key, state));
    headers
}

/// Streams must not be buffered on their way (`wrangler dev` and compressing
/// proxies hold a compressed event stream back) nor cached.
fn unbuffered() -> HeaderList {
    vec![("Cache-Control", "no-cache".to_owned()), ("Content-Encoding", "identity".to_owned())]
}

/// What a job's result carries besides its body and status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultHead<'a> {
    /// The stored content type.
    pub content_type: &'a str,
    /// The job's key, as the client sent it.
    pub key: &'a str,
    /// The job's state with this result.
    pub state: JobState,
    /// The attempt whose result this is, if any.
    pub attempt: Option<u32>,
    /// A replay (not the call that made it).
    pub replayed: bool,
    /// The job is not finished and may be asked again after this long.
    pub retry_after_ms: Option<u64>,
}

/// A job's result's headers. A result says `x-should-retry: true` only with
/// a time to retry after while the job is not finished; any other (a
/// finished job's, whatever its status — a replayed 503 of a dead job too —
/// or an unknown outcome that will never be retried) says `false`.
pub fn result(head: &ResultHead) -> HeaderList {
    let mut headers = vec![("Content-Type", head.content_type.to_owned())];
    headers.extend(about_job(head.key, head.state));
    headers.extend(head.attempt.map(|attempt| (header::ATTEMPT, attempt.to_string())));
    headers.extend(head.replayed.then(|| (header::IDEMPOTENT_REPLAYED, "true".to_owned())));
    headers.extend(head.content_type.starts_with(sse::MEDIA_TYPE).then(unbuffered).unwrap_or_default());
    let retry = head.retry_after_ms.filter(|_| !head.state.is_terminal());
    headers.extend(retry.map(retry_after).unwrap_or_default());
    headers.push((header::SHOULD_RETRY, should_retry(retry.is_some())));
    headers
}

/// A caller's view of a live stream (`attempt` streams it, the job is in
/// flight): like a result's, but never `x-should-retry: true`. A streamed
/// answer is never sent to the provider again (its tokens are billed):
/// asking again only follows or replays it, which says the same.
pub fn stream(content_type: &str, key: &str, attempt: u32, replayed: bool) -> HeaderList {
    let mut headers = vec![("Content-Type", content_type.to_owned())];
    headers.extend(unbuffered());
    headers.extend(about_job(key, JobState::InFlight));
    headers.push((header::ATTEMPT, attempt.to_string()));
    headers.extend(replayed.then(|| (header::IDEMPOTENT_REPLAYED, "true".to_owned())));
    headers.push((header::SHOULD_RETRY, should_retry(false)));
    headers
}

#[cfg(test)]
mod tests;
