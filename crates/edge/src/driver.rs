//! The driver of a job: claims, calls and records attempts until one is
//! final, retrying transient failures with the core's full-jitter backoff
//! within the job's attempt cap and the tenant's retry budget.
//!
//! Every write is a compare-and-swap on the job's version. An attempt whose
//! write loses (another writer changed the job meanwhile) does not overwrite
//! the winner: it is recorded in the audit as discarded, and the caller gets
//! the job as it now stands.

use std::time::Duration;

use onejob_core::admission;
use onejob_core::backoff::retries::{Observation, Retries, Step, UnknownOutcomes};
use onejob_core::classify::Decision;
use onejob_core::job::{AttemptReport, AttemptTicket, Job, JobState, UnknownPolicy};
use onejob_core::key::{IdempotencyKey, StorageId};
use onejob_core::protocol::{Problem, ProblemType};
use onejob_core::random::RandomSource;
use onejob_core::reply::{BodyHint, read_reply};
use worker::{Delay, Result};

use crate::budgets;
use crate::clock::now_ms;
use crate::config::Config;
use crate::handoff::Submission;
use crate::http::JobResult;
use crate::store::{Store, StoreError, StoredResponse};
use crate::stored;
use crate::upstream::{self, Call, CallResult, Streaming};

pub struct Driver<'a> {
    config: &'a Config,
    store: &'a Store,
    submission: &'a Submission,
    body: &'a [u8],
    /// The job's key for the provider: derived from tenant + key.
    upstream_key: String,
    provider: String,
    model: Option<String>,
    /// The request asks for a streamed answer (`"stream": true`).
    stream: bool,
}

/// What driving a job produced for its caller.
pub enum Driven {
    /// A result (final, or one to ask again about later).
    Result(JobResult),
    /// The upstream is streaming its answer: the Ledger's pump takes it from
    /// here. `ticket` holds the job for the streaming attempt.
    Stream { ticket: AttemptTicket, streaming: Streaming },
}

/// What one attempt produced, unless it streams.
struct Attempted {
    observed: Observation,
    response: StoredResponse,
    report: AttemptReport,
}

impl<'a> Driver<'a> {
    pub fn new(config: &'a Config, store: &'a Store, submission: &'a Submission, body: &'a [u8]) -> Self {
        let upstream_key = IdempotencyKey::parse(&submission.key)
            .map(|key| StorageId::derive(&submission.tenant, &key).upstream_key())
            .unwrap_or_default();
        let request = serde_json::from_slice::<serde_json::Value>(body).ok();
        let model = request.as_ref().and_then(|v| v.get("model").and_then(|m| m.as_str()).map(str::to_owned));
        let stream = request.as_ref().and_then(|v| v.get("stream")).and_then(serde_json::Value::as_bool) == Some(true);
        let provider = config.settings.upstream.name().to_owned();
        Self { config, store, submission, body, upstream_key, provider, model, stream }
    }

    /// Runs attempts on `job` (claimable) until a result for the caller.
    /// A job that is not `stored` yet is written with its first claim (one
    /// write on the first call, not two).
    pub async fn run(&self, job: &mut Job, mut stored: bool) -> Result<Driven> {
        // Nothing dedups a resend to the provider: an unknown outcome stops here.
        let mut retries = Retries::new(self.config.settings.backoff, UnknownOutcomes::Stop);
        loop {
            let read = job.version();
            let ticket = match job.claim(read, now_ms(), &self.provider, self.model.as_deref()) {
                Ok(ticket) => ticket,
                Err(error) => return Err(worker::Error::RustError(format!("claim refused: {error}"))),
            };
            // The claim is durable before the upstream call can let anyone in.
            let written = if stored { self.store.update_job(read, job) } else { self.store.insert_job(job) };
            stored = true;
            match written {
                Ok(()) => {}
                Err(StoreError::LostRace) => return self.job_as_it_stands(job).map(Driven::Result),
                Err(StoreError::Failed(error)) => return Err(error),
            }
            let attempted = match self.attempt(ticket).await {
                Ok(attempted) => attempted,
                // Past the first byte the provider is never called again
                // automatically: the job says so before anyone reads a byte.
                Err(streaming) => {
                    let read = job.version();
                    let ticket = job
                        .mark_streaming(ticket, now_ms())
                        .map_err(|e| worker::Error::RustError(format!("stream refused: {e}")))?;
                    self.store.start_streamed_response(ticket.attempt, &streaming.content_type)?;
                    match self.store.update_job(read, job) {
                        Ok(()) => return Ok(Driven::Stream { ticket, streaming }),
                        Err(StoreError::LostRace) => return self.job_as_it_stands(job).map(Driven::Result),
                        Err(StoreError::Failed(error)) => return Err(error),
                    }
                }
            };
            if !self.record(job, ticket, &attempted)? {
                return self.job_as_it_stands(job).map(Driven::Result);
            }
            let may_try_again = job.state() == JobState::Failed;
            let step = budgets::with_budget(&self.submission.tenant, |budget| {
                retries.next(&attempted.observed, may_try_again, budget, &mut MathRandom)
            });
            let Attempted { observed, response, .. } = attempted;
            let finished = match step {
                Step::Deliver => JobResult::of(response, job.state(), Some(ticket.attempt), None),
                Step::Wait(ms) => {
                    Delay::from(Duration::from_millis(ms)).await;
                    continue;
                }
                Step::GiveUp if observed.classification.decision == Decision::Unknown => {
                    let problem = Problem::new(
                        ProblemType::UpstreamTimeout,
                        "the provider did not answer in time and may still be processing the request",
                    );
                    // Under UNKNOWN_POLICY=block no lease ever ends: nothing to retry after.
                    let problem = match job.policy().unknown_policy() {
                        UnknownPolicy::Block => problem,
                        UnknownPolicy::RetryAfterLease => problem.with_retry_after_ms(job.lease_remaining_ms(now_ms())),
                    };
                    JobResult::problem(&problem, job.state(), Some(ticket.attempt))
                }
                // Out of attempts (dead: final) or of budget (ask again later).
                Step::GiveUp => {
                    let again = may_try_again.then(|| observed.server_delay_ms.unwrap_or(1_000));
                    JobResult::of(response, job.state(), Some(ticket.attempt), again)
                }
            };
            return Ok(Driven::Result(finished));
        }
    }

