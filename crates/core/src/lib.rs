//! # onejob-core
//!
//! The pure logic of onejob, shared by the browser SDK (`onejob-client`) and
//! the Cloudflare Worker (`onejob-edge`). It compiles natively and to
//! `wasm32-unknown-unknown` and does no I/O: no clock (`now_ms` is an
//! argument), no randomness (a [`random::RandomSource`] is), no sleeping
//! (delays are returned).
//!
//! ## Layers
//!
//! A module imports only from modules above it in this list: a lower layer,
//! or one listed before it in its own (`node scripts/core-graph.mjs` checks
//! it, and that no import cycle is left). Doc links do not count.
//!
//! - L0 `wire`, `digest`, `random`, `canonical`, `fingerprint`, `key`, `keyless`, `result_cache`: the HTTP vocabulary, and what "the same request" is.
//!   - [`wire`]: header names, RFC 9457 problem types, `Prefer`.
//!   - `digest` (private): SHA-256 in hex.
//!   - [`random`]: the randomness a caller supplies.
//!   - [`canonical`] and [`fingerprint`]: what "the same request" means.
//!   - [`key`]: idempotency keys and the tenant-scoped storage ids.
//!   - [`keyless`]: the key derived for a request without one (`KEYLESS`), and how an ended keyless job answers.
//!   - [`result_cache`]: which requests look in KV for a finished result before the Ledger (`RESULT_CACHE`).
//! - L1 `reply`, `classify`, `breaker`, `backoff`: what an outcome means, and when to go again.
//!   - [`reply`]: what an LLM reply says (a final-but-unusable hint, token usage).
//!   - [`classify`]: which outcomes are retried, never retried, or unknown.
//!   - [`breaker`]: a circuit breaker per provider, outside the retries.
//!   - [`backoff`]: jittered delays, `Retry-After`, the retry budget.
//! - L2 `job`, `contract`, `providers`, `sse`, `upstream`, `template`, `effect`, `job_type`: the job machine, the upstreams, and server-defined job types.
//!   - [`job`]: the job/attempt state machine with compare-and-swap.
//!   - [`contract`]: a route's output contract (required keys, a JSON Schema subset).
//!   - [`providers`]: named upstreams, routes by model, the order of failover.
//!   - [`sse`]: streamed answers cut into events; terminal, error and usage events.
//!   - [`upstream`]: a provider's answer on arrival: streamed, too large to keep, or read whole.
//!   - [`template`]: `{{input.x}}` / `{{output.x}}` templates: rendering, and checking them against schemas.
//!   - [`effect`]: writes and sends that happen once: claims, receipts, approvals, reconciliation.
//!   - [`job_type`]: server-defined intents: input schema, prompt, output contract, effects.
//! - L3 `tenant`, `admin`, `signature`, `token`, `demo`, `quota`, `alert`, `pricing`, `settings`, `intent`: a deployment's settings and credentials, and the client's keys.
//!   - [`tenant`]: bearer keys to tenant ids, by digest.
//!   - [`admin`]: admin keys (by digest), their names and scopes.
//!   - [`signature`]: HMAC-SHA256 for signed alerts and user tokens.
//!   - [`token`]: short-lived user tokens (HS256 JWTs) scoped to a tenant and a user.
//!   - [`demo`]: the built-in demo provider's behaviours: each model's latency and misbehaviour, the triage, its answers and streams in each API's format; the demo page's user tokens and inbox rows.
//!   - [`quota`]: token budgets per day, per tenant and per user.
//!   - [`alert`]: when dead letters (or a quota's use) become an alert, its delivery id and its format (onejob's, Slack's).
//!   - [`pricing`]: a price table per model, for spend estimates.
//!   - [`settings`]: a deployment's settings, their defaults and ranges.
//!   - [`intent`]: which key a client-side intent uses, and when it changes (the client's).
//! - L4 `admission`, `answer`, `background`, `front`, `admin_query`, `admin_route`, `provider_check`, `dead_letters`, `ledger`, `savings`: what the Ledger decides about a job, what the worker's front decides about a request, what operators see of dead letters, and what that saved.
//!   - [`admission`]: what happens to a keyed request for a job (run, replay, wait, refuse).
//!   - [`answer`]: what a job's callers are answered, and what a replay is (the first answer, byte for byte).
//!   - [`background`]: background jobs: what a queue delivery does, when the outbox resends (`background::progress`: how far the queue's consumer has got, so a lost message is told from a backlog).
//!   - [`front`]: the worker's stateless front: which route a request is, its method, and every check of a tenant's request that needs no I/O.
//!   - [`admin_query`]: the operator lists' query filters, read strictly.
//!   - [`admin_route`]: the operator API's routes, read, scoped and checked; a keyed operator request's answer, kept.
//!   - [`provider_check`]: a providers check: its samples and path, each provider's request, what each answer says of the contract, which providers are safe.
//!   - [`dead_letters`]: the operators' dead letters: a row, the list grouped by cause with its trend, the dead-letter alert.
//!   - [`ledger`]: what the Ledger Durable Object decides about a job (moving here, sans-IO).
//!   - [`savings`]: answers given without an upstream call, what they saved, and the report beside the spend.
//! - L5 `view`, `response`, `protocol`, `telemetry`, `job_logging`, `ledger_call`, `kept_run`, `deployment`: what a job looks like from outside, the worker's call to a job's Ledger, and a deployment's configuration.
//!   - [`view`]: the job view served by `GET /onejob/v1/jobs/{key}`.
//!   - [`response`]: which headers the worker's responses carry (CORS, a preflight, a problem, a job's result, a stream).
//!   - [`protocol`]: the old path of [`wire`] and [`view`], kept so the client and the edge compile.
//!   - [`telemetry`]: OpenTelemetry spans of a job request (OTLP JSON), W3C trace context, log lines.
//!   - [`job_logging`]: which log lines a job's writes print (`JOB_LOGS=json`).
//!   - [`ledger_call`]: the worker's one call to a job's Ledger (`LedgerCall`), its payloads and their wire form.
//!   - [`kept_run`]: a job type's run as a job keeps it: the type it runs and the subject it holds.
//!   - [`deployment`]: a deployment's configuration as its variables and secrets make it, each checked.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod admin_query;
pub mod admin_route;
pub mod admission;
pub mod alert;
pub mod answer;
pub mod background;
pub mod backoff;
pub mod breaker;
pub mod canonical;
pub mod classify;
pub mod contract;
pub mod dead_letters;
pub mod demo;
pub mod deployment;
mod digest;
pub mod effect;
pub mod fingerprint;
pub mod front;
pub mod intent;
pub mod job;
pub mod job_logging;
pub mod job_type;
pub mod kept_run;
pub mod key;
pub mod keyless;
pub mod ledger;
pub mod ledger_call;
pub mod pricing;
pub mod protocol;
pub mod provider_check;
pub mod providers;
pub mod quota;
pub mod random;
pub mod reply;
pub mod response;
pub mod result_cache;
pub mod savings;
pub mod settings;
pub mod signature;
pub mod sse;
pub mod telemetry;
pub mod template;
pub mod tenant;
pub mod token;
pub mod upstream;
pub mod view;
pub mod wire;
