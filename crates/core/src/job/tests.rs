//! The state machine's rules, including the cases where jobs break:
//! concurrent claims, reverse-order finishes, two drivers with their own
//! copies, unknown outcomes, attempt caps.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use proptest::prelude::*;

use super::*;
use crate::identity::fingerprint::{Body, Fingerprint};
use crate::retry::classify::ErrorClass;
use crate::retry::reply::Usage;

const T0: u64 = 1_700_000_000_000;

fn policy(max_attempts: u32) -> JobPolicy {
    JobPolicy::new(max_attempts, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap()
}

fn job(max_attempts: u32) -> Job {
    let fp = Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap();
    Job::new(fp, T0, policy(max_attempts))
}

fn ok() -> AttemptReport {
    AttemptReport {
        status: Some(200),
        usage: Some(Usage { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }),
        error_class: Some(ErrorClass::None),
    }
}

fn unavailable() -> AttemptReport {
    AttemptReport { status: Some(503), usage: None, error_class: Some(ErrorClass::Unavailable) }
}

fn timeout() -> AttemptReport {
    AttemptReport { status: None, usage: None, error_class: Some(ErrorClass::TimeoutAfterSend) }
}

#[test]
fn happy_path_claim_then_complete() {
    let mut j = job(4);
    assert_eq!(j.state(), JobState::Pending);
    let t = j.claim(0, T0 + 1, "demo", Some("demo")).unwrap();
    assert_eq!(t, AttemptTicket { attempt: 1, version: 1 });
    assert_eq!(j.state(), JobState::InFlight);
    assert_eq!(j.lease_until_ms(), Some(T0 + 1 + 1_000));
    j.complete(t, T0 + 51, ok()).unwrap();
    assert_eq!(j.state(), JobState::Completed);
    assert_eq!(j.version(), 2);
    assert_eq!(j.completed_by(), Some(1));
    let a = &j.attempts()[0];
    assert_eq!((a.outcome, a.status, a.latency_ms), (AttemptOutcome::Succeeded, Some(200), Some(50)));
    assert_eq!(a.usage.unwrap().total_tokens, 7);
    assert_eq!(j.replayed_attempt().unwrap().number, 1);
    assert_eq!(j.claim(2, T0 + 60, "demo", None), Err(JobError::Finished { state: JobState::Completed }));
}

#[test]
fn two_claims_on_one_pending_job_exactly_one_wins() {
    let mut j = job(4);
    let read_by_a = j.version();
    let read_by_b = j.version();
    let a = j.claim(read_by_a, T0, "demo", None);
    let b = j.claim(read_by_b, T0, "demo", None);
    assert!(a.is_ok());
    assert_eq!(b, Err(JobError::VersionConflict { expected: 0, actual: 1 }));
    // Even with a fresh read, the job is held.
    assert_eq!(
        j.claim(j.version(), T0 + 10, "demo", None),
        Err(JobError::InFlight { attempt: 1, lease_remaining_ms: 990 })
    );
    assert_eq!(j.attempts().len(), 1);
}

#[test]
fn reverse_order_finish_the_second_to_return_loses() {
    let mut j = job(4);
    let first = j.claim(0, T0, "demo", None).unwrap();
    // The first attempt's lease runs out: presumed lost, outcome unknown.
    assert!(j.expire(T0 + 1_000));
    assert_eq!(j.state(), JobState::Unknown);
    assert_eq!(j.attempts()[0].outcome, AttemptOutcome::Abandoned);
    // After the unknown lease a second attempt claims and finishes first.
    let second = j.claim(j.version(), T0 + 6_000, "demo", None).unwrap();
    j.complete(second, T0 + 6_100, ok()).unwrap();
    let snapshot = j.clone();
    // The first attempt finally returns: it loses, and nothing changes.
    assert_eq!(j.complete(first, T0 + 6_200, ok()), Err(JobError::StaleAttempt { attempt: 1 }));
    assert_eq!(j.fail(first, T0 + 6_200, unavailable()), Err(JobError::StaleAttempt { attempt: 1 }));
    assert_eq!(j, snapshot);
    assert!(j.note_discarded(1, T0 + 6_200, ok()));
    assert_eq!(j.attempts()[0].outcome, AttemptOutcome::Discarded);
    assert_eq!((j.state(), j.completed_by(), j.version()), (JobState::Completed, Some(2), snapshot.version() + 1));
}

/// Storage as the Ledger uses it: a write lands only if the stored version is
/// still the one the writer read (`UPDATE … WHERE version = ?`).
struct CasCell {
    stored: Job,
}

impl CasCell {
    fn read(&self) -> Job {
        self.stored.clone()
    }

    fn write(&mut self, read_version: u64, job: &Job) -> Result<(), ()> {
        if self.stored.version() != read_version {
            return Err(());
        }
        self.stored = job.clone();
        Ok(())
    }
}

#[test]
fn two_drivers_with_their_own_copies_the_late_write_loses_and_is_audited() {
    let mut cell = CasCell { stored: job(4) };
    // Driver A claims and calls upstream; its lease lapses under a slow call.
    let mut a = cell.read();
    let a_ticket = a.claim(0, T0, "demo", None).unwrap();
    cell.write(0, &a).unwrap();
    // Driver B reads later: A is presumed lost (unknown), and after the
    // unknown lease B claims, answers and writes.
    let mut b = cell.read();
    let read_by_b = b.version();
    assert!(b.expire(T0 + 1_000));
    cell.write(read_by_b, &b).unwrap();
    let read_by_b = b.version();
    let b_ticket = b.claim(read_by_b, T0 + 6_000, "demo", None).unwrap();
    cell.write(read_by_b, &b).unwrap();
    let read_by_b = b.version();
    b.complete(b_ticket, T0 + 6_100, ok()).unwrap();
    cell.write(read_by_b, &b).unwrap();
    // A returns at last. On its own stale copy the transition succeeds...
    a.complete(a_ticket, T0 + 6_200, ok()).unwrap();
    // ...but the store refuses the write: A's copy was read at another version.
    assert_eq!(cell.write(a_ticket.version, &a), Err(()));
    // A reloads and records, for the audit only, that its result was discarded.
    let mut current = cell.read();
    let read = current.version();
    assert!(current.note_discarded(a_ticket.attempt, T0 + 6_200, ok()));
    cell.write(read, &current).unwrap();
    let stored = cell.read();
    assert_eq!((stored.state(), stored.completed_by()), (JobState::Completed, Some(2)));
    assert_eq!(stored.attempts()[0].outcome, AttemptOutcome::Discarded);
    assert_eq!(stored.attempts()[1].outcome, AttemptOutcome::Succeeded);
}

#[test]
fn a_ticket_from_an_older_claim_cannot_write_even_while_in_flight() {
    let mut j = job(4);
    let first = j.claim(0, T0, "demo", None).unwrap();
    j.fail(first, T0 + 10, unavailable()).unwrap();
    let second = j.claim(j.version(), T0 + 20, "demo", None).unwrap();
    assert_eq!(j.complete(first, T0 + 30, ok()), Err(JobError::StaleAttempt { attempt: 1 }));
    j.complete(second, T0 + 40, ok()).unwrap();
    assert_eq!(j.completed_by(), Some(2));
}

#[test]
fn timeout_is_unknown_and_blocks_claims_until_the_lease_ends() {
    let mut j = job(4);
    let t = j.claim(0, T0, "demo", None).unwrap();
    j.mark_unknown(t, T0 + 900, timeout()).unwrap();
    assert_eq!(j.state(), JobState::Unknown);
    assert_eq!(j.attempts()[0].outcome, AttemptOutcome::Unknown);
    let v = j.version();
    assert_eq!(j.claim(v, T0 + 900, "demo", None), Err(JobError::UnknownLease { retry_after_ms: 5_000 }));
    assert_eq!(j.claim(v, T0 + 5_899, "demo", None), Err(JobError::UnknownLease { retry_after_ms: 1 }));
    assert_eq!(j.check_claim(T0 + 5_899), Err(JobError::UnknownLease { retry_after_ms: 1 }));
    assert_eq!(j.check_claim(T0 + 5_900), Ok(()));
    let again = j.claim(v, T0 + 5_900, "demo", None).unwrap();
    assert_eq!(again.attempt, 2);
    assert_eq!(j.attempts().len(), 2);
}

#[test]
fn block_policy_never_retries_an_unknown_job() {
    let fp = Fingerprint::of_request("POST", "/", Body::Bytes(b"")).unwrap();
    let mut j = Job::new(fp, T0, JobPolicy::new(4, 1_000, 5_000, 86_400_000, UnknownPolicy::Block).unwrap());
    let t = j.claim(0, T0, "demo", None).unwrap();
    j.mark_unknown(t, T0 + 1, timeout()).unwrap();
    assert_eq!(j.claim(j.version(), T0 + 1_000_000, "demo", None), Err(JobError::Blocked));
    assert!(!j.expire(T0 + 1_000_000));
    assert_eq!(j.state(), JobState::Unknown);
}

#[test]
fn attempt_cap_reached_makes_the_job_dead() {
    let mut j = job(3);
    for n in 1..=3 {
        let t = j.claim(j.version(), T0 + n, "demo", None).unwrap();
        let state = j.fail(t, T0 + n, unavailable()).unwrap();
        assert_eq!(state, if n < 3 { JobState::Failed } else { JobState::Dead });
    }
    assert_eq!(j.claim(j.version(), T0 + 10, "demo", None), Err(JobError::Finished { state: JobState::Dead }));
    assert_eq!(j.attempts().len(), 3);
    assert_eq!(j.replayed_attempt().unwrap().status, Some(503));
}

#[test]
fn unknown_with_no_attempts_left_dies_when_its_lease_ends() {
    let mut j = job(1);
    let t = j.claim(0, T0, "demo", None).unwrap();
    j.mark_unknown(t, T0 + 10, timeout()).unwrap();
    assert!(!j.expire(T0 + 5_009));
    assert!(j.expire(T0 + 5_010));
    assert_eq!(j.state(), JobState::Dead);
    assert!(!j.expire(T0 + 9_999_999), "dead is terminal");
}

#[test]
fn permanent_errors_complete_the_job_and_are_replayed() {
    let mut j = job(4);
    let t = j.claim(0, T0, "demo", None).unwrap();
    let rejected = AttemptReport { status: Some(400), usage: None, error_class: Some(ErrorClass::ClientError) };
    j.complete(t, T0 + 5, rejected).unwrap();
    assert_eq!(j.state(), JobState::Completed);
    assert_eq!(j.replayed_attempt().unwrap().outcome, AttemptOutcome::Rejected);
    let mut k = job(4);
    let t = k.claim(0, T0, "demo", None).unwrap();
    let filtered = AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::ContentFilter) };
    k.complete(t, T0 + 5, filtered).unwrap();
    assert_eq!(k.replayed_attempt().unwrap().outcome, AttemptOutcome::Rejected);
}

