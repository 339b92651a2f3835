//! A queue delivery to the Ledger, in the order it is performed: the one
//! sequence the Durable Object (`edge/src/ledger/background.rs`) and the
//! simulation (`core/tests/simulation`) both run. The machine chooses every
//! next step; its performer only does what each [`Op`] says and feeds back
//! what it found ([`Input`]).
//!
//! | Op | The performer | Feeds back |
//! |---|---|---|
//! | [`Op::ReadSettled`] | reads the job, what time settled in it written first | [`Input::Read`] |
//! | [`Op::LoadRequest`] | reads the job's kept request | [`Input::Request`] |
//! | [`Op::Lock`] | takes the drive lock (nothing was awaited since the read) | [`Input::Done`] |
//! | [`Op::TakeMessage`] | notes in the outbox that a delivery took the message | [`Input::Done`] |
//! | [`Op::Arm`] | sets the alarm for the job's next due time | [`Input::Done`] |
//! | [`Op::AskQuota`] | asks the job's quotas | [`Input::Quota`] |
//! | [`Op::Unlock`] | releases the drive lock | [`Input::Done`] |
//! | [`Op::Drive`] | drives one attempt under the lock, then releases it | [`Input::Driven`] |
//! | [`Op::Tend`] | performs the tending steps, in order | [`Input::Done`] |
//! | [`Op::Record`] | records the verdict in the outbox of a stored job | [`Input::Recorded`] |
//! | [`Op::Answer`] | answers the queue's consumer; the delivery is over | — |
//!
//! Why this order: the lock is taken before the message is taken and the
//! quota asked, so a duplicate that arrives while the quota is asked finds
//! the job taken; the message is taken (and the alarm set) before the
//! drive, so from there the attempt's lease covers the job, not the outbox,
//! and a crash mid-call is sent again when the lease ends; what tends the
//! job is performed before the verdict is answered.

use crate::job::Job;
use crate::ledger::background::delivery::{self, AfterDrive, Plan, Verdict};
use crate::ledger::background::tending::Step;
use crate::wire::Problem;

/// What the performer does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read the job as of now, what time settled in it written first.
    ReadSettled,
    /// Read whether the job's request was kept.
    LoadRequest,
    /// Take the drive lock: this delivery runs the job from here.
    Lock,
    /// The delivery took the job's message (the outbox's `taken`).
    TakeMessage,
    /// Set the alarm for this job's next due time.
    Arm(Job),
    /// Ask the job's quotas.
    AskQuota,
    /// Release the drive lock (the quota refused the run).
    Unlock,
    /// Drive one attempt of this job under the lock, then release it.
    Drive(Job),
    /// Perform these steps, in order.
    Tend(Vec<Step>),
    /// Record the verdict in the outbox (of a stored job only).
    Record(Verdict),
    /// Answer the queue's consumer with this verdict: the delivery is over.
    Answer(Verdict),
}

/// What the performer found doing the last [`Op`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The delivery arrived.
    Start,
    /// The op is done and says nothing.
    Done,
    /// The job as read ([`Op::ReadSettled`]), and whether a drive runs here.
    Read {
        /// The stored job, settled by time.
        job: Option<Job>,
        /// A drive (or a stream's pump) runs in this object.
        driving: bool,
    },
    /// Whether the job's request was kept ([`Op::LoadRequest`]).
    Request {
        /// It was.
        kept: bool,
    },
    /// What the quota said ([`Op::AskQuota`]): a problem when spent.
    Quota(Option<Problem>),
    /// The drive is over ([`Op::Drive`]).
    Driven {
        /// The job as stored after it.
        job: Option<Job>,
        /// How long the drive's answer asked to wait (`retry-after-ms`).
        asked_ms: Option<u64>,
    },
    /// The verdict is recorded ([`Op::Record`]).
    Recorded {
        /// The job as stored (none in a fresh object: nothing recorded).
        job: Option<Job>,
        /// A drive runs here now (it sets the alarm when it is done).
        driving: bool,
    },
}

