//! # onejob-core
//!
//! The pure logic of onejob, shared by the browser SDK (`onejob-client`) and
//! the Cloudflare Worker (`onejob-edge`). It compiles natively and to
//! `wasm32-unknown-unknown` and does no I/O: no clock (`now_ms` is an
//! argument), no randomness (a [`random::RandomSource`] is), no sleeping
//! (delays are returned).
//!
//! - [`admin`]: admin keys (by digest), their names and scopes.
//! - [`admin_query`]: the operator lists' query filters, read strictly.
//! - [`alert`]: when dead letters become an alert, and its delivery id.
//! - [`admission`]: what happens to a keyed request for a job (run, replay, wait, refuse).
//! - [`answer`]: what a job's callers are answered, and what a replay is (the first answer, byte for byte).
//! - [`canonical`] and [`fingerprint`]: what "the same request" means.
//! - [`key`]: idempotency keys and the tenant-scoped storage ids.
//! - [`intent`]: which key a client-side intent uses, and when it changes.
//! - [`background`]: background jobs: what a queue delivery does, when the outbox resends.
//! - [`backoff`]: jittered delays, `Retry-After`, the retry budget.
//! - [`breaker`]: a circuit breaker per provider, outside the retries.
//! - [`classify`]: which outcomes are retried, never retried, or unknown.
//! - [`contract`]: a route's output contract (required keys, a JSON Schema subset).
//! - [`reply`]: what an LLM reply says (a final-but-unusable hint, token usage).
//! - [`job`]: the job/attempt state machine with compare-and-swap.
//! - [`ledger`]: what the Ledger Durable Object decides about a job (moving here, sans-IO).
//! - [`job_type`]: server-defined intents: input schema, prompt, output contract, effects.
//! - [`effect`]: writes and sends that happen once: claims, receipts, approvals, reconciliation.
//! - [`pricing`]: a price table per model, for spend estimates.
//! - [`protocol`]: the old path of [`wire`] and [`view`], kept so the client and the edge compile.
//! - [`quota`]: token budgets per day, per tenant and per user.
//! - [`providers`]: named upstreams, routes by model, the order of failover.
//! - [`signature`]: HMAC-SHA256 for signed alerts and user tokens.
//! - [`settings`]: a deployment's settings, their defaults and ranges.
//! - [`sse`]: streamed answers cut into events; terminal, error and usage events.
//! - [`token`]: short-lived user tokens (HS256 JWTs) scoped to a tenant and a user.
//! - [`template`]: `{{input.x}}` / `{{output.x}}` templates: rendering, and checking them against schemas.
//! - [`tenant`]: bearer keys to tenant ids, by digest.
//! - [`view`]: the job view served by `GET /onejob/v1/jobs/{key}`.
//! - [`wire`]: the HTTP vocabulary: header names, RFC 9457 problem types, `Prefer`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod admin_query;
pub mod admission;
pub mod alert;
pub mod answer;
pub mod background;
pub mod backoff;
pub mod breaker;
pub mod canonical;
pub mod classify;
pub mod contract;
mod digest;
pub mod effect;
pub mod fingerprint;
pub mod intent;
pub mod job;
pub mod job_type;
pub mod key;
pub mod ledger;
pub mod pricing;
pub mod protocol;
pub mod providers;
pub mod quota;
pub mod random;
pub mod reply;
pub mod settings;
pub mod signature;
pub mod sse;
pub mod template;
pub mod tenant;
pub mod token;
pub mod view;
pub mod wire;
