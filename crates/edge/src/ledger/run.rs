//! Job types in the Ledger (`POST /onejob/v1/run/{type}`): the subject
//! gate, then, once the answer is in, the type's effects, each performed
//! once (see [`onejob_core::effect`]), and the run's answer.
//!
//! Effects are kept beside the job (store table `effects`), planned once
//! from the stored input and answer, and driven by whoever finds one due:
//! the request that got the answer, a queue delivery, the alarm, an
//! approval or an operator. One runner at a time per object
//! (the coordination's effects runner); every claim and record is a compare-and-swap on the
//! effect's version. A claimed effect that was never recorded (the runtime
//! died in between) is reconciled with its destination, never performed
//! blindly.

use std::time::Duration;

use onejob_core::effect::{self, Effect, EffectState, Step};
use onejob_core::job::Job;
use onejob_core::job_type::JobType;
use onejob_core::ledger::follow_up::{self, AfterAnswer, AfterCheck, AfterPass, Ended, FollowUp};
use onejob_core::protocol::{JobView, Problem, ProblemType};
use serde_json::{Value, json};
use worker::{Delay, Response, Result};

use super::Ledger;
use crate::api::handoff::{DeadFacts, JobMessage, OperatorRequest, Submission};
use crate::api::ledger::LedgerCall;
use crate::effects::{self, Performed};
use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::env::random::MathRandom;
use crate::http::{self, JobResult};
use crate::ledger::stored;
use crate::ops;

impl Ledger {
    /// The submission this object's job was made with, if it kept one (a
    /// job type's job always does: its type and input are in it).
    fn stored_submission(&self) -> Result<Option<Submission>> {
        match self.store().load_submission()? {
            Some(text) => Ok(Some(serde_json::from_str(&text)?)),
            None => Ok(None),
        }
    }

