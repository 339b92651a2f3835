//! `Ledger`: the Durable Object that owns one job (one per tenant + key).
//!
//! Durable Objects run one event at a time, but an `.await` on a fetch lets
//! the next request in. So the Ledger:
//! 1. claims with the core state machine and writes the claim (synchronous
//!    SQL) *before* awaiting the upstream call;
//! 2. lets exactly one request drive the job at a time (`driving`); every
//!    duplicate that arrives meanwhile waits for that driver's result and
//!    gets it replayed (one result fanned out to many waiters);
//! 3. replays the stored response of a finished job to every later duplicate.
//!
//! No `RefCell` borrow is held across an `.await`, and nothing that comes
//! from a request or from storage is unwrapped: a panic here would throw
//! away the in-memory state of every object in the isolate.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{Either, select};
use onejob_core::backoff::budget::RetryBudget;
use onejob_core::backoff::retries::{Retries, UnknownOutcomes};
use onejob_core::backoff::retry_after::RetryAfter;
use onejob_core::classify::{BodyHint, Decision, Outcome, classify, read_reply};
use onejob_core::job::{AttemptReport, Job, JobError, JobState};
use onejob_core::key::IdempotencyKey;
use onejob_core::protocol::{JobView, Problem, ProblemType, header};
use onejob_core::random::RandomSource;
use worker::{Date, Delay, DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::config::Config;
use crate::http::{self, JobHeaders};
use crate::store::{Store, StoredResponse};
use crate::upstream::{self, Call, CallResult};

/// Headers the gateway uses to hand a validated request to its Ledger.
pub mod internal {
    pub const KEY: &str = "x-onejob-key";
    pub const FINGERPRINT: &str = "x-onejob-fingerprint";
    pub const PATH: &str = "x-onejob-path";
    pub const WAIT_MS: &str = "x-onejob-wait-ms";
    pub const STORAGE_ID: &str = "x-onejob-storage-id";
}

thread_local! {
    /// One retry budget per isolate: when the upstream is failing for
    /// everyone, retries stop being spent for everyone.
    static BUDGET: RefCell<RetryBudget> = RefCell::new(RetryBudget::default());
}

/// The validated request a driver sends upstream.
#[derive(Clone, Copy)]
struct Upcall<'a> {
    key: &'a str,
    storage_id: &'a str,
    path: &'a str,
    content_type: &'a str,
    body: &'a [u8],
}

/// What a driver hands to the duplicates that waited for it.
#[derive(Clone)]
struct Settled {
    response: StoredResponse,
    state: JobState,
    attempt: Option<u32>,
    retry_after_ms: Option<u64>,
}

#[durable_object]
pub struct Ledger {
    state: State,
    env: Env,
    /// True while one request is running the job's attempts.
    driving: Cell<bool>,
    /// Duplicates waiting for the driver's result.
    waiters: RefCell<Vec<oneshot::Sender<Settled>>>,
    /// Whether this instance has created its tables.
    schema_ready: Cell<bool>,
}

impl DurableObject for Ledger {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            driving: Cell::new(false),
            waiters: RefCell::new(Vec::new()),
            schema_ready: Cell::new(false),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let outcome = match req.path().as_str() {
            "/run" => self.run(req).await,
            "/job" => self.view(&req),
            _ => http::problem_of(ProblemType::NotFound, "unknown ledger route"),
        };
        outcome.or_else(|error| {
            worker::console_error!("ledger: {error}");
            http::problem_of(ProblemType::Internal, "the ledger failed; the request may be retried with the same key")
        })
    }

    async fn alarm(&self) -> Result<Response> {
        let store = self.store()?;
        match store.load_job()? {
            Some(job) if job.is_expired(now_ms()) && !self.driving.get() => {
                store.delete_everything()?;
            }
            // Expired while an attempt still runs: look again in a minute.
            Some(job) if job.is_expired(now_ms()) => {
                self.state.storage().set_alarm(Duration::from_secs(60)).await?;
            }
            Some(job) => self.schedule_expiry(&job).await?,
            None => {}
        }
        Response::empty()
    }
}

impl Ledger {
    /// The job's tables, created on this instance's first use (not on every
    /// request: the replay path stays two reads).
    fn store(&self) -> Result<Store> {
        let store = Store::new(self.state.storage().sql());
        if !self.schema_ready.get() {
            store.create_tables()?;
            self.schema_ready.set(true);
        }
        Ok(store)
    }

    fn config(&self) -> std::result::Result<Config, String> {
        Config::from_env(&self.env)
    }

    /// `GET /onejob/v1/jobs/{key}`.
    fn view(&self, req: &Request) -> Result<Response> {
        let key = header_of(req, internal::KEY).and_then(|k| IdempotencyKey::parse(&k).ok());
        let (Some(key), Some(mut job)) = (key, self.store()?.load_job()?) else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        job.expire(now_ms());
        http::with_cors(Response::from_json(&JobView::new(key, &job))?)
    }