/// Where a delivery is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Stage {
    #[default]
    Arrived,
    Read,
    RequestRead(Job),
    Locked(Job),
    Taken(Job),
    Armed(Job),
    AskedQuota(Job),
    Unlocked {
        job: Job,
        problem: Problem,
    },
    Driving,
    Tending(Verdict),
    Recording(Verdict),
    Answering(Verdict),
    Over,
}

/// One queue delivery's sequence ([module docs](self)).
#[derive(Debug, Clone, Default)]
pub struct DeliveryMachine {
    stage: Stage,
}

impl DeliveryMachine {
    /// A delivery that has just arrived: feed it [`Input::Start`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the delivery has been answered.
    pub fn is_over(&self) -> bool {
        self.stage == Stage::Over
    }

    /// The next op, given what the last one found, at `now_ms`. An input
    /// the stage does not expect is a performer's bug: the delivery ends
    /// with a retry at once (the queue delivers the message again).
    pub fn on(&mut self, input: Input, now_ms: u64) -> Op {
        let (stage, op) = match (std::mem::take(&mut self.stage), input) {
            (Stage::Arrived, Input::Start) => (Stage::Read, Op::ReadSettled),
            (Stage::Read, Input::Read { job, driving }) => match delivery::plan(job, now_ms, driving) {
                Plan::Settle { verdict, steps } => (Stage::Tending(verdict), Op::Tend(steps)),
                Plan::Run(job) => (Stage::RequestRead(job), Op::LoadRequest),
            },
            (Stage::RequestRead(job), Input::Request { kept: true }) => (Stage::Locked(job), Op::Lock),
            (Stage::RequestRead(_), Input::Request { kept: false }) => Self::tend(AfterDrive::NOTHING_TO_RUN),
            (Stage::Locked(job), Input::Done) => (Stage::Taken(job), Op::TakeMessage),
            (Stage::Taken(job), Input::Done) => (Stage::Armed(job.clone()), Op::Arm(job)),
            (Stage::Armed(job), Input::Done) => (Stage::AskedQuota(job), Op::AskQuota),
            (Stage::AskedQuota(job), Input::Quota(None)) => (Stage::Driving, Op::Drive(job)),
            (Stage::AskedQuota(job), Input::Quota(Some(problem))) => (Stage::Unlocked { job, problem }, Op::Unlock),
            // Over budget: the job waits for the next day (the alarm sends it again then).
            (Stage::Unlocked { job, problem }, Input::Done) => {
                Self::tend(delivery::refused_by_quota(job, &problem, now_ms))
            }
            // No attempt could be made (no route, every breaker open): the
            // job waits for the next probe; then its dead letter.
            (Stage::Driving, Input::Driven { job, asked_ms }) => {
                Self::tend(delivery::after_drive(job, asked_ms, now_ms))
            }
            (Stage::Tending(verdict), Input::Done) => (Stage::Recording(verdict), Op::Record(verdict)),
            // A drive here sets the alarm when it is done (a stream's watchdog
            // must not be replaced meanwhile).
            (Stage::Recording(verdict), Input::Recorded { job: Some(job), driving: false }) => {
                (Stage::Answering(verdict), Op::Arm(job))
            }
            (Stage::Recording(verdict), Input::Recorded { .. }) | (Stage::Answering(verdict), Input::Done) => {
                (Stage::Over, Op::Answer(verdict))
            }
            (_, _) => (Stage::Over, Op::Answer(Verdict::Retry { delay_ms: 0 })),
        };
        self.stage = stage;
        op
    }

