//! What happens to a keyed request for a job: the one decision the `Ledger`
//! makes for every request before it does anything, as a pure function.
//!
//! | the job | the request | admission |
//! |---|---|---|
//! | none yet | any | [`Admission::Run`] (create and claim) |
//! | any | another fingerprint | [`Admission::Refuse`] 422 `idempotency-key-reused` |
//! | completed or dead | same | [`Admission::Replay`] |
//! | driven by a request of this object | same, willing to wait | [`Admission::Wait`] for its result |
//! | driven here | same, `Prefer: wait=0` | [`Admission::Refuse`] 409 `request-in-progress` |
//! | held by an attempt this object does not know (it restarted mid-call) | same | 409 `request-in-progress`, retry when its lease ends |
//! | unknown, within its lease | same | 409 `outcome-unknown`, retry when the lease ends |
//! | unknown, policy `block` | same | 409 `outcome-blocked`, not to be retried: an operator must resolve it |
//! | pending, failed, or unknown past its lease | same | [`Admission::Run`] |
//!
//! Time-driven transitions ([`Job::expire`]) are the caller's to apply (and
//! persist) first, so the job given here is the job as of `now_ms`.
//!
//! A keyless request (its key derived by the gateway, see [`crate::identity::keyless`])
//! is admitted by [`admit_keyless`]: the same rules, but a job that has
//! ended is replayed only within the mode's window after its creation
//! (`coalesce`: never); past it, and with nobody driving the job here, it is
//! [`Admission::Renew`]: a new job under the same key replaces it.

use crate::identity::fingerprint::Fingerprint;
use crate::identity::keyless::Keyless;
use crate::job::{Job, JobError};
use crate::wire::{Problem, ProblemType};

/// How long a refused duplicate is told to wait when nothing better is known.
pub const DEFAULT_RETRY_AFTER_MS: u64 = 1_000;

/// The request being admitted.
#[derive(Debug, Clone, Copy)]
pub struct Arrival<'a> {
    /// The client's idempotency key (named in problems).
    pub key: &'a str,
    /// The request's fingerprint.
    pub fingerprint: &'a Fingerprint,
    /// How long it may wait for a running request (`Prefer: wait=N`).
    pub wait_ms: u64,
}

/// What happens to the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Claim the job and run an attempt (creating the job if there is none).
    Run,
    /// The job is finished: replay its stored result.
    Replay,
    /// Another request of this object is driving the job: wait for its
    /// result, up to the arrival's `wait_ms`.
    Wait,
    /// Answer with this problem; the job is not touched.
    Refuse(Problem),
    /// A keyless request after its ended job's replay window: replace the
    /// job with a new one under the same key ([`Job::renew`]), then claim
    /// it and run an attempt.
    Renew,
}

/// Decides what happens to a keyless request: as [`admit`], except that an
/// ended job is replayed only until `keyless`'s replay window after its
/// creation has passed. After it, and with no drive here (a drive still
/// hands its answer to the requests that joined it, and this one is
/// replayed that answer like them), the request renews the job.
pub fn admit_keyless(
    job: Option<&Job>,
    arrival: Arrival<'_>,
    now_ms: u64,
    driving: bool,
    keyless: Keyless,
) -> Admission {
    if let Some(job) = job
        && job.fingerprint() == arrival.fingerprint
        && job.state().is_terminal()
        && !driving
        && now_ms >= job.created_ms().saturating_add(keyless.replay_ms())
    {
        return Admission::Renew;
    }
    admit(job, arrival, now_ms, driving)
}

/// Decides what happens to `arrival` given the job as of `now_ms` and
/// whether a request of this object is driving it right now.
pub fn admit(job: Option<&Job>, arrival: Arrival<'_>, now_ms: u64, driving: bool) -> Admission {
    let Some(job) = job else {
        return Admission::Run;
    };
    if job.fingerprint() != arrival.fingerprint {
        return Admission::Refuse(key_reused(arrival.key));
    }
    if job.state().is_terminal() {
        return Admission::Replay;
    }
    if driving {
        return if arrival.wait_ms == 0 {
            Admission::Refuse(in_progress(arrival.key, DEFAULT_RETRY_AFTER_MS))
        } else {
            Admission::Wait
        };
    }
    match job.check_claim(now_ms) {
        Ok(()) => Admission::Run,
        Err(JobError::Finished { .. }) => Admission::Replay,
        Err(JobError::UnknownLease { retry_after_ms }) => Admission::Refuse(
            Problem::new(
                ProblemType::OutcomeUnknown,
                "the last attempt timed out after the request reached the provider; no new attempt until Retry-After",
            )
            .with_key(arrival.key)
            .with_retry_after_ms(retry_after_ms),
        ),
        Err(JobError::Blocked) => Admission::Refuse(
            Problem::new(
                ProblemType::OutcomeBlocked,
                "the last attempt's outcome is unknown and this deployment blocks retries; an operator must resolve the job",
            )
            .with_key(arrival.key),
        ),
        // Held by an attempt this object does not know (it restarted
        // mid-call): wait out its lease.
        Err(JobError::InFlight { lease_remaining_ms, .. }) => {
            Admission::Refuse(in_progress(arrival.key, lease_remaining_ms.max(1)))
        }
        // check_claim compares no version, holds no ticket, hedges nothing
        // and is no operator action.
        Err(
            JobError::VersionConflict { .. }
            | JobError::StaleAttempt { .. }
            | JobError::NotHedgeable
            | JobError::NotReplayable { .. }
            | JobError::NotResolvable { .. },
        ) => {
            Admission::Refuse(in_progress(arrival.key, DEFAULT_RETRY_AFTER_MS))
        }
    }
}