    /// A keyed request that the gateway has authenticated and validated.
    async fn run(&self, mut req: Request) -> Result<Response> {
        let config = match self.config() {
            Ok(config) => config,
            Err(detail) => {
                return http::problem_of(ProblemType::Internal, format!("gateway misconfigured: {detail}"));
            }
        };
        let (Some(key), Some(fingerprint), Some(path)) =
            (header_of(&req, internal::KEY), header_of(&req, internal::FINGERPRINT), header_of(&req, internal::PATH))
        else {
            return http::problem_of(ProblemType::Internal, "the ledger was called without its routing headers");
        };
        let wait_ms =
            header_of(&req, internal::WAIT_MS).and_then(|w| w.parse().ok()).unwrap_or(config.coalesce_wait_ms);
        let storage_id = header_of(&req, internal::STORAGE_ID).unwrap_or_default();
        let content_type = header_of(&req, "Content-Type").unwrap_or_else(|| "application/json".into());
        let body = req.bytes().await?;

        let store = self.store()?;
        let now = now_ms();
        // From here to the claim nothing awaits, so no other request can
        // interleave between reading the job and deciding what to do.
        let (mut job, created) = match store.load_job()? {
            Some(job) => (job, false),
            None => {
                let Some(fp) = onejob_core::fingerprint::Fingerprint::parse(&fingerprint) else {
                    return http::problem_of(ProblemType::Internal, "malformed fingerprint from the gateway");
                };
                let job = Job::new(fp, now, config.policy);
                store.save_job(&key, &job)?;
                (job, true)
            }
        };
        if job.fingerprint().as_str() != fingerprint {
            return http::problem(
                &Problem::new(
                    ProblemType::KeyReused,
                    "this Idempotency-Key was first used with a different request (method, path or body); use a new key for a new request",
                )
                .with("key", key.as_str()),
            );
        }
        if job.expire(now) {
            store.save_job(&key, &job)?;
        }

        if job.state().is_terminal() {
            return self.replay(&store, &job, &key);
        }
        if self.driving.get() {
            return self.wait_for_driver(&key, wait_ms).await;
        }
        match job.check_claim(now) {
            Ok(()) => {}
            Err(JobError::Finished { .. }) => return self.replay(&store, &job, &key),
            Err(JobError::UnknownLease { retry_after_ms }) => {
                let detail = format!(
                    "the last attempt timed out after the request reached the provider; no new attempt for {retry_after_ms} ms"
                );
                let problem = Problem::new(ProblemType::OutcomeUnknown, detail)
                    .with("key", key.as_str())
                    .with("retry_after_ms", retry_after_ms);
                return problem_about(&problem, &key, job.state());
            }
            Err(JobError::Blocked) => {
                let problem = Problem::new(
                    ProblemType::OutcomeUnknown,
                    "the last attempt's outcome is unknown and this deployment blocks retries; an operator must resolve the job",
                )
                .with("key", key.as_str());
                return problem_about(&problem, &key, job.state());
            }
            Err(JobError::InFlight { lease_remaining_ms, .. }) => {
                // Held by an attempt this instance does not know (the object
                // restarted mid-call): wait out its lease.
                let problem = Problem::new(ProblemType::RequestInProgress, "an earlier attempt still holds this job")
                    .with("retry_after_ms", lease_remaining_ms.max(1));
                return problem_about(&problem, &key, job.state());
            }
            Err(error @ (JobError::VersionConflict { .. } | JobError::StaleAttempt { .. })) => {
                return Err(transition_error(error));
            }
        }
        let request =
            Upcall { key: &key, storage_id: &storage_id, path: &path, content_type: &content_type, body: &body };
        self.drive(&store, job, created, request, &config).await
    }

    /// Replays a finished job's stored response.
    fn replay(&self, store: &Store, job: &Job, key: &str) -> Result<Response> {
        let attempt = job.replayed_attempt().map(|a| a.number);
        let stored = match attempt {
            Some(n) => store.load_response(n)?,
            None => None,
        };
        let response = stored.unwrap_or_else(|| gave_up_response(job));
        respond(response, key, job.state(), attempt, true)
    }

    async fn wait_for_driver(&self, key: &str, wait_ms: u64) -> Result<Response> {
        let in_progress = |retry_after_ms: u64| {
            let problem = Problem::new(
                ProblemType::RequestInProgress,
                "a request with this key is still running; retry with the same key to get its result",
            )
            .with("key", key)
            .with("retry_after_ms", retry_after_ms);
            problem_about(&problem, key, JobState::InFlight)
        };
        if wait_ms == 0 {
            return in_progress(1_000);
        }
        let (sender, receiver) = oneshot::channel();
        self.waiters.borrow_mut().push(sender);
        let timer = Delay::from(Duration::from_millis(wait_ms));
        match select(receiver, timer).await {
            Either::Left((Ok(settled), _)) => {
                let response = respond(settled.response, key, settled.state, settled.attempt, true)?;
                add_retry_after(response, settled.retry_after_ms)
            }
            // The wait ran out, or the driver failed without a result.
            _ => in_progress(1_000),
        }
    }

