//! What the queue consumer does with a background job's message once the
//! job's Ledger has judged the delivery ([`crate::ledger::background::outbox::on_delivery`])
//! or run it: one [`Verdict`], the message the Ledger answers the consumer
//! with; and what the consumer then does to the message ([`Disposition`]:
//! [`on_verdict`], [`after_dead_letter`], [`after_record`]) and which queue
//! a batch is from ([`Queue`]).

use serde::{Deserialize, Serialize};

use crate::job::{Job, JobState};
use crate::ledger::background::outbox::Delivery;
pub use crate::ledger::background::tending::{Deferral, Step, defer};

/// How long a background job whose delivery could make no attempt (no route,
/// every provider's breaker open) waits before its next delivery, at least:
/// it waits rather than being sent again at every outbox round.
pub const NO_ATTEMPT_WAIT_MS: u64 = 60_000;

/// What the consumer does with the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    /// Done with this message.
    Ack,
    /// Deliver it again after this long.
    Retry {
        /// Milliseconds until the redelivery.
        delay_ms: u64,
    },
    /// The job is dead: record a dead letter, then done.
    Dead,
}

/// The longest delay Cloudflare Queues take for a redelivery (12 hours).
pub const MAX_REDELIVERY_DELAY_S: u32 = 43_200;

/// The delay of a redelivery `delay_ms` from now as Queues take it, in
/// whole seconds: the seconds in it plus one (never sooner than the job's
/// backoff, at least one), at most [`MAX_REDELIVERY_DELAY_S`] (the outbox
/// and the alarm cover a longer wait).
pub fn redelivery_delay_s(delay_ms: u64) -> u32 {
    u32::try_from(delay_ms / 1_000 + 1).unwrap_or(u32::MAX).min(MAX_REDELIVERY_DELAY_S)
}

/// How long a dead-letter message whose recording failed (an alert
/// receiver, or D1, down for a while) waits before the next try, in
/// seconds: it is tried again for as long as the queue's retries last.
pub const DEAD_LETTER_RETRY_S: u32 = 5;

/// The queue a batch comes from: the background jobs' or the dead letters'
/// (any queue but the dead letters' carries job messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// Job messages: each is delivered to its job's Ledger.
    Jobs,
    /// Dead letters: each is recorded for operators.
    DeadLetters,
}

impl Queue {
    /// The queue named `name`, where `dead_letters` is the dead letters' name.
    pub fn of(name: &str, dead_letters: &str) -> Queue {
        match name == dead_letters {
            true => Queue::DeadLetters,
            false => Queue::Jobs,
        }
    }

    /// Whether the consumer tells the queue's cursor about this queue's
    /// batches ([`crate::ledger::background::progress`]): the jobs queue's only
    /// (a dead letter has no Ledger waiting for it).
    pub fn tells_progress(self) -> bool {
        self == Queue::Jobs
    }
}

/// What the consumer does to a message: Cloudflare Queues' calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Acknowledge it: done.
    Ack,
    /// Hand it back for the queue's own redelivery.
    Retry,
    /// Hand it back, to be delivered again after this many seconds.
    RetryAfter(u32),
}

impl Disposition {
    /// A message that does not read as a job's: nothing can ever be done
    /// with it, so it is acknowledged (dropped).
    pub const MALFORMED: Disposition = Disposition::Ack;
}

/// What a job message's delivery does once its Ledger answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Settle the message so.
    Settle(Disposition),
    /// The job is dead: send its dead letter, then settle as
    /// [`after_dead_letter`] says.
    SendDeadLetter,
}

/// What the consumer does with a job message whose Ledger answered
/// `verdict` (`None`: asking it failed, or its answer did not read): a
/// failure is redelivered by the queue, a retry after the verdict's delay
/// ([`redelivery_delay_s`]), a dead job's message goes to the dead letters.
pub fn on_verdict(verdict: Option<Verdict>) -> Next {
    match verdict {
        Some(Verdict::Ack) => Next::Settle(Disposition::Ack),
        Some(Verdict::Retry { delay_ms }) => Next::Settle(Disposition::RetryAfter(redelivery_delay_s(delay_ms))),
        Some(Verdict::Dead) => Next::SendDeadLetter,
        None => Next::Settle(Disposition::Retry),
    }
}

/// A dead job's message once its dead letter was sent (`sent`), or not:
/// done, or redelivered to send it again.
pub fn after_dead_letter(sent: bool) -> Disposition {
    match sent {
        true => Disposition::Ack,
        false => Disposition::Retry,
    }
}

