//! The operator API, under `/onejob/v1/admin/`, for admin keys
//! (`ADMIN_KEYS`; an admin scoped to one tenant reaches only its jobs):
//!
//! - `GET  dead-letters[?tenant=&error_class=]`: dead letters grouped by cause;
//! - `POST dead-letters/replay` (keyed): fresh attempts for one dead job or
//!   every dead job of a cause, under the same jobs and keys;
//! - `POST jobs/resolve` (keyed): settle an unknown job;
//! - `POST jobs/{tenant}/{key}/enqueue`: send a background job's message again;
//! - `GET  savings[?since_ms=&tenant=]`: answers given without an upstream
//!   call and what they saved, next to what was spent, per tenant, model and hour.
//!
//! Replays and resolves carry their own `Idempotency-Key`: the same request
//! twice is answered twice and done once (the index keeps the answer; each
//! job also records the request, so even two at once change a job once).

use onejob_core::config::admin::Admin;
use onejob_core::operators::dead_letters::DeadLettersAnswer;
use onejob_core::operators::query::costs_answer;
use onejob_core::operators::route::{
    self, AdminAnswer, AdminRequest, AdminRoute, DEAD_LETTERS_LISTED, JobName, MAX_REPLAY, ReplayBody, ReplayReport,
    ReplaySelection, ResolveBody,
};
use worker::{Env, Request, Response, Result};

use crate::api::client;
use crate::api::handoff::{JobMessage, OperatorRequest};
use crate::api::ledger::LedgerCall;
use crate::env::clock::now_ms;
use crate::env::config::{self, Config};
use crate::http::body;
use crate::http::{self, Step, Stop};
use crate::ops;

/// Routes `rest` (the path after `/onejob/v1/admin/`): the core reads and
/// checks the route ([`AdminRoute::parse`]), this performs it and answers
/// what it gives ([`AdminAnswer`]) in one place.
pub async fn handle(req: Request, env: &Env, rest: &str) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    route(req, env, &config, rest).await.map_or_else(Stop::respond, |answer| respond(&answer))
}

async fn route(mut req: Request, env: &Env, config: &Config, rest: &str) -> Step<AdminAnswer> {
    let head = body::head(&req)?;
    let admin = head.credentials().admin(&config.admins)?.clone();
    let limit = config.settings.max_body_bytes;
    match AdminRoute::parse(&admin, &AdminRequest::of(&head, rest))? {
        AdminRoute::DeadLetters(query) => {
            let (tenant, class) = (query.tenant.as_deref(), query.error_class.as_deref());
            let letters = ops::dead_letters(env, tenant, class, DEAD_LETTERS_LISTED).await?;
            list(&DeadLettersAnswer::of(letters, now_ms()))
        }
        AdminRoute::Jobs(filter) => list(&ops::jobs(env, &filter).await?),
        AdminRoute::Costs(query) => {
            let grouped = ops::costs(env, query.since_ms, query.tenant.as_deref()).await?;
            list(&costs_answer(query.since_ms, grouped, route::prices_note(&config.prices)))
        }
        AdminRoute::Savings(query) => {
            let report = ops::savings(env, query.since_ms, query.tenant.as_deref()).await?;
            list(&report.answer(query.since_ms, &config.prices))
        }
        AdminRoute::JobView(job) => to_job(env, &admin, &job, |_| LedgerCall::AdminView).await,
        AdminRoute::Approve(job) => to_job(env, &admin, &job, LedgerCall::Approve).await,
        AdminRoute::Enqueue(job) => to_job(env, &admin, &job, LedgerCall::Enqueue).await,
        AdminRoute::Replay { request } => {
            let body: ReplayBody = body::read_json(&mut req, limit, ReplayBody::SHAPE).await?;
            body.check_names()?;
            once(env, &admin, &request, replay(env, &admin, &request, body)).await
        }
        AdminRoute::Resolve { request } => {
            let body: ResolveBody = body::read_json(&mut req, limit, ResolveBody::SHAPE).await?;
            body.check(&admin)?;
            let (job, call) = LedgerCall::resolve(&admin, &request, body);
            let resolve = async {
                let answer = forward(env, &job, &call).await?;
                // Settled: off the dead-letter list.
                if answer.settled() {
                    ops::mark_replayed(env, &job.tenant, job.user.as_deref(), &job.key).await?;
                }
                Ok::<_, Stop>(answer)
            };
            once(env, &admin, &request, resolve).await
        }
        AdminRoute::Effect { request, job, effect, action } => {
            let call = LedgerCall::effect(&admin, &job, &request, effect, action);
            once(env, &admin, &request, async { Ok(forward(env, &job, &call).await?) }).await
        }
    }
}

