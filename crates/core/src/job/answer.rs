//! What a job's callers are answered, and what a replay is: a finished job
//! answers every later request with the answer its first caller got, byte
//! for byte (status, body, content type; `x-should-retry: false`, no
//! `Retry-After`).
//!
//! | how the job ended | its answer (live, then replayed) |
//! |---|---|
//! | `completed`: a success, a permanent error, a stream with the provider's error event | the winning attempt's response ([`Job::replayed_attempt`]) |
//! | `dead` after transient errors or broken contracts | the last attempt's response (a race lost by both racers: the last attempt's, also for its live caller) |
//! | `dead` after an unknown outcome | the final [`unknown_outcome`] answer its last caller got (`504`), kept as the last attempt's response; [`dead_without_response`] when no caller was answered (the runtime was lost) |
//! | `interrupted`, `cancelled` | the partial stream with the gateway's error event, as its caller read it |
//!
//! Not replays, never stored as the job's answer: an unknown outcome with
//! an attempt still to come (`504` with the lease as `Retry-After`), a
//! duplicate inside a lease or while another request drives the job (`409`),
//! a failed job out of retry budget, `503 no-healthy-provider`, a quota's
//! `429`. Their job is not finished: asking again may run an attempt.

use crate::job::{Job, JobState, UnknownPolicy};
use crate::wire::{Problem, ProblemType};

/// What the caller is told when an attempt's outcome is unknown and no
/// attempt of the job still runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAnswer {
    /// A `504 upstream-timeout`.
    pub problem: Problem,
    /// `Some(attempt)` when this answer is final: no attempt will follow
    /// (none is left, or the policy blocks retries), so it is the job's
    /// answer, kept as that attempt's response (the one [`Job::replayed_attempt`]
    /// names once the job is dead). It then carries no time to retry after,
    /// or a dead job's replay and its first answer would differ.
    pub final_attempt: Option<u32>,
}

/// The answer to an unknown outcome (`job` unknown, as just recorded): with
/// the remaining lease as the time to retry after while an attempt may
/// follow; final otherwise.
pub fn unknown_outcome(job: &Job, now_ms: u64) -> UnknownAnswer {
    let policy = job.policy().unknown_policy();
    let last = job.attempts().last().map(|a| a.number);
    let is_final = job.state() == JobState::Unknown && (policy == UnknownPolicy::Block || job.attempts_left() == 0);
    if is_final {
        let detail = match policy {
            UnknownPolicy::Block => {
                "the provider did not answer in time and may still be processing the request; an operator decides what happens next"
            }
            UnknownPolicy::RetryAfterLease => {
                "the provider did not answer in time and may still be processing the request; it was the job's last attempt"
            }
        };
        return UnknownAnswer { problem: Problem::new(ProblemType::UpstreamTimeout, detail), final_attempt: last };
    }
    let problem = Problem::new(
        ProblemType::UpstreamTimeout,
        "the provider did not answer in time and may still be processing the request",
    )
    .with_retry_after_ms(job.lease_remaining_ms(now_ms));
    UnknownAnswer { problem, final_attempt: None }
}

