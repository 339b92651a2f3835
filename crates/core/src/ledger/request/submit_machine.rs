//! A keyed request to the Ledger, in the order it is performed: read the
//! job, decide ([`submit::decide`]), then what the decision says. The one
//! sequence the Durable Object (`edge/src/ledger/submit.rs`) and the
//! simulation both run; a run it admits goes on as a
//! [`crate::ledger::request::run_machine::RunMachine`].
//!
//! | Op | The performer | Feeds back |
//! |---|---|---|
//! | [`Op::Read`] | reads the job (settled by time), the one being created, who drives, whether it streams here | [`Input::Read`] |
//! | [`Op::AskRoute`] | asks whether a route serves a new job's model | [`Input::Route`] |
//! | [`Op::ReplaceEnded`] | clears an ended keyless job's rows for its renewal, sets its retention alarm | [`Input::Done`] |
//! | [`Op::KeepForAdoption`] | keeps a background submission for the drive here to adopt | [`Input::Done`] |
//! | [`Op::ClaimSubject`] | claims a new job type's job's subject (`once_per`) | [`Input::Checked`] |
//! | [`Op::Adopt`] | makes the job a background job ([`submit::adopt`]) | [`Input::Adopted`] |
//! | [`Op::Refuse`], [`Op::Replay`], [`Op::FollowStream`], [`Op::Wait`], [`Op::Accepted`], [`Op::Run`] | answers so (a run: the run machine) | — |
//!
//! From the read to the claim nothing awaits, except a route's lookup
//! (no I/O: the deployment's routes) and a background job's subject.

use crate::job::{Job, JobPolicy, JobState};
use crate::ledger::request::submit::{self, Decision, Plan, Read, Request, Run};
use crate::wire::Problem;

/// What the performer does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read what the decision needs.
    Read,
    /// Ask whether a route serves the new job's model.
    AskRoute,
    /// Clear the ended keyless job's rows; this job replaces it.
    ReplaceEnded(Job),
    /// Keep the background submission for the drive here to adopt.
    KeepForAdoption,
    /// Claim the new job's subject first.
    ClaimSubject,
    /// Make the job a background job (the keyless job renewed, if any).
    Adopt {
        /// The keyless job this request renewed.
        renewed: Option<Job>,
    },
    /// Answer with this problem about a job in `state`.
    Refuse {
        /// The refusal.
        problem: Problem,
        /// The job's state as the answer reports it.
        state: JobState,
    },
    /// Replay the finished job's stored result.
    Replay {
        /// The finished job.
        job: Job,
        /// Whether the replay may be written to the KV cache.
        cache: bool,
    },
    /// Follow the stream running here from its first event.
    FollowStream,
    /// Wait for the drive here.
    Wait,
    /// Answer `202` with the job as it stands.
    Accepted(Job),
    /// Run the job ([`crate::ledger::request::run_machine::RunMachine::for_caller`]).
    Run(Run),
}

impl Op {
    /// Whether the op answers the request: the submission is over.
    pub fn answers(&self) -> bool {
        matches!(
            self,
            Op::Refuse { .. } | Op::Replay { .. } | Op::FollowStream | Op::Wait | Op::Accepted(_) | Op::Run(_)
        )
    }
}

/// What the performer found doing the last [`Op`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// The request arrived.
    Start,
    /// The op is done and says nothing.
    Done,
    /// What was read ([`Op::Read`]).
    Read(Read),
    /// The refusal when no route serves the new job's model ([`Op::AskRoute`]).
    Route(Option<Problem>),
    /// The subject's claim: a problem when another job holds it ([`Op::ClaimSubject`]).
    Checked(Option<Problem>),
    /// The job as adopted ([`Op::Adopt`]).
    Adopted(Job),
}

/// The request's facts the decision needs, given with each input.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The request.
    pub request: Request<'a>,
    /// Now.
    pub now_ms: u64,
    /// The deployment's job policy.
    pub policy: JobPolicy,
}

/// Where the submission is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Stage {
    #[default]
    Arrived,
    Reading,
    Routing(Decision),
    Replacing(Decision),
    Keeping(Job),
    Claiming {
        renewed: Option<Job>,
    },
    Adopting,
    Over,
}

