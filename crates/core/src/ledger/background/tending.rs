//! What tends a background job after a queue delivery, a delivery's drive
//! or the alarm, as steps the Ledger performs in order: its message sent
//! again or given up on, its next attempt deferred, its dead letter, the
//! follow-up of its answer. [`crate::ledger::background::delivery`] and
//! [`crate::ledger::background::wake`] say which steps apply; the shell has one
//! performer for all of them.

use crate::job::Job;
use crate::ledger::background::outbox::{self, Outbox};

/// One step of tending a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send the job's queue message (through the outbox), the job as it stands.
    Send(Job),
    /// No delivery took any of the job's messages: it is left to operators.
    GiveUpSending,
    /// Write the job deferred (compare-and-swap), then arm the alarm for it.
    Defer(Deferral),
    /// Dead-letter the job if it needs an operator (sent once).
    DeadLetter(Job),
    /// Follow the job's answer up: what follows it, effects due.
    FollowUp,
}

/// A background job's next attempt deferred: the job to write over version
/// `read` (compare-and-swap), then the alarm armed for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferral {
    /// The version it was read at.
    pub read: u64,
    /// The job, waiting.
    pub job: Job,
}

/// `job`'s next attempt waits `wait_ms` from `now_ms` (a spent quota: until
/// the next day; no attempt made: [`crate::ledger::background::delivery::no_attempt_wait_ms`]).
pub fn defer(mut job: Job, wait_ms: u64, now_ms: u64) -> Deferral {
    let read = job.version();
    job.defer_until(now_ms.saturating_add(wait_ms), now_ms);
    Deferral { read, job }
}

/// Whether a [`Step::DeadLetter`] sends one now: the job needs an operator
/// ([`outbox::needs_operator`]) and no dead letter went out for it yet
/// (`lettered`): once per job, whatever found it so.
pub fn letter_due(job: &Job, outbox: &Outbox, lettered: bool, now_ms: u64) -> bool {
    !lettered && outbox::needs_operator(job, outbox, now_ms)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::Fingerprint;
    use crate::job::test_job;
    use crate::job::{AttemptReport, JobPolicy, JobState, UnknownPolicy};

    #[test]
    fn a_deferral_writes_over_the_version_read_and_holds_the_job_until_then() {
        let job = test_job::new();
        let read = job.version();
        let Deferral { read: over, job: deferred } = defer(job, 5_000, 1_000);
        assert_eq!(over, read);
        assert!(deferred.version() > read, "the deferral is a write");
        assert_eq!(deferred.not_before_ms(), 6_000);
    }

    #[test]
    fn a_dead_background_job_is_lettered_once_and_a_live_or_foreground_one_never() {
        let policy = JobPolicy::new(1, 30_000, 60_000, 86_400_000, UnknownPolicy::RetryAfterLease).expect("policy");
        let mut dead = Job::new(Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{}"), 0, policy);
        dead.run_in_background(0);
        let ticket = dead.claim(dead.version(), 1, "p", None).expect("claim");
        dead.fail(ticket, 2, AttemptReport::default()).expect("its last attempt fails");
        assert_eq!(dead.state(), JobState::Dead);
        let outbox = Outbox::default();
        assert!(letter_due(&dead, &outbox, false, 3));
        assert!(!letter_due(&dead, &outbox, true, 3), "sent once");
        let mut live = test_job::new();
        live.run_in_background(0);
        assert!(!letter_due(&live, &outbox, false, 3));
        assert!(!letter_due(&test_job::new(), &outbox, false, 3), "a foreground job has no dead letter");
    }
}