#[test]
fn a_crashed_attempt_is_found_by_the_next_claim() {
    let mut j = job(4);
    j.claim(0, T0, "demo", None).unwrap();
    let v = j.version();
    // The runtime lost the attempt; the next request after its lease sees unknown.
    assert_eq!(j.claim(v, T0 + 1_500, "demo", None), Err(JobError::UnknownLease { retry_after_ms: 5_000 }));
    assert_eq!(j.version(), v, "a refused claim changes nothing");
    assert!(j.expire(T0 + 1_500));
    let t = j.claim(j.version(), T0 + 6_500, "demo", None).unwrap();
    assert_eq!(t.attempt, 2);
}

#[test]
fn policy_is_validated() {
    assert_eq!(JobPolicy::new(0, 1, 1, 10, UnknownPolicy::Block), Err(PolicyError::NoAttempts));
    assert_eq!(JobPolicy::new(1, 0, 1, 10, UnknownPolicy::Block), Err(PolicyError::ZeroLease));
    assert_eq!(JobPolicy::new(1, 5, 5, 10, UnknownPolicy::Block), Err(PolicyError::RetentionTooShort));
    assert!(j_expires_after_retention());
}

fn j_expires_after_retention() -> bool {
    let j = job(1);
    !j.is_expired(T0 + 86_399_999) && j.is_expired(T0 + 86_400_000)
}

