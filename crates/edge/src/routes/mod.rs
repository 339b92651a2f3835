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

use onejob_core::front::Route;
use onejob_core::wire::ProblemType;
use worker::{Context, Env, Request, Response, Result};

use crate::http;

/// Hands a request to its route ([`Route::of`] decides which; a `404`
/// problem for none). `ctx` runs work past the response (telemetry's
/// export, counting a replay from KV).
pub async fn dispatch(req: Request, env: &Env, ctx: &Context) -> Result<Response> {
    let path = req.path();
    match Route::of(req.method().as_ref(), &path) {
        Route::Preflight => http::preflight(&req),
        Route::Models => gateway::models(&req, env),
        Route::Proxy => gateway::proxy(req, env, ctx).await,
        Route::Run(job_type) => gateway::run(req, env, ctx, job_type).await,
        Route::Job(key, route) => gateway::job(req, env, key, route).await,
        Route::Admin(rest) => admin::handle(req, env, rest).await,
        Route::Providers => providers::list(req, env).await,
        Route::ProvidersCheck => providers::check(req, env).await,
        Route::DemoToken => crate::demo::routes::token(req, env),
        Route::DemoReadOut(what) => crate::demo::routes::read_out(&req, env, what).await,
        Route::ProblemDoc(slug) => gateway::problem_doc(&req, slug),
        Route::NotFound => http::problem_of(ProblemType::NotFound, "no such route"),
    }
}
