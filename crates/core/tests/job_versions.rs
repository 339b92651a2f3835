//! The job's compare-and-swap, from outside: a version or an attempt's
//! ticket read before another write no longer holds the job.
//!
//! The simulation cannot see this check: its drives write through their own
//! copy of the job and the world's storage refuses a stale write anyway,
//! so a job that ignored the version in a ticket or a claim passed every
//! seed (`make mutants`, deliberate bugs b and b2). The job's own rule is
//! checked here.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use onejob_core::identity::fingerprint::Fingerprint;
use onejob_core::job::{AttemptReport, AttemptTicket, Job, JobError, JobPolicy, JobState, UnknownPolicy};

const T0: u64 = 1_700_000_000_000;

fn job() -> Job {
    let policy = JobPolicy::new(3, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).expect("policy");
    Job::new(Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{}"), T0, policy)
}

fn ok() -> AttemptReport {
    AttemptReport { status: Some(200), ..AttemptReport::default() }
}

/// A job claimed by attempt 1, then written by someone else (a background
/// submission adopting it): the ticket the claim gave is stale.
fn claimed_then_written() -> (Job, AttemptTicket) {
    let mut job = job();
    let ticket = job.claim(job.version(), T0, "p", None).expect("claim");
    assert!(job.run_in_background(T0 + 1), "another write");
    assert_eq!(job.state(), JobState::InFlight);
    (job, ticket)
}

#[test]
fn a_ticket_from_before_another_write_cannot_end_or_renew_its_attempt() {
    let stale = Err(JobError::StaleAttempt { attempt: 1 });
    let (mut job, ticket) = claimed_then_written();
    let before = job.clone();
    assert_eq!(job.complete(ticket, T0 + 2, ok()), stale);
    assert_eq!(job.fail(ticket, T0 + 2, AttemptReport::default()).map(|_| ()), stale);
    assert_eq!(job.mark_unknown(ticket, T0 + 2, AttemptReport::default()), stale);
    assert_eq!(job.mark_streaming(ticket, T0 + 2).map(|_| ()), stale);
    assert_eq!(job.extend_lease(ticket, T0 + 2).map(|_| ()), stale);
    assert_eq!(job, before, "a refused transition leaves the job as it was");
    // The same attempt with the ticket of the job as it now stands does.
    let current = AttemptTicket { attempt: 1, version: job.version() };
    job.complete(current, T0 + 3, ok()).expect("the current ticket holds the job");
    assert_eq!(job.completed_by(), Some(1));
}

#[test]
fn a_claim_or_a_hedge_on_a_version_read_before_another_write_is_refused() {
    let mut pending = job();
    let read = pending.version();
    assert!(pending.run_in_background(T0));
    let before = pending.clone();
    assert!(matches!(pending.claim(read, T0 + 1, "p", None), Err(JobError::VersionConflict { .. })));
    assert_eq!(pending, before);
    pending.claim(pending.version(), T0 + 1, "p", None).expect("a claim on the version as it stands");

    let (mut in_flight, _) = claimed_then_written();
    let read = in_flight.version();
    in_flight.defer_until(0, T0 + 2);
    let before = in_flight.clone();
    assert!(matches!(in_flight.hedge(read, T0 + 3, "q", None), Err(JobError::VersionConflict { .. })));
    assert_eq!(in_flight, before);
    in_flight.hedge(in_flight.version(), T0 + 3, "q", None).expect("a hedge on the version as it stands");
}
