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
use onejob_core::admin_query::{CostsQuery, DeadLettersQuery, JobsQuery, QueryError};
use onejob_core::front::percent_decode;
use onejob_core::key::IdempotencyKey;
use onejob_core::protocol::{ProblemType, header};
use serde::Deserialize;
use worker::{Env, Method, Request, Response, Result};

use crate::api::client;
use crate::api::handoff::{JobMessage, OperatorRequest};
use crate::api::ledger::{LedgerCall, ReplayReply};
use crate::env::config;
use crate::http::body;
use crate::http::{self, problem_of};
use crate::ops;
use crate::routes::auth::admin_of;

/// The most jobs one replay of a cause touches.
const MAX_REPLAY: u32 = 100;

/// The operator routes, by path: each takes one method.
enum Route<'a> {
    /// `GET dead-letters`.
    DeadLetters,
    /// `GET jobs`: the jobs index, filtered.
    Jobs,
    /// `GET costs`.
    Costs,
    /// `GET savings`.
    Savings,
    /// `POST dead-letters/replay` (keyed).
    Replay,
    /// `POST jobs/resolve` (keyed).
    Resolve,
    /// `GET jobs/{tenant}/{key}`.
    JobView(&'a str),
    /// `POST jobs/{tenant}/{key}/approve`.
    Approve(&'a str),
    /// `POST jobs/{tenant}/{key}/enqueue`.
    Enqueue(&'a str),
    /// `POST jobs/{tenant}/{key}/effects/{name}/{resend | mark_done}` (keyed).
    Effect { job: &'a str, effect: &'a str, action: &'a str },
}

impl Route<'_> {
    fn of(rest: &str) -> Option<Route<'_>> {
        Some(match rest {
            "dead-letters" => Route::DeadLetters,
            "jobs" => Route::Jobs,
            "costs" => Route::Costs,
            "savings" => Route::Savings,
            "dead-letters/replay" => Route::Replay,
            "jobs/resolve" => Route::Resolve,
            _ => {
                let inner = rest.strip_prefix("jobs/")?;
                if let Some(job) = inner.strip_suffix("/approve") {
                    Route::Approve(job)
                } else if let Some(job) = inner.strip_suffix("/enqueue") {
                    Route::Enqueue(job)
                } else if let Some((job, effect, action)) = effect_route(inner) {
                    Route::Effect { job, effect, action }
                } else if inner.matches('/').count() == 1 {
                    Route::JobView(inner)
                } else {
                    return None;
                }
            }
        })
    }

    fn method(&self) -> Method {
        match self {
            Route::DeadLetters | Route::Jobs | Route::Costs | Route::Savings | Route::JobView(_) => Method::Get,
            _ => Method::Post,
        }
    }
}

/// Routes `rest` (the path after `/onejob/v1/admin/`).
pub async fn handle(mut req: Request, env: &Env, rest: &str) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    let admin = match admin_of(&req, &config.admins) {
        Ok(admin) => admin.clone(),
        Err(detail) => return problem_of(ProblemType::Unauthorized, detail),
    };
    let Some(route) = Route::of(rest) else { return problem_of(ProblemType::NotFound, "no such admin route") };
    if req.method() != route.method() {
        return http::method_not_allowed(&req.method(), &route.method());
    }
    let url = req.url()?;
    let pairs: Vec<(String, String)> = url.query_pairs().map(|(n, v)| (n.into_owned(), v.into_owned())).collect();
    let limit = config.settings.max_body_bytes;
    match route {
        Route::DeadLetters => {
            let query = match DeadLettersQuery::parse(&pairs) {
                Ok(query) => query,
                Err(error) => return invalid_query(&error),
            };
            let tenant = match scoped_tenant(&admin, query.tenant) {
                Ok(tenant) => tenant,
                Err(response) => return response,
            };
            let letters = ops::dead_letters(env, tenant.as_deref(), query.error_class.as_deref(), 500).await?;
            let body = serde_json::json!({ "groups": ops::groups(&letters), "entries": letters });
            http::with_cors(Response::from_json(&body)?)
        }
        Route::Jobs => {
            let mut filter = match JobsQuery::parse(&pairs) {
                Ok(query) => query,
                Err(error) => return invalid_query(&error),
            };
            filter.tenant = match scoped_tenant(&admin, filter.tenant.take()) {
                Ok(tenant) => tenant,
                Err(response) => return response,
            };
            let (jobs, next) = ops::jobs(env, &filter).await?;
            let jobs: Vec<serde_json::Value> = jobs
                .into_iter()
                .map(|job| {
                    serde_json::json!({
                        "tenant": job.tenant, "user": (!job.user.is_empty()).then_some(job.user), "key": job.key,
                        "state": job.state, "model": job.model, "provider": job.provider, "error_class": job.error_class,
                        "attempts": job.attempts, "tokens": job.tokens, "cost_usd": job.cost_usd,
                        "background": job.background == 1, "created_ms": job.created_ms, "updated_ms": job.updated_ms,
                    })
                })
                .collect();
            http::with_cors(Response::from_json(&serde_json::json!({ "jobs": jobs, "next_cursor": next }))?)
        }
        Route::Costs => {
            let query = match CostsQuery::parse(&pairs) {
                Ok(query) => query,
                Err(error) => return invalid_query(&error),
            };
            let tenant = match scoped_tenant(&admin, query.tenant) {
                Ok(tenant) => tenant,
                Err(response) => return response,
            };
            let mut costs = ops::costs(env, query.since_ms, tenant.as_deref()).await?;
            // What the spend is counted with, for the console: the bundled
            // table's date and the models PRICES prices instead.
            costs["prices"] = serde_json::json!({
                "bundled_as_of": onejob_core::pricing::BUNDLED_AS_OF,
                "overridden": config.prices.overridden(),
            });
            http::with_cors(Response::from_json(&costs)?)
        }
        Route::Savings => {
            // The same filters as the costs: since when, which tenant.
            let query = match CostsQuery::parse(&pairs) {
                Ok(query) => query,
                Err(error) => return invalid_query(&error),
            };
            let tenant = match scoped_tenant(&admin, query.tenant) {
                Ok(tenant) => tenant,
                Err(response) => return response,
            };
            let report = ops::savings(env, query.since_ms, tenant.as_deref()).await?;
            let mut body = serde_json::to_value(&report)?;
            // Counted from the start of since_ms's hour: say so.
            body["since_ms"] = serde_json::Value::from(onejob_core::savings::bucket_of(query.since_ms));
            body["prices"] = serde_json::json!({
                "bundled_as_of": onejob_core::pricing::BUNDLED_AS_OF,
                "overridden": config.prices.overridden(),
            });
            http::with_cors(Response::from_json(&body)?)
        }
        Route::JobView(inner) => match job_of_path(&pairs, &admin, inner) {
            Ok(job) => to_job(env, &admin, &job, |_| LedgerCall::AdminView).await,
            Err(refused) => refused,
        },
        Route::Replay => {
            let Some(request_key) = operator_key(&req)? else { return missing_key() };
            let shape = "{\"tenant\", \"key\", \"user\"?} or {\"error_class\", \"tenant\"?}";
            let body: ReplayBody = match body::read_json(&mut req, limit, shape).await? {
                Ok(body) => body,
                Err(refused) => return Ok(refused),
            };
            if let Err(refused) = check_job_names(body.tenant.as_deref(), body.user.as_deref(), body.key.as_deref()) {
                return refused;
            }
            once(env, &admin, &request_key, replay(env, &admin, &request_key, body)).await
        }
        Route::Resolve => {
            let Some(request_key) = operator_key(&req)? else { return missing_key() };
            let shape = "{\"tenant\", \"key\", \"user\"?, \"action\": \"succeeded\" | \"retry\", \"response\"?}";
            let body: ResolveBody = match body::read_json(&mut req, limit, shape).await? {
                Ok(body) => body,
                Err(refused) => return Ok(refused),
            };
            if let Err(refused) = check_job_names(Some(&body.tenant), body.user.as_deref(), Some(&body.key)) {
                return refused;
            }
            if !admin.reaches(&body.tenant) {
                return problem_of(ProblemType::Forbidden, "this admin key does not reach that tenant");
            }
            let request = OperatorRequest {
                key: body.key.clone(),
                by: admin.name.clone(),
                request: request_key.clone(),
                action: Some(body.action),
                status: body.response.as_ref().and_then(|r| r.status),
                body: body.response.and_then(|r| r.body),
                effect: None,
            };
            let job = JobMessage { tenant: body.tenant, user: body.user, key: body.key };
            let resolve = async {
                let (status, answer) = forward(env, &job, &LedgerCall::Resolve(request)).await?;
                // Settled: off the dead-letter list.
                if (200..300).contains(&status) {
                    ops::mark_replayed(env, &job.tenant, job.user.as_deref(), &job.key).await?;
                }
                Ok((status, answer))
            };
            once(env, &admin, &request_key, resolve).await
        }
        Route::Approve(inner) => match job_of_path(&pairs, &admin, inner) {
            Ok(job) => to_job(env, &admin, &job, LedgerCall::Approve).await,
            Err(refused) => refused,
        },
        Route::Effect { job, effect, action } => {
            let Some(request_key) = operator_key(&req)? else { return missing_key() };
            let job = match job_of_path(&pairs, &admin, job) {
                Ok(job) => job,
                Err(refused) => return refused,
            };
            let request = OperatorRequest {
                key: job.key.clone(),
                by: admin.name.clone(),
                request: request_key.clone(),
                action: Some(action.to_owned()),
                status: None,
                body: None,
                effect: Some(percent_decode(effect)),
            };
            once(env, &admin, &request_key, forward(env, &job, &LedgerCall::Effect(request))).await
        }
        Route::Enqueue(inner) => match job_of_path(&pairs, &admin, inner) {
            Ok(job) => to_job(env, &admin, &job, LedgerCall::Enqueue).await,
            Err(refused) => refused,
        },
    }
}

