//! # onejob-edge
//!
//! The Cloudflare Worker of onejob. The stateless front ([`routes`])
//! authenticates the caller, validates the request, fingerprints it with the
//! core, tries the KV cache of finished results, and hands everything else
//! (as one typed [`api::handoff`] message) to the `Ledger` Durable Object of
//! (tenant, key), which runs the request upstream at most once per job and
//! replays the outcome to every duplicate.
//!
//! The entry points are here: `fetch` hands a request to
//! [`routes::dispatch`], `consume` a queue batch to [`queue::consume`].
//! Everything else lives in a folder that says what it owns and what it may
//! import (its module doc; `node scripts/modgraph.mjs` checks the imports):
//!
//! | module | what it owns |
//! |---|---|
//! | [`routes`] | the stateless front: the router, auth, the proxy, job-type runs, jobs, the operator API, the providers' page and contract check |
//! | [`ledger`] | the `Ledger` Durable Object and everything private to it: admission, the driver (attempts), the stream pump, storage, alarms, the effects runner |
//! | [`objects`] | the other Durable Objects: `ProviderHealth` (a breaker per provider), `UsageMeter` (quotas), `QueueCursor` (how far the queue's consumer has got) |
//! | [`api`] | the Worker ↔ Durable Object protocol: the hand-off to the Ledger, the objects' messages, their clients |
//! | [`upstream`] | one call to one provider (the demo one or an HTTP API) |
//! | [`effects`] | a job type's effect destinations (D1 rows, signed webhooks) |
//! | [`ops`] | the operators' D1 index: dead letters, alerts, the jobs index, subjects, operator requests |
//! | [`queue`], [`cache`] | Cloudflare Queues (background jobs, dead letters); the KV cache of finished results |
//! | [`http`] | building responses (problems, CORS, a job's result, a stream) and reading request bodies |
//! | [`env`] | the only code that reads `Env`, the clock and `Math.random`: configuration, bindings, retry budgets |
//! | [`error`] | a leaf: the edge's own failures, by kind (`EdgeError`) |
//! | [`answer`] | a leaf: what a provider answered, and a response as the Ledger keeps it |
//! | [`demo`] | the built-in demo: its provider, its inbox, its routes; imported by upstream, effects and routes only |

#![forbid(unsafe_code)]

mod answer;
mod api;
mod cache;
mod demo;
mod effects;
mod env;
mod error;
mod http;
mod ledger;
mod objects;
mod ops;
mod queue;
mod routes;
mod upstream;

pub use ledger::Ledger;
pub use objects::cursor::QueueCursor;
pub use objects::health::ProviderHealth;
pub use objects::meter::UsageMeter;

use onejob_core::wire::ProblemType;
use worker::{Context, Env, MessageBatch, Request, Response, Result, event};

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    // Whatever fails below still answers as a problem, with CORS, so a
    // browser sees an error it can read instead of a bare 500.
    routes::dispatch(req, &env, &ctx).await.or_else(|error| {
        worker::console_error!("onejob: {error}");
        http::problem_of(ProblemType::Internal, "onejob failed; the request may be retried with the same key")
    })
}

/// Background jobs and dead letters (see [`queue`]).
#[event(queue)]
async fn consume(batch: MessageBatch<serde_json::Value>, env: Env, _ctx: Context) -> Result<()> {
    queue::consume(batch, env).await
}
