//! What operators do to a job (send its message again, replay, resolve)
//! and what they read of it (its dead-letter facts, its admin view).

use onejob_core::ledger::operator::{self, ReplayStep, Resolution, Resolved};
use onejob_core::protocol::{JobView, ProblemType};
use onejob_core::sse;
use onejob_core::view::{AdminJob, StoredResult};
use worker::{Response, Result};

use crate::answer::StoredResponse;
use crate::api::handoff::{DeadFacts, OperatorRequest};
use crate::api::ledger::ReplayReply;
use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::http;

use super::Ledger;

impl Ledger {
    /// An operator sends the job's message again.
    pub(super) async fn kick(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let Some(job) = self.store().load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        if !job.is_background() {
            return http::problem_of(ProblemType::NotBackground, "only a background job has a queue message");
        }
        worker::console_log!("ledger: {} sent job {} to the queue again", request.by, request.key);
        self.enqueue(config, &job, true).await?;
        let enqueued = self.store().load_outbox()?.sends();
        http::with_cors(Response::from_json(&serde_json::json!({ "enqueued": enqueued }))?.with_status(202))
    }

    /// An operator gives a dead background job a fresh allowance of attempts.
    pub(super) async fn replay(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        // A job type's answer is in but some effect did not happen: only
        // those effects go again.
        if let Some(answer) = self.replay_effects(config, request).await? {
            return Ok(answer);
        }
        let store = self.store();
        let Some(mut job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        match operator::replay_step(&job, &store.load_outbox()?) {
            ReplayStep::Refused(refused) => return http::problem(&refused.problem()),
            ReplayStep::Resend => {
                store.clear_dead_lettered()?;
                self.enqueue(config, &job, true).await?;
                return Response::from_json(&ReplayReply::replayed());
            }
            ReplayStep::Replay { claim_subject: true } => {
                if let Some(problem) = self.subject_for_replay(config).await {
                    return http::problem_of(ProblemType::NotReplayable, problem.detail);
                }
            }
            ReplayStep::Replay { claim_subject: false } => {}
        }
        let read = job.version();
        let grant = job.policy().max_attempts();
        match job.replay_dead(read, grant, &request.by, &request.request, now_ms()) {
            Ok(true) => {
                store.update_job(read, &job)?;
                store.clear_dead_lettered()?;
                self.enqueue(config, &job, true).await?;
                Response::from_json(&ReplayReply::replayed())
            }
            Ok(false) => Response::from_json(&ReplayReply::not_replayed("already replayed by this request")),
            Err(error) => http::problem_of(ProblemType::NotReplayable, error.to_string()),
        }
    }

    /// An operator settles an unknown job: succeeded with a given response,
    /// or one new attempt now (the core decides, [`operator::resolve`]).
    pub(super) async fn resolve(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let store = self.store();
        let Some(mut job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let resolution = match Resolution::read(request.action.as_deref(), request.status, request.body.clone()) {
            Ok(resolution) => resolution,
            Err(refused) => return http::problem(&refused.problem()),
        };
        let read = job.version();
        match operator::resolve(&mut job, resolution, &request.by, &request.request, now_ms()) {
            Ok(Resolved::Changed { response, requeue }) => {
                if let Some((attempt, status, body)) = response {
                    let body = serde_json::to_vec(&body)?;
                    store.save_response(
                        attempt,
                        &StoredResponse { status, content_type: "application/json".into(), body },
                    )?;
                }
                store.update_job(read, &job)?;
                store.clear_dead_lettered()?;
                if requeue {
                    self.enqueue(config, &job, true).await?;
                }
                self.follow_up(config).await?;
            }
            Ok(Resolved::AlreadyApplied) => {}
            Err(error) => return http::problem_of(ProblemType::NotResolvable, error.to_string()),
        }
        http::with_cors(Response::from_json(&JobView::new(self.parse_key(&request.key)?, &job))?)
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
        let result = match job.replayed_attempt() {
            Some(attempt) if attempt.streamed => {
                let events = store.load_events(attempt.number, 0, u64::MAX)?;
                Some(StoredResult::preview(200, sse::MEDIA_TYPE, events.iter().map(Vec::as_slice)))
            }
            Some(attempt) => store.load_response(attempt.number)?.map(|response| {
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