fn invalid_query(error: &QueryError) -> Result<Response> {
    problem_of(ProblemType::InvalidQuery, error.to_string())
}

#[derive(Deserialize)]
struct ReplayBody {
    tenant: Option<String>,
    user: Option<String>,
    key: Option<String>,
    error_class: Option<String>,
}

#[derive(Deserialize)]
struct ResolveBody {
    tenant: String,
    user: Option<String>,
    key: String,
    action: String,
    response: Option<ResolvedResponse>,
}

#[derive(Deserialize)]
struct ResolvedResponse {
    status: Option<u16>,
    body: Option<serde_json::Value>,
}

/// The job `{tenant}/{key}` (percent-encoded; `?user=` for a user's) an
/// admin route names, if its names are well formed (`400` otherwise, as on
/// the tenant routes) and this admin reaches its tenant.
fn job_of_path(
    pairs: &[(String, String)],
    admin: &Admin,
    inner: &str,
) -> std::result::Result<JobMessage, Result<Response>> {
    let Some((tenant, key)) = inner.split_once('/').filter(|(_, key)| !key.contains('/')) else {
        return Err(problem_of(ProblemType::NotFound, "use /onejob/v1/admin/jobs/{tenant}/{key}"));
    };
    let (tenant, key) = (percent_decode(tenant), percent_decode(key));
    let users: Vec<&String> = pairs.iter().filter(|(n, _)| n == "user").map(|(_, v)| v).collect();
    if users.len() > 1 {
        return Err(problem_of(ProblemType::InvalidQuery, "query parameter user: given more than once"));
    }
    let user = users.first().map(|u| (*u).clone());
    check_job_names(Some(&tenant), user.as_deref(), Some(&key))?;
    if !admin.reaches(&tenant) {
        return Err(problem_of(ProblemType::Forbidden, "this admin key does not reach that tenant"));
    }
    Ok(JobMessage { tenant, user, key })
}