    /// Becomes the job's driver: runs attempts, then fans the one result out
    /// to every duplicate that waited for it.
    async fn drive(
        &self,
        store: &Store,
        mut job: Job,
        created: bool,
        request: Upcall<'_>,
        config: &Config,
    ) -> Result<Response> {
        self.driving.set(true);
        let settled = async {
            if created {
                self.schedule_expiry(&job).await?;
            }
            self.attempts(store, &mut job, &request, config).await
        }
        .await;
        self.driving.set(false);
        let settled = match settled {
            Ok(settled) => settled,
            Err(error) => {
                // Dropping the senders releases the waiters with "in progress".
                self.waiters.borrow_mut().clear();
                return Err(error);
            }
        };
        let waiters: Vec<_> = self.waiters.borrow_mut().drain(..).collect();
        for waiter in waiters {
            let _ = waiter.send(settled.clone());
        }
        if settled.state.is_terminal() {
            self.cache_result(request.storage_id, &job, &settled);
        }
        let response = respond(settled.response, request.key, settled.state, settled.attempt, false)?;
        add_retry_after(response, settled.retry_after_ms)
    }

    /// Claims, calls and records attempts until one is final, retrying
    /// transient failures with backoff within the attempt cap and the budget.
    async fn attempts(&self, store: &Store, job: &mut Job, request: &Upcall<'_>, config: &Config) -> Result<Settled> {
        let Upcall { key, path, content_type, body, .. } = *request;
        let provider = upstream::provider_name(&config.upstream);
        let model = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("model").and_then(|m| m.as_str()).map(str::to_owned));
        let api_key = self.env.secret("UPSTREAM_API_KEY").ok().map(|s| s.to_string());
        let mut rng = MathRandom;
        // Nothing dedups a resend to the provider: an unknown outcome stops here.
        let mut retries = Retries::new(config.backoff, UnknownOutcomes::Stop);
        loop {
            let ticket = job
                .claim(job.version(), now_ms(), &provider, model.as_deref())
                .map_err(|e| worker::Error::RustError(format!("claim refused: {e}")))?;
            // The claim is durable before the upstream call can let anyone in.
            store.save_job(key, job)?;
            let call = Call {
                path,
                body,
                content_type,
                idempotency_key: key,
                attempt: ticket.attempt,
                timeout_ms: config.upstream_timeout_ms,
            };
            let result = upstream::call(&config.upstream, api_key.as_deref(), call).await;
            let now = now_ms();
            // Every outcome leaves a response to store: the provider's, or a
            // problem describing the failure.
            let (outcome, response, usage, server_hint) = match result {
                CallResult::Reply(reply) => {
                    let facts = read_reply(&reply.body);
                    let is_success = (200..300).contains(&reply.status);
                    let hint = if is_success { facts.hint } else { BodyHint::None };
                    let outcome = Outcome::Http { status: reply.status, should_retry: reply.should_retry, hint };
                    let server_hint = RetryAfter::from_headers(
                        reply.retry_after_ms.as_deref(),
                        reply.retry_after.as_deref(),
                        now,
                        config.retry_after_cap_ms,
                    );
                    let response =
                        StoredResponse { status: reply.status, content_type: reply.content_type, body: reply.body };
                    (outcome, response, facts.usage, server_hint.map(|h| h.delay_ms))
                }
                CallResult::Transport { failure, detail } => {
                    let response = StoredResponse::problem(&Problem::new(ProblemType::UpstreamFailed, detail));
                    (Outcome::Transport(failure), response, None, None)
                }
            };
            let classification = classify(outcome);
            let status = match outcome {
                Outcome::Http { status, .. } => Some(status),
                Outcome::Transport(_) => None,
            };
            let report = AttemptReport { status, usage, error_class: Some(classification.class) };

            match classification.decision {
                Decision::Accept | Decision::Never => {
                    store.save_response(ticket.attempt, &response)?;
                    job.complete(ticket, now, report).map_err(transition_error)?;
                    store.save_job(key, job)?;
                    if classification.decision == Decision::Accept {
                        BUDGET.with(|b| b.borrow_mut().on_success());
                    }
                    return Ok(Settled {
                        response,
                        state: job.state(),
                        attempt: Some(ticket.attempt),
                        retry_after_ms: None,
                    });
                }
                Decision::Unknown => {
                    job.mark_unknown(ticket, now, report).map_err(transition_error)?;
                    store.save_job(key, job)?;
                    let lease = job.lease_remaining_ms(now);
                    // The response is not stored: a later attempt may still win.
                    let problem = Problem::new(
                        ProblemType::UpstreamTimeout,
                        "the provider did not answer in time and may still be processing the request; retry with the same key after Retry-After",
                    )
                    .with("retry_after_ms", lease);
                    let response = StoredResponse::problem(&problem);
                    return Ok(Settled {
                        response,
                        state: job.state(),
                        attempt: Some(ticket.attempt),
                        retry_after_ms: Some(lease),
                    });
                }
                Decision::Retry | Decision::RetryOnce => {
                    store.save_response(ticket.attempt, &response)?;
                    let state = job.fail(ticket, now, report).map_err(transition_error)?;
                    store.save_job(key, job)?;
                    let may_try_again = state == JobState::Failed;
                    let delay = BUDGET.with(|b| {
                        retries.after(classification, may_try_again, server_hint, &mut b.borrow_mut(), &mut rng)
                    });
                    let Some(delay) = delay else {
                        let retry_after_ms = may_try_again.then(|| server_hint.unwrap_or(1_000));
                        return Ok(Settled { response, state, attempt: Some(ticket.attempt), retry_after_ms });
                    };
                    Delay::from(Duration::from_millis(delay)).await;
                }
            }
        }
    }

    /// Writes the finished result to KV in the background (a read-through
    /// cache for replays; the Ledger stays the authority).
    fn cache_result(&self, storage_id: &str, job: &Job, settled: &Settled) {
        let Ok(kv) = self.env.kv("RESULTS") else {
            return;
        };
        let ttl_s = (job.expires_ms().saturating_sub(now_ms()) / 1000).max(60);
        let metadata = crate::cache::CachedMeta {
            fingerprint: job.fingerprint().to_string(),
            status: settled.response.status,
            content_type: settled.response.content_type.clone(),
            state: settled.state.as_str().to_owned(),
            attempt: settled.attempt.unwrap_or(0),
        };
        let body = settled.response.body.clone();
        let key = storage_id.to_owned();
        self.state.wait_until(async move {
            let put = kv.put_bytes(&key, &body).and_then(|p| p.metadata(metadata)).map(|p| p.expiration_ttl(ttl_s));
            if let Ok(put) = put
                && let Err(error) = put.execute().await
            {
                worker::console_warn!("ledger: caching the result in KV failed: {error}");
            }
        });
    }

    async fn schedule_expiry(&self, job: &Job) -> Result<()> {
        let at = js_sys::Date::new(&(job.expires_ms() as f64).into());
        self.state.storage().set_alarm(worker::ScheduledTime::new(at)).await
    }
}