    /// The job type of this object's job (as the deployment defines it now).
    fn stored_job_type<'c>(&self, config: &'c Config) -> Option<&'c JobType> {
        let run = self.stored_submission().ok()??.run?;
        config.job_types.get(&run.job_type)
    }

    /// A new job of a type with `once_per`: its subject must be free (or
    /// this job's). `Some` is the refusal.
    pub(super) async fn subject_taken(&self, config: &Config, submission: &Submission) -> Option<Problem> {
        let run = submission.run.as_ref()?;
        let job_type = config.job_types.get(&run.job_type)?;
        let subject = job_type.subject_of(&run.input)?;
        let user = submission.user.as_deref();
        match ops::claim_subject(&self.env, &claim_of(submission, &run.job_type, &subject)).await {
            Ok(None) => None,
            Ok(Some(holder)) => {
                let field = job_type.once_per.as_deref().unwrap_or("subject");
                let problem = Problem::new(
                    ProblemType::AlreadyRun,
                    format!("{field} {subject:?} already has a {} job; it is not run again", run.job_type),
                )
                .with_key(submission.key.as_str());
                // The holder's key only to its own user (another user's key
                // names a job this caller cannot read).
                Some(if holder.user == user.unwrap_or("") { problem.with_job_key(&holder.key) } else { problem })
            }
            // Not knowing whether the subject is taken, run nothing: the
            // caller retries with the same key.
            Err(error) => {
                worker::console_error!("ledger: checking a job type's subject failed: {error}");
                Some(
                    Problem::new(ProblemType::Internal, "the job type's subject could not be checked; retry")
                        .with_key(submission.key.as_str())
                        .with_retry_after_ms(1_000),
                )
            }
        }
    }

    /// A job that expires without its answer holds its subject no longer
    /// (it would otherwise hold it for good); an answered one keeps it: a
    /// triaged ticket is not triaged again, also after its job is deleted.
    pub(super) async fn release_subject_at_expiry(&self, job: Option<&Job>) {
        if job.is_some_and(answered) {
            return;
        }
        let Ok(Some(submission)) = self.stored_submission() else { return };
        let Some(run) = &submission.run else { return };
        // The subject is only ever claimed when the type names one.
        let Ok(config) = crate::env::config::load(&self.env) else { return };
        let Some(subject) = config.job_types.get(&run.job_type).and_then(|t| t.subject_of(&run.input)) else {
            return;
        };
        if let Err(error) = ops::release_subject(&self.env, &claim_of(&submission, &run.job_type, &subject)).await {
            worker::console_warn!("ledger: freeing an expired job's subject failed: {error}");
        }
    }

    /// A dead run job's subject, claimed again before an operator replays
    /// it (`Some`: another job holds it now).
    pub(super) async fn subject_for_replay(&self, config: &Config) -> Option<Problem> {
        let submission = self.stored_submission().ok()??;
        submission.run.as_ref()?;
        self.subject_taken(config, &submission).await
    }

    /// After a run job's model part finished (or stopped): an answer plans
    /// the effects and runs those due; an end without one frees the subject.
    pub(super) async fn after_answer(&self, config: &Config, submission: &Submission, result: Ended) {
        let Some(run) = &submission.run else { return };
        let outcome = async {
            let subject = config.job_types.get(&run.job_type).and_then(|t| t.subject_of(&run.input));
            let claim = subject.as_deref().map(|subject| claim_of(submission, &run.job_type, subject));
            match AfterAnswer::of(result) {
                AfterAnswer::CheckThenEffects { check_contract } => {
                    let checked = if check_contract {
                        AfterCheck::of(&run.job_type, self.broken_answer(config)?)
                    } else {
                        AfterCheck::Effects
                    };
                    if let AfterCheck::DeadLetter(detail) = checked {
                        if let Some(claim) = &claim {
                            ops::release_subject(&self.env, claim).await?;
                        }
                        let facts = DeadFacts {
                            dead: true,
                            error_class: "contract".into(),
                            last_status: Some(result.status),
                            detail,
                            attempts: result.attempt,
                        };
                        ops::record_dead_letter(&self.env, &submission.message(), &facts).await?;
                        return ops::alert_if_due(&self.env, config, "contract").await;
                    }
                    if let Some(claim) = &claim {
                        ops::subject_answered(&self.env, claim).await?;
                    }
                    self.plan_effects(config)?;
                    self.run_effects(config).await
                }
                AfterAnswer::ReleaseSubject => match &claim {
                    Some(claim) => ops::release_subject(&self.env, claim).await,
                    None => Ok(()),
                },
                AfterAnswer::Nothing => Ok(()),
            }
        };
        if let Err(error) = outcome.await {
            // The alarm picks the effects up again (they are planned from storage).
            worker::console_error!("ledger: a job type's effects failed: {error}");
        }
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
        if planned {
            return self.run_effects(config).await;
        }
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
    /// and answer.
    fn plan_effects(&self, config: &Config) -> Result<()> {
        let store = self.store();
        if !store.load_effects()?.is_empty() {
            return Ok(());
        }
        let (Some(job), Some(submission)) = (store.load_job()?, self.stored_submission()?) else {
            return Ok(());
        };
        let Some(run) = submission.run.as_ref() else { return Ok(()) };
        let Some(job_type) = config.job_types.get(&run.job_type) else {
            worker::console_warn!("ledger: job type {} is gone; its effects are not planned", run.job_type);
            return Ok(());
        };
        if job_type.effects.is_empty() || !answered(&job) {
            return Ok(());
        }
        let Some(response) = job.replayed_attempt().and_then(|a| store.load_response(a.number).transpose()) else {
            return Ok(());
        };
        let output = match job_type.output_of(&response?.body) {
            Ok(output) => output,
            Err(violation) => {
                worker::console_warn!("ledger: the stored answer breaks the contract now: {}", violation.0);
                return Ok(());
            }
        };
        let storage_id = submission.storage_id();
        let now = now_ms();
        let effects: Vec<Effect> = job_type
            .effects
            .iter()
            .map(|spec| Effect::plan(spec, storage_id.as_str(), &run.input, &output, now))
            .collect();
        store.plan_effects(&effects)
    }

    /// Runs every effect that is due, waiting in between for retries due
    /// within `follow_up::INLINE_WAIT_MS`; later ones are left to the alarm.
    pub(super) async fn run_effects(&self, config: &Config) -> Result<()> {
        if !self.memory.borrow_mut().begin_effects() {
            return Ok(()); // the runner here looks again before it stops
        }
        let watch = worker::ScheduledTime::from(Duration::from_millis(follow_up::CLAIM_WATCH_MS));
        if let Err(error) = crate::ledger::alarms::set(&self.state, watch).await {
            worker::console_warn!("ledger: setting the effects' watch failed: {error}");
        }
        let ran = self.run_effects_now(config).await;
        self.memory.borrow_mut().end_effects();
        let store = self.store();
        if let Some(job) = store.load_job()? {
            self.arm(config, &job);
        }
        ran
    }

    async fn run_effects_now(&self, config: &Config) -> Result<()> {
        let store = self.store();
        let Some(submission) = self.stored_submission()? else { return Ok(()) };
        let Some(job_type) = submission.run.as_ref().and_then(|run| config.job_types.get(&run.job_type)) else {
            return Ok(());
        };
        let source = format!("onejob:{}", job_type.name);
        let started = now_ms();
        loop {
            let now = now_ms();
            let mut acted = false;
            let mut wake: Option<u64> = None;
            for mut effect in store.load_effects()? {
                let Some(spec) = job_type.effects.iter().find(|s| s.name == effect.name) else { continue };
                let read = effect.version;
                if effect.expire(now) {
                    store.update_effect(read, &effect)?;
                    continue;
                }
                match effect.step(now) {
                    Step::Perform => {
                        let Some(attempt) = effect.claim(now) else { continue };
                        // The claim is written before the effect is attempted.
                        store.update_effect(read, &effect)?;
                        let claimed = effect.version;
                        let performed = effects::perform(&self.env, spec, &effect, &source).await;
                        config.faults.after_effect(&effect.name).await;
                        let before = effect.state;
                        match performed {
                            Performed::Outcome(outcome) => {
                                effect.finish(attempt, outcome, spec.retry, now_ms(), &mut MathRandom)
                            }
                            Performed::AlreadyThere(found) => {
                                effect.reconcile(found, spec.retry, now_ms(), &mut MathRandom)
                            }
                        }
                        store.update_effect(claimed, &effect)?;
                        self.dead_letter_effect(config, &submission, &effect, before).await;
                        acted = true;
                    }
                    // Claimed but never recorded: the runtime that claimed it
                    // is gone (this object's one runner records before it
                    // moves on). Ask the destination first.
                    Step::Reconcile => {
                        let found = effects::ask(&self.env, spec, &effect, &source).await;
                        let before = effect.state;
                        effect.reconcile(found, spec.retry, now_ms(), &mut MathRandom);
                        store.update_effect(read, &effect)?;
                        self.dead_letter_effect(config, &submission, &effect, before).await;
                        acted = effect.version != read && effect.step(now_ms()) == Step::Perform;
                    }
                    Step::WaitUntil(at) => wake = Some(wake.map_or(at, |w| w.min(at))),
                    Step::Nothing => {}
                }
            }
            match AfterPass::of(acted, wake, started, now_ms()) {
                AfterPass::Again => {}
                AfterPass::Sleep(ms) => Delay::from(Duration::from_millis(ms)).await,
                // Over budget or nothing due soon: the alarm goes on.
                AfterPass::Stop => return Ok(()),
            }
        }
    }

    /// An effect that just came to need an operator becomes a dead letter
    /// (and an alert, at once): the answer was delivered, this part was not.
    async fn dead_letter_effect(&self, config: &Config, submission: &Submission, effect: &Effect, before: EffectState) {
        if before.needs_operator() || !effect.state.needs_operator() {
            return;
        }
        let facts = DeadFacts {
            dead: true,
            error_class: onejob_core::admin_query::EFFECT_CLASS.into(),
            last_status: effect.attempts.last().and_then(|a| a.status),
            detail: onejob_core::ledger::dead_letter::detail_of_effect(effect),
            attempts: effect.attempts.len() as u32,
        };
        let message = JobMessage {
            tenant: submission.tenant.clone(),
            user: submission.user.clone(),
            key: submission.key.to_string(),
        };
        let recorded = async {
            ops::record_dead_letter(&self.env, &message, &facts).await?;
            ops::alert_if_due(&self.env, config, "effect").await
        };
        if let Err(error) = recorded.await {
            worker::console_error!("ledger: recording an effect's dead letter failed: {error}");
        }
    }

    /// The answer of a run job: `{type, key, state, output, effects}` for
    /// an answer, the problem for anything else.
    pub(super) fn run_answer(
        &self,
        config: &Config,
        submission: &Submission,
        result: JobResult,
        replayed: bool,
    ) -> Result<Response> {
        // A streamed answer is answered as a stream (its effects follow it;
        // `GET /onejob/v1/jobs/{key}` shows them).
        let streamed = result.content_type.starts_with("text/event-stream");
        let Some(run) = submission.run.as_ref().filter(|_| (200..300).contains(&result.status) && !streamed) else {
            return result.into_response(submission.key.as_str(), replayed);
        };
        let job_type = config.job_types.get(&run.job_type);
        let output = job_type.and_then(|t| t.output_of(&result.body).ok()).unwrap_or(Value::Null);
        let effects = self.store().load_effects()?;
        // A duplicate may get here before the effects are planned: running.
        let state = effect::effects_state(&effects, job_type.map_or(0, |t| t.effects.len()));
        let body = json!({
            "type": run.job_type,
            "key": submission.key,
            "state": state,
            "output": output,
            "effects": effects,
        });
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

    /// When the effects next need a look: the earliest due one, but no
    /// sooner than the watch while they run here (their runner is busy).
    pub(super) fn effects_due(&self, config: &Config) -> Option<u64> {
        let effects = self.store().load_effects().ok()?;
        if effects.is_empty() {
            return None;
        }
        let job_type = self.stored_job_type(config);
        let defined = |name: &str| job_type.is_some_and(|t| t.effects.iter().any(|s| s.name == name));
        follow_up::next_look_ms(&effects, defined, self.memory.borrow().effects_running(), now_ms())
    }

    /// Fills a view's effects in (a run job's).
    pub(super) fn with_effects(&self, view: &mut JobView) -> Result<()> {
        let effects = self.store().load_effects()?;
        if !effects.is_empty() {
            view.effects_state = Some(effect::effects_state(&effects, effects.len()));
            view.effects = effects;
        }
        Ok(())
    }

    /// `POST /onejob/v1/jobs/{key}/approve`: every effect waiting for an
    /// approval may run, once; then they run.
    pub(super) async fn approve(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let store = self.store();
        let Some(job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let mut effects = store.load_effects()?;
        let read: Vec<u64> = effects.iter().map(|e| e.version).collect();
        let approval = effect::approve_all(&mut effects, &request.by, now_ms());
        for (effect, read) in effects.iter().zip(read) {
            if effect.version != read {
                store.update_effect(read, effect)?;
            }
        }
        let approved = match approval {
            Ok(approved) => approved,
            Err(error) => return http::problem_of(error.problem_type(), error.to_string()),
        };
        if approved {
            worker::console_log!("ledger: {} approved the effects of job {}", request.by, request.key);
        }
        self.run_effects(config).await?;
        self.answer_as_run(config, &job)
    }

    /// An operator resends an effect (dead or unknown), or marks one done.
    pub(super) async fn effect_action(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let store = self.store();
        let Some(job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "no job with that key");
        };
        let name = request.effect.as_deref().unwrap_or_default();
        let Some(mut effect) = store.load_effects()?.into_iter().find(|e| e.name == name) else {
            return http::problem_of(ProblemType::NotFound, "this job has no effect of that name");
        };
        let retry = self.retry_of(config, &effect);
        let read = effect.version;
        let done = match request.action.as_deref() {
            Some("resend") => effect.resend(&request.by, retry, now_ms()),
            Some("mark_done") => effect.mark_done(&request.by, now_ms()),
            _ => return http::problem_of(ProblemType::InvalidQuery, "action must be resend or mark_done"),
        };
        match done {
            Ok(changed) => {
                if changed {
                    store.update_effect(read, &effect)?;
                    self.run_effects(config).await?;
                }
                self.answer_as_run(config, &job)
            }
            Err(error) => http::problem_of(error.problem_type(), error.to_string()),
        }
    }

    /// Replaying a run job whose answer is in resends only its effects that
    /// failed for good (dead). `None`: there is none.
    pub(super) async fn replay_effects(&self, config: &Config, request: &OperatorRequest) -> Result<Option<Response>> {
        let store = self.store();
        let effects = store.load_effects()?;
        // Only dead effects: an unknown one may have arrived, so only an
        // operator who checked resends it (one effect at a time).
        if !effects.iter().any(|e| e.state == EffectState::Dead) {
            return Ok(None);
        }
        let now = now_ms();
        let mut resent = Vec::new();
        for mut effect in effects {
            let retry = self.retry_of(config, &effect);
            let read = effect.version;
            if effect.state == EffectState::Dead && effect.resend(&request.by, retry, now) == Ok(true) {
                store.update_effect(read, &effect)?;
                resent.push(effect.name.clone());
            }
        }
        self.run_effects(config).await?;
        Ok(Some(Response::from_json(&json!({ "replayed": true, "effects": resent }))?))
    }

    fn retry_of(&self, config: &Config, effect: &Effect) -> effect::EffectRetry {
        let spec = self.stored_job_type(config).and_then(|t| t.effects.iter().find(|s| s.name == effect.name));
        spec.map_or(effect::EffectRetry::WEBHOOK, |s| s.retry)
    }

    /// The run's answer from storage (for approvals and operator actions).
    fn answer_as_run(&self, config: &Config, job: &Job) -> Result<Response> {
        let store = self.store();
        let job = store.load_job()?.unwrap_or_else(|| job.clone());
        let Some(submission) = self.stored_submission()? else {
            return http::problem_of(ProblemType::JobNotFound, "no job type's job here");
        };
        let result = stored::finished_result(&store, &job)?;
        self.run_answer(config, &submission, result, false)
    }
}

/// How a job type's model part ended, from a result the driver returned
/// (never a stream: those end in their pump).
pub(super) fn ended_of(result: &JobResult) -> Ended {
    Ended { state: result.state, status: result.status, attempt: result.attempt.unwrap_or(1), streamed: false }
}

/// The hold of `submission`'s job on `subject` of `job_type`.
fn claim_of<'a>(submission: &'a Submission, job_type: &'a str, subject: &'a str) -> ops::SubjectClaim<'a> {
    ops::SubjectClaim {
        tenant: &submission.tenant,
        user: submission.user.as_deref(),
        job_type,
        subject,
        key: submission.key.as_str(),
    }
}

/// The job ended with an answer (a 2xx), the effects' input.
fn answered(job: &Job) -> bool {
    Ended::of_job(job).is_some_and(|ended| ended.answered())
}

/// Asks the Ledger of `submission`'s job to follow its answer up (after its
/// stream ended; see `Ledger::follow_up`).
pub async fn effects_after_stream(env: &worker::Env, submission: &Submission) {
    let asked = crate::api::client::ledger(env, &submission.storage_id(), &LedgerCall::FollowUp).await;
    if let Err(error) = asked {
        worker::console_warn!("ledger: running a streamed job's effects failed (the alarm will): {error}");
    }
}