/// A dead letter once recorded (`recorded`), or not (an alert receiver, or
/// D1, down for a while): done, or tried again [`DEAD_LETTER_RETRY_S`] later.
pub fn after_record(recorded: bool) -> Disposition {
    match recorded {
        true => Disposition::Ack,
        false => Disposition::RetryAfter(DEAD_LETTER_RETRY_S),
    }
}

/// The verdict of a delivery that ran nothing: acknowledged, or handed back
/// for the job's backoff; `None` when the delivery is to run the job (its
/// verdict comes after the run: [`after_run`]).
pub fn without_run(judged: Delivery, job: Option<&Job>, now_ms: u64) -> Option<Verdict> {
    match judged {
        Delivery::Run => None,
        Delivery::RetryIn(delay_ms) => Some(Verdict::Retry { delay_ms }),
        Delivery::Ack => Some(after_run(job, now_ms)),
    }
}

/// The verdict once a delivery was run (or judged): a dead job's message
/// goes to the dead letters, a failed one's comes back after the job's
/// backoff, any other is done.
pub fn after_run(job: Option<&Job>, now_ms: u64) -> Verdict {
    match job {
        Some(job) if job.state() == JobState::Dead => Verdict::Dead,
        Some(job) if job.state() == JobState::Failed => {
            Verdict::Retry { delay_ms: job.not_before_ms().saturating_sub(now_ms) }
        }
        _ => Verdict::Ack,
    }
}

/// Whether a delivery that ran nothing follows up the job: a redelivery of
/// a finished job type's job settles what follows its answer, and effects
/// due or claimed by a runtime that is gone (a drive running here does so
/// itself when it ends).
pub fn follows_up(judged: Delivery, job: Option<&Job>, driving: bool) -> bool {
    judged == Delivery::Ack && job.is_some_and(|job| job.state() == JobState::Completed) && !driving
}

/// How long a job whose run made no attempt waits for its next delivery:
/// what the answer asked for (a breaker's next probe), at least
/// [`NO_ATTEMPT_WAIT_MS`]; `None` when the run made an attempt.
pub fn no_attempt_wait_ms(job: &Job, asked_ms: Option<u64>) -> Option<u64> {
    job.attempts().is_empty().then(|| asked_ms.unwrap_or(0).max(NO_ATTEMPT_WAIT_MS))
}

/// What a delivery does, judged against the job as read (settled by time)
/// and whether a drive runs here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Run nothing: perform `steps`, then answer `verdict`. The job (if any)
    /// is dead-lettered if it needs an operator (its runtime may have died
    /// before the dead letter went out, and after its lease nothing else
    /// looks again before retention), then a finished job type's answer is
    /// followed up (see [`follows_up`]).
    Settle {
        /// The consumer's verdict.
        verdict: Verdict,
        /// What tends the job first, in order ([`Step::DeadLetter`], [`Step::FollowUp`]).
        steps: Vec<Step>,
    },
    /// Run this job: the delivery takes its message and drives one attempt
    /// (if its request is there; else it acknowledges the message).
    Run(Job),
}

/// What a delivery does with `job` at `now_ms` (`driving`: a drive runs here).
pub fn plan(job: Option<Job>, now_ms: u64, driving: bool) -> Plan {
    let judged = crate::ledger::background::outbox::on_delivery(job.as_ref(), now_ms, driving);
    match (without_run(judged, job.as_ref(), now_ms), job) {
        (None, Some(job)) => Plan::Run(job),
        // Judged to run, there is a job: only the arm above; nothing to run
        // without one (`on_delivery` acknowledges it).
        (verdict, job) => {
            let follow_up = follows_up(judged, job.as_ref(), driving).then_some(Step::FollowUp);
            let steps = job.map(Step::DeadLetter).into_iter().chain(follow_up).collect();
            Plan::Settle { verdict: verdict.unwrap_or(Verdict::Ack), steps }
        }
    }
}

/// A delivery refused by a spent quota (`problem`): the job waits until
/// the problem says it may run (the next day; at once when it says nothing).
pub fn over_quota(job: Job, problem: &crate::wire::Problem, now_ms: u64) -> Deferral {
    defer(job, problem.retry_after_ms.unwrap_or(0), now_ms)
}

/// A delivery refused by a spent quota (`problem`), instead of its drive:
/// the job waits ([`over_quota`]) and the message is acknowledged (the
/// alarm sends it again when the job may run).
pub fn refused_by_quota(job: Job, problem: &crate::wire::Problem, now_ms: u64) -> AfterDrive {
    AfterDrive { steps: vec![Step::Defer(over_quota(job, problem, now_ms))], verdict: Verdict::Ack }
}