#[test]
fn the_record_round_trips_through_json() {
    let mut j = job(4);
    let t = j.claim(0, T0, "demo", Some("demo")).unwrap();
    j.complete(t, T0 + 7, ok()).unwrap();
    let text = serde_json::to_string(&j).unwrap();
    assert!(text.contains("\"state\":\"completed\""));
    assert_eq!(serde_json::from_str::<Job>(&text).unwrap(), j);
}

#[test]
fn a_stream_keeps_its_lease_while_it_runs_and_an_interrupted_one_is_final() {
    let mut j = job(4);
    let t = j.claim(0, T0, "demo", None).unwrap();
    // A long answer: the lease restarts at every write, so it is never taken for lost.
    let held = j.extend_lease(t, T0 + 900).unwrap();
    assert!(!j.expire(T0 + 1_500), "still held at 1.5 s after a renewal at 0.9 s");
    j.interrupt(held, T0 + 2_000, AttemptReport::default()).unwrap();
    assert_eq!(j.state(), JobState::Interrupted);
    assert!(j.state().is_terminal());
    assert_eq!(j.replayed_attempt().unwrap().outcome, AttemptOutcome::Interrupted);
    assert_eq!(
        j.claim(j.version(), T0 + 99_000, "demo", None),
        Err(JobError::Finished { state: JobState::Interrupted })
    );
    // The old ticket lost its hold with the renewal.
    assert_eq!(j.extend_lease(t, T0 + 2_100), Err(JobError::StaleAttempt { attempt: 1 }));
}

