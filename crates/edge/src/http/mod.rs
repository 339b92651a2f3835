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
use onejob_core::front::response::{self, HeaderList, ResultHead};
use onejob_core::front::{self, Refusal};
use onejob_core::job::JobState;
use onejob_core::upstream::sse::Numbering;
use onejob_core::wire::{PROBLEM_CONTENT_TYPE, Problem, ProblemType};
use worker::{Headers, Request, Response, Result};

use crate::answer::StoredResponse;

/// Sets every header of `list` (which the core decides, [`response`]).
fn set_all(headers: &Headers, list: HeaderList) -> Result<()> {
    list.into_iter().try_for_each(|(name, value)| headers.set(name, &value))
}

/// A response with `list`'s headers and the CORS headers.
fn with_headers(response: Response, list: HeaderList) -> Result<Response> {
    let headers = Headers::new();
    set_all(&headers, list)?;
    with_cors(response.with_headers(headers))
}

/// Adds the CORS headers every response carries, so a browser app on another
/// origin can call the gateway and read onejob's headers.
pub fn with_cors(mut response: Response) -> Result<Response> {
    set_all(response.headers_mut(), response::cors())?;
    Ok(response)
}

/// A `200` JSON answer of `body`, with CORS: every listing's and page's
/// answer. Its error converts into a plain `Result` or a route's [`Step`].
pub fn json<E: From<worker::Error>>(body: &impl serde::Serialize) -> std::result::Result<Response, E> {
    Ok(with_cors(Response::from_json(body)?)?)
}

/// The answer to a CORS preflight ([`response::preflight`]).
pub fn preflight(req: &Request) -> Result<Response> {
    let requested = req.headers().get("Access-Control-Request-Headers")?;
    with_headers(Response::empty()?.with_status(204), response::preflight(requested.as_deref()))
}

/// A problem+json response; retryable kinds carry `x-should-retry: true`
/// and, when known, `Retry-After`.
pub fn problem(problem: &Problem) -> Result<Response> {
    let body = Response::from_bytes(problem.to_json().into_bytes())?.with_status(problem.status());
    with_headers(body, response::problem(problem))
}

/// `202 Accepted` for a background job: where to follow it, when to look.
pub fn accepted(view: &onejob_core::job::view::JobView) -> Result<Response> {
    let mut response = Response::from_json(view)?.with_status(202);
    set_all(response.headers_mut(), response::accepted(view.key.as_str(), view.state))?;
    with_cors(response)
}

/// A request the core refused before any I/O ([`Refusal`]): its problem,
/// and the `Allow` header of a `405`.
pub fn refuse(refusal: &Refusal) -> Result<Response> {
    let mut response = problem(&refusal.problem())?;
    set_all(response.headers_mut(), refusal.headers())?;
    Ok(response)
}

/// Why a route ends before its answer: the core refused the request
/// (answered with its problem, [`refuse`]), or I/O failed (the worker's
/// boundary answers `500` and logs it). A route's steps `?` into it and
/// [`Stop::respond`] answers it, in one place.
#[derive(Debug)]
pub enum Stop {
    /// The core refused the request.
    Refused(Refusal),
    /// I/O failed.
    Failed(worker::Error),
}

impl From<Refusal> for Stop {
    fn from(refusal: Refusal) -> Self {
        Stop::Refused(refusal)
    }
}

impl From<worker::Error> for Stop {
    fn from(error: worker::Error) -> Self {
        Stop::Failed(error)
    }
}

impl From<serde_json::Error> for Stop {
    fn from(error: serde_json::Error) -> Self {
        Stop::Failed(error.into())
    }
}

impl Stop {
    /// The one place a route's stop becomes its response.
    pub fn respond(self) -> Result<Response> {
        match self {
            Stop::Refused(refusal) => refuse(&refusal),
            Stop::Failed(error) => Err(error),
        }
    }
}

/// A step of a route: its value, or why the route stops ([`Stop`]).
pub type Step<T> = std::result::Result<T, Stop>;

/// Shorthand for a problem with only a detail.
pub fn problem_of(kind: ProblemType, detail: impl Into<String>) -> Result<Response> {
    problem(&Problem::new(kind, detail))
}

/// 500 with nothing of the configuration in it: the detail is in the log
/// ([`front::misconfigured`]).
pub fn misconfigured() -> Result<Response> {
    refuse(&front::misconfigured())
}

/// A problem about a job: with the job's key and state.
pub fn problem_about(problem: &Problem, key: &str, state: JobState) -> Result<Response> {
    let mut response = self::problem(problem)?;
    set_all(response.headers_mut(), response::about_job(key, state))?;
    Ok(response)
}

/// `Retry-After` (whole seconds, at least 1) and `retry-after-ms` for a wait of `ms`.
pub fn set_retry_after(headers: &Headers, ms: u64) -> Result<()> {
    set_all(headers, response::retry_after(ms))
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
        let head = ResultHead {
            content_type: &self.content_type,
            key,
            state: self.state,
            attempt: self.attempt,
            replayed,
            retry_after_ms: self.retry_after_ms,
        };
        let headers = response::result(&head);
        with_headers(Response::from_bytes(self.body)?.with_status(self.status), headers)
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
    let headers = response::stream(content_type, key, attempt, replayed);
    let mut numbering = Numbering::after(from, ids);
    let body = events.map(move |event| Ok::<Vec<u8>, worker::Error>(numbering.next(event)));
    with_headers(Response::from_stream(body)?, headers)
}

#[cfg(test)]
mod tests {
    use onejob_core::front::refused;
    use onejob_core::wire::ProblemType;

    use super::Stop;

    #[test]
    fn a_refusal_is_answered_as_its_problem_and_a_failure_is_the_boundary_s() {
        let refusal = refused(ProblemType::Forbidden, "this admin key does not reach that tenant");
        assert!(matches!(Stop::from(refusal.clone()), Stop::Refused(r) if r == refusal));
        let failed = Stop::from(worker::Error::RustError("D1 down".into()));
        assert!(matches!(&failed, Stop::Failed(error) if error.to_string() == "D1 down"));
        assert!(failed.respond().is_err(), "a failure passes to the boundary (500, logged)");
        let unreadable = serde_json::from_str::<u8>("x").unwrap_err();
        assert!(matches!(Stop::from(unreadable), Stop::Failed(_)));
    }
}