/// What follows a delivery's drive, from the job as stored after it (or
/// what a delivery that did not drive does instead: [`refused_by_quota`],
/// [`AfterDrive::NOTHING_TO_RUN`]); the steps are performed before the
/// verdict is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterDrive {
    /// What tends the job, in order: a run that made no attempt (no route,
    /// every breaker open) defers it for the next probe ([`Step::Defer`]);
    /// the job as it stands then is dead-lettered if it needs an operator
    /// ([`Step::DeadLetter`]).
    pub steps: Vec<Step>,
    /// The consumer's verdict ([`after_run`]).
    pub verdict: Verdict,
}

impl AfterDrive {
    /// A delivery judged to run a job whose request was not kept: nothing
    /// runs or tends it, and the message is acknowledged.
    pub const NOTHING_TO_RUN: AfterDrive = AfterDrive { steps: Vec::new(), verdict: Verdict::Ack };
}

/// What follows a delivery's drive of `job` (as stored after it), whose
/// answer asked to wait `asked_ms`.
pub fn after_drive(job: Option<Job>, asked_ms: Option<u64>, now_ms: u64) -> AfterDrive {
    let wait_ms = job.as_ref().and_then(|job| no_attempt_wait_ms(job, asked_ms));
    let (deferral, job) = match (job, wait_ms) {
        (Some(job), Some(wait_ms)) => {
            let deferral = defer(job, wait_ms, now_ms);
            let job = Some(deferral.job.clone());
            (Some(deferral), job)
        }
        (job, _) => (None, job),
    };
    let verdict = after_run(job.as_ref(), now_ms);
    let steps = deferral.map(Step::Defer).into_iter().chain(job.map(Step::DeadLetter)).collect();
    AfterDrive { steps, verdict }
}