/// 409: a request with this key is still running.
pub fn in_progress(key: &str, retry_after_ms: u64) -> Problem {
    Problem::new(
        ProblemType::RequestInProgress,
        "a request with this key is still running; retry with the same key to get its result",
    )
    .with_key(key)
    .with_retry_after_ms(retry_after_ms)
}

/// 422: the key was first used with another request.
pub fn key_reused(key: &str) -> Problem {
    Problem::new(
        ProblemType::KeyReused,
        "this Idempotency-Key was first used with a different request (method, path, query or body); use a new key for a new request",
    )
    .with_key(key)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::Body;
    use crate::job::{AttemptReport, JobPolicy, UnknownPolicy};
    use crate::retry::classify::ErrorClass;

    const T0: u64 = 1_700_000_000_000;
    const KEY: &str = "0123456789abcdef";

    fn fp(body: &str) -> Fingerprint {
        Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(body.as_bytes())).unwrap()
    }

    fn job(unknown_policy: UnknownPolicy) -> Job {
        let policy = JobPolicy::new(2, 1_000, 5_000, 86_400_000, unknown_policy).unwrap();
        Job::new(fp("{}"), T0, policy)
    }

    fn arrive(fingerprint: &Fingerprint, wait_ms: u64) -> Arrival<'_> {
        Arrival { key: KEY, fingerprint, wait_ms }
    }

    fn refused(admission: Admission) -> Problem {
        match admission {
            Admission::Refuse(problem) => problem,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn report(status: u16, class: ErrorClass) -> AttemptReport {
        AttemptReport { status: Some(status), usage: None, error_class: Some(class) }
    }

    #[test]
    fn a_new_key_runs() {
        assert_eq!(admit(None, arrive(&fp("{}"), 30_000), T0, false), Admission::Run);
    }

    #[test]
    fn another_request_under_the_same_key_is_422_whatever_the_state() {
        let mut running = job(UnknownPolicy::RetryAfterLease);
        running.claim(0, T0, "demo", None).unwrap();
        for driving in [false, true] {
            let problem = refused(admit(Some(&running), arrive(&fp(r#"{"a":1}"#), 30_000), T0, driving));
            assert_eq!(problem.kind, ProblemType::KeyReused);
            assert_eq!(problem.status(), 422);
            assert_eq!(problem.key.as_deref(), Some(KEY));
        }
    }

    #[test]
    fn finished_jobs_replay() {
        let mut done = job(UnknownPolicy::RetryAfterLease);
        let ticket = done.claim(0, T0, "demo", None).unwrap();
        done.complete(ticket, T0 + 5, report(200, ErrorClass::None)).unwrap();
        assert_eq!(admit(Some(&done), arrive(&fp("{}"), 0), T0 + 10, true), Admission::Replay);
        let mut dead = job(UnknownPolicy::RetryAfterLease);
        for n in 0..2 {
            let ticket = dead.claim(dead.version(), T0 + n, "demo", None).unwrap();
            dead.fail(ticket, T0 + n, report(503, ErrorClass::Unavailable)).unwrap();
        }
        assert_eq!(admit(Some(&dead), arrive(&fp("{}"), 0), T0 + 10, false), Admission::Replay);
    }

    #[test]
    fn a_duplicate_of_a_driven_job_waits_unless_it_asked_not_to() {
        let mut running = job(UnknownPolicy::RetryAfterLease);
        running.claim(0, T0, "demo", None).unwrap();
        assert_eq!(admit(Some(&running), arrive(&fp("{}"), 30_000), T0, true), Admission::Wait);
        let problem = refused(admit(Some(&running), arrive(&fp("{}"), 0), T0, true));
        assert_eq!(problem.kind, ProblemType::RequestInProgress);
        assert_eq!(problem.retry_after_ms, Some(DEFAULT_RETRY_AFTER_MS));
        // Between two attempts (failed, backing off) the driver still owns it.
        let mut failed = job(UnknownPolicy::RetryAfterLease);
        let ticket = failed.claim(0, T0, "demo", None).unwrap();
        failed.fail(ticket, T0 + 1, report(503, ErrorClass::Unavailable)).unwrap();
        assert_eq!(admit(Some(&failed), arrive(&fp("{}"), 30_000), T0 + 2, true), Admission::Wait);
        // ...and when nobody drives it, the next request retries it.
        assert_eq!(admit(Some(&failed), arrive(&fp("{}"), 30_000), T0 + 2, false), Admission::Run);
    }

    #[test]
    fn an_attempt_this_object_lost_holds_the_job_until_its_lease_ends() {
        let mut orphan = job(UnknownPolicy::RetryAfterLease);
        orphan.claim(0, T0, "demo", None).unwrap();
        let problem = refused(admit(Some(&orphan), arrive(&fp("{}"), 30_000), T0 + 400, false));
        assert_eq!(problem.kind, ProblemType::RequestInProgress);
        assert_eq!(problem.retry_after_ms, Some(600));
    }

    #[test]
    fn unknown_outcomes_block_until_the_lease_ends_or_forever() {
        let mut unknown = job(UnknownPolicy::RetryAfterLease);
        let ticket = unknown.claim(0, T0, "demo", None).unwrap();
        unknown.mark_unknown(ticket, T0 + 100, report(0, ErrorClass::TimeoutAfterSend)).unwrap();
        let problem = refused(admit(Some(&unknown), arrive(&fp("{}"), 30_000), T0 + 1_100, false));
        assert_eq!(problem.kind, ProblemType::OutcomeUnknown);
        assert_eq!(problem.status(), 409);
        assert_eq!(problem.retry_after_ms, Some(4_000));
        assert_eq!(admit(Some(&unknown), arrive(&fp("{}"), 30_000), T0 + 5_100, false), Admission::Run);

        let mut blocked = job(UnknownPolicy::Block);
        let ticket = blocked.claim(0, T0, "demo", None).unwrap();
        blocked.mark_unknown(ticket, T0 + 100, report(0, ErrorClass::TimeoutAfterSend)).unwrap();
        let problem = refused(admit(Some(&blocked), arrive(&fp("{}"), 30_000), T0 + 999_999, false));
        assert_eq!(problem.kind, ProblemType::OutcomeBlocked);
        assert!(!problem.kind.should_retry(), "retrying cannot help: an operator must resolve it");
        assert_eq!(problem.retry_after_ms, None);
    }

    fn completed_at(created_ms: u64) -> Job {
        let policy = JobPolicy::new(2, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
        let mut done = Job::new(fp("{}"), created_ms, policy);
        let ticket = done.claim(0, created_ms, "demo", None).unwrap();
        done.complete(ticket, created_ms + 5, report(200, ErrorClass::None)).unwrap();
        done
    }

    const WINDOW: Keyless = Keyless::Window { window_ms: 60_000 };

    #[test]
    fn a_keyless_request_replays_within_the_window_and_renews_after_it() {
        let done = completed_at(T0);
        let at = |now| admit_keyless(Some(&done), arrive(&fp("{}"), 30_000), now, false, WINDOW);
        assert_eq!(at(T0 + 10), Admission::Replay);
        assert_eq!(at(T0 + 59_999), Admission::Replay);
        assert_eq!(at(T0 + 60_000), Admission::Renew, "the window is measured from the job's first request");
        assert_eq!(at(T0 + 3_600_000), Admission::Renew);
    }

    #[test]
    fn coalesce_never_replays_an_ended_job() {
        let done = completed_at(T0);
        assert_eq!(
            admit_keyless(Some(&done), arrive(&fp("{}"), 30_000), T0 + 6, false, Keyless::Coalesce),
            Admission::Renew
        );
        let mut dead = job(UnknownPolicy::RetryAfterLease);
        for n in 0..2 {
            let ticket = dead.claim(dead.version(), T0 + n, "demo", None).unwrap();
            dead.fail(ticket, T0 + n, report(503, ErrorClass::Unavailable)).unwrap();
        }
        assert_eq!(
            admit_keyless(Some(&dead), arrive(&fp("{}"), 0), T0 + 10, false, Keyless::Coalesce),
            Admission::Renew
        );
    }

    #[test]
    fn a_keyless_request_joins_a_job_in_flight_in_every_mode() {
        for keyless in [Keyless::Coalesce, WINDOW] {
            assert_eq!(admit_keyless(None, arrive(&fp("{}"), 30_000), T0, false, keyless), Admission::Run);
            let mut running = job(UnknownPolicy::RetryAfterLease);
            running.claim(0, T0, "demo", None).unwrap();
            let joined = admit_keyless(Some(&running), arrive(&fp("{}"), 30_000), T0 + 120_000, true, keyless);
            assert_eq!(joined, Admission::Wait, "{keyless:?}");
            // A job that has not ended (failed, backing off; unknown) keeps its rules.
            let mut failed = job(UnknownPolicy::RetryAfterLease);
            let ticket = failed.claim(0, T0, "demo", None).unwrap();
            failed.fail(ticket, T0 + 1, report(503, ErrorClass::Unavailable)).unwrap();
            assert_eq!(
                admit_keyless(Some(&failed), arrive(&fp("{}"), 30_000), T0 + 120_000, false, keyless),
                Admission::Run
            );
            let mut unknown = job(UnknownPolicy::RetryAfterLease);
            let ticket = unknown.claim(0, T0, "demo", None).unwrap();
            unknown.mark_unknown(ticket, T0 + 100, report(0, ErrorClass::TimeoutAfterSend)).unwrap();
            let problem = refused(admit_keyless(Some(&unknown), arrive(&fp("{}"), 30_000), T0 + 1_100, false, keyless));
            assert_eq!(problem.kind, ProblemType::OutcomeUnknown);
        }
    }

    #[test]
    fn an_ended_job_whose_drive_still_answers_is_replayed_not_renewed() {
        // Its drive hands the answer to every request that joined it; one
        // arriving before the drive let go gets the same answer.
        let done = completed_at(T0);
        assert_eq!(
            admit_keyless(Some(&done), arrive(&fp("{}"), 30_000), T0 + 10, true, Keyless::Coalesce),
            Admission::Replay
        );
    }

    #[test]
    fn a_keyless_key_under_another_request_is_still_422() {
        let done = completed_at(T0);
        let problem =
            refused(admit_keyless(Some(&done), arrive(&fp(r#"{"a":1}"#), 30_000), T0 + 120_000, false, WINDOW));
        assert_eq!(problem.kind, ProblemType::KeyReused);
    }

    #[test]
    fn a_renewed_job_starts_afresh_past_the_old_version() {
        let done = completed_at(T0);
        assert!(
            job(UnknownPolicy::RetryAfterLease).renew(T0, *done.policy()).is_none(),
            "only an ended job is renewed"
        );
        let renewed = done.renew(T0 + 70_000, *done.policy()).unwrap();
        assert_eq!(renewed.state(), crate::job::JobState::Pending);
        assert!(renewed.attempts().is_empty());
        assert_eq!(renewed.completed_by(), None);
        assert_eq!(renewed.created_ms(), T0 + 70_000);
        assert_eq!(renewed.fingerprint(), done.fingerprint());
        assert!(renewed.version() > done.version(), "no write made for the old job passes the new one's CAS");
        assert_eq!((done.generation(), renewed.generation()), (0, 1));
        // The new job runs, and its first claim is attempt 1 at its own version.
        assert_eq!(
            admit_keyless(Some(&renewed), arrive(&fp("{}"), 30_000), T0 + 70_000, false, WINDOW),
            Admission::Run
        );
        let mut stale = renewed.clone();
        assert!(stale.claim(done.version(), T0 + 70_001, "demo", None).is_err(), "the old version is stale");
        let mut running = renewed.clone();
        let ticket = running.claim(renewed.version(), T0 + 70_001, "demo", None).unwrap();
        assert_eq!(ticket.attempt, 1);
        running.complete(ticket, T0 + 70_005, report(200, ErrorClass::None)).unwrap();
        // Its window runs from its own creation; after it, a third generation.
        let at = |now| admit_keyless(Some(&running), arrive(&fp("{}"), 30_000), now, false, WINDOW);
        assert_eq!(at(T0 + 129_999), Admission::Replay);
        assert_eq!(at(T0 + 130_000), Admission::Renew);
        assert_eq!(running.renew(T0 + 130_000, *running.policy()).unwrap().generation(), 2);
    }

    #[test]
    fn pending_jobs_run() {
        let pending = job(UnknownPolicy::RetryAfterLease);
        assert_eq!(admit(Some(&pending), arrive(&fp("{}"), 30_000), T0, false), Admission::Run);
    }
}
