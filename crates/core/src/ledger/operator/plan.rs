//! What the Ledger performs for an operator's or an approver's request
//! (kick, replay, resolve, approve, an effect's action), in order, and what
//! it answers: one [`Plan`] per request, so the Durable Object only
//! performs its steps ([`Perform`]) and renders its reply ([`Reply`]).
//!
//! The rules themselves stay where they were decided: which replay applies
//! ([`settle::replay_step`]), how an unknown job is settled
//! ([`settle::resolve`]), what an action does to the effects
//! ([`effects::decide`](crate::ledger::effects::run::decide)). This module turns their outcomes into the writes,
//! sends and runs that follow and the answer that ends the request.

use serde_json::Value;

use crate::job::Job;
use crate::ledger::effects::run::{Decided, Then, Write};
use crate::ledger::operator::settle::{self, ReplayStep, Resolution, Resolved};
use crate::wire::{Problem, ProblemType};

/// The content type of a response an operator gives when resolving a job.
pub const RESOLVED_CONTENT_TYPE: &str = "application/json";

/// One step the Ledger performs for an operator, in the plan's order.
#[derive(Debug, Clone, PartialEq)]
pub enum Perform {
    /// Store the operator attempt's response (before the job that names it):
    /// the JSON body the operator gave, as a replay gives it back.
    SaveResponse {
        /// The attempt's number.
        attempt: u32,
        /// Its status.
        status: u16,
        /// Its content type ([`RESOLVED_CONTENT_TYPE`]).
        content_type: &'static str,
        /// Its body: the JSON, compact.
        body: Vec<u8>,
    },
    /// Write the job (as the plan left it) over the version `expected`.
    WriteJob {
        /// The version read.
        expected: u64,
    },
    /// Clear the job's dead letter (it goes again, or it is settled).
    ClearDeadLetter,
    /// Send the job's message to the queue again (by an operator).
    Enqueue,
    /// Write one effect (a compare-and-swap on its version; boxed: an
    /// effect is far larger than the other steps).
    WriteEffect(Box<Write>),
    /// Run the effects that are due.
    RunEffects,
    /// Follow the job's answer up (a job type's answer is in: its effects follow).
    FollowUp,
}

/// What the request is answered, once the steps are performed.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// This problem (refused, or not found).
    Problem(Problem),
    /// `202 {"enqueued": N}`: the job's queue messages sent so far.
    Enqueued,
    /// A replay's outcome: it goes again (`effects`: a job type's effects
    /// resent, by name), or it changes nothing (`reason`).
    Replay {
        /// Whether it goes again.
        replayed: bool,
        /// Why not.
        reason: Option<&'static str>,
        /// The effects resent, when they are what was replayed.
        effects: Option<Vec<String>>,
    },
    /// The job's view (after a resolution).
    View,
    /// The run's answer, read from storage (after an approval or an effect's action).
    RunAnswer,
}

/// The steps of one operator request and its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// What to perform, in order; a step that fails ends the request (500).
    pub perform: Vec<Perform>,
    /// What is logged once it is performed.
    pub log: Option<String>,
    /// The answer.
    pub reply: Reply,
}

impl Plan {
    /// Nothing to perform: only `reply`.
    fn reply(reply: Reply) -> Self {
        Self { perform: Vec::new(), log: None, reply }
    }

    /// A refusal of `kind` with `detail`, nothing performed.
    fn refuse(kind: ProblemType, detail: impl Into<String>) -> Self {
        Self::reply(Reply::Problem(Problem::new(kind, detail)))
    }
}

/// An operator sends the job's message again (only a background job has one).
pub fn kick(job: &Job, by: &str, key: &str) -> Plan {
    if !job.is_background() {
        return Plan::refuse(ProblemType::NotBackground, "only a background job has a queue message");
    }
    let log = Some(format!("{by} sent job {key} to the queue again"));
    Plan { perform: vec![Perform::Enqueue], log, reply: Reply::Enqueued }
}

/// The writes of an action on the effects, then a run of them when it calls for one.
fn effect_steps(decided: Decided) -> Vec<Perform> {
    let runs = matches!(decided.then, Then::Run { .. } | Then::Replayed(_));
    let writes = decided.writes.into_iter().map(|write| Perform::WriteEffect(Box::new(write)));
    writes.chain(runs.then_some(Perform::RunEffects)).collect()
}

