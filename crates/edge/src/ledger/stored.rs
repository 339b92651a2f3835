//! A finished job's result as it is replayed from the Ledger's storage: the
//! response of the attempt that won (or of a dead job's last attempt, which
//! may be the final `504` its caller got after an unknown outcome), a
//! streamed answer's events, or — when the last outcome was unknown and no
//! caller was answered — a problem saying so. What a replay is, per
//! ending: [`onejob_core::job::answer`]. And the request it kept, as it was submitted.

use onejob_core::job::Job;
use onejob_core::job::answer;
use onejob_core::upstream::sse::with_id;
use worker::Result;

use crate::api::handoff::Submission;
use crate::error::EdgeError;
use crate::http::JobResult;
use crate::ledger::store::Store;

/// The request kept for the job (its submission and body: what a
/// background job's deliveries run and its messages say), if one was kept.
pub fn kept_request(store: &Store) -> Result<Option<(Submission, Vec<u8>)>> {
    let Some((submission, body)) = store.load_request()? else { return Ok(None) };
    let submission = serde_json::from_str(&submission).map_err(|_| EdgeError::Unreadable("request".into()))?;
    Ok(Some((submission, body)))
}

/// The stored result of a finished job.
pub fn finished_result(store: &Store, job: &Job) -> Result<JobResult> {
    let attempt = job.replayed_attempt().map(|a| a.number);
    let stored = match attempt {
        Some(n) => store.load_response(n)?,
        None => None,
    };
    Ok(match stored {
        Some(response) => JobResult::of(response, job.state(), attempt, None),
        // A dead job whose last attempt's outcome was unknown, and whose
        // caller was never answered, kept no response.
        None => JobResult::problem(&answer::dead_without_response(job), job.state(), attempt),
    })
}

/// A finished streamed answer after its first `from` events (numbered with
/// `id:` lines when `ids`); `None` when the job's answer did not stream.
pub fn stream_after(store: &Store, job: &Job, from: u64, ids: bool) -> Result<Option<JobResult>> {
    let Some(attempt) = job.replayed_attempt().map(|a| a.number) else { return Ok(None) };
    // The head tells whether it streamed; only the events after `from` are read.
    let Some(head) = store.response_head(attempt)?.filter(|h| h.streamed) else { return Ok(None) };
    Ok(Some(JobResult {
        status: head.status,
        content_type: head.content_type,
        body: store
            .load_events(attempt, from, u64::MAX)?
            .iter()
            .zip(from + 1..)
            .flat_map(|(event, number)| if ids { with_id(event, number) } else { event.clone() })
            .collect(),
        state: job.state(),
        attempt: Some(attempt),
        retry_after_ms: None,
    }))
}
