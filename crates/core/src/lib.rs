//! # onejob-core
//!
//! The pure logic of onejob, shared by the browser SDK (`onejob-client`) and
//! the Cloudflare Worker (`onejob-edge`). It compiles natively and to
//! `wasm32-unknown-unknown` and does no I/O: no clock (`now_ms` is an
//! argument), no randomness (a [`identity::random::RandomSource`] is), no sleeping
//! (delays are returned).
//!
//! ## The map
//!
//! One folder per part of the product, in layer order: a folder imports only
//! folders above it in this list (`node scripts/modgraph.mjs --crate core`
//! checks it, and that no module cycle is left). Doc links do not count.
//!
//! | Folder | What it decides |
//! |---|---|
//! | [`wire`] | the HTTP vocabulary: header names, RFC 9457 problem types, `Prefer` |
//! | [`identity`] | what "the same request" is: canonical JSON, fingerprints, idempotency keys, keyless keys, randomness, the client's key rules |
//! | [`retry`] | what an outcome means and when to go again: classes, LLM reply hints, breakers, backoff |
//! | [`upstream`] | the providers: routes and failover order, output contracts, SSE, an answer on arrival |
//! | [`job_type`] | server-defined intents: schemas, templates, effects and receipts |
//! | [`job`] | the job record and its attempts (compare-and-swap), what callers are answered, the job view |
//! | [`config`] | a deployment's settings and credentials: tenants, admin keys, tokens, quotas, prices, alerts |
//! | [`demo`] | the built-in demo provider |
//! | [`front`] | the worker's stateless front: routes and every check without I/O, response headers |
//! | [`ledger`] | what the Ledger Durable Object decides about one job: requests, streams, background jobs, effects, operators, storage |
//! | [`operators`] | the operator API, dead letters, savings, the providers check |
//! | [`telemetry`] | OpenTelemetry spans, trace context, log lines |
//! | [`api`] | the worker's one call to a job's Ledger (`LedgerCall`) |
//! | [`deployment`] | a deployment's whole configuration, each part checked |
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
pub mod config;
pub mod demo;
pub mod deployment;
pub mod front;
pub mod identity;
pub mod job;
pub mod job_type;
pub mod ledger;
pub mod operators;
pub mod retry;
pub mod telemetry;
pub mod upstream;
pub mod wire;