#[test]
fn a_stream_whose_pump_is_gone_is_interrupted_never_retried() {
    // Lease lapsed with no renewal: interrupted, not unknown (no new attempt).
    let mut j = job(4);
    let t = j.claim(0, T0, "demo", None).unwrap();
    j.mark_streaming(t, T0 + 10).unwrap();
    assert!(j.is_streaming());
    assert_eq!(j.attempts()[0].first_byte_ms, Some(T0 + 10));
    assert!(j.expire(T0 + 1_010));
    assert_eq!(j.state(), JobState::Interrupted);
    assert_eq!(j.attempts()[0].outcome, AttemptOutcome::Interrupted);
    assert_eq!(j.attempts()[0].error_class, Some(ErrorClass::StreamInterrupted));
    assert_eq!(
        j.claim(j.version(), T0 + 99_000, "demo", None),
        Err(JobError::Finished { state: JobState::Interrupted })
    );
    // Known to be gone (the runtime restarted): settled at once.
    let mut k = job(4);
    let t = k.claim(0, T0, "demo", None).unwrap();
    assert!(!k.settle_orphaned_stream(T0 + 5), "not streaming yet: the unknown-outcome rules apply");
    k.mark_streaming(t, T0 + 10).unwrap();
    assert!(k.settle_orphaned_stream(T0 + 20));
    assert_eq!((k.state(), k.completed_by()), (JobState::Interrupted, Some(1)));
    // Cancelled by a caller: final, replayed, never run again.
    let mut c = job(4);
    let t = c.claim(0, T0, "demo", None).unwrap();
    let t = c.mark_streaming(t, T0 + 10).unwrap();
    c.cancel(t, T0 + 50, AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::Cancelled) })
        .unwrap();
    assert_eq!((c.state(), c.completed_by()), (JobState::Cancelled, Some(1)));
    assert_eq!(c.attempts()[0].outcome, AttemptOutcome::Cancelled);
    assert_eq!(c.claim(c.version(), T0 + 99, "demo", None), Err(JobError::Finished { state: JobState::Cancelled }));
}