    /// One upstream call, observed; `Err` when its answer streams.
    async fn attempt(&self, ticket: AttemptTicket) -> std::result::Result<Attempted, Streaming> {
        let settings = &self.config.settings;
        let call = Call {
            target: &self.submission.target,
            body: self.body,
            content_type: &self.submission.content_type,
            upstream_key: &self.upstream_key,
            attempt: ticket.attempt,
            timeout_ms: settings.upstream_timeout_ms,
            stream: self.stream,
        };
        let (observed, response, usage) =
            match upstream::call(&settings.upstream, self.config.api_key.as_deref(), call).await {
                CallResult::Reply(reply) => {
                    let facts = read_reply(&reply.body);
                    let hint = if (200..300).contains(&reply.status) { facts.hint } else { BodyHint::None };
                    let observed = Observation::from_http(
                        reply.status,
                        &|name| reply.header(name),
                        hint,
                        now_ms(),
                        settings.retry_after_cap_ms,
                    );
                    let response =
                        StoredResponse { status: reply.status, content_type: reply.content_type, body: reply.body };
                    (observed, response, facts.usage)
                }
                CallResult::Stream(streaming) => return Err(streaming),
                CallResult::Transport { failure, detail } => {
                    let problem = Problem::new(ProblemType::UpstreamFailed, detail);
                    let response = StoredResponse {
                        status: problem.status(),
                        content_type: onejob_core::protocol::PROBLEM_CONTENT_TYPE.into(),
                        body: problem.to_json().into_bytes(),
                    };
                    (Observation::transport(failure), response, None)
                }
            };
        let report = AttemptReport { status: observed.status, usage, error_class: Some(observed.classification.class) };
        Ok(Attempted { observed, response, report })
    }

    /// Writes the attempt's outcome if it still holds the job. Returns
    /// `false` when it lost the job to another writer: then it is only
    /// audited as discarded, and `job` is reloaded.
    fn record(&self, job: &mut Job, ticket: AttemptTicket, attempted: &Attempted) -> Result<bool> {
        let now = now_ms();
        let report = attempted.report;
        let applied = match attempted.observed.classification.decision {
            Decision::Accept | Decision::Never => job.complete(ticket, now, report).map(|_| ()),
            Decision::Unknown => job.mark_unknown(ticket, now, report),
            Decision::Retry | Decision::RetryOnce => job.fail(ticket, now, report).map(|_| ()),
        };
        // The response first (keyed by attempt: no one else writes it), then
        // the job that points at it: a job never names a response that is not
        // there. An unknown outcome keeps no response: a later attempt may win.
        if applied.is_ok() && attempted.observed.classification.decision != Decision::Unknown {
            self.store.save_response(ticket.attempt, &attempted.response)?;
        }
        let written = applied.is_ok() && {
            match self.store.update_job(ticket.version, job) {
                Ok(()) => true,
                Err(StoreError::LostRace) => false,
                Err(StoreError::Failed(error)) => return Err(error),
            }
        };
        if written {
            return Ok(true);
        }
        let Some(mut current) = self.store.load_job()? else {
            return Err(worker::Error::RustError("the job vanished during an attempt".into()));
        };
        let read = current.version();
        if current.note_discarded(ticket.attempt, now, report)
            && let Err(StoreError::Failed(error)) = self.store.update_job(read, &current)
        {
            return Err(error);
        }
        worker::console_warn!("ledger: attempt {} lost the job; its result was discarded", ticket.attempt);
        *job = current;
        Ok(false)
    }

    /// What the caller gets after losing the job: the winner's stored result
    /// once the job has finished, else "in progress".
    fn job_as_it_stands(&self, job: &mut Job) -> Result<JobResult> {
        if let Some(current) = self.store.load_job()? {
            *job = current;
        }
        if job.state().is_terminal() {
            return stored::finished_result(self.store, job);
        }
        let problem = admission::in_progress(&self.submission.key, admission::DEFAULT_RETRY_AFTER_MS);
        Ok(JobResult::problem(&problem, job.state(), None))
    }
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