/// One submission's sequence ([module docs](self)).
#[derive(Debug, Clone, Default)]
pub struct SubmitMachine {
    stage: Stage,
}

impl SubmitMachine {
    /// A request that has just arrived: feed it [`Input::Start`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The next op, given what the last one found. An input the stage does
    /// not expect is a performer's bug: the request is refused as in progress.
    pub fn on(&mut self, input: Input, context: Context<'_>) -> Op {
        let (stage, op) = match (std::mem::take(&mut self.stage), input) {
            (Stage::Arrived, Input::Start) => (Stage::Reading, Op::Read),
            (Stage::Reading, Input::Read(read)) => {
                let mut asked = false;
                let Context { request, now_ms, policy } = context;
                let decision = submit::decide(read, request, now_ms, policy, || {
                    asked = true;
                    None
                });
                match asked {
                    true => (Stage::Routing(decision), Op::AskRoute),
                    false => Self::decided(decision),
                }
            }
            // A new job for a model no route serves is refused before anything is written.
            (Stage::Routing(Decision { renewed, .. }), Input::Route(Some(problem))) => {
                Self::decided(Decision { renewed, plan: Plan::Refuse { problem, state: JobState::Pending } })
            }
            (Stage::Routing(decision), Input::Route(None)) => Self::decided(decision),
            (Stage::Replacing(Decision { renewed, plan }), Input::Done) => Self::dispatch(plan, renewed),
            (Stage::Keeping(job), Input::Done) => (Stage::Over, Op::Accepted(job)),
            (Stage::Claiming { .. }, Input::Checked(Some(problem))) => {
                (Stage::Over, Op::Refuse { problem, state: JobState::Pending })
            }
            (Stage::Claiming { renewed }, Input::Checked(None)) => (Stage::Adopting, Op::Adopt { renewed }),
            (Stage::Adopting, Input::Adopted(job)) => (Stage::Over, Op::Accepted(job)),
            (_, _) => {
                let (problem, state) = submit::wait_over(context.request.arrival.key);
                (Stage::Over, Op::Refuse { problem, state })
            }
        };
        self.stage = stage;
        op
    }

    /// A keyless job renewed has its ended rows replaced first (still
    /// without an await); then the plan.
    fn decided(decision: Decision) -> (Stage, Op) {
        match decision.renewed.clone() {
            Some(renewed) => (Stage::Replacing(decision), Op::ReplaceEnded(renewed)),
            None => Self::dispatch(decision.plan, None),
        }
    }