/// A job's tenant, user and key as an operator names them: the key as the
/// tenant routes take it (`400 invalid-idempotency-key`), the tenant and the
/// user as non-empty, bounded text (`400 invalid-query`).
fn check_job_names(
    tenant: Option<&str>,
    user: Option<&str>,
    key: Option<&str>,
) -> std::result::Result<(), Result<Response>> {
    for (name, value) in [("tenant", tenant), ("user", user)] {
        if let Some(value) = value
            && (value.is_empty() || value.len() > 256 || value.chars().any(char::is_control))
        {
            let detail = format!("{name} must be 1 to 256 bytes of text");
            return Err(problem_of(ProblemType::InvalidQuery, detail));
        }
    }
    if let Some(key) = key
        && let Err(error) = IdempotencyKey::parse(key)
    {
        return Err(problem_of(ProblemType::InvalidIdempotencyKey, error.to_string()));
    }
    Ok(())
}

/// `{tenant}/{key}/effects/{name}/{resend | mark_done}` (after `jobs/`): the job's
/// part, the effect's name and the action.
fn effect_route(inner: &str) -> Option<(&str, &str, &str)> {
    let (rest, action) = inner.rsplit_once('/')?;
    let (job, effect) = rest.rsplit_once("/effects/")?;
    matches!(action, "resend" | "mark_done").then_some((job, effect, action))
}