/// One step a racing participant can take.
#[derive(Debug, Clone)]
enum Step {
    Claim { stale_read: bool },
    Complete(usize),
    Fail(usize),
    Unknown(usize),
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<bool>().prop_map(|stale_read| Step::Claim { stale_read }),
        (0usize..6).prop_map(Step::Complete),
        (0usize..6).prop_map(Step::Fail),
        (0usize..6).prop_map(Step::Unknown),
        (0u64..8_000).prop_map(Step::Advance),
    ]
}

proptest! {
    /// Whatever order claims, reports and time come in: the version only
    /// grows, attempts never exceed the cap, at most one attempt ever wins,
    /// and a refused transition leaves the job unchanged.
    #[test]
    fn invariants_hold_under_any_interleaving(steps in proptest::collection::vec(step(), 1..60), cap in 1u32..5) {
        let mut j = job(cap);
        let mut now = T0;
        let mut tickets: Vec<AttemptTicket> = Vec::new();
        let mut stale_version = 0;
        for step in steps {
            let before = j.clone();
            let result = match step {
                Step::Claim { stale_read } => {
                    let v = if stale_read { stale_version } else { j.version() };
                    stale_version = j.version();
                    j.claim(v, now, "demo", None).map(|t| tickets.push(t))
                }
                Step::Complete(i) => tickets.get(i).copied().map_or(Ok(()), |t| j.complete(t, now, ok())),
                Step::Fail(i) => tickets.get(i).copied().map_or(Ok(()), |t| j.fail(t, now, unavailable()).map(|_| ())),
                Step::Unknown(i) => tickets.get(i).copied().map_or(Ok(()), |t| j.mark_unknown(t, now, timeout())),
                Step::Advance(ms) => { now += ms; Ok(()) }
            };
            if result.is_err() {
                prop_assert_eq!(&j, &before);
            }
            prop_assert!(j.version() >= before.version());
            prop_assert!(j.attempts().len() as u32 <= cap);
            let winners = j.attempts().iter().filter(|a| matches!(a.outcome, AttemptOutcome::Succeeded | AttemptOutcome::Rejected)).count();
            prop_assert!(winners <= 1);
            prop_assert_eq!(winners == 1, j.state() == JobState::Completed);
            if before.state().is_terminal() {
                prop_assert_eq!(before.state(), j.state());
            }
        }
    }
}

/// A hedge: the second attempt answers first and wins; the first is marked
/// lost_race and its late answer is only audited (usage kept), never used.
#[test]
fn hedge_reverse_order_finish_the_late_racer_loses() {
    let mut j = job(4);
    let a = j.claim(0, T0, "primary", Some("m")).unwrap();
    let b = j.hedge(j.version(), T0 + 500, "backup", Some("m")).unwrap();
    assert_eq!(b.attempt, 2);
    assert_eq!(j.state(), JobState::InFlight);
    // The first racer's lease still holds the job.
    assert_eq!(j.lease_until_ms(), Some(T0 + 1_500));
    j.complete(b, T0 + 1_500, ok()).unwrap();
    assert_eq!((j.state(), j.completed_by()), (JobState::Completed, Some(2)));
    assert_eq!(j.attempts()[0].outcome, AttemptOutcome::LostRace);
    assert_eq!(j.attempts()[0].ended_ms, None);
    // A answers at last: refused as the result, audited with its usage.
    assert_eq!(j.complete(a, T0 + 3_000, ok()), Err(JobError::StaleAttempt { attempt: 1 }));
    let before = j.version();
    assert!(j.note_discarded(1, T0 + 3_000, ok()));
    assert_eq!(j.version(), before + 1);
    let late = &j.attempts()[0];
    assert_eq!(
        (late.outcome, late.ended_ms, late.usage.unwrap().total_tokens),
        (AttemptOutcome::LostRace, Some(T0 + 3_000), 7)
    );
    assert_eq!(j.replayed_attempt().unwrap().number, 2);
    // Audited once only.
    assert!(!j.note_discarded(1, T0 + 3_100, ok()));
}