/// What the outbox records of a message once its delivery's verdict is
/// given: handed back to be delivered again after a delay, or taken.
pub fn record(outbox: &mut crate::ledger::background::outbox::Outbox, verdict: Verdict, now_ms: u64) {
    match verdict {
        Verdict::Retry { delay_ms } => outbox.requeued(now_ms, delay_ms),
        Verdict::Ack | Verdict::Dead => outbox.taken(now_ms),
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::{Body, Fingerprint};
    use crate::job::{AttemptReport, JobPolicy, UnknownPolicy};

    const NOW: u64 = 1_000_000;

    fn job(max_attempts: u32) -> Job {
        let policy = JobPolicy::new(max_attempts, 30_000, 60_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
        let fingerprint = Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap();
        Job::new(fingerprint, NOW, policy)
    }

    /// The job after one attempt that failed transiently.
    fn failed(max_attempts: u32) -> Job {
        let mut job = job(max_attempts);
        let ticket = job.claim(job.version(), NOW, "p", None).unwrap();
        job.fail(ticket, NOW + 10, AttemptReport::default()).unwrap();
        job
    }

    #[test]
    fn only_the_dead_letters_queue_carries_dead_letters() {
        assert_eq!(Queue::of("onejob-dead-letters", "onejob-dead-letters"), Queue::DeadLetters);
        assert_eq!(Queue::of("onejob-jobs", "onejob-dead-letters"), Queue::Jobs);
        assert_eq!(Queue::of("", "onejob-dead-letters"), Queue::Jobs, "any other queue carries job messages");
    }

    #[test]
    fn a_verdict_settles_its_message_or_sends_a_dead_letter_first() {
        assert_eq!(on_verdict(Some(Verdict::Ack)), Next::Settle(Disposition::Ack));
        assert_eq!(on_verdict(Some(Verdict::Retry { delay_ms: 2_500 })), Next::Settle(Disposition::RetryAfter(3)));
        assert_eq!(on_verdict(Some(Verdict::Retry { delay_ms: 0 })), Next::Settle(Disposition::RetryAfter(1)));
        assert_eq!(
            on_verdict(Some(Verdict::Retry { delay_ms: u64::MAX })),
            Next::Settle(Disposition::RetryAfter(MAX_REDELIVERY_DELAY_S))
        );
        assert_eq!(on_verdict(Some(Verdict::Dead)), Next::SendDeadLetter);
        assert_eq!(on_verdict(None), Next::Settle(Disposition::Retry), "a failed delivery: the queue redelivers it");
    }

    #[test]
    fn a_dead_letter_sent_or_recorded_is_done_else_tried_again() {
        assert_eq!(after_dead_letter(true), Disposition::Ack);
        assert_eq!(after_dead_letter(false), Disposition::Retry);
        assert_eq!(after_record(true), Disposition::Ack);
        assert_eq!(after_record(false), Disposition::RetryAfter(DEAD_LETTER_RETRY_S));
        assert_eq!(Disposition::MALFORMED, Disposition::Ack, "a malformed message is dropped");
    }

    #[test]
    fn a_run_ends_as_dead_letter_redelivery_after_the_backoff_or_done() {
        assert_eq!(after_run(None, NOW), Verdict::Ack);
        assert_eq!(after_run(Some(&job(4)), NOW), Verdict::Ack);
        let retrying = failed(4);
        assert_eq!(retrying.state(), JobState::Failed);
        let wait = retrying.not_before_ms().saturating_sub(NOW + 10);
        assert_eq!(after_run(Some(&retrying), NOW + 10), Verdict::Retry { delay_ms: wait });
        // Past its backoff: deliver again at once.
        assert_eq!(after_run(Some(&retrying), u64::MAX), Verdict::Retry { delay_ms: 0 });
        let dead = failed(1);
        assert_eq!(dead.state(), JobState::Dead);
        assert_eq!(after_run(Some(&dead), NOW), Verdict::Dead);
    }

    #[test]
    fn a_judged_delivery_that_runs_nothing_has_its_verdict_at_once() {
        assert_eq!(without_run(Delivery::Run, Some(&job(4)), NOW), None);
        assert_eq!(without_run(Delivery::RetryIn(250), Some(&job(4)), NOW), Some(Verdict::Retry { delay_ms: 250 }));
        assert_eq!(without_run(Delivery::Ack, Some(&failed(1)), NOW), Some(Verdict::Dead));
        assert_eq!(without_run(Delivery::Ack, None, NOW), Some(Verdict::Ack));
    }

    #[test]
    fn a_run_without_an_attempt_waits_at_least_a_minute() {
        assert_eq!(no_attempt_wait_ms(&job(4), None), Some(NO_ATTEMPT_WAIT_MS));
        assert_eq!(no_attempt_wait_ms(&job(4), Some(5_000)), Some(NO_ATTEMPT_WAIT_MS));
        assert_eq!(no_attempt_wait_ms(&job(4), Some(120_000)), Some(120_000));
        assert_eq!(no_attempt_wait_ms(&failed(4), Some(120_000)), None);
    }

    #[test]
    fn the_verdict_s_wire_form_is_what_the_consumer_reads() {
        assert_eq!(serde_json::to_string(&Verdict::Ack).unwrap(), r#"{"verdict":"ack"}"#);
        assert_eq!(
            serde_json::to_string(&Verdict::Retry { delay_ms: 5 }).unwrap(),
            r#"{"verdict":"retry","delay_ms":5}"#
        );
        assert_eq!(serde_json::from_str::<Verdict>(r#"{"verdict":"dead"}"#).unwrap(), Verdict::Dead);
    }

    #[test]
    fn only_an_acknowledged_redelivery_of_a_completed_job_follows_up_and_not_under_a_drive() {
        let mut completed = job(4);
        let ticket = completed.claim(completed.version(), NOW, "p", None).unwrap();
        completed.complete(ticket, NOW + 10, AttemptReport::default()).unwrap();
        assert_eq!(completed.state(), JobState::Completed);
        assert!(follows_up(Delivery::Ack, Some(&completed), false));
        assert!(!follows_up(Delivery::Ack, Some(&completed), true), "a drive here follows up itself");
        assert!(!follows_up(Delivery::RetryIn(5), Some(&completed), false));
        assert!(!follows_up(Delivery::Run, Some(&completed), false));
        assert!(!follows_up(Delivery::Ack, Some(&failed(1)), false), "a dead job has no answer to follow up");
        assert!(!follows_up(Delivery::Ack, None, false));
    }

    #[test]
    fn a_redelivery_waits_whole_seconds_never_sooner_at_least_one_at_most_twelve_hours() {
        assert_eq!(redelivery_delay_s(0), 1);
        assert_eq!(redelivery_delay_s(999), 1);
        assert_eq!(redelivery_delay_s(1_000), 2);
        assert_eq!(redelivery_delay_s(2_500), 3);
        assert_eq!(redelivery_delay_s(u64::MAX), MAX_REDELIVERY_DELAY_S);
    }

    #[test]
    fn a_delivery_that_runs_nothing_settles_and_looks_at_the_job_once() {
        assert_eq!(plan(None, NOW, false), Plan::Settle { verdict: Verdict::Ack, steps: vec![] });
        let dead = failed(1);
        assert_eq!(
            plan(Some(dead.clone()), NOW + 20, false),
            Plan::Settle { verdict: Verdict::Dead, steps: vec![Step::DeadLetter(dead)] }
        );
        let mut completed = job(4);
        let ticket = completed.claim(completed.version(), NOW, "p", None).unwrap();
        completed.complete(ticket, NOW + 10, AttemptReport::default()).unwrap();
        assert_eq!(
            plan(Some(completed.clone()), NOW + 20, false),
            Plan::Settle { verdict: Verdict::Ack, steps: vec![Step::DeadLetter(completed.clone()), Step::FollowUp] }
        );
        assert_eq!(
            plan(Some(completed.clone()), NOW + 20, true),
            Plan::Settle { verdict: Verdict::Ack, steps: vec![Step::DeadLetter(completed)] },
            "a drive here follows up itself"
        );
        // Backing off: handed back for the rest of the backoff.
        let mut retrying = failed(4);
        retrying.defer_until(NOW + 5_000, NOW + 20);
        assert_eq!(
            plan(Some(retrying.clone()), NOW + 20, false),
            Plan::Settle { verdict: Verdict::Retry { delay_ms: 4_980 }, steps: vec![Step::DeadLetter(retrying)] }
        );
        // Claimable: it runs; driven here: acknowledged.
        assert_eq!(plan(Some(job(4)), NOW, false), Plan::Run(job(4)));
        assert!(matches!(plan(Some(job(4)), NOW, true), Plan::Settle { verdict: Verdict::Ack, .. }));
    }

    #[test]
    fn a_drive_that_made_no_attempt_defers_the_job_then_answers_its_verdict() {
        let after = after_drive(Some(job(4)), Some(5_000), NOW);
        let [Step::Defer(deferral), Step::DeadLetter(deferred)] = &after.steps[..] else {
            panic!("deferred, then looked at for a dead letter: {:?}", after.steps)
        };
        assert_eq!(deferral.read, job(4).version());
        assert_eq!(deferral.job.not_before_ms(), NOW + NO_ATTEMPT_WAIT_MS);
        assert_eq!(deferred, &deferral.job, "the job as deferred is the one looked at");
        assert_eq!(after.verdict, Verdict::Ack);
        // An attempt was made: the job as it is, its verdict.
        let dead = failed(1);
        assert_eq!(
            after_drive(Some(dead.clone()), None, NOW),
            AfterDrive { steps: vec![Step::DeadLetter(dead)], verdict: Verdict::Dead }
        );
        assert_eq!(after_drive(None, Some(1), NOW), AfterDrive { steps: vec![], verdict: Verdict::Ack });
    }

    #[test]
    fn a_delivery_over_its_quota_defers_the_job_until_the_problem_says() {
        use crate::wire::{Problem, ProblemType};
        let spent = Problem::new(ProblemType::QuotaExceeded, "spent").with_retry_after_ms(3_600_000);
        let deferral = over_quota(job(4), &spent, NOW);
        assert_eq!(deferral.read, job(4).version());
        assert_eq!(deferral.job.not_before_ms(), NOW + 3_600_000);
        let unsaid = Problem::new(ProblemType::QuotaExceeded, "spent");
        assert_eq!(over_quota(job(4), &unsaid, NOW).job.not_before_ms(), NOW);
        let refused = refused_by_quota(job(4), &spent, NOW);
        assert_eq!(refused.steps, vec![Step::Defer(over_quota(job(4), &spent, NOW))], "it waits, and nothing else");
        assert_eq!(refused.verdict, Verdict::Ack, "the alarm sends it again, not the queue");
    }

    #[test]
    fn a_delivery_with_nothing_to_run_tends_nothing_and_is_acknowledged() {
        assert_eq!(AfterDrive::NOTHING_TO_RUN, AfterDrive { steps: vec![], verdict: Verdict::Ack });
    }

    #[test]
    fn the_outbox_records_a_handed_back_message_as_queued_and_any_other_as_taken() {
        use crate::ledger::background::outbox::{Message, Outbox};
        let mut outbox = Outbox::default();
        record(&mut outbox, Verdict::Retry { delay_ms: 500 }, NOW);
        assert_eq!(outbox.message(), Message::Queued { due_ms: NOW + 500 });
        record(&mut outbox, Verdict::Dead, NOW + 1);
        assert_eq!(outbox.message(), Message::Taken { at_ms: NOW + 1 });
        record(&mut outbox, Verdict::Ack, NOW + 2);
        assert_eq!(outbox.message(), Message::Taken { at_ms: NOW + 2 });
    }
}