/// Builds the client-facing response for a stored result (moved, not copied).
fn respond(
    stored: StoredResponse,
    key: &str,
    state: JobState,
    attempt: Option<u32>,
    replayed: bool,
) -> Result<Response> {
    let job = JobHeaders { key, state: state.as_str(), attempt, replayed };
    http::job_result(stored.status, &stored.content_type, stored.body, &job)
}

/// onejob's headers on a problem about the job.
fn problem_about(problem: &Problem, key: &str, state: JobState) -> Result<Response> {
    JobHeaders { key, state: state.as_str(), attempt: None, replayed: false }.apply(http::problem(problem)?)
}

fn add_retry_after(mut response: Response, retry_after_ms: Option<u64>) -> Result<Response> {
    if let Some(ms) = retry_after_ms {
        let headers = response.headers_mut();
        http::set_retry_after(headers, ms)?;
        headers.set(header::SHOULD_RETRY, "true")?;
    }
    Ok(response)
}

/// What a dead job replays when its last attempt left no response (its
/// outcome was unknown when the attempts ran out).
fn gave_up_response(job: &Job) -> StoredResponse {
    let detail = format!("onejob gave up after {} attempts; the last outcome was unknown", job.attempts().len());
    StoredResponse::problem(&Problem::new(ProblemType::UpstreamFailed, detail))
}

fn transition_error(error: JobError) -> worker::Error {
    worker::Error::RustError(format!("job transition refused: {error}"))
}

fn header_of(req: &Request, name: &str) -> Option<String> {
    req.headers().get(name).ok().flatten()
}

fn now_ms() -> u64 {
    Date::now().as_millis()
}

/// Jitter needs no cryptographic randomness; `Math.random` spreads retries.
struct MathRandom;

impl RandomSource for MathRandom {
    fn next_u64(&mut self) -> u64 {
        let high = (js_sys::Math::random() * 4_294_967_296.0) as u64;
        let low = (js_sys::Math::random() * 4_294_967_296.0) as u64;
        (high << 32) | low
    }
}