/// A list's answer: `body` as JSON.
fn list(body: &impl serde::Serialize) -> Step<AdminAnswer> {
    Ok(AdminAnswer::json(body)?)
}

/// An admin's request to one job's Ledger that carries no operator key
/// (a look, a kick), answered as the Ledger answers it.
async fn to_job(env: &Env, admin: &Admin, job: &JobName, call: fn(OperatorRequest) -> LedgerCall) -> Step<AdminAnswer> {
    Ok(forward(env, job, &call(OperatorRequest::of(admin, job, ""))).await?)
}

/// Answers a keyed operator request once: a repeat gets the first answer.
/// A refusal met while performing it is its answer, kept as any other
/// ([`AdminAnswer::refused`]).
async fn once(
    env: &Env,
    admin: &Admin,
    request_key: &str,
    work: impl std::future::Future<Output = Step<AdminAnswer>>,
) -> Step<AdminAnswer> {
    let id = route::request_id(admin, request_key);
    if let Some(stored) = ops::done_request(env, &id).await? {
        return Ok(AdminAnswer::kept(&stored));
    }
    let answer = match work.await {
        Err(Stop::Refused(refusal)) => AdminAnswer::refused(&refusal),
        answer => answer?,
    };
    if answer.keeps() {
        ops::remember_request(env, &id, &answer.kept_form()).await?;
    }
    Ok(answer)
}

/// An operator answer: its status, body and the headers the core gives it
/// ([`AdminAnswer::headers`]), with CORS.
fn respond(answer: &AdminAnswer) -> Result<Response> {
    let mut response = Response::from_bytes(answer.body.as_bytes().to_vec())?.with_status(answer.status);
    for (name, value) in answer.headers() {
        response.headers_mut().set(name, value)?;
    }
    http::with_cors(response)
}

/// One operator request to a job's Ledger: its answer.
async fn forward(env: &Env, job: &JobName, call: &LedgerCall) -> Result<AdminAnswer> {
    let message = JobMessage { tenant: job.tenant.clone(), user: job.user.clone(), key: job.key.clone(), sent_ms: 0 };
    let mut response = client::to_ledger(env, &message, call).await?;
    Ok(AdminAnswer::new(response.status_code(), response.text().await?))
}

/// Replays one dead job, or every dead job of a cause (at most [`MAX_REPLAY`]).
async fn replay(env: &Env, admin: &Admin, request_key: &str, body: ReplayBody) -> Step<AdminAnswer> {
    let targets: Vec<JobName> = match body.selection(admin)? {
        ReplaySelection::One(job) => vec![job],
        ReplaySelection::Cause { tenant, error_class } => {
            let letters = ops::dead_letters(env, tenant.as_deref(), Some(&error_class), MAX_REPLAY).await?;
            letters.into_iter().map(JobName::from).collect()
        }
    };
    let mut report = ReplayReport::default();
    for job in &targets {
        if !report.in_scope(admin, job) {
            continue;
        }
        let answer = forward(env, job, &LedgerCall::Replay(OperatorRequest::of(admin, job, request_key))).await?;
        if report.record(job, answer.status, &answer.body) {
            ops::mark_replayed(env, &job.tenant, job.user.as_deref(), &job.key).await?;
        }
    }
    Ok(AdminAnswer::new(200, report.to_json()))
}