/// An admin's request to one job's Ledger that carries no operator key
/// (a look, a kick), answered as the Ledger answers it.
async fn to_job(
    env: &Env,
    admin: &Admin,
    job: &JobMessage,
    call: fn(OperatorRequest) -> LedgerCall,
) -> Result<Response> {
    let request = OperatorRequest {
        key: job.key.clone(),
        by: admin.name.clone(),
        request: String::new(),
        action: None,
        status: None,
        body: None,
        effect: None,
    };
    let (status, body) = forward(env, job, &call(request)).await?;
    json_response(status, &body)
}

/// The tenant an admin asks about: its own when scoped (403 for another).
fn scoped_tenant(admin: &Admin, asked: Option<String>) -> std::result::Result<Option<String>, Result<Response>> {
    match (&admin.scope, asked) {
        (onejob_core::admin::Scope::All, asked) => Ok(asked),
        (onejob_core::admin::Scope::Tenant(own), None) => Ok(Some(own.clone())),
        (onejob_core::admin::Scope::Tenant(own), Some(asked)) if *own == asked => Ok(Some(asked)),
        _ => Err(problem_of(ProblemType::Forbidden, "this admin key does not reach that tenant")),
    }
}

fn operator_key(req: &Request) -> Result<Option<String>> {
    Ok(req.headers().get(header::IDEMPOTENCY_KEY)?.filter(|k| IdempotencyKey::parse(k).is_ok()))
}

fn missing_key() -> Result<Response> {
    problem_of(
        ProblemType::MissingIdempotencyKey,
        "operator requests that change jobs need an Idempotency-Key (16–255 visible ASCII characters)",
    )
}

/// Answers a keyed operator request once: a repeat gets the first answer.
async fn once(
    env: &Env,
    admin: &Admin,
    request_key: &str,
    work: impl std::future::Future<Output = Result<(u16, String)>>,
) -> Result<Response> {
    // Scoped by who asked and what they reach: two admins of one name but
    // different scopes never share an answer.
    let scope = match &admin.scope {
        onejob_core::admin::Scope::All => "*".to_owned(),
        onejob_core::admin::Scope::Tenant(tenant) => format!("tenant:{tenant}"),
    };
    let id = format!("{}\u{1f}{scope}\u{1f}{request_key}", admin.name);
    if let Some(stored) = ops::done_request(env, &id).await? {
        let (status, body) = serde_json::from_str::<(u16, String)>(&stored).unwrap_or((200, stored));
        let mut response = json_response(status, &body)?;
        response.headers_mut().set(header::IDEMPOTENT_REPLAYED, "true")?;
        return Ok(response);
    }
    let (status, body) = work.await?;
    // Only a settled answer is kept (a 5xx may be asked again).
    if status < 500 {
        ops::remember_request(env, &id, &serde_json::to_string(&(status, &body))?).await?;
    }
    json_response(status, &body)
}

