//! The stateless front of the worker: it authenticates the caller, checks
//! everything that can be checked without the job, and hands the rest to
//! the job's `Ledger` through [`crate::api`]. Owns the router and every
//! route handler but the demo's ([`crate::demo::routes`]).
//!
//! The routes ([`dispatch`]):
//! - `POST /v1/{path}`: the OpenAI-compatible, idempotent proxy ([`gateway`]);
//! - `GET /v1/models`: the models the deployment routes ([`gateway`]);
//! - `POST /onejob/v1/run/{type}`: a job type's run ([`gateway`]);
//! - `GET /onejob/v1/jobs/{key}`: the job and its attempts (tenant-scoped);
//! - `GET /onejob/v1/jobs/{key}/stream?from=N`: a streamed answer after its
//!   first `N` events, live or stored (`Last-Event-ID: N` works too);
//! - `POST /onejob/v1/jobs/{key}/cancel`: stops a streaming answer;
//! - `POST /onejob/v1/jobs/{key}/approve`: lets waiting effects run;
//! - `/onejob/v1/admin/…`: the operator API ([`admin`]);
//! - `GET /onejob/v1/providers`, `POST /onejob/v1/providers/check` ([`providers`]);
//! - `GET /demo/token`, `/demo/tickets`, `/demo/inbox`: the demo's
//!   ([`crate::demo::routes`], only with `DEMO_TOKEN_ISSUER=on`);
//! - `GET /onejob/problems/{type}`: what an error type means;
//! - `OPTIONS *`: CORS preflight; everything else: the demo page (assets).
//!
//! May import: `api`, `http`, `env`, `cache`, `ops` (the operator lists),
//! `demo` (its routes) and the core; `upstream` only from [`check`] (the
//! contract check calls providers directly). Never the Ledger (`ledger`) or
//! another Durable Object's code (`objects`): a route reaches them through
//! their clients in `api`.

mod admin;
mod auth;
mod check;
mod gateway;
mod providers;

use onejob_core::protocol::ProblemType;
use worker::{Context, Env, Method, Request, Response, Result};

use crate::http;
use crate::routes::gateway::JobRoute;

/// Hands a request to its route (a `404` problem for none).
/// `ctx` runs work past the response (telemetry's export, counting a replay from KV).
pub async fn dispatch(req: Request, env: &Env, ctx: &Context) -> Result<Response> {
    let path = req.path();
    if req.method() == Method::Options {
        return http::preflight(&req);
    }
    if path == "/v1/models" {
        return gateway::models(&req, env);
    }
    if path.starts_with("/v1/") {
        return gateway::proxy(req, env, ctx).await;
    }
    if let Some(job_type) = path.strip_prefix("/onejob/v1/run/") {
        let job_type = job_type.to_owned();
        return gateway::run(req, env, ctx, &job_type).await;
    }
    if let Some(rest) = path.strip_prefix("/onejob/v1/jobs/") {
        let (key, route) =
            match (rest.strip_suffix("/stream"), rest.strip_suffix("/cancel"), rest.strip_suffix("/approve")) {
                (Some(key), _, _) => (key, JobRoute::Stream),
                (_, Some(key), _) => (key, JobRoute::Cancel),
                (_, _, Some(key)) => (key, JobRoute::Approve),
                _ => (rest, JobRoute::View),
            };
        let key = key.to_owned();
        return gateway::job(req, env, &key, route).await;
    }
    if let Some(rest) = path.strip_prefix("/onejob/v1/admin/") {
        let rest = rest.to_owned();
        return admin::handle(req, env, &rest).await;
    }
    if path == "/onejob/v1/providers" {
        return providers::list(req, env).await;
    }
    if path == "/onejob/v1/providers/check" {
        return providers::check(req, env).await;
    }
    if path == "/demo/token" {
        return crate::demo::routes::token(req, env);
    }
    if let Some(what @ ("tickets" | "inbox")) = path.strip_prefix("/demo/") {
        let what = what.to_owned();
        return crate::demo::routes::read_out(&req, env, &what).await;
    }
    if let Some(slug) = path.strip_prefix("/onejob/problems/") {
        return gateway::problem_doc(&req, slug);
    }
    http::problem_of(ProblemType::NotFound, "no such route")
}