    fn dispatch(plan: Plan, renewed: Option<Job>) -> (Stage, Op) {
        match plan {
            Plan::Refuse { problem, state } => (Stage::Over, Op::Refuse { problem, state }),
            Plan::Replay { job, cache } => (Stage::Over, Op::Replay { job, cache }),
            Plan::FollowStream => (Stage::Over, Op::FollowStream),
            Plan::Wait => (Stage::Over, Op::Wait),
            Plan::Accept { job, adopt_later: true } => (Stage::Keeping(job), Op::KeepForAdoption),
            Plan::Accept { job, adopt_later: false } => (Stage::Over, Op::Accepted(job)),
            Plan::Adopt { subject_first: true } => (Stage::Claiming { renewed }, Op::ClaimSubject),
            Plan::Adopt { subject_first: false } => (Stage::Adopting, Op::Adopt { renewed }),
            Plan::Run(run) => (Stage::Over, Op::Run(run)),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::{Body, Fingerprint};
    use crate::job::UnknownPolicy;
    use crate::ledger::request::admission::Arrival;
    use crate::wire::ProblemType;

    const NOW: u64 = 1_000_000;
    const KEY: &str = "key-0123456789abcdef";

    fn fingerprint() -> Fingerprint {
        Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap()
    }

    fn policy() -> JobPolicy {
        JobPolicy::new(3, 30_000, 60_000, 86_400_000, UnknownPolicy::RetryAfterLease).expect("policy")
    }

    fn context(fingerprint: &Fingerprint, background: bool) -> Context<'_> {
        let arrival = Arrival { key: KEY, fingerprint, wait_ms: 30_000 };
        Context { request: Request { arrival, keyless: None, background }, now_ms: NOW, policy: policy() }
    }

    fn nothing_read() -> Input {
        Input::Read(Read { stored: None, creating: None, driving: false, streaming: false })
    }

    #[test]
    fn a_new_job_asks_its_route_then_runs() {
        let fp = fingerprint();
        let mut machine = SubmitMachine::new();
        assert_eq!(machine.on(Input::Start, context(&fp, false)), Op::Read);
        assert_eq!(machine.on(nothing_read(), context(&fp, false)), Op::AskRoute);
        let run = machine.on(Input::Route(None), context(&fp, false));
        assert!(matches!(&run, Op::Run(Run { stored: false, created: true, .. })), "{run:?}");
        assert!(run.answers());
    }

    #[test]
    fn no_route_refuses_a_new_job_before_anything_is_written() {
        let fp = fingerprint();
        let mut machine = SubmitMachine::new();
        machine.on(Input::Start, context(&fp, false));
        machine.on(nothing_read(), context(&fp, false));
        let problem = Problem::new(ProblemType::NoRoute, "no route serves the model");
        let refused = machine.on(Input::Route(Some(problem.clone())), context(&fp, false));
        assert_eq!(refused, Op::Refuse { problem, state: JobState::Pending });
    }

    #[test]
    fn a_duplicate_of_a_job_driven_here_waits_and_asks_no_route() {
        let fp = fingerprint();
        let creating = Job::new(fp.clone(), NOW, policy());
        let read = Input::Read(Read { stored: None, creating: Some(creating), driving: true, streaming: false });
        let mut machine = SubmitMachine::new();
        machine.on(Input::Start, context(&fp, false));
        assert_eq!(machine.on(read, context(&fp, false)), Op::Wait);
    }

    #[test]
    fn a_background_duplicate_of_a_drive_here_is_kept_for_adoption_then_accepted() {
        let fp = fingerprint();
        let creating = Job::new(fp.clone(), NOW, policy());
        let read = Read { stored: None, creating: Some(creating.clone()), driving: true, streaming: false };
        let mut machine = SubmitMachine::new();
        machine.on(Input::Start, context(&fp, true));
        assert_eq!(machine.on(Input::Read(read), context(&fp, true)), Op::KeepForAdoption);
        assert!(matches!(machine.on(Input::Done, context(&fp, true)), Op::Accepted(_)));
    }

    #[test]
    fn a_background_submission_nobody_drives_is_adopted_then_accepted() {
        let fp = fingerprint();
        let mut machine = SubmitMachine::new();
        machine.on(Input::Start, context(&fp, true));
        let adopt = machine.on(nothing_read(), context(&fp, true));
        let adopt = match adopt {
            Op::AskRoute => machine.on(Input::Route(None), context(&fp, true)),
            other => other,
        };
        assert_eq!(adopt, Op::ClaimSubject, "a new job claims its subject first (none for a job of no type)");
        assert_eq!(machine.on(Input::Checked(None), context(&fp, true)), Op::Adopt { renewed: None });
        let job = Job::new(fp.clone(), NOW, policy());
        assert_eq!(machine.on(Input::Adopted(job.clone()), context(&fp, true)), Op::Accepted(job));
    }

    #[test]
    fn a_taken_subject_refuses_the_background_submission_before_any_adoption() {
        let fp = fingerprint();
        let mut machine = SubmitMachine::new();
        machine.on(Input::Start, context(&fp, true));
        if machine.on(nothing_read(), context(&fp, true)) == Op::AskRoute {
            machine.on(Input::Route(None), context(&fp, true));
        }
        let taken = Problem::new(ProblemType::RequestInProgress, "the subject is another job's");
        let refused = machine.on(Input::Checked(Some(taken.clone())), context(&fp, true));
        assert_eq!(refused, Op::Refuse { problem: taken, state: JobState::Pending });
    }

    #[test]
    fn an_input_out_of_order_is_refused_as_in_progress() {
        let fp = fingerprint();
        let mut machine = SubmitMachine::new();
        let op = machine.on(Input::Done, context(&fp, false));
        assert!(
            matches!(op, Op::Refuse { ref problem, .. } if problem.kind == ProblemType::RequestInProgress),
            "{op:?}"
        );
    }
}
