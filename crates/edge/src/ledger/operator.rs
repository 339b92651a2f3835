//! What operators do to a job (send its message again, replay, resolve;
//! and, with `run`, approve and act on its effects) and what they read of
//! it (its dead-letter facts, its admin view). What each request performs
//! and answers is the core's [`operator_plan`]; [`Ledger::perform`] performs it.

use onejob_core::job::Job;
use onejob_core::job::view::JobView;
use onejob_core::job::view::{AdminJob, ResultSource, StoredResult};
use onejob_core::ledger::effects::run::Action;
use onejob_core::ledger::operator::plan::{self, Perform, Plan, Reply};
use onejob_core::ledger::operator::settle;
use onejob_core::wire::ProblemType;
use worker::{Response, Result};

use crate::answer::StoredResponse;
use crate::api::handoff::{DeadFacts, OperatorRequest};
use crate::api::ledger::ReplayReply;
use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::http;

use super::Ledger;

impl Ledger {
    /// An operator sends the job's message again ([`plan::kick`]).
    pub(super) async fn kick(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let Some(job) = self.store().load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let plan = plan::kick(&job, &request.by, &request.key);
        self.perform(config, &job, plan, &request.key).await
    }

    /// An operator replays a job ([`plan::replay`]): a job type's
    /// dead effects when its answer is in; else a dead background job gets a
    /// fresh allowance of attempts (its subject claimed again first), or an
    /// undelivered one its messages.
    pub(super) async fn replay(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let store = self.store();
        let Some(mut job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let decided = self.decide_effects(config, &Action::ReplayDead, &request.by)?;
        let step = settle::replay_step(&job, &store.load_outbox()?);
        let subject_taken = self.subject_for_replay(config, plan::replay_claims_subject(&decided, step)).await;
        let by = (request.by.as_str(), request.request.as_str());
        let plan = plan::replay(&mut job, decided, step, subject_taken, by, now_ms());
        self.perform(config, &job, plan, &request.key).await
    }

    /// An operator settles an unknown job: succeeded with a given response,
    /// or one new attempt now ([`plan::resolve`]).
    pub(super) async fn resolve(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let Some(mut job) = self.store().load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let asked = (request.action.as_deref(), request.status, request.body.clone());
        let by = (request.by.as_str(), request.request.as_str());
        let plan = plan::resolve(&mut job, asked, by, now_ms());
        self.perform(config, &job, plan, &request.key).await
    }

    /// Performs an operator's [`Plan`] on `job` (as the plan left it; the job
    /// under `key`): its steps in order, a failed one ending the request;
    /// then its log line and its reply.
    pub(super) async fn perform(&self, config: &Config, job: &Job, plan: Plan, key: &str) -> Result<Response> {
        for step in plan.perform {
            self.perform_step(config, job, step).await?;
        }
        if let Some(line) = plan.log {
            worker::console_log!("ledger: {line}");
        }
        match plan.reply {
            Reply::Problem(problem) => http::problem(&problem),
            Reply::Enqueued => {
                let enqueued = self.store().load_outbox()?.sends();
                http::with_cors(Response::from_json(&serde_json::json!({ "enqueued": enqueued }))?.with_status(202))
            }
            Reply::Replay { replayed, reason, effects } => {
                Response::from_json(&ReplayReply { replayed, reason: reason.map(str::to_owned), effects })
            }
            Reply::View => http::with_cors(Response::from_json(&JobView::new(self.parse_key(key)?, job))?),
            Reply::RunAnswer => self.answer_as_run(config, job),
        }
    }

    /// One step of an operator's plan, on `job` as the plan left it.
    async fn perform_step(&self, config: &Config, job: &Job, step: Perform) -> Result<()> {
        let store = self.store();
        match step {
            Perform::SaveResponse { attempt, status, content_type, body } => {
                store.save_response(attempt, &StoredResponse { status, content_type: content_type.into(), body })
            }
            Perform::WriteJob { expected } => store.update_job(expected, job).map_err(Into::into),
            Perform::ClearDeadLetter => store.clear_dead_lettered(),
            Perform::Enqueue => self.enqueue(config, job, true).await,
            Perform::WriteEffect(write) => store.update_effect(write.expected, &write.effect).map_err(Into::into),
            Perform::RunEffects => self.run_effects(config).await,
            Perform::FollowUp => self.follow_up(config).await,
        }
    }

    /// What a dead letter records about this job.
    pub(super) fn facts(&self) -> Result<Response> {
        let store = self.store();
        let Some(job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "no job here");
        };
        let last_body = |attempt| store.load_response(attempt).ok().flatten().map(|response| response.body);
        let facts = DeadFacts::of_job(&job, &store.load_outbox()?, now_ms(), last_body);
        Response::from_json(&facts)
    }

    /// The job for an operator: its view, whose it is, and its stored result.
    pub(super) fn admin_view(&self) -> Result<Response> {
        let store = self.store();
        let (Some(mut job), Some(meta)) = (store.load_job()?, store.load_meta()?) else {
            return http::problem_of(ProblemType::JobNotFound, "no job with that key");
        };
        job.expire(now_ms());
        let result = match ResultSource::of(&job) {
            Some(ResultSource::Events { attempt }) => {
                let events = store.load_events(attempt, 0, u64::MAX)?;
                Some(StoredResult::of_events(events.iter().map(Vec::as_slice)))
            }
            Some(ResultSource::Response { attempt }) => store.load_response(attempt)?.map(|response| {
                StoredResult::preview(response.status, &response.content_type, [response.body.as_slice()])
            }),
            None => None,
        };
        let mut view = JobView::new(self.parse_key(&meta.key)?, &job);
        // The same count the tenant's view shows (the operator's console says
        // "background (N queue messages)" from it).
        self.with_outbox(&mut view, &job)?;
        self.with_effects(&mut view)?;
        let (tenant, user, model) = (meta.tenant.as_str(), meta.user.as_deref(), meta.model.as_deref());
        Response::from_json(&AdminJob { view, tenant, user, model, result })
    }
}