fn json_response(status: u16, body: &str) -> Result<Response> {
    let content_type = if status >= 400 { "application/problem+json" } else { "application/json" };
    let mut response = Response::from_bytes(body.as_bytes().to_vec())?.with_status(status);
    response.headers_mut().set("Content-Type", content_type)?;
    http::with_cors(response)
}

/// One operator request to a job's Ledger: its status and body.
async fn forward(env: &Env, job: &JobMessage, call: &LedgerCall) -> Result<(u16, String)> {
    let mut response = client::to_ledger(env, job, call).await?;
    Ok((response.status_code(), response.text().await?))
}

/// Replays one dead job, or every dead job of a cause (at most [`MAX_REPLAY`]).
async fn replay(env: &Env, admin: &Admin, request_key: &str, body: ReplayBody) -> Result<(u16, String)> {
    let targets: Vec<(String, Option<String>, String)> = match (body.key, body.error_class) {
        (Some(key), None) => {
            let Some(tenant) = body.tenant else {
                return problem_body(ProblemType::InvalidJson, "a key needs its tenant");
            };
            if !admin.reaches(&tenant) {
                return problem_body(ProblemType::Forbidden, "this admin key does not reach that tenant");
            }
            vec![(tenant, body.user, key)]
        }
        (None, Some(class)) => {
            let tenant = match scoped_tenant(admin, body.tenant) {
                Ok(tenant) => tenant,
                Err(_) => return problem_body(ProblemType::Forbidden, "this admin key does not reach that tenant"),
            };
            let letters = ops::dead_letters(env, tenant.as_deref(), Some(&class), MAX_REPLAY).await?;
            letters.into_iter().map(|l| (l.tenant, (!l.user.is_empty()).then_some(l.user), l.key)).collect()
        }
        _ => return problem_body(ProblemType::InvalidJson, "send either a tenant and key, or an error_class"),
    };
    let mut replayed = Vec::new();
    let mut skipped = Vec::new();
    for (tenant, user, key) in targets {
        let entry = serde_json::json!({ "tenant": tenant, "user": user, "key": key });
        if !admin.reaches(&tenant) {
            skipped.push(serde_json::json!({ "tenant": tenant, "key": key, "reason": "out of this admin's scope" }));
            continue;
        }
        let request = OperatorRequest {
            key: key.clone(),
            by: admin.name.clone(),
            request: request_key.to_owned(),
            action: None,
            status: None,
            body: None,
            effect: None,
        };
        let job = JobMessage { tenant: tenant.clone(), user: user.clone(), key: key.clone() };
        let (status, answer) = forward(env, &job, &LedgerCall::Replay(request)).await?;
        // A 200 is a [`ReplayReply`]; anything else is a problem, whose detail says why.
        let skipped_because = match (status, serde_json::from_str::<ReplayReply>(&answer)) {
            (200, Ok(ReplayReply { replayed: true, .. })) => None,
            (200, Ok(ReplayReply { reason, .. })) => Some(reason),
            _ => Some(
                serde_json::from_str::<serde_json::Value>(&answer)
                    .ok()
                    .and_then(|problem| problem.get("detail")?.as_str().map(str::to_owned)),
            ),
        };
        match skipped_because {
            None => {
                ops::mark_replayed(env, &tenant, user.as_deref(), &key).await?;
                replayed.push(entry);
            }
            Some(reason) => skipped.push(serde_json::json!({ "tenant": tenant, "key": key, "reason": reason })),
        }
    }
    Ok((200, serde_json::json!({ "replayed": replayed, "skipped": skipped }).to_string()))
}

fn problem_body(kind: ProblemType, detail: &str) -> Result<(u16, String)> {
    let problem = onejob_core::protocol::Problem::new(kind, detail);
    Ok((problem.status(), problem.to_json()))
}
