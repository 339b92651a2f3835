//! Response helpers: RFC 9457 problems, CORS, onejob's headers.

use onejob_core::protocol::{PROBLEM_CONTENT_TYPE, Problem, ProblemType, header};
use worker::{Headers, Response, Result};

/// Adds the CORS headers every response carries, so a browser app on another
/// origin can call the gateway and read onejob's headers.
pub fn with_cors(mut response: Response) -> Result<Response> {
    let headers = response.headers_mut();
    headers.set("Access-Control-Allow-Origin", "*")?;
    headers.set("Access-Control-Expose-Headers", &header::EXPOSED.join(", "))?;
    headers.set("Vary", "Origin")?;
    Ok(response)
}

/// The answer to a CORS preflight.
pub fn preflight() -> Result<Response> {
    let headers = Headers::new();
    headers.set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")?;
    headers.set(
        "Access-Control-Allow-Headers",
        "Authorization, Content-Type, Idempotency-Key, Prefer, x-stainless-retry-count",
    )?;
    headers.set("Access-Control-Max-Age", "86400")?;
    with_cors(Response::empty()?.with_status(204).with_headers(headers))
}

/// A problem+json response; retryable kinds carry `x-should-retry`.
pub fn problem(problem: &Problem) -> Result<Response> {
    let kind = ProblemType::from_type_uri(&problem.type_uri);
    let headers = Headers::new();
    headers.set("Content-Type", PROBLEM_CONTENT_TYPE)?;
    headers.set(header::SHOULD_RETRY, if kind.is_some_and(ProblemType::should_retry) { "true" } else { "false" })?;
    if let Some(ms) = problem.extensions.get("retry_after_ms").and_then(|v| v.as_u64()) {
        set_retry_after(&headers, ms)?;
    }
    let response =
        Response::from_bytes(problem.to_json().into_bytes())?.with_status(problem.status).with_headers(headers);
    with_cors(response)
}

/// Shorthand for a problem with only a detail.
pub fn problem_of(kind: ProblemType, detail: impl Into<String>) -> Result<Response> {
    problem(&Problem::new(kind, detail))
}

/// `Retry-After` (whole seconds, at least 1) and `retry-after-ms` for a wait of `ms`.
pub fn set_retry_after(headers: &Headers, ms: u64) -> Result<()> {
    headers.set(header::RETRY_AFTER, &ms.div_ceil(1000).max(1).to_string())?;
    headers.set(header::RETRY_AFTER_MS, &ms.to_string())
}

/// onejob's headers on a response about a job.
pub struct JobHeaders<'a> {
    pub key: &'a str,
    /// The job state's wire name (`completed`, `dead`, …).
    pub state: &'a str,
    /// The attempt whose result this is, if any.
    pub attempt: Option<u32>,
    /// Whether the response comes from storage rather than this request's own call.
    pub replayed: bool,
}

impl JobHeaders<'_> {
    pub fn apply(&self, mut response: Response) -> Result<Response> {
        let headers = response.headers_mut();
        headers.set(header::IDEMPOTENCY_KEY, self.key)?;
        headers.set(header::JOB_STATE, self.state)?;
        if let Some(attempt) = self.attempt {
            headers.set(header::ATTEMPT, &attempt.to_string())?;
        }
        if self.replayed {
            headers.set(header::IDEMPOTENT_REPLAYED, "true")?;
        }
        Ok(response)
    }
}

/// A job's result as the client gets it, whether from the Ledger or the KV
/// cache: the stored status, content type and bytes, with CORS and job headers.
pub fn job_result(status: u16, content_type: &str, body: Vec<u8>, job: &JobHeaders<'_>) -> Result<Response> {
    let headers = Headers::new();
    headers.set("Content-Type", content_type)?;
    job.apply(with_cors(Response::from_bytes(body)?.with_status(status).with_headers(headers))?)
}
