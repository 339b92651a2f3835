//! The operator API, under `/onejob/v1/admin/`, for admin keys
//! (`ADMIN_KEYS`; an admin scoped to one tenant reaches only its jobs):
//!
//! - `GET  dead-letters[?tenant=&error_class=]`: dead letters grouped by cause;
//! - `POST dead-letters/replay` (keyed): fresh attempts for one dead job or
//!   every dead job of a cause, under the same jobs and keys;
//! - `POST jobs/resolve` (keyed): settle an unknown job;
//! - `POST jobs/{tenant}/{key}/enqueue`: send a background job's message again.
//!
//! Replays and resolves carry their own `Idempotency-Key`: the same request
//! twice is answered twice and done once (the index keeps the answer; each
//! job also records the request, so even two at once change a job once).

use onejob_core::admin::Admin;
use onejob_core::key::IdempotencyKey;
use onejob_core::protocol::{ProblemType, header};
use serde::Deserialize;
use worker::{Env, Method, Request, Response, Result};

use crate::auth::admin_of;
use crate::config;
use crate::gateway::percent_decode;
use crate::handoff::{JobMessage, OperatorRequest, route};
use crate::http::{self, problem_of};
use crate::objects;
use crate::ops;

/// The most jobs one replay of a cause touches.
const MAX_REPLAY: u32 = 100;

