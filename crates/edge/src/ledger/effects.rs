//! Job types in the Ledger (`POST /onejob/v1/run/{type}`): the subject
//! gate, then, once the answer is in, the type's effects, each performed
//! once (see [`onejob_core::job_type::effect`]), and the run's answer.
//!
//! Effects are kept beside the job (store table `effects`), planned once
//! from the stored input and answer, and driven by whoever finds one due:
//! the request that got the answer, a queue delivery, the alarm, an
//! approval or an operator. One runner at a time per object (the
//! coordination's effects runner). What the runner does — claim, perform,
//! record (each write a compare-and-swap on the effect's version),
//! reconcile a claimed-but-unrecorded effect with its destination by
//! receipt, expire approvals, dead-letter, wait or stop — and what an
//! approval or an operator's action does, is decided by the core's
//! [`onejob_core::ledger::effects::run`]; this file performs it.

use std::collections::VecDeque;
use std::time::Duration;

use onejob_core::api::ledger_call::{job_type_of, subject_of};
use onejob_core::job::Job;
use onejob_core::job::view::JobView;
use onejob_core::job_type::JobType;
use onejob_core::job_type::effect::Effect;
use onejob_core::ledger::effects::follow_up::{AfterAnswer, AfterCheck, Ended, FollowUp, Held, Step};
use onejob_core::ledger::effects::run::{
    self as machine, Action, Command, Decided, Defined, EffectDeadLetter, Event, Inputs, Planning, Run,
};
use onejob_core::ledger::effects::subject;
use onejob_core::ledger::operator::plan;
use onejob_core::wire::{Problem, ProblemType};
use worker::{Delay, Response, Result};

use super::Ledger;
use crate::api::handoff::{DeadFacts, OperatorRequest, Submission};
use crate::api::ledger::LedgerCall;
use crate::effects;
use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::env::random::MathRandom;
use crate::http::{self, JobResult};
use crate::ledger::store::Store;
use crate::ledger::{drive, stored};
use crate::ops;

impl Ledger {
    /// The submission this object's job was made with, if it kept one (a
    /// job type's job always does: its type and input are in it).
    fn stored_submission(&self) -> Result<Option<Submission>> {
        let text = self.store().load_submission()?;
        Ok(text.map(|text| serde_json::from_str(&text)).transpose()?)
    }

