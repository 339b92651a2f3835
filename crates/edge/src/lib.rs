//! # onejob-edge
//!
//! The Cloudflare Worker of onejob. The stateless front ([`gateway`])
//! authenticates the caller, validates the request, fingerprints it with the
//! core, tries the KV cache of finished results, and hands everything else
//! (as one typed [`handoff`] message) to the `Ledger` Durable Object of
//! (tenant, key), which runs the request upstream at most once per job and
//! replays the outcome to every duplicate.
//!
//! Routes:
//! - `POST /v1/{path}`: the OpenAI-compatible, idempotent proxy;
//! - `GET /onejob/v1/jobs/{key}`: the job and its attempts (tenant-scoped);
//! - `GET /onejob/v1/jobs/{key}/stream?from=N`: a streamed answer after its
//!   first `N` events, live or stored (`Last-Event-ID: N` works too);
//! - `POST /onejob/v1/jobs/{key}/cancel`: stops a streaming answer;
//! - `GET /onejob/problems/{type}`: what an error type means;
//! - `OPTIONS *`: CORS preflight; everything else: the demo page (assets).

mod admin;
mod alarms;
mod auth;
mod body;
mod budgets;
mod cache;
mod check;
mod clock;
mod config;
mod demo;
mod driver;
mod effects;
mod faults;
mod gateway;
mod handoff;
mod health;
mod http;
mod ledger;
mod meter;
mod objects;
mod ops;
mod queue;
mod reply;
mod store;
mod stored;
mod stream;
mod upstream;
mod webhook;

pub use health::ProviderHealth;
pub use ledger::Ledger;
pub use meter::UsageMeter;

use gateway::JobRoute;
use onejob_core::protocol::ProblemType;
use worker::{Context, Env, MessageBatch, Method, Request, Response, Result, event};

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    // Whatever fails below still answers as a problem, with CORS, so a
    // browser sees an error it can read instead of a bare 500.
    route(req, &env).await.or_else(|error| {
        worker::console_error!("onejob: {error}");
        http::problem_of(ProblemType::Internal, "onejob failed; the request may be retried with the same key")
    })
}

/// Background jobs and dead letters (see [`queue`]).
#[event(queue)]
async fn consume(batch: MessageBatch<serde_json::Value>, env: Env, _ctx: Context) -> Result<()> {
    queue::consume(batch, env).await
}

async fn route(req: Request, env: &Env) -> Result<Response> {
    let path = req.path();
    if req.method() == Method::Options {
        return http::preflight(&req);
    }
    if path.starts_with("/v1/") {
        return gateway::proxy(req, env).await;
    }
    if let Some(job_type) = path.strip_prefix("/onejob/v1/run/") {
        let job_type = job_type.to_owned();
        return gateway::run(req, env, &job_type).await;
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
        return gateway::providers(req, env).await;
    }
    if path == "/onejob/v1/providers/check" {
        return gateway::provider_check(req, env).await;
    }
    if path == "/demo/token" {
        return gateway::demo_token(req, env);
    }
    if let Some(what @ ("tickets" | "inbox")) = path.strip_prefix("/demo/") {
        let what = what.to_owned();
        return gateway::demo_read_out(&req, env, &what).await;
    }
    if let Some(slug) = path.strip_prefix("/onejob/problems/") {
        return gateway::problem_doc(&req, slug);
    }
    http::problem_of(ProblemType::NotFound, "no such route")
}