/// Routes `rest` (the path after `/onejob/v1/admin/`).
pub async fn handle(mut req: Request, env: &Env, rest: &str) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    let admin = match admin_of(&req, &config.admins) {
        Ok(admin) => admin.clone(),
        Err(detail) => return problem_of(ProblemType::Unauthorized, detail),
    };
    match (req.method(), rest) {
        (Method::Get, "dead-letters") => {
            let url = req.url()?;
            let param = |name: &str| url.query_pairs().find(|(n, _)| n == name).map(|(_, v)| v.into_owned());
            let tenant = match scoped_tenant(&admin, param("tenant")) {
                Ok(tenant) => tenant,
                Err(response) => return response,
            };
            let letters = ops::dead_letters(env, tenant.as_deref(), param("error_class").as_deref(), 500).await?;
            let body = serde_json::json!({ "groups": ops::groups(&letters), "entries": letters });
            http::with_cors(Response::from_json(&body)?)
        }
        (Method::Get, "jobs") => {
            let url = req.url()?;
            let mut filter: ops::JobFilter = serde_urlencoded_filter(&url);
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
        (Method::Get, "costs") => {
            let url = req.url()?;
            let param = |name: &str| url.query_pairs().find(|(n, _)| n == name).map(|(_, v)| v.into_owned());
            let since_ms = param("since_ms").and_then(|v| v.parse().ok()).unwrap_or(0);
            let tenant = match scoped_tenant(&admin, param("tenant")) {
                Ok(tenant) => tenant,
                Err(response) => return response,
            };
            http::with_cors(Response::from_json(&ops::costs(env, since_ms, tenant.as_deref()).await?)?)
        }
        (Method::Get, path) if let Some(inner) = path.strip_prefix("jobs/") => match job_of_path(&req, &admin, inner) {
            Ok(job) => to_job(env, &admin, &job, route::ADMIN_VIEW).await,
            Err(refused) => refused,
        },
        (Method::Post, "dead-letters/replay") => {
            let Some(request_key) = operator_key(&req)? else { return missing_key() };
            let body: ReplayBody = match req.json().await {
                Ok(body) => body,
                Err(_) => {
                    return problem_of(
                        ProblemType::InvalidJson,
                        "send {\"tenant\", \"key\"} or {\"error_class\", \"tenant\"?}",
                    );
                }
            };
            once(env, &admin, &request_key, replay(env, &admin, &request_key, body)).await
        }
        (Method::Post, "jobs/resolve") => {
            let Some(request_key) = operator_key(&req)? else { return missing_key() };
            let body: ResolveBody = match req.json().await {
                Ok(body) => body,
                Err(_) => {
                    return problem_of(
                        ProblemType::InvalidJson,
                        "send {\"tenant\", \"key\", \"action\": \"succeeded\" | \"retry\", \"response\"?}",
                    );
                }
            };
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
                let (status, answer) = forward(env, &job, route::RESOLVE, &request).await?;
                // Settled: off the dead-letter list.
                if (200..300).contains(&status) {
                    ops::mark_replayed(env, &job.tenant, job.user.as_deref(), &job.key).await?;
                }
                Ok((status, answer))
            };
            once(env, &admin, &request_key, resolve).await
        }
        // A job type's effects: `…/jobs/{tenant}/{key}/approve`, and
        // `…/jobs/{tenant}/{key}/effects/{name}/resend` (or `/mark_done`).
        (Method::Post, path)
            if let Some(inner) = path.strip_prefix("jobs/").and_then(|p| p.strip_suffix("/approve")) =>
        {
            match job_of_path(&req, &admin, inner) {
                Ok(job) => to_job(env, &admin, &job, route::APPROVE).await,
                Err(refused) => refused,
            }
        }
        (Method::Post, path) if let Some((inner, effect, action)) = effect_route(path) => {
            let Some(request_key) = operator_key(&req)? else { return missing_key() };
            let job = match job_of_path(&req, &admin, inner) {
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
            once(env, &admin, &request_key, forward(env, &job, route::EFFECT, &request)).await
        }
        (Method::Post, path)
            if let Some(inner) = path.strip_prefix("jobs/").and_then(|p| p.strip_suffix("/enqueue")) =>
        {
            match job_of_path(&req, &admin, inner) {
                Ok(job) => to_job(env, &admin, &job, route::ENQUEUE).await,
                Err(refused) => refused,
            }
        }
        _ => problem_of(ProblemType::NotFound, "no such admin route"),
    }
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
/// admin route names, if this admin reaches its tenant.
fn job_of_path(req: &Request, admin: &Admin, inner: &str) -> std::result::Result<JobMessage, Result<Response>> {
    let Some((tenant, key)) = inner.split_once('/') else {
        return Err(problem_of(ProblemType::NotFound, "use /onejob/v1/admin/jobs/{tenant}/{key}"));
    };
    let (tenant, key) = (percent_decode(tenant), percent_decode(key));
    if !admin.reaches(&tenant) {
        return Err(problem_of(ProblemType::Forbidden, "this admin key does not reach that tenant"));
    }
    let url = req.url().map_err(Err)?;
    let user = url.query_pairs().find(|(n, _)| n == "user").map(|(_, v)| v.into_owned());
    Ok(JobMessage { tenant, user, key })
}

/// `jobs/{tenant}/{key}/effects/{name}/{resend | mark_done}`: the job's
/// part, the effect's name and the action.
fn effect_route(path: &str) -> Option<(&str, &str, &str)> {
    let inner = path.strip_prefix("jobs/")?;
    let (rest, action) = inner.rsplit_once('/')?;
    let (job, effect) = rest.rsplit_once("/effects/")?;
    matches!(action, "resend" | "mark_done").then_some((job, effect, action))
}

/// An admin's request to one job's Ledger that carries no operator key
/// (a look, a kick), answered as the Ledger answers it.
async fn to_job(env: &Env, admin: &Admin, job: &JobMessage, route: &str) -> Result<Response> {
    let request = OperatorRequest {
        key: job.key.clone(),
        by: admin.name.clone(),
        request: String::new(),
        action: None,
        status: None,
        body: None,
        effect: None,
    };
    let (status, body) = forward(env, job, route, &request).await?;
    json_response(status, &body)
}

/// The jobs list's filters from the query string.
fn serde_urlencoded_filter(url: &worker::Url) -> ops::JobFilter {
    let param =
        |name: &str| url.query_pairs().find(|(n, _)| n == name).map(|(_, v)| v.into_owned()).filter(|v| !v.is_empty());
    let number = |name: &str| param(name).and_then(|v| v.parse().ok());
    ops::JobFilter {
        tenant: param("tenant"),
        user: param("user"),
        state: param("state"),
        model: param("model"),
        error_class: param("error_class"),
        since_ms: number("since_ms"),
        until_ms: number("until_ms"),
        cursor: param("cursor"),
        limit: param("limit").and_then(|v| v.parse().ok()),
    }
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
async fn forward(env: &Env, job: &JobMessage, route: &str, request: &OperatorRequest) -> Result<(u16, String)> {
    let mut response = objects::to_ledger(env, job, route, serde_json::to_string(request)?).await?;
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
        let (status, answer) = forward(env, &job, route::REPLAY, &request).await?;
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap_or_default();
        if status == 200 && answer.get("replayed").and_then(serde_json::Value::as_bool) == Some(true) {
            ops::mark_replayed(env, &tenant, user.as_deref(), &key).await?;
            replayed.push(entry);
        } else {
            let reason = answer.get("detail").or_else(|| answer.get("reason")).cloned().unwrap_or_default();
            skipped.push(serde_json::json!({ "tenant": tenant, "key": key, "reason": reason }));
        }
    }
    Ok((200, serde_json::json!({ "replayed": replayed, "skipped": skipped }).to_string()))
}

fn problem_body(kind: ProblemType, detail: &str) -> Result<(u16, String)> {
    let problem = onejob_core::protocol::Problem::new(kind, detail);
    Ok((problem.status(), problem.to_json()))
}
