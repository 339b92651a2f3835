//! Building responses: RFC 9457 problems, CORS, a job's result and a live
//! stream with onejob's headers; and reading request bodies ([`body`]).
//! Nearly every module uses it, so it sits low.
//!
//! May import: `answer` and the core (nothing that reads the environment).
//! Never `ledger`, `upstream` or `demo`: a stream is any stream of events
//! ([`stream_response`]), a stored response an
//! [`crate::answer::StoredResponse`].

pub mod body;

use futures_util::{Stream, StreamExt};
use onejob_core::front::Refusal;
use onejob_core::job::JobState;
use onejob_core::protocol::{PROBLEM_CONTENT_TYPE, Problem, ProblemType, header};
use onejob_core::sse::{self, with_id};
use worker::{Headers, Request, Response, Result};

use crate::answer::StoredResponse;

/// Adds the CORS headers every response carries, so a browser app on another
/// origin can call the gateway and read onejob's headers.
pub fn with_cors(mut response: Response) -> Result<Response> {
    let headers = response.headers_mut();
    headers.set("Access-Control-Allow-Origin", "*")?;
    headers.set("Access-Control-Expose-Headers", &header::EXPOSED.join(", "))?;
    Ok(response)
}

/// Request headers a preflight always allows.
const ALWAYS_ALLOWED: &str = "Authorization, Content-Type, Idempotency-Key, Prefer";
/// Bounds on what a preflight may ask for.
const MAX_REQUESTED_HEADERS: usize = 64;
const MAX_REQUESTED_BYTES: usize = 4096;

/// The answer to a CORS preflight. The official SDKs send headers of their
/// own (`x-stainless-*`, `anthropic-version`, …), so the gateway allows what
/// the browser asks for, once each name is checked to be a header name.
pub fn preflight(req: &Request) -> Result<Response> {
    let requested = req.headers().get("Access-Control-Request-Headers")?;
    let allowed = match requested.as_deref().and_then(valid_header_list) {
        Some(list) => format!("{ALWAYS_ALLOWED}, {list}"),
        None => ALWAYS_ALLOWED.to_owned(),
    };
    let headers = Headers::new();
    headers.set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")?;
    headers.set("Access-Control-Allow-Headers", &allowed)?;
    // Browsers cap it (Chromium: 2 h); one preflight per origin and header set.
    headers.set("Access-Control-Max-Age", "86400")?;
    headers.set("Vary", "Access-Control-Request-Headers")?;
    with_cors(Response::empty()?.with_status(204).with_headers(headers))
}

/// `Access-Control-Request-Headers` normalised, if it is a bounded list of
/// valid header names (RFC 9110 tokens).
fn valid_header_list(requested: &str) -> Option<String> {
    if requested.len() > MAX_REQUESTED_BYTES {
        return None;
    }
    let names: Vec<&str> = requested.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    let is_token = |name: &str| name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    (names.len() <= MAX_REQUESTED_HEADERS && names.iter().all(|n| is_token(n))).then(|| names.join(", "))
}

/// A problem+json response; retryable kinds carry `x-should-retry: true`
/// and, when known, `Retry-After`.
pub fn problem(problem: &Problem) -> Result<Response> {
    let headers = Headers::new();
    headers.set("Content-Type", PROBLEM_CONTENT_TYPE)?;
    headers.set(header::SHOULD_RETRY, if problem.kind.should_retry() { "true" } else { "false" })?;
    if let Some(ms) = problem.retry_after_ms {
        set_retry_after(&headers, ms)?;
    }
    let response =
        Response::from_bytes(problem.to_json().into_bytes())?.with_status(problem.status()).with_headers(headers);
    with_cors(response)
}

/// `202 Accepted` for a background job: where to follow it, when to look.
pub fn accepted(view: &onejob_core::protocol::JobView) -> Result<Response> {
    let mut response = Response::from_json(view)?.with_status(202);
    let headers = response.headers_mut();
    headers.set("Location", &format!("/onejob/v1/jobs/{}", view.key))?;
    headers.set(header::RETRY_AFTER, "1")?;
    headers.set("Preference-Applied", "respond-async")?;
    headers.set(header::JOB_STATE, view.state.as_str())?;
    headers.set(header::IDEMPOTENCY_KEY, view.key.as_str())?;
    with_cors(response)
}

/// `405` for a route that takes only `allowed` (and the CORS preflight),
/// with the `Allow` header RFC 9110 §15.5.6 requires.
pub fn method_not_allowed(used: &worker::Method, allowed: &worker::Method) -> Result<Response> {
    let mut response = problem_of(ProblemType::MethodNotAllowed, format!("{used} is not allowed here; use {allowed}"))?;
    response.headers_mut().set("Allow", &format!("{allowed}, OPTIONS"))?;
    Ok(response)
}

/// A request the core refused before any I/O ([`Refusal`]): its problem,
/// and the `Allow` header of a `405`.
pub fn refuse(refusal: &Refusal) -> Result<Response> {
    let mut response = problem(&refusal.problem())?;
    if let Some(allow) = refusal.allow() {
        response.headers_mut().set("Allow", &allow)?;
    }
    Ok(response)
}

/// Shorthand for a problem with only a detail.
pub fn problem_of(kind: ProblemType, detail: impl Into<String>) -> Result<Response> {
    problem(&Problem::new(kind, detail))
}

