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

use onejob_core::admin::Admin;
use onejob_core::admin_query::costs_answer;
use onejob_core::admin_route::{
    self, AdminRequest, AdminRoute, DEAD_LETTERS_LISTED, JobName, MAX_REPLAY, ReplayBody, ReplayReport,
    ReplaySelection, ResolveBody,
};
use onejob_core::dead_letters::DeadLettersAnswer;
use onejob_core::protocol::header;
use worker::{Env, Request, Response, Result};

use crate::api::client;
use crate::api::handoff::{JobMessage, OperatorRequest};
use crate::api::ledger::LedgerCall;
use crate::env::clock::now_ms;
use crate::env::config::{self, Config};
use crate::http::body;
use crate::http::{self, Step, Stop};
use crate::ops;
use crate::routes::auth::Presented;

/// Routes `rest` (the path after `/onejob/v1/admin/`): the core reads and
/// checks the route ([`AdminRoute::parse`]), this performs it.
pub async fn handle(req: Request, env: &Env, rest: &str) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    route(req, env, &config, rest).await.or_else(Stop::respond)
}

async fn route(mut req: Request, env: &Env, config: &Config, rest: &str) -> Step<Response> {
    let admin = Presented::of(&req).credentials().admin(&config.admins)?.clone();
    let url = req.url()?;
    let query: Vec<(String, String)> = url.query_pairs().map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    let operator_key = req.headers().get(header::IDEMPOTENCY_KEY)?;
    let method = req.method();
    let request = AdminRequest { method: method.as_ref(), rest, query: &query, operator_key: operator_key.as_deref() };
    let limit = config.settings.max_body_bytes;
    match AdminRoute::parse(&admin, &request)? {
        AdminRoute::DeadLetters(query) => {
            let (tenant, class) = (query.tenant.as_deref(), query.error_class.as_deref());
            let letters = ops::dead_letters(env, tenant, class, DEAD_LETTERS_LISTED).await?;
            list(&DeadLettersAnswer::of(letters, now_ms()))
        }
        AdminRoute::Jobs(filter) => {
            let (jobs, next) = ops::jobs(env, &filter).await?;
            list(&serde_json::json!({ "jobs": jobs, "next_cursor": next }))
        }
        AdminRoute::Costs(query) => {
            let grouped = ops::costs(env, query.since_ms, query.tenant.as_deref()).await?;
            list(&costs_answer(query.since_ms, grouped, admin_route::prices_note(&config.prices)))
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
                let (status, answer) = forward(env, &job, &call).await?;
                // Settled: off the dead-letter list.
                if admin_route::settled(status) {
                    ops::mark_replayed(env, &job.tenant, job.user.as_deref(), &job.key).await?;
                }
                Ok::<_, Stop>((status, answer))
            };
            once(env, &admin, &request, resolve).await
        }
        AdminRoute::Effect { request, job, effect, action } => {
            let call = LedgerCall::effect(&admin, &job, &request, effect, action);
            once(env, &admin, &request, async { Ok(forward(env, &job, &call).await?) }).await
        }
    }
}

/// A list's answer: `body` as JSON, with CORS.
fn list(body: &impl serde::Serialize) -> Step<Response> {
    Ok(http::with_cors(Response::from_json(body)?)?)
}

/// An admin's request to one job's Ledger that carries no operator key
/// (a look, a kick), answered as the Ledger answers it.
async fn to_job(env: &Env, admin: &Admin, job: &JobName, call: fn(OperatorRequest) -> LedgerCall) -> Step<Response> {
    let (status, body) = forward(env, job, &call(OperatorRequest::of(admin, job, ""))).await?;
    Ok(json_response(status, &body, false)?)
}

/// Answers a keyed operator request once: a repeat gets the first answer.
/// A refusal met while performing it is its answer, kept as any other
/// ([`admin_route::refused_answer`]).
async fn once(
    env: &Env,
    admin: &Admin,
    request_key: &str,
    work: impl std::future::Future<Output = Step<(u16, String)>>,
) -> Step<Response> {
    let id = admin_route::request_id(admin, request_key);
    if let Some(stored) = ops::done_request(env, &id).await? {
        let (status, body) = admin_route::kept_answer(&stored);
        return Ok(json_response(status, &body, true)?);
    }
    let (status, body) = match work.await {
        Err(Stop::Refused(refusal)) => admin_route::refused_answer(&refusal),
        answer => answer?,
    };
    if admin_route::keeps(status) {
        ops::remember_request(env, &id, &serde_json::to_string(&(status, &body))?).await?;
    }
    Ok(json_response(status, &body, false)?)
}

/// An operator answer: `status`, `body` and the headers the core gives it
/// ([`admin_route::answer_headers`]), with CORS.
fn json_response(status: u16, body: &str, replayed: bool) -> Result<Response> {
    let mut response = Response::from_bytes(body.as_bytes().to_vec())?.with_status(status);
    for (name, value) in admin_route::answer_headers(status, replayed) {
        response.headers_mut().set(name, value)?;
    }
    http::with_cors(response)
}

/// One operator request to a job's Ledger: its status and body.
async fn forward(env: &Env, job: &JobName, call: &LedgerCall) -> Result<(u16, String)> {
    let message = JobMessage { tenant: job.tenant.clone(), user: job.user.clone(), key: job.key.clone() };
    let mut response = client::to_ledger(env, &message, call).await?;
    Ok((response.status_code(), response.text().await?))
}

/// Replays one dead job, or every dead job of a cause (at most [`MAX_REPLAY`]).
async fn replay(env: &Env, admin: &Admin, request_key: &str, body: ReplayBody) -> Step<(u16, String)> {
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
        let (status, answer) =
            forward(env, job, &LedgerCall::Replay(OperatorRequest::of(admin, job, request_key))).await?;
        if report.record(job, status, &answer) {
            ops::mark_replayed(env, &job.tenant, job.user.as_deref(), &job.key).await?;
        }
    }
    Ok((200, report.to_json()))
}
