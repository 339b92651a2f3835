//! What the Ledger decides when someone acts on a job directly: an
//! operator settling an unknown job, a caller cancelling a stream, a
//! caller polling a background job.

use crate::job::{Job, JobState};
use crate::wire::{Problem, ProblemType};

/// Why an action is refused: the problem's type and detail (a small value;
/// [`Refused::problem`] builds the problem sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// The problem's type.
    pub kind: ProblemType,
    /// Its detail.
    pub detail: &'static str,
}

impl Refused {
    /// The problem sent for it.
    pub fn problem(self) -> Problem {
        Problem::new(self.kind, self.detail)
    }
}

/// How an operator settles a job whose last outcome is unknown.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// It did succeed: this response is the job's answer.
    Succeeded {
        /// Its status (200 to 299).
        status: u16,
        /// Its JSON body.
        body: serde_json::Value,
    },
    /// One new attempt, now.
    Retry,
}

impl Resolution {
    /// Reads an operator's `action` (`succeeded` or `retry`) with the
    /// response a success records (status 200 by default, `null` body).
    pub fn read(action: Option<&str>, status: Option<u16>, body: Option<serde_json::Value>) -> Result<Self, Refused> {
        match action {
            Some("succeeded") => {
                let status = status.unwrap_or(200);
                if !(200..300).contains(&status) {
                    let detail = "a resolved job's response status is 200 to 299";
                    return Err(Refused { kind: ProblemType::InvalidQuery, detail });
                }
                Ok(Self::Succeeded { status, body: body.unwrap_or(serde_json::Value::Null) })
            }
            Some("retry") => Ok(Self::Retry),
            _ => Err(Refused { kind: ProblemType::InvalidQuery, detail: "action must be succeeded or retry" }),
        }
    }
}

/// What a cancel of `job` does: `Ok(true)` stops the stream running here
/// (`202`, under way), `Ok(false)` changes nothing (`200`: a streamed answer
/// that has ended, cancelled or not), `Err` refuses (`409`: a job whose
/// answer does not stream, finished or not, was never cancellable).
pub fn cancel(job: &Job, streaming_here: bool) -> Result<bool, Refused> {
    let streamed = job.replayed_attempt().is_some_and(|attempt| attempt.streamed);
    if streaming_here {
        Ok(true)
    } else if job.state().is_terminal() && streamed {
        Ok(false)
    } else {
        let detail = "only a job whose answer is streaming can be cancelled";
        Err(Refused { kind: ProblemType::NotCancellable, detail })
    }
}

/// When a caller polling an unfinished job should look again: after a
/// background job's backoff, else soon (1 to 10 s). `None` once it is finished.
pub fn poll_after_ms(job: &Job, now_ms: u64) -> Option<u64> {
    (!job.state().is_terminal()).then(|| job.not_before_ms().saturating_sub(now_ms).clamp(1_000, 10_000))
}

/// Whether an operator's settlement of `job` sends it to the queue again:
/// a background job left failed (one new attempt) runs there.
pub fn requeue_after_resolve(job: &Job) -> bool {
    job.is_background() && job.state() == JobState::Failed
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::job::AttemptReport;

    fn job() -> Job {
        super::super::test_job::new()
    }

    #[test]
    fn an_operator_resolves_with_a_2xx_answer_or_one_more_attempt() {
        assert_eq!(Resolution::read(Some("retry"), None, None), Ok(Resolution::Retry));
        assert_eq!(
            Resolution::read(Some("succeeded"), None, None),
            Ok(Resolution::Succeeded { status: 200, body: serde_json::Value::Null })
        );
        let body = serde_json::json!({"ok": true});
        assert_eq!(
            Resolution::read(Some("succeeded"), Some(201), Some(body.clone())),
            Ok(Resolution::Succeeded { status: 201, body })
        );
        assert_eq!(Resolution::read(Some("succeeded"), Some(500), None).unwrap_err().kind, ProblemType::InvalidQuery);
        assert_eq!(Resolution::read(Some("maybe"), None, None).unwrap_err().kind, ProblemType::InvalidQuery);
        assert_eq!(Resolution::read(None, None, None).unwrap_err().kind, ProblemType::InvalidQuery);
    }

    #[test]
    fn only_a_streamed_answer_is_cancellable_and_an_ended_one_changes_nothing() {
        let mut j = job();
        assert!(cancel(&j, true).expect("streaming here"));
        assert_eq!(cancel(&j, false).unwrap_err().kind, ProblemType::NotCancellable);
        let ticket = j.claim(j.version(), 1, "p", None).expect("claim");
        let ticket = j.mark_streaming(ticket, 2).expect("stream");
        j.complete(ticket, 3, AttemptReport::default()).expect("complete");
        assert!(!cancel(&j, false).expect("ended stream"));
        // A finished answer that did not stream was never cancellable.
        let mut other = job();
        let ticket = other.claim(other.version(), 1, "p", None).expect("claim");
        other.complete(ticket, 2, AttemptReport::default()).expect("complete");
        assert_eq!(cancel(&other, false).unwrap_err().kind, ProblemType::NotCancellable);
    }

    #[test]
    fn a_poll_looks_again_within_one_to_ten_seconds_and_not_after_the_end() {
        let mut j = job();
        assert_eq!(poll_after_ms(&j, 0), Some(1_000));
        j.defer_until(60_000, 0);
        assert_eq!(poll_after_ms(&j, 0), Some(10_000));
        assert_eq!(poll_after_ms(&j, 55_000), Some(5_000));
        let ticket = j.claim(j.version(), 60_000, "p", None).expect("claim");
        j.complete(ticket, 60_001, AttemptReport::default()).expect("complete");
        assert_eq!(poll_after_ms(&j, 60_002), None);
    }
}