/// An approver's or an operator's action on the effects (`POST …/approve`,
/// or an effect resent or marked done), as
/// [`effects::decide`](crate::ledger::effects::run::decide) decided it: its writes, a run,
/// and the run's answer, or the refusal (after the writes: a lapsed approval
/// expires its effect). `by` approving an effect that may now run is logged.
pub fn on_effects(decided: Decided, by: &str, key: &str) -> Plan {
    let log = (decided.then == Then::Run { approved: true }).then(|| format!("{by} approved the effects of job {key}"));
    let reply = match &decided.then {
        Then::Refuse(refusal) => {
            let (kind, detail) = refusal.problem();
            Reply::Problem(Problem::new(kind, detail))
        }
        _ => Reply::RunAnswer,
    };
    Plan { perform: effect_steps(decided), log, reply }
}

/// Whether an operator's replay claims the job type's subject again before
/// it goes on: a dead job freed it, and its dead effects are not what is replayed.
pub fn replay_claims_subject(decided: &Decided, step: ReplayStep) -> bool {
    !matches!(decided.then, Then::Replayed(_)) && step == ReplayStep::Replay { claim_subject: true }
}

/// An operator's replay of `job`: a job type's dead effects when its answer
/// is in ([`Then::Replayed`]); else what [`settle::replay_step`] says —
/// refused, the outbox's messages sent again, or fresh attempts
/// ([`Job::replay_dead`], applied to `job` here) unless `subject_taken`
/// (another job took the subject meanwhile).
pub fn replay(
    job: &mut Job,
    decided: Decided,
    step: ReplayStep,
    subject_taken: Option<Problem>,
    (by, request): (&str, &str),
    now_ms: u64,
) -> Plan {
    if let Then::Replayed(resent) = &decided.then {
        let reply = Reply::Replay { replayed: true, reason: None, effects: Some(resent.clone()) };
        return Plan { perform: effect_steps(decided), log: None, reply };
    }
    let resend = || vec![Perform::ClearDeadLetter, Perform::Enqueue];
    let replayed = Reply::Replay { replayed: true, reason: None, effects: None };
    match (step, subject_taken) {
        (ReplayStep::Refused(refused), _) => Plan::reply(Reply::Problem(refused.problem())),
        (ReplayStep::Resend, _) => Plan { perform: resend(), log: None, reply: replayed },
        (ReplayStep::Replay { .. }, Some(taken)) => Plan::refuse(ProblemType::NotReplayable, taken.detail),
        (ReplayStep::Replay { .. }, None) => {
            let read = job.version();
            let grant = job.policy().max_attempts();
            match job.replay_dead(read, grant, by, request, now_ms) {
                Ok(true) => {
                    let mut perform = vec![Perform::WriteJob { expected: read }];
                    perform.extend(resend());
                    Plan { perform, log: None, reply: replayed }
                }
                Ok(false) => {
                    let reason = Some("already replayed by this request");
                    Plan::reply(Reply::Replay { replayed: false, reason, effects: None })
                }
                Err(error) => Plan::refuse(ProblemType::NotReplayable, error.to_string()),
            }
        }
    }
}

/// An operator settles an unknown job (`action` `succeeded`, with `status`
/// and `body`, or `retry`): [`Resolution::read`], then [`settle::resolve`]
/// on `job`, then its writes in order — the operator attempt's response
/// before the job that names it, the job, its dead letter cleared, a
/// background job sent again, the answer followed up — and the job's view.
pub fn resolve(
    job: &mut Job,
    (action, status, body): (Option<&str>, Option<u16>, Option<Value>),
    (by, request): (&str, &str),
    now_ms: u64,
) -> Plan {
    let resolution = match Resolution::read(action, status, body) {
        Ok(resolution) => resolution,
        Err(refused) => return Plan::reply(Reply::Problem(refused.problem())),
    };
    let read = job.version();
    match settle::resolve(job, resolution, by, request, now_ms) {
        Ok(Resolved::Changed { response, requeue }) => {
            let saved = response.map(|(attempt, status, body)| Perform::SaveResponse {
                attempt,
                status,
                content_type: RESOLVED_CONTENT_TYPE,
                body: body.to_string().into_bytes(),
            });
            let written = [Perform::WriteJob { expected: read }, Perform::ClearDeadLetter];
            let perform = saved
                .into_iter()
                .chain(written)
                .chain(requeue.then_some(Perform::Enqueue))
                .chain([Perform::FollowUp])
                .collect();
            Plan { perform, log: None, reply: Reply::View }
        }
        Ok(Resolved::AlreadyApplied) => Plan::reply(Reply::View),
        Err(error) => Plan::refuse(ProblemType::NotResolvable, error.to_string()),
    }
}

#[cfg(test)]
mod tests;
