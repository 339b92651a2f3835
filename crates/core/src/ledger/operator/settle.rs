//! What the Ledger decides when someone acts on a job directly: an
//! operator settling an unknown job, a caller cancelling a stream, a
//! caller polling a background job.

use crate::job::{Job, JobError, JobState};
use crate::ledger::background::outbox::{self, Outbox};
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

/// What a cancel does that is not refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancel {
    /// Stop the stream running here.
    pub stops: bool,
    /// The status the job's view is answered with: `202` while the cancel
    /// is under way, else `200`.
    pub status: u16,
}

/// What a cancel of `job` does: stops the stream running here (`202`,
/// under way), or changes nothing (`200`: a streamed answer that has ended,
/// cancelled or not); `Err` refuses (`409`: a job whose answer does not
/// stream, finished or not, was never cancellable).
pub fn cancel(job: &Job, streaming_here: bool) -> Result<Cancel, Refused> {
    let streamed = job.replayed_attempt().is_some_and(|attempt| attempt.streamed);
    if streaming_here {
        Ok(Cancel { stops: true, status: 202 })
    } else if job.state().is_terminal() && streamed {
        Ok(Cancel { stops: false, status: 200 })
    } else {
        let detail = "only a job whose answer is streaming can be cancelled";
        Err(Refused { kind: ProblemType::NotCancellable, detail })
    }
}

/// A stream's resumption when no stream is live here: from storage, the
/// `read` of a finished `job`'s streamed answer (`None`: it did not
/// stream); `404 job-not-found` without a finished job, or when its answer
/// did not stream. `read`'s failure is the shell's (I/O).
pub fn resume<T, E>(
    job: Option<&Job>,
    read: impl FnOnce(&Job) -> Result<Option<T>, E>,
) -> Result<Result<T, Refused>, E> {
    let Some(job) = job.filter(|job| job.state().is_terminal()) else {
        let detail = "this tenant has no streamed job with that key";
        return Ok(Err(Refused { kind: ProblemType::JobNotFound, detail }));
    };
    let detail = "this job's answer was not streamed";
    Ok(read(job)?.ok_or(Refused { kind: ProblemType::JobNotFound, detail }))
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

/// What an operator's replay of a job (whose job type's answer, if any, is
/// not in: those replay their effects) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayStep {
    /// Refused: only a background job has attempts an operator replays.
    Refused(Refused),
    /// The outbox gave up on its messages (no delivery took one): once the
    /// queue is fixed, a fresh run of sends, and nothing else.
    Resend,
    /// Fresh attempts ([`Job::replay_dead`] decides whether it may), after
    /// its job type's subject is claimed again when `claim_subject` (a dead
    /// job freed it; another job may have taken it meanwhile).
    Replay {
        /// Claim the subject first.
        claim_subject: bool,
    },
}

/// What an operator's replay of `job` does, its outbox as `outbox` says.
pub fn replay_step(job: &Job, outbox: &Outbox) -> ReplayStep {
    if !job.is_background() {
        let detail = "only a background job can be replayed";
        return ReplayStep::Refused(Refused { kind: ProblemType::NotBackground, detail });
    }
    if outbox::undelivered(job, outbox) {
        return ReplayStep::Resend;
    }
    ReplayStep::Replay { claim_subject: job.state() == JobState::Dead }
}

/// What an operator's resolution did to a job, for the Ledger to perform
/// in this order: store the operator attempt's response (before the job
/// that names it), write the job, clear its dead letter, send it to the
/// queue again, and follow up (a job type's answer is in: its effects follow).
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// This request was applied before: nothing changes.
    AlreadyApplied,
    /// The job changed.
    Changed {
        /// The operator attempt's response: its number, status and JSON body.
        response: Option<(u32, u16, serde_json::Value)>,
        /// Whether the job goes to the queue again ([`requeue_after_resolve`]).
        requeue: bool,
    },
}