#[test]
fn hedge_mirror_the_first_racer_wins() {
    let mut j = job(4);
    let a = j.claim(0, T0, "primary", None).unwrap();
    let b = j.hedge(j.version(), T0 + 500, "backup", None).unwrap();
    j.complete(a, T0 + 1_300, ok()).unwrap();
    assert_eq!(j.completed_by(), Some(1));
    assert_eq!(j.attempts()[1].outcome, AttemptOutcome::LostRace);
    assert_eq!(j.fail(b, T0 + 2_000, unavailable()), Err(JobError::StaleAttempt { attempt: 2 }));
}

#[test]
fn a_racer_that_fails_leaves_the_job_to_the_other() {
    let mut j = job(4);
    let a = j.claim(0, T0, "primary", None).unwrap();
    let b = j.hedge(j.version(), T0 + 500, "backup", None).unwrap();
    assert_eq!(j.fail(b, T0 + 1_100, unavailable()), Ok(JobState::InFlight));
    j.complete(a, T0 + 1_500, ok()).unwrap();
    assert_eq!((j.state(), j.completed_by()), (JobState::Completed, Some(1)));
    assert_eq!(j.attempts()[1].outcome, AttemptOutcome::Failed);

    // Both fail: the job is failed, with attempts left for the next claim.
    let mut j = job(4);
    let a = j.claim(0, T0, "primary", None).unwrap();
    let b = j.hedge(j.version(), T0 + 500, "backup", None).unwrap();
    j.fail(a, T0 + 1_100, unavailable()).unwrap();
    assert_eq!(j.fail(b, T0 + 1_200, unavailable()), Ok(JobState::Failed));
    assert_eq!(j.claim(j.version(), T0 + 1_300, "primary", None).unwrap().attempt, 3);

    // One unknown, the other failed: the job is unknown (it may still finish).
    let mut j = job(4);
    let a = j.claim(0, T0, "primary", None).unwrap();
    let b = j.hedge(j.version(), T0 + 500, "backup", None).unwrap();
    j.mark_unknown(a, T0 + 1_100, timeout()).unwrap();
    assert_eq!(j.state(), JobState::InFlight);
    assert_eq!(j.fail(b, T0 + 1_200, unavailable()), Ok(JobState::Unknown));
    assert_eq!(j.lease_until_ms(), Some(T0 + 1_100 + 5_000));
}

#[test]
fn only_one_running_non_streaming_attempt_can_be_hedged() {
    let mut j = job(4);
    assert_eq!(j.hedge(0, T0, "backup", None), Err(JobError::NotHedgeable));
    let a = j.claim(0, T0, "primary", None).unwrap();
    j.hedge(j.version(), T0 + 10, "backup", None).unwrap();
    assert_eq!(j.hedge(j.version(), T0 + 20, "third", None), Err(JobError::NotHedgeable));
    let mut s = job(4);
    let t = s.claim(0, T0, "primary", None).unwrap();
    s.mark_streaming(t, T0 + 5).unwrap();
    assert_eq!(s.hedge(s.version(), T0 + 10, "backup", None), Err(JobError::NotHedgeable));
    // The cap counts hedges.
    let mut one = job(1);
    one.claim(0, T0, "primary", None).unwrap();
    assert_eq!(one.hedge(1, T0 + 10, "backup", None), Err(JobError::Finished { state: JobState::Dead }));
    let _ = a;
}

#[test]
fn a_lost_race_runtime_abandons_both_racers() {
    let mut j = job(4);
    j.claim(0, T0, "primary", None).unwrap();
    j.hedge(j.version(), T0 + 500, "backup", None).unwrap();
    assert!(j.expire(T0 + 1_600));
    assert_eq!(j.state(), JobState::Unknown);
    assert!(j.attempts().iter().all(|a| a.outcome == AttemptOutcome::Abandoned));
}