    /// The job type of this object's job (as the deployment defines it now).
    fn stored_job_type<'c>(&self, config: &'c Config) -> Option<&'c JobType> {
        let submission = self.stored_submission().ok().flatten();
        job_type_of(&config.job_types, submission.and_then(|s| s.run).as_ref())
    }

    /// A new job of a type with `once_per`: its subject must be free (or
    /// this job's). `Some` is the refusal ([`subject::Subject::refusal`]).
    pub(super) async fn subject_taken(&self, config: &Config, submission: &Submission) -> Option<Problem> {
        let subject = subject_of(&config.job_types, submission.run.as_ref())?;
        let claimed = ops::claim_subject(&self.env, &claim_of(submission, &subject.held())).await;
        // Not knowing whether the subject is taken, run nothing: the caller
        // retries with the same key.
        if let Err(error) = &claimed {
            worker::console_error!("ledger: checking a job type's subject failed: {error}");
        }
        let holder = claimed.as_ref().map(|held| held.as_ref().map(|h| (h.user.as_str(), h.key.as_str())));
        subject.refusal(holder, submission.key.as_str(), submission.user.as_deref())
    }

    /// A job that expires without its answer frees its subject
    /// ([`subject::freed_at_expiry`]); an answered one keeps it.
    pub(super) async fn release_subject_at_expiry(&self, job: Option<&Job>) {
        if !subject::freed_at_expiry(job) {
            return;
        }
        let (Ok(Some(submission)), Ok(config)) = (self.stored_submission(), crate::env::config::load(&self.env)) else {
            return;
        };
        // The subject is only ever claimed when the type names one.
        let Some(subject) = subject_of(&config.job_types, submission.run.as_ref()) else { return };
        if let Err(error) = ops::release_subject(&self.env, &claim_of(&submission, &subject.held())).await {
            worker::console_warn!("ledger: freeing an expired job's subject failed: {error}");
        }
    }

    /// A dead run job's subject, claimed again before an operator replays
    /// it when `wanted` (`Some`: another job holds it now).
    pub(super) async fn subject_for_replay(&self, config: &Config, wanted: bool) -> Option<Problem> {
        if !wanted {
            return None;
        }
        let submission = self.stored_submission().ok()??;
        self.subject_taken(config, &submission).await
    }

    /// After a run job's model part finished (or stopped): an answer plans
    /// the effects and runs those due; an end without one frees the subject
    /// (the steps are the core's [`AfterAnswer`], [`AfterCheck`]).
    pub(super) async fn after_answer(&self, config: &Config, submission: &Submission, result: Ended) {
        let Some(run) = &submission.run else { return };
        let held = subject_of(&config.job_types, Some(run)).map(|subject| subject.held());
        let mut steps = VecDeque::from(AfterAnswer::of(result).steps(held.as_ref()));
        while let Some(step) = steps.pop_front() {
            let done = match step {
                Step::CheckContract => self.broken_answer(config).map(|broken| {
                    steps.extend(AfterCheck::of(&run.job_type, broken).steps(held.as_ref()));
                }),
                Step::ReleaseSubject(held) => ops::release_subject(&self.env, &claim_of(submission, &held)).await,
                Step::SubjectAnswered(held) => ops::subject_answered(&self.env, &claim_of(submission, &held)).await,
                Step::DeadLetter(detail) => self.dead_letter_contract(config, submission, result, detail).await,
                Step::PlanEffects => self.plan_effects(config),
                Step::RunEffects => self.run_effects(config).await,
            };
            if let Err(error) = done {
                // The alarm picks the effects up again (they are planned from storage).
                worker::console_error!("ledger: a job type's effects failed: {error}");
                return;
            }
        }
    }

    /// A streamed answer that breaks its type's contract: its dead letter
    /// (class `contract`), and an alert when one is due.
    async fn dead_letter_contract(
        &self,
        config: &Config,
        submission: &Submission,
        result: Ended,
        detail: String,
    ) -> Result<()> {
        let facts = DeadFacts::of_broken_contract(result.status, detail, result.attempt);
        let recorded_ms = ops::record_dead_letter(&self.env, &submission.message(), &facts).await?;
        ops::alert_if_due(&self.env, config, "contract", recorded_ms).await
    }

    /// What follows a run job's model part, read from storage: while no
    /// effect is planned, [`Self::after_answer`] (the subject marked answered
    /// or freed, a streamed answer's contract checked, the effects planned
    /// and run); then only the effects that are due. Every path that finds a
    /// job's answer in (a stream's pump through `/effects`, the alarm, a queue
    /// redelivery, an operator's resolve) comes here, so none skips a step.
    pub(super) async fn follow_up(&self, config: &Config) -> Result<()> {
        let store = self.store();
        let planned = !store.load_effects()?.is_empty();
        let Some(submission) = self.stored_submission()? else { return Ok(()) };
        match FollowUp::of(submission.run.is_some(), planned, store.load_job()?.as_ref()) {
            FollowUp::RunEffects => self.run_effects(config).await,
            FollowUp::AfterAnswer(ended) => {
                self.after_answer(config, &submission, ended).await;
                Ok(())
            }
            FollowUp::Nothing => Ok(()),
        }
    }

    /// The violation of the stored answer, if it breaks its type's output
    /// contract (only a streamed one can).
    fn broken_answer(&self, config: &Config) -> Result<Option<String>> {
        let store = self.store();
        let (Some(job), Some(job_type)) = (store.load_job()?, self.stored_job_type(config)) else { return Ok(None) };
        let Some(attempt) = job.replayed_attempt() else { return Ok(None) };
        let Some(response) = store.load_response(attempt.number)? else { return Ok(None) };
        Ok(job_type.output_of(&response.body).err().map(|v| v.0))
    }

    /// Plans the effects of a finished run job, once, from its stored input
    /// and answer ([`machine::plan_once`]).
    fn plan_effects(&self, config: &Config) -> Result<()> {
        let store = self.store();
        let (Some(job), Some(submission)) = (store.load_job()?, self.stored_submission()?) else {
            return Ok(());
        };
        let Some(run) = submission.run.as_ref() else { return Ok(()) };
        let planned = !store.load_effects()?.is_empty();
        let answer = job.replayed_attempt().map(|a| store.load_response(a.number)).transpose()?.flatten();
        let job_type = (run.job_type.as_str(), config.job_types.get(&run.job_type));
        let body = answer.as_ref().map(|r| r.body.as_slice());
        let storage_id = submission.storage_id();
        let stored = (storage_id.as_str(), &run.input);
        match machine::plan_once(planned, job_type, &job, body, stored, now_ms()) {
            Planning::Write(effects) => store.plan_effects(&effects),
            Planning::Warn(warning) => {
                worker::console_warn!("ledger: {warning}");
                Ok(())
            }
            Planning::Nothing => Ok(()),
        }
    }

    /// Runs the effects that are due, one runner at a time (the
    /// coordination's effects runner is the lock; a runner already here
    /// looks again before it stops), then sets the alarm.
    pub(super) async fn run_effects(&self, config: &Config) -> Result<()> {
        if !self.memory.borrow_mut().begin_effects() {
            return Ok(());
        }
        let ran = self.run_effects_now(config).await;
        self.memory.borrow_mut().end_effects();
        if let Some(job) = self.store().load_job()? {
            self.arm(config, &job);
        }
        ran
    }

    /// Performs what the core's effects machine ([`Run`]) decides until it finishes.
    async fn run_effects_now(&self, config: &Config) -> Result<()> {
        let Some(submission) = self.stored_submission()? else { return Ok(()) };
        let Some(job_type) = job_type_of(&config.job_types, submission.run.as_ref()) else { return Ok(()) };
        let store = self.store();
        let source = format!("onejob:{}", job_type.name);
        let mut run = Run::new(Defined::of(Some(job_type)));
        let mut commands: VecDeque<Command> =
            run.start(&mut Inputs { now_ms: now_ms(), random: &mut MathRandom }).into();
        while let Some(command) = commands.pop_front() {
            let event = match command {
                Command::Watch { at_ms } => {
                    self.watch(at_ms).await;
                    continue;
                }
                Command::Load => Event::Loaded(store.load_effects()?),
                Command::Persist { effect, expected } => {
                    let written = store.update_effect(expected, &effect);
                    Event::Persisted(drive::persisted(&store, written, |store| stored_effect(store, &effect.name))?)
                }
                Command::Perform { effect } => {
                    let spec = job_type.effects.iter().find(|s| s.name == effect.name);
                    let performed = effects::perform(&self.env, spec, &effect, &source).await;
                    config.faults.after_effect(&effect.name).await;
                    Event::Performed(performed)
                }
                Command::AskReceipt { effect } => {
                    let spec = job_type.effects.iter().find(|s| s.name == effect.name);
                    Event::Receipt(effects::ask(&self.env, spec, &effect, &source).await)
                }
                Command::DeadLetter(letter) => {
                    Event::DeadLettered { recorded: self.dead_letter_effect(config, &submission, letter).await }
                }
                Command::Sleep { ms } => {
                    Delay::from(Duration::from_millis(ms)).await;
                    Event::Woke
                }
                Command::Finish => break,
            };
            commands.extend(run.on(event, &mut Inputs { now_ms: now_ms(), random: &mut MathRandom }));
        }
        Ok(())
    }

    /// While effects run, the alarm is kept close (a restart reconciles what was claimed).
    async fn watch(&self, at_ms: u64) {
        let at = worker::ScheduledTime::new(js_sys::Date::new(&(at_ms as f64).into()));
        if let Err(error) = crate::ledger::alarms::set(&self.state, at).await {
            worker::console_warn!("ledger: setting the effects' watch failed: {error}");
        }
    }

    /// An effect that came to need an operator is a dead letter (and an
    /// alert, at once): the answer was delivered, this part was not.
    /// Whether it was recorded: one that was not is sent again later (the
    /// effects machine keeps it due); a failed alert is only logged (the
    /// letter is in the operators' list).
    async fn dead_letter_effect(&self, config: &Config, submission: &Submission, letter: EffectDeadLetter) -> bool {
        let recorded_ms = match ops::record_dead_letter(&self.env, &submission.message(), &letter.facts()).await {
            Ok(recorded_ms) => recorded_ms,
            Err(error) => {
                worker::console_error!("ledger: recording an effect's dead letter failed (sent again later): {error}");
                return false;
            }
        };
        if let Err(error) = ops::alert_if_due(&self.env, config, "effect", recorded_ms).await {
            worker::console_error!("ledger: alerting about an effect's dead letter failed: {error}");
        }
        true
    }

    /// The answer of a run job: `{type, key, state, output, effects}` for
    /// an answer ([`machine::run_answer`]), the problem for anything else.
    pub(super) fn run_answer(
        &self,
        config: &Config,
        submission: &Submission,
        result: JobResult,
        replayed: bool,
    ) -> Result<Response> {
        let as_run = machine::answers_as_run(result.status, &result.content_type);
        let Some(run) = submission.run.as_ref().filter(|_| as_run) else {
            return result.into_response(submission.key.as_str(), replayed);
        };
        let effects = self.store().load_effects()?;
        let job_type = config.job_types.get(&run.job_type);
        let body = machine::run_answer(&run.job_type, job_type, submission.key.as_str(), &result.body, &effects);
        let answer = JobResult {
            status: 200,
            content_type: "application/json".into(),
            body: serde_json::to_vec(&body)?,
            state: result.state,
            attempt: result.attempt,
            retry_after_ms: None,
        };
        answer.into_response(submission.key.as_str(), replayed)
    }

    /// When the effects next need a look ([`machine::next_look_ms`]).
    pub(super) fn effects_due(&self, config: &Config) -> Option<u64> {
        let effects = self.store().load_effects().ok()?;
        let defined = Defined::of(self.stored_job_type(config));
        machine::next_look_ms(&effects, &defined, self.memory.borrow().effects_running(), now_ms())
    }

    /// Fills a view's effects in (a run job's: [`JobView::set_effects`]).
    pub(super) fn with_effects(&self, view: &mut JobView) -> Result<()> {
        view.set_effects(self.store().load_effects()?);
        Ok(())
    }

    /// What an approver's or an operator's `action` does to the stored
    /// effects now ([`machine::decide`]).
    pub(super) fn decide_effects(&self, config: &Config, action: &Action, by: &str) -> Result<Decided> {
        let defined = Defined::of(self.stored_job_type(config));
        Ok(machine::decide(self.store().load_effects()?, action, by, &defined, now_ms()))
    }

    /// `POST /onejob/v1/jobs/{key}/approve`: every effect waiting for an
    /// approval may run, once; then they run.
    pub(super) async fn approve(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        self.act_on_effects(config, request, Action::Approve, "this tenant has no job with that key").await
    }

    /// An operator resends an effect (dead or unknown), or marks one done.
    pub(super) async fn effect_action(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let action = Action::on_effect(request.effect.as_deref().unwrap_or_default(), request.action.as_deref());
        self.act_on_effects(config, request, action, "no job with that key").await
    }

    /// Performs what `action` does to the stored effects
    /// ([`plan::on_effects`]); without a job, `404` saying `missing`.
    async fn act_on_effects(
        &self,
        config: &Config,
        request: &OperatorRequest,
        action: Action,
        missing: &str,
    ) -> Result<Response> {
        let Some(job) = self.store().load_job()? else { return http::problem_of(ProblemType::JobNotFound, missing) };
        let decided = self.decide_effects(config, &action, &request.by)?;
        self.perform(config, &job, plan::on_effects(decided, &request.by, &request.key), &request.key).await
    }

    /// The run's answer from storage (for approvals and operator actions).
    pub(super) fn answer_as_run(&self, config: &Config, job: &Job) -> Result<Response> {
        let store = self.store();
        let job = store.load_job()?.unwrap_or_else(|| job.clone());
        let Some(submission) = self.stored_submission()? else {
            return http::problem_of(ProblemType::JobNotFound, "no job type's job here");
        };
        let result = stored::finished_result(&store, &job)?;
        self.run_answer(config, &submission, result, false)
    }
}

