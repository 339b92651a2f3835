//! Background jobs (`Prefer: respond-async`): what the Ledger does with a
//! queue delivery, and when it must send the job's message again.
//!
//! Queues deliver at least once and never dedup by content, so every
//! delivery is judged against the job ([`on_delivery`]): only a delivery
//! that finds the job claimable runs an attempt; one that finds it finished,
//! or being run, is acknowledged with no effect. The Ledger's alarm is the
//! outbox ([`resend_at`]): whatever happened to a message (a failed send, a
//! consumer that died mid-call, a lease that ended), a job that should run
//! and has not is sent again, and the deliveries' dedup makes that safe.

use crate::job::{Job, JobError};

/// What a queue delivery does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Claim the job and run one attempt.
    Run,
    /// Nothing to do: acknowledge the message. The job is finished, being
    /// run, gone, or waiting for something the Ledger's alarm will act on
    /// (a lease to end, an operator).
    Ack,
    /// Not yet: redeliver this message after so many milliseconds (the
    /// backoff after a transient failure).
    RetryIn(u64),
}

/// Judges a delivery for `job` at `now_ms`; `driving` says whether a
/// request of this object is running the job right now.
pub fn on_delivery(job: Option<&Job>, now_ms: u64, driving: bool) -> Delivery {
    let Some(job) = job else { return Delivery::Ack };
    if job.state().is_terminal() || driving {
        return Delivery::Ack;
    }
    if job.not_before_ms() > now_ms {
        return Delivery::RetryIn(job.not_before_ms() - now_ms);
    }
    match job.check_claim(now_ms) {
        Ok(()) => Delivery::Run,
        // In flight elsewhere (a runtime that died mid-call), unknown, or
        // blocked: the alarm sends the job again when it may run.
        Err(
            JobError::InFlight { .. } | JobError::UnknownLease { .. } | JobError::Blocked | JobError::Finished { .. },
        ) => Delivery::Ack,
        Err(_) => Delivery::RetryIn(1_000),
    }
}

/// When the Ledger's alarm should send a background job's message again if
/// nothing has run it by then: `outbox_delay_ms` after the last send
/// (`last_sent_ms`, 0 for none: after the job's creation) or the backoff's
/// end, or when its lease ends. `None` for a job that needs no message
/// (finished, not background, or waiting for an operator).
pub fn resend_at(job: &Job, last_sent_ms: u64, outbox_delay_ms: u64) -> Option<u64> {
    use crate::job::{JobState, UnknownPolicy};
    if !job.is_background() || job.state().is_terminal() {
        return None;
    }
    let after_send = last_sent_ms.max(job.not_before_ms()).max(job.created_ms()).saturating_add(outbox_delay_ms);
    match job.state() {
        JobState::Pending | JobState::Failed => Some(after_send),
        // When the lease ends the job is unknown (or dead, or claimable).
        JobState::InFlight => job.lease_until_ms().map(|until| until.max(after_send)),
        JobState::Unknown => match job.policy().unknown_policy() {
            UnknownPolicy::RetryAfterLease => job.lease_until_ms().map(|until| until.max(after_send)),
            UnknownPolicy::Block => None,
        },
        _ => None,
    }
}

/// Whether a background job needs an operator: dead, or unknown with no
/// automatic retry (`UNKNOWN_POLICY=block`) once its lease is over. Such a
/// job is a dead letter.
pub fn needs_operator(job: &Job, now_ms: u64) -> bool {
    use crate::job::{JobState, UnknownPolicy};
    if !job.is_background() {
        return false;
    }
    match job.state() {
        JobState::Dead => true,
        JobState::Unknown => {
            job.policy().unknown_policy() == UnknownPolicy::Block && job.lease_remaining_ms(now_ms) == 0
        }
        _ => false,
    }
}