/// Settles `job` (unknown, or dead with an unknown last attempt) as
/// `resolution` says, once per operator `request`, at the version it has now.
pub fn resolve(
    job: &mut Job,
    resolution: Resolution,
    by: &str,
    request: &str,
    now_ms: u64,
) -> Result<Resolved, JobError> {
    let read = job.version();
    let response = match resolution {
        Resolution::Succeeded { status, body } => match job.resolve_succeeded(read, status, by, request, now_ms)? {
            Some(attempt) => Some((attempt, status, body)),
            None => return Ok(Resolved::AlreadyApplied),
        },
        Resolution::Retry if job.allow_attempt(read, by, request, now_ms)? => None,
        Resolution::Retry => return Ok(Resolved::AlreadyApplied),
    };
    Ok(Resolved::Changed { response, requeue: requeue_after_resolve(job) })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::job::AttemptReport;

    fn job() -> Job {
        crate::job::test_job::new()
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
        assert_eq!(cancel(&j, true), Ok(Cancel { stops: true, status: 202 }));
        assert_eq!(cancel(&j, false).unwrap_err().kind, ProblemType::NotCancellable);
        let ticket = j.claim(j.version(), 1, "p", None).expect("claim");
        let ticket = j.mark_streaming(ticket, 2).expect("stream");
        j.complete(ticket, 3, AttemptReport::default()).expect("complete");
        assert_eq!(cancel(&j, false), Ok(Cancel { stops: false, status: 200 }));
        // A finished answer that did not stream was never cancellable.
        let mut other = job();
        let ticket = other.claim(other.version(), 1, "p", None).expect("claim");
        other.complete(ticket, 2, AttemptReport::default()).expect("complete");
        assert_eq!(cancel(&other, false).unwrap_err().kind, ProblemType::NotCancellable);
    }

    #[test]
    fn a_stream_resumes_from_storage_only_for_a_finished_job_whose_answer_streamed() {
        let read = |job: &Job| Ok::<_, ()>(Some(job.version()));
        let not_found = |refused: Refused| (refused.kind, refused.detail);
        // No job, or one not finished (and no stream live here): nothing is read.
        let unread = |_: &Job| -> Result<Option<u64>, ()> { panic!("not read") };
        let none = resume(None, unread).unwrap().map_err(not_found);
        assert_eq!(none, Err((ProblemType::JobNotFound, "this tenant has no streamed job with that key")));
        let mut j = job();
        let running = resume(Some(&j), unread).unwrap().map_err(not_found);
        assert_eq!(running, Err((ProblemType::JobNotFound, "this tenant has no streamed job with that key")));
        let ticket = j.claim(j.version(), 1, "p", None).expect("claim");
        j.complete(ticket, 2, AttemptReport::default()).expect("complete");
        assert_eq!(resume(Some(&j), read), Ok(Ok(j.version())));
        let unstreamed = resume(Some(&j), |_| Ok::<Option<u64>, ()>(None)).unwrap().map_err(not_found);
        assert_eq!(unstreamed, Err((ProblemType::JobNotFound, "this job's answer was not streamed")));
        // The read's own failure is the shell's.
        assert_eq!(resume(Some(&j), |_| Err::<Option<u64>, _>("io")), Err("io"));
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

    /// A background job whose one attempt's outcome is unknown.
    fn unknown_background_job() -> Job {
        let mut j = job();
        j.run_in_background(0);
        let ticket = j.claim(j.version(), 1, "p", None).expect("claim");
        j.mark_unknown(ticket, 2, AttemptReport::default()).expect("unknown");
        assert_eq!(j.state(), JobState::Unknown);
        j
    }

    #[test]
    fn a_resolution_as_succeeded_stores_the_operator_s_answer_once() {
        let mut j = unknown_background_job();
        let body = serde_json::json!({"ok": true});
        let resolution = Resolution::Succeeded { status: 200, body: body.clone() };
        let resolved = resolve(&mut j, resolution.clone(), "ops", "r1", 3).expect("resolved");
        assert_eq!(resolved, Resolved::Changed { response: Some((2, 200, body)), requeue: false });
        assert_eq!(j.state(), JobState::Completed);
        let version = j.version();
        assert_eq!(resolve(&mut j, resolution, "ops", "r1", 4), Ok(Resolved::AlreadyApplied));
        assert_eq!(j.version(), version, "the same request changes nothing");
    }

    #[test]
    fn a_retry_resolution_sends_a_background_job_to_the_queue_again_once() {
        let mut j = unknown_background_job();
        let resolved = resolve(&mut j, Resolution::Retry, "ops", "r1", 3).expect("resolved");
        assert_eq!(resolved, Resolved::Changed { response: None, requeue: true });
        assert_eq!(j.state(), JobState::Failed);
        assert_eq!(resolve(&mut j, Resolution::Retry, "ops", "r1", 4), Ok(Resolved::AlreadyApplied));
        // A finished job is not the operator's to settle.
        let mut done = job();
        let ticket = done.claim(done.version(), 1, "p", None).expect("claim");
        done.complete(ticket, 2, AttemptReport::default()).expect("complete");
        assert!(matches!(resolve(&mut done, Resolution::Retry, "ops", "r2", 3), Err(JobError::NotResolvable { .. })));
    }

    #[test]
    fn a_replay_resends_an_undelivered_job_and_gives_a_dead_one_fresh_attempts() {
        assert_eq!(
            replay_step(&job(), &Outbox::default()),
            ReplayStep::Refused(Refused {
                kind: ProblemType::NotBackground,
                detail: "only a background job can be replayed"
            })
        );
        let mut queued = job();
        queued.run_in_background(0);
        assert_eq!(replay_step(&queued, &Outbox::default()), ReplayStep::Replay { claim_subject: false });
        let mut gave_up = Outbox::default();
        gave_up.give_up();
        assert_eq!(replay_step(&queued, &gave_up), ReplayStep::Resend, "no delivery took its messages");
        let mut dead = queued.clone();
        let ticket = dead.claim(dead.version(), 1, "p", None).expect("claim");
        dead.give_up(ticket, 2, AttemptReport::default()).expect("dead");
        assert_eq!(replay_step(&dead, &Outbox::default()), ReplayStep::Replay { claim_subject: true });
    }
}