/// The effect named `name` as stored now (what a lost write of the effects
/// machine is answered with).
fn stored_effect(store: &Store, name: &str) -> Result<Option<Box<Effect>>> {
    Ok(store.load_effects()?.into_iter().find(|e| e.name == name).map(Box::new))
}

/// How a job type's model part ended, from a result the driver returned
/// (never a stream: those end in their pump).
pub(super) fn ended_of(result: &JobResult) -> Ended {
    Ended { state: result.state, status: result.status, attempt: result.attempt.unwrap_or(1), streamed: false }
}

/// The hold of `submission`'s job on the subject it `held`.
fn claim_of<'a>(submission: &'a Submission, held: &'a Held) -> ops::SubjectClaim<'a> {
    ops::SubjectClaim {
        tenant: &submission.tenant,
        user: submission.user.as_deref(),
        job_type: &held.type_name,
        subject: &held.subject,
        key: submission.key.as_str(),
    }
}

/// Asks the Ledger of `submission`'s job to follow its answer up (after its
/// stream ended; see `Ledger::follow_up`).
pub async fn effects_after_stream(env: &worker::Env, submission: &Submission) {
    let asked = crate::api::client::ledger(env, &submission.storage_id(), &LedgerCall::FollowUp).await;
    if let Err(error) = asked {
        worker::console_warn!("ledger: running a streamed job's effects failed (the alarm will): {error}");
    }
}