/// The answer of a dead job whose last attempt kept no response: its
/// outcome was unknown and no caller was answered (the runtime that ran it
/// was lost, so its lease ran out). The same job gives the same bytes.
pub fn dead_without_response(job: &Job) -> Problem {
    let detail = format!("onejob gave up after {} attempts; the last outcome was unknown", job.attempts().len());
    Problem::new(ProblemType::UpstreamFailed, detail)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::{Body, Fingerprint};
    use crate::job::{AttemptReport, JobPolicy};
    use crate::retry::classify::ErrorClass;

    const T0: u64 = 1_700_000_000_000;
    const UNKNOWN_LEASE_MS: u64 = 5_000;

    fn job(max_attempts: u32, policy: UnknownPolicy) -> Job {
        let fp = Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap();
        Job::new(fp, T0, JobPolicy::new(max_attempts, 1_000, UNKNOWN_LEASE_MS, 86_400_000, policy).unwrap())
    }

    fn timeout() -> AttemptReport {
        AttemptReport { status: None, usage: None, error_class: Some(ErrorClass::TimeoutAfterSend) }
    }

    fn unavailable() -> AttemptReport {
        AttemptReport { status: Some(503), usage: None, error_class: Some(ErrorClass::Unavailable) }
    }

    /// Claims the job at `at` and records a timeout.
    fn time_out(job: &mut Job, at: u64) {
        let ticket = job.claim(job.version(), at, "p", None).unwrap();
        job.mark_unknown(ticket, at + 100, timeout()).unwrap();
    }

    #[test]
    fn with_an_attempt_left_it_says_when_to_ask_again_and_is_not_the_jobs_answer() {
        let mut j = job(2, UnknownPolicy::RetryAfterLease);
        time_out(&mut j, T0);
        let answer = unknown_outcome(&j, T0 + 1_100);
        assert_eq!(answer.final_attempt, None);
        assert_eq!(answer.problem.kind, ProblemType::UpstreamTimeout);
        assert_eq!(answer.problem.retry_after_ms, Some(UNKNOWN_LEASE_MS - 1_000));
    }

    #[test]
    fn the_last_attempt_is_final_with_no_time_in_it_whenever_it_is_built() {
        let mut j = job(2, UnknownPolicy::RetryAfterLease);
        time_out(&mut j, T0);
        time_out(&mut j, T0 + 10_000);
        let answer = unknown_outcome(&j, T0 + 10_100);
        assert_eq!(answer.final_attempt, Some(2));
        assert_eq!(answer.problem.retry_after_ms, None);
        // The same bytes at any time: what the caller got is what is kept.
        assert_eq!(answer, unknown_outcome(&j, T0 + 14_000));
        // Once the lease is over the job is dead, and replays attempt 2's response.
        j.expire(T0 + 10_100 + UNKNOWN_LEASE_MS);
        assert_eq!(j.state(), JobState::Dead);
        assert_eq!(j.replayed_attempt().map(|a| a.number), answer.final_attempt);
    }

    #[test]
    fn under_block_no_lease_ends_so_the_first_unknown_answer_is_final() {
        let mut j = job(4, UnknownPolicy::Block);
        time_out(&mut j, T0);
        let answer = unknown_outcome(&j, T0 + 100);
        assert_eq!(answer.final_attempt, Some(1));
        assert_eq!(answer.problem.retry_after_ms, None);
        assert!(answer.problem.detail.contains("operator"));
    }

    #[test]
    fn a_race_whose_other_racer_failed_is_answered_for_its_last_attempt() {
        // Attempt 1 times out while attempt 2 (the hedge) still runs; then
        // attempt 2 fails: the job is unknown, and its last attempt is 2.
        let mut j = job(2, UnknownPolicy::RetryAfterLease);
        let first = j.claim(0, T0, "p", None).unwrap();
        let second = j.hedge(j.version(), T0 + 300, "q", None).unwrap();
        j.mark_unknown(first, T0 + 1_000, timeout()).unwrap();
        assert_eq!(j.state(), JobState::InFlight);
        j.fail(second, T0 + 1_200, unavailable()).unwrap();
        assert_eq!(j.state(), JobState::Unknown);
        assert_eq!(unknown_outcome(&j, T0 + 1_200).final_attempt, Some(2));
    }

    #[test]
    fn a_dead_job_without_a_response_names_its_attempts() {
        let mut j = job(1, UnknownPolicy::RetryAfterLease);
        time_out(&mut j, T0);
        let problem = dead_without_response(&j);
        assert_eq!(problem.kind, ProblemType::UpstreamFailed);
        assert_eq!(problem.detail, "onejob gave up after 1 attempts; the last outcome was unknown");
        assert_eq!(problem.to_json(), dead_without_response(&j.clone()).to_json());
    }
}