/// When the Ledger should next look at a background job: to send its
/// message again ([`resend_at`]), or, for one unknown under
/// `UNKNOWN_POLICY=block`, when its lease ends and it becomes a dead letter
/// ([`needs_operator`]). `None`: nothing to do before retention.
pub fn wake_at(job: &Job, last_sent_ms: u64, outbox_delay_ms: u64, now_ms: u64) -> Option<u64> {
    resend_at(job, last_sent_ms, outbox_delay_ms).or_else(|| {
        let blocked = job.is_background() && job.state() == crate::job::JobState::Unknown;
        blocked.then(|| job.lease_until_ms()).flatten().filter(|until| *until > now_ms)
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::classify::ErrorClass;
    use crate::fingerprint::{Body, Fingerprint};
    use crate::job::{AttemptReport, JobPolicy, UnknownPolicy};

    const T0: u64 = 1_700_000_000_000;

    fn job(unknown_policy: UnknownPolicy) -> Job {
        let fp = Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap();
        let policy = JobPolicy::new(3, 1_000, 5_000, 86_400_000, unknown_policy).unwrap();
        let mut job = Job::new(fp, T0, policy);
        job.run_in_background(T0);
        job
    }

    fn unavailable() -> AttemptReport {
        AttemptReport { status: Some(503), usage: None, error_class: Some(ErrorClass::Unavailable) }
    }

    #[test]
    fn a_delivery_runs_only_a_claimable_job() {
        let mut j = job(UnknownPolicy::RetryAfterLease);
        assert_eq!(on_delivery(None, T0, false), Delivery::Ack);
        assert_eq!(on_delivery(Some(&j), T0, false), Delivery::Run);
        // The same message again while this object runs it: no effect.
        assert_eq!(on_delivery(Some(&j), T0, true), Delivery::Ack);
        let t = j.claim(j.version(), T0, "p", None).unwrap();
        // In flight after a restart (no driver here): the alarm will act at the lease's end.
        assert_eq!(on_delivery(Some(&j), T0 + 10, false), Delivery::Ack);
        j.fail(t, T0 + 20, unavailable()).unwrap();
        j.defer_until(T0 + 2_020, T0 + 20);
        assert_eq!(on_delivery(Some(&j), T0 + 1_020, false), Delivery::RetryIn(1_000));
        assert_eq!(on_delivery(Some(&j), T0 + 2_020, false), Delivery::Run);
        let t = j.claim(j.version(), T0 + 2_030, "p", None).unwrap();
        j.complete(
            t,
            T0 + 2_040,
            AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::None) },
        )
        .unwrap();
        assert_eq!(on_delivery(Some(&j), T0 + 3_000, false), Delivery::Ack);
    }

    #[test]
    fn the_outbox_resends_what_should_run_and_has_not() {
        let mut j = job(UnknownPolicy::RetryAfterLease);
        assert_eq!(resend_at(&j, 0, 5_000), Some(T0 + 5_000), "never sent: after its creation");
        assert_eq!(resend_at(&j, T0 + 50, 5_000), Some(T0 + 5_050));
        let t = j.claim(j.version(), T0 + 100, "p", None).unwrap();
        // In flight: when its lease ends.
        assert_eq!(resend_at(&j, T0, 500), Some(T0 + 1_100));
        j.mark_unknown(t, T0 + 200, AttemptReport::default()).unwrap();
        assert_eq!(resend_at(&j, T0, 500), Some(T0 + 5_200));
        let mut blocked = job(UnknownPolicy::Block);
        let t = blocked.claim(blocked.version(), T0, "p", None).unwrap();
        blocked.mark_unknown(t, T0 + 1, AttemptReport::default()).unwrap();
        assert_eq!(resend_at(&blocked, T0, 500), None, "an operator must resolve it");
        // ...but its lease's end makes it a dead letter: the Ledger wakes then.
        assert_eq!(wake_at(&blocked, T0, 500, T0 + 2), Some(T0 + 1 + 5_000));
        assert!(!needs_operator(&blocked, T0 + 2));
        assert!(needs_operator(&blocked, T0 + 1 + 5_000));
        assert_eq!(wake_at(&blocked, T0, 500, T0 + 1 + 5_000), None);
        let mut sync = job(UnknownPolicy::RetryAfterLease);
        sync = Job::new(sync.fingerprint().clone(), T0, *sync.policy());
        assert_eq!(resend_at(&sync, T0, 500), None, "not a background job");
    }
}