#[test]
fn a_dead_job_is_replayed_under_the_same_job_once_per_operator_request() {
    let mut j = job(2);
    for at in [T0, T0 + 10] {
        let t = j.claim(j.version(), at, "p", None).unwrap();
        j.fail(t, at + 5, unavailable()).unwrap();
    }
    assert_eq!(j.state(), JobState::Dead);
    assert!(j.replay_dead(j.version(), 2, "ops@acme", "replay-1", T0 + 100).unwrap());
    assert_eq!((j.state(), j.attempts_left(), j.max_attempts()), (JobState::Failed, 2, 4));
    // The same operator request again: no second allowance.
    assert!(!j.replay_dead(j.version(), 2, "ops@acme", "replay-1", T0 + 200).unwrap());
    assert_eq!(j.attempts_left(), 2);
    let event = &j.operator_events()[0];
    assert_eq!((event.action, event.by.as_str(), event.at_ms), (OperatorAction::Replayed, "ops@acme", T0 + 100));
    // The new attempts run under the same job, numbered on.
    let t = j.claim(j.version(), T0 + 300, "p", None).unwrap();
    assert_eq!(t.attempt, 3);
    j.complete(t, T0 + 310, ok()).unwrap();
    assert_eq!(j.state(), JobState::Completed);
    // Only a dead job is replayed; a stale version is refused.
    assert_eq!(
        j.replay_dead(j.version(), 1, "ops", "replay-2", T0),
        Err(JobError::NotReplayable { state: JobState::Completed })
    );
    assert!(matches!(j.replay_dead(0, 1, "ops", "replay-3", T0), Err(JobError::VersionConflict { .. })));
}

#[test]
fn an_unknown_job_is_resolved_by_an_operator() {
    let mut j = job(1);
    let t = j.claim(0, T0, "p", None).unwrap();
    j.mark_unknown(t, T0 + 5, timeout()).unwrap();
    // Succeeded with the operator's response: an operator attempt wins.
    let mut done = j.clone();
    assert_eq!(done.resolve_succeeded(done.version(), 200, "ops", "resolve-1", T0 + 50), Ok(Some(2)));
    assert_eq!((done.state(), done.completed_by()), (JobState::Completed, Some(2)));
    assert_eq!(done.attempts()[1].provider, "operator");
    assert_eq!(done.replayed_attempt().unwrap().number, 2);
    assert_eq!(done.resolve_succeeded(done.version(), 200, "ops", "resolve-1", T0 + 60), Ok(None));
    // Or one new attempt now, inside the lease, with none left under the cap.
    assert_eq!(j.attempts_left(), 0);
    assert!(j.allow_attempt(j.version(), "ops", "allow-1", T0 + 50).unwrap());
    assert_eq!(j.state(), JobState::Failed);
    assert_eq!(j.claim(j.version(), T0 + 60, "p", None).unwrap().attempt, 2);
    assert_eq!(j.operator_events()[0].action, OperatorAction::AllowedAttempt);
    // A completed job is not resolvable.
    assert!(matches!(done.allow_attempt(done.version(), "ops", "allow-2", T0), Err(JobError::NotResolvable { .. })));
}

#[test]
fn a_job_is_marked_background_once() {
    let mut j = job(2);
    assert!(!j.is_background());
    assert!(j.run_in_background(T0));
    assert_eq!(j.version(), 1);
    assert!(!j.run_in_background(T0 + 1));
    assert!(j.is_background());
    let json = serde_json::to_string(&j).unwrap();
    let back: Job = serde_json::from_str(&json).unwrap();
    assert_eq!(back, j);
}

#[test]
fn give_up_makes_a_dead_letter_whatever_attempts_are_left() {
    let mut j = job(4);
    let t = j.claim(0, T0, "p", None).unwrap();
    let auth = AttemptReport { status: Some(401), usage: None, error_class: Some(ErrorClass::Auth) };
    j.give_up(t, T0 + 5, auth).unwrap();
    assert_eq!((j.state(), j.attempts_left()), (JobState::Dead, 3));
    assert_eq!(j.attempts()[0].outcome, AttemptOutcome::Failed);
    assert_eq!(j.replayed_attempt().unwrap().status, Some(401));
    assert!(j.replay_dead(j.version(), 1, "ops", "fixed-the-key", T0 + 10).unwrap());
    assert_eq!(j.state(), JobState::Failed);
}