    fn tend(after: AfterDrive) -> (Stage, Op) {
        (Stage::Tending(after.verdict), Op::Tend(after.steps))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::job::test_job;
    use crate::wire::ProblemType;

    const NOW: u64 = 1_000_000;

    /// Feeds `inputs` in turn after [`Input::Start`]; the ops they made.
    fn ops(inputs: Vec<Input>) -> Vec<Op> {
        let mut machine = DeliveryMachine::new();
        let mut ops = vec![machine.on(Input::Start, NOW)];
        for input in inputs {
            ops.push(machine.on(input, NOW));
        }
        ops
    }

    fn pending() -> Job {
        test_job::kept_for(86_400_000)
    }

    #[test]
    fn a_run_locks_takes_the_message_arms_and_asks_the_quota_before_it_drives() {
        let job = pending();
        let read = Input::Read { job: Some(job.clone()), driving: false };
        let ops =
            ops(vec![read, Input::Request { kept: true }, Input::Done, Input::Done, Input::Done, Input::Quota(None)]);
        let expected = [
            Op::ReadSettled,
            Op::LoadRequest,
            Op::Lock,
            Op::TakeMessage,
            Op::Arm(job.clone()),
            Op::AskQuota,
            Op::Drive(job),
        ];
        assert_eq!(ops, expected);
    }

    #[test]
    fn after_the_drive_the_steps_are_tended_then_the_verdict_recorded_armed_and_answered() {
        let job = pending();
        let mut machine = DeliveryMachine::new();
        machine.on(Input::Start, NOW);
        machine.on(Input::Read { job: Some(job.clone()), driving: false }, NOW);
        for input in [Input::Request { kept: true }, Input::Done, Input::Done, Input::Done, Input::Quota(None)] {
            machine.on(input, NOW);
        }
        let after = delivery::after_drive(Some(job.clone()), None, NOW);
        let tend = machine.on(Input::Driven { job: Some(job.clone()), asked_ms: None }, NOW);
        assert_eq!(tend, Op::Tend(after.steps));
        assert_eq!(machine.on(Input::Done, NOW), Op::Record(after.verdict));
        let recorded = Input::Recorded { job: Some(job.clone()), driving: false };
        assert_eq!(machine.on(recorded, NOW), Op::Arm(job));
        assert!(!machine.is_over());
        assert_eq!(machine.on(Input::Done, NOW), Op::Answer(after.verdict));
        assert!(machine.is_over());
    }

    #[test]
    fn a_spent_quota_releases_the_lock_then_defers_the_job_and_acks() {
        let job = pending();
        let problem = Problem::new(ProblemType::QuotaExceeded, "spent").with_retry_after_ms(3_600_000);
        let read = Input::Read { job: Some(job.clone()), driving: false };
        let mut inputs = vec![read, Input::Request { kept: true }, Input::Done, Input::Done, Input::Done];
        inputs.extend([Input::Quota(Some(problem.clone())), Input::Done]);
        let ops = ops(inputs);
        assert_eq!(ops[6], Op::Unlock);
        let refused = delivery::refused_by_quota(job, &problem, NOW);
        assert_eq!(ops[7], Op::Tend(refused.steps));
        assert_eq!(refused.verdict, Verdict::Ack);
        assert!(!ops.iter().any(|op| matches!(op, Op::Drive(_))), "no drive when the quota is spent");
    }

    #[test]
    fn without_its_request_nothing_runs_and_the_message_is_acknowledged() {
        let read = Input::Read { job: Some(pending()), driving: false };
        let ops = ops(vec![read, Input::Request { kept: false }, Input::Done]);
        assert_eq!(ops[2..], [Op::Tend(Vec::new()), Op::Record(Verdict::Ack)]);
    }

    #[test]
    fn a_settled_delivery_tends_then_records_and_a_drive_here_is_left_to_arm() {
        let ops = ops(vec![Input::Read { job: None, driving: false }, Input::Done]);
        let Plan::Settle { verdict, steps } = delivery::plan(None, NOW, false) else { panic!("settles") };
        assert_eq!(ops[1..], [Op::Tend(steps), Op::Record(verdict)]);
        let mut machine = DeliveryMachine::new();
        for input in [Input::Start, Input::Read { job: None, driving: true }, Input::Done] {
            machine.on(input, NOW);
        }
        let recorded = Input::Recorded { job: Some(pending()), driving: true };
        assert_eq!(machine.on(recorded, NOW), Op::Answer(verdict), "no arm while a drive runs here");
    }

    #[test]
    fn an_input_out_of_order_ends_the_delivery_with_a_retry() {
        let mut machine = DeliveryMachine::new();
        assert_eq!(machine.on(Input::Done, NOW), Op::Answer(Verdict::Retry { delay_ms: 0 }));
        assert!(machine.is_over());
    }
}