/// 500 with nothing of the configuration in it: the detail is in the log.
pub fn misconfigured() -> Result<Response> {
    problem_of(ProblemType::Misconfigured, "gateway misconfigured; the operator has the details in the log")
}

/// A problem about a job: with the job's key and state.
pub fn problem_about(problem: &Problem, key: &str, state: JobState) -> Result<Response> {
    let mut response = self::problem(problem)?;
    let headers = response.headers_mut();
    headers.set(header::IDEMPOTENCY_KEY, key)?;
    headers.set(header::JOB_STATE, state.as_str())?;
    Ok(response)
}

/// `Retry-After` (whole seconds, at least 1) and `retry-after-ms` for a wait of `ms`.
pub fn set_retry_after(headers: &Headers, ms: u64) -> Result<()> {
    headers.set(header::RETRY_AFTER, &ms.div_ceil(1000).max(1).to_string())?;
    headers.set(header::RETRY_AFTER_MS, &ms.to_string())
}

/// A job's result as every caller gets it — the driver, a waiting duplicate,
/// a replay from the Ledger or from KV: the stored status, content type and
/// bytes, with onejob's headers.
#[derive(Debug, Clone)]
pub struct JobResult {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    /// The job's state with this result.
    pub state: JobState,
    /// The attempt whose result this is, if any.
    pub attempt: Option<u32>,
    /// The job is not finished and may be asked again after this long.
    pub retry_after_ms: Option<u64>,
}

impl JobResult {
    /// A stored (or just stored) response as the job's result, moved, not copied.
    pub fn of(response: StoredResponse, state: JobState, attempt: Option<u32>, retry_after_ms: Option<u64>) -> Self {
        let StoredResponse { status, content_type, body } = response;
        Self { status, content_type, body, state, attempt, retry_after_ms }
    }

    /// An error of onejob's own (no upstream response to keep), as problem+json.
    pub fn problem(problem: &Problem, state: JobState, attempt: Option<u32>) -> Self {
        Self {
            status: problem.status(),
            content_type: PROBLEM_CONTENT_TYPE.into(),
            body: problem.to_json().into_bytes(),
            state,
            attempt,
            retry_after_ms: problem.retry_after_ms,
        }
    }

    /// The response for the client with key `key`. A result says
    /// `x-should-retry: true` only with a time to retry after; any other (a
    /// finished job's, whatever its status — a replayed 503 of a dead job
    /// too — or an unknown outcome that will never be retried) says `false`.
    pub fn into_response(self, key: &str, replayed: bool) -> Result<Response> {
        let headers = Headers::new();
        headers.set("Content-Type", &self.content_type)?;
        headers.set(header::IDEMPOTENCY_KEY, key)?;
        headers.set(header::JOB_STATE, self.state.as_str())?;
        if let Some(attempt) = self.attempt {
            headers.set(header::ATTEMPT, &attempt.to_string())?;
        }
        if replayed {
            headers.set(header::IDEMPOTENT_REPLAYED, "true")?;
        }
        if self.content_type.starts_with(sse::MEDIA_TYPE) {
            set_stream_headers(&headers)?;
        }
        match self.retry_after_ms {
            Some(ms) if !self.state.is_terminal() => {
                set_retry_after(&headers, ms)?;
                headers.set(header::SHOULD_RETRY, "true")?;
            }
            _ => headers.set(header::SHOULD_RETRY, "false")?,
        }
        with_cors(Response::from_bytes(self.body)?.with_status(self.status).with_headers(headers))
    }
}

/// What a caller's view of a live stream says about it: the attempt that
/// streams, its content type, and how many events come before its first.
pub struct StreamHead<'a> {
    pub attempt: u32,
    pub content_type: &'a str,
    pub from: u64,
}

/// A caller's view of a live stream: `events` (complete SSE events) as they
/// come, with onejob's headers, numbered with `id:` lines when `ids`. The
/// job is still running (`in_flight`).
pub fn stream_response(
    head: StreamHead,
    events: impl Stream<Item = Vec<u8>> + 'static,
    key: &str,
    replayed: bool,
    ids: bool,
) -> Result<Response> {
    let StreamHead { attempt, content_type, from } = head;
    let headers = Headers::new();
    headers.set("Content-Type", content_type)?;
    set_stream_headers(&headers)?;
    headers.set(header::IDEMPOTENCY_KEY, key)?;
    headers.set(header::JOB_STATE, JobState::InFlight.as_str())?;
    headers.set(header::ATTEMPT, &attempt.to_string())?;
    if replayed {
        headers.set(header::IDEMPOTENT_REPLAYED, "true")?;
    }
    // A streamed answer is never sent to the provider again (its tokens are
    // billed): asking again only follows or replays it, which says the same.
    headers.set(header::SHOULD_RETRY, "false")?;
    let mut number = from;
    let body = events.map(move |event| {
        number += 1;
        Ok::<Vec<u8>, worker::Error>(if ids { with_id(&event, number) } else { event })
    });
    with_cors(Response::from_stream(body)?.with_headers(headers))
}

/// Streams must not be buffered on their way (`wrangler dev` and compressing
/// proxies hold a compressed event stream back) nor cached.
fn set_stream_headers(headers: &Headers) -> Result<()> {
    headers.set("Cache-Control", "no-cache")?;
    headers.set("Content-Encoding", "identity")
}
