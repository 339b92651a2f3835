//! The driver of a job: places each attempt on a provider of the request's
//! route, claims, calls and records attempts until one is final, retrying
//! transient failures with the core's full-jitter backoff within the job's
//! attempt cap and the tenant's retry budget.
//!
//! Failover is a new attempt of the same job: after a failure the next
//! attempt goes to the route's next provider (see
//! [`onejob_core::providers::Route::rotation`]), skipping providers whose
//! breaker is open, and does not wait out the failed provider's backoff. A
//! route with `hedge_after_ms` races a second attempt on the next provider
//! when the first is slow; the first final answer wins the job by
//! compare-and-swap and the other, if it answers, is audited as `lost_race`.
//!
//! Every write is a compare-and-swap on the job's version. An attempt whose
//! write loses (another writer changed the job meanwhile) does not overwrite
//! the winner: it is recorded in the audit as discarded, and the caller gets
//! the job as it now stands.

use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::{Either, select};
use onejob_core::admission;
use onejob_core::answer;
use onejob_core::backoff::retries::{Observation, Retries, Step, UnknownOutcomes};
use onejob_core::breaker::{Permit, is_failure};
use onejob_core::classify::{Classification, Decision, ErrorClass, TransportFailure};
use onejob_core::contract::Contract;
use onejob_core::job::{AttemptReport, AttemptTicket, Job, JobState};
use onejob_core::protocol::{PROBLEM_CONTENT_TYPE, Problem, ProblemType};
use onejob_core::providers::{Api, Placement, Route};
use onejob_core::random::RandomSource;
use serde_json::Value;
use worker::{Delay, Env, Result};

use crate::budgets;
use crate::clock::now_ms;
use crate::config::Config;
use crate::handoff::Submission;
use crate::health::{self, Report};
use crate::http::JobResult;
use crate::store::{JobMeta, Store, StoreError, StoredResponse};
use crate::stored;
use crate::upstream::{self, Call, CallResult, Streaming};

pub struct Driver<'a> {
    config: &'a Config,
    env: &'a Env,
    store: &'a Store,
    submission: &'a Submission,
    body: &'a [u8],
    /// The job's key for the provider: derived from tenant + key.
    upstream_key: String,
    /// The request's JSON, to send each provider its own model name.
    request: Option<Value>,
    /// The model the request asked for: picks the route.
    model: Option<String>,
    /// The request asks for a streamed answer (`"stream": true`).
    stream: bool,
    api: Api,
    /// A hedged attempt that lost the race and has not answered yet.
    late: RefCell<Option<LateAttempt>>,
    /// The body, owned once for the calls that outlive this borrow.
    shared_body: OnceCell<Rc<[u8]>>,
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
pub struct Attempted {
    observed: Observation,
    response: StoredResponse,
    report: AttemptReport,
}

/// An attempt's call, owning everything it needs: it may outlive the
/// request (a hedge's loser is awaited after the winner has answered).
type Launched = Pin<Box<dyn Future<Output = std::result::Result<Attempted, Streaming>>>>;

/// Where an attempt goes.
struct Choice {
    /// The provider's index in the settings.
    provider: usize,
    /// The model name sent to it.
    model: Option<String>,
    /// It goes as its breaker's half-open probe.
    probe: bool,
    /// How long to wait first: the backoff this provider asked for.
    wait_ms: u64,
}

/// A hedged attempt that lost the race but may still answer: its answer is
/// audited (it was paid for) and never used.
pub struct LateAttempt {
    attempt: u32,
    call: Launched,
}

impl<'a> Driver<'a> {
    pub fn new(config: &'a Config, env: &'a Env, store: &'a Store, submission: &'a Submission, body: &'a [u8]) -> Self {
        let upstream_key = submission.storage_id().upstream_key();
        let request = serde_json::from_slice::<Value>(body).ok();
        let model = request.as_ref().and_then(|v| v.get("model").and_then(|m| m.as_str()).map(str::to_owned));
        let stream = request.as_ref().and_then(|v| v.get("stream")).and_then(Value::as_bool) == Some(true);
        let api = Api::of_path(&submission.target);
        Self {
            config,
            env,
            store,
            submission,
            body,
            upstream_key,
            request,
            model,
            stream,
            api,
            late: RefCell::new(None),
            shared_body: OnceCell::new(),
        }
    }

    /// The hedged attempt still out after the job was won, if any: the
    /// Ledger awaits it past the response ([`audit_late`]).
    pub fn take_late(&self) -> Option<LateAttempt> {
        self.late.borrow_mut().take()
    }

    /// Runs attempts on `job` (claimable) until a result for the caller.
    /// A job that is not `stored` yet is written with its first claim (one
    /// write on the first call, not two).
    pub async fn run(&self, job: &mut Job, mut stored: bool) -> Result<Driven> {
        let providers = &self.config.settings.providers;
        let route = match route_of(self.config, &self.submission.target, self.model.as_deref()) {
            Ok(route) => route,
            Err(no_route) => return Ok(Driven::Result(JobResult::problem(&no_route.problem(), job.state(), None))),
        };
        // Nothing dedups a resend to the provider: an unknown outcome stops here.
        let mut retries = Retries::new(self.config.settings.backoff, UnknownOutcomes::Stop);
        // When each provider may be called again: a backoff (or a
        // `Retry-After`) is owed to the provider that asked for it, not to
        // the next one.
        let mut not_before_ms = vec![0; providers.list().len()];
        // The backoff the last failure asked for, owed if the same provider goes next.
        let mut backoff_ms = 0;
        loop {
            let last = job.attempts().last().map(|a| a.provider.clone());
            let order =
                route.placement(providers, self.api, last.as_deref(), None, &not_before_ms, backoff_ms, now_ms(), true);
            let choice = match self.place(order).await {
                Ok(choice) => choice,
                Err(retry_after_ms) => {
                    let problem = Problem::new(
                        ProblemType::NoHealthyProvider,
                        "every provider of this route is failing; the request may be retried with the same key",
                    )
                    .with_retry_after_ms(retry_after_ms);
                    return Ok(Driven::Result(JobResult::problem(&problem, job.state(), None)));
                }
            };
            let name = providers.get(choice.provider).name.clone();
            if choice.wait_ms > 0 {
                Delay::from(Duration::from_millis(choice.wait_ms)).await;
            }
            let read = job.version();
            let ticket = match job.claim(read, now_ms(), &name, choice.model.as_deref()) {
                Ok(ticket) => ticket,
                Err(error) => return Err(worker::Error::RustError(format!("claim refused: {error}"))),
            };
            // The claim is durable before the upstream call can let anyone in.
            let written = if stored { self.store.update_job(read, job) } else { self.insert(job) };
            stored = true;
            match written {
                Ok(()) => {}
                Err(StoreError::LostRace) => return self.job_as_it_stands(job).map(Driven::Result),
                Err(StoreError::Failed(error)) => return Err(error),
            }
            let call = self.launch(ticket, &choice, route);
            let hedge_after_ms = route.hedge_after_ms.filter(|_| !self.stream);
            let (ticket, attempted) = match hedge_after_ms {
                Some(ms) => match self.race(job, route, (ticket, choice, call), ms, &not_before_ms).await? {
                    Some(settled) => settled,
                    None => return self.job_as_it_stands(job).map(Driven::Result),
                },
                None => match call.await {
                    Ok(attempted) => {
                        if !self.record(job, ticket, &attempted)? {
                            return self.job_as_it_stands(job).map(Driven::Result);
                        }
                        (ticket, attempted)
                    }
                    // Past the first byte the provider is never called again
                    // automatically: the job says so before anyone reads a byte.
                    Err(streaming) => return self.start_stream(job, ticket, streaming),
                },
            };
            if job.state().is_terminal() && job.replayed_attempt().is_some_and(|a| a.number != ticket.attempt) {
                // The job's answer is another attempt's (the other racer
                // won, or a race both lost ended on the earlier attempt's
                // report): its stored response is the result, so the first
                // answer is the one every replay gives.
                return stored::finished_result(self.store, job).map(Driven::Result);
            }
            let may_try_again = job.state() == JobState::Failed;
            let step = budgets::with_budget(&self.submission.tenant, |budget| {
                retries.next(&attempted.observed, may_try_again, budget, &mut MathRandom)
            });
            let Attempted { observed, response, .. } = attempted;
            let finished = match step {
                Step::Deliver => JobResult::of(response, job.state(), Some(ticket.attempt), None),
                // A background job waits in the queue, not here.
                Step::Wait(ms) if self.submission.background => {
                    let read = job.version();
                    job.defer_until(now_ms() + ms, now_ms());
                    return match self.store.update_job(read, job) {
                        Ok(()) | Err(StoreError::LostRace) => self.job_as_it_stands(job).map(Driven::Result),
                        Err(StoreError::Failed(error)) => Err(error),
                    };
                }
                Step::Wait(ms) => {
                    // Time the provider's server asked for is owed to it alone.
                    let attempt = job.attempts().iter().find(|a| a.number == ticket.attempt);
                    if let (Some(server_ms), Some(index)) =
                        (observed.server_delay_ms, attempt.and_then(|a| providers.index_of(&a.provider)))
                    {
                        not_before_ms[index] = now_ms() + server_ms;
                    }
                    backoff_ms = ms;
                    continue;
                }
                // Unknown: this attempt's outcome, or a hedge's other racer's.
                Step::GiveUp if job.state() == JobState::Unknown => {
                    let answer = answer::unknown_outcome(job, now_ms());
                    let response = problem_response(&answer.problem);
                    // The last attempt (or UNKNOWN_POLICY=block): this answer
                    // is the job's, kept before anyone reads it, so the dead
                    // job replays what its caller got.
                    if let Some(attempt) = answer.final_attempt {
                        self.store.keep_answer(attempt, &response)?;
                    }
                    let attempt = answer.final_attempt.unwrap_or(ticket.attempt);
                    JobResult::of(response, job.state(), Some(attempt), answer.problem.retry_after_ms)
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

    /// Writes a new job, with who it belongs to.
    fn insert(&self, job: &Job) -> std::result::Result<(), StoreError> {
        self.store.insert_job(job)?;
        self.store.save_meta(&self.meta())?;
        Ok(())
    }

    /// Who this job belongs to and what it asks for.
    pub fn meta(&self) -> JobMeta {
        JobMeta {
            tenant: self.submission.tenant.clone(),
            user: self.submission.user.clone(),
            key: self.submission.key.to_string(),
            model: self.model.clone(),
            metered: 0,
        }
    }

    /// Where the next attempt goes: the first of `order` (the core's
    /// [`Route::placement`]) whose breaker lets a call through. `Err` with
    /// the time until the earliest probe when every breaker is open.
    async fn place(&self, order: Vec<Placement<'_>>) -> std::result::Result<Choice, u64> {
        let providers = &self.config.settings.providers;
        let mut retry_after_ms = u64::MAX;
        for Placement { step, wait_ms } in order {
            let permit = health::permit(self.env, providers.get(step.provider)).await;
            match permit {
                Permit::Call | Permit::Probe => {
                    let model = step.model.clone().or_else(|| self.model.clone());
                    let probe = permit == Permit::Probe;
                    return Ok(Choice { provider: step.provider, model, probe, wait_ms });
                }
                Permit::Skip { retry_after_ms: ms } => retry_after_ms = retry_after_ms.min(ms),
            }
        }
        Err(if retry_after_ms == u64::MAX { 1_000 } else { retry_after_ms.max(1) })
    }

    /// Races a second attempt against a slow first one. Returns the attempt
    /// that settled the job (the winner, or the last to fail), or `None` when
    /// the job was lost to another writer.
    async fn race(
        &self,
        job: &mut Job,
        route: &Route,
        (ticket_a, choice_a, call_a): (AttemptTicket, Choice, Launched),
        hedge_after_ms: u64,
        not_before_ms: &[u64],
    ) -> Result<Option<(AttemptTicket, Attempted)>> {
        let mut call_a = match select(call_a, Delay::from(Duration::from_millis(hedge_after_ms))).await {
            Either::Left((answered, _)) => return self.settle(job, ticket_a, answered),
            Either::Right((_, call_a)) => call_a,
        };
        if job.attempts_left() == 0 {
            return self.settle(job, ticket_a, call_a.await);
        }
        // Slow: a second attempt on the next provider, if one is healthy.
        let providers = &self.config.settings.providers;
        let name_a = providers.get(choice_a.provider).name.clone();
        let order = route.placement(
            providers,
            self.api,
            Some(&name_a),
            Some(choice_a.provider),
            not_before_ms,
            0,
            now_ms(),
            false,
        );
        let placed = self.place(order).await;
        // The first may have answered while the breaker was asked: then no
        // hedge leaves (a call never sent must not be paid for after the race).
        if let Some(answered) = (&mut call_a).now_or_never() {
            return self.settle(job, ticket_a, answered);
        }
        let hedged = match placed {
            Ok(choice_b) => {
                let read = job.version();
                let name_b = &providers.get(choice_b.provider).name;
                match job.hedge(read, now_ms(), name_b, choice_b.model.as_deref()) {
                    Ok(ticket_b) => match self.store.update_job(read, job) {
                        Ok(()) => Some((ticket_b, choice_b)),
                        Err(StoreError::LostRace) => return Ok(None),
                        Err(StoreError::Failed(error)) => return Err(error),
                    },
                    Err(_) => None,
                }
            }
            _ => None,
        };
        let Some((ticket_b, choice_b)) = hedged else {
            return self.settle(job, ticket_a, call_a.await);
        };
        let call_b = self.launch(ticket_b, &choice_b, route);
        let ((first, answered), (other, call)) = match select(call_a, call_b).await {
            Either::Left((answered, call_b)) => ((ticket_a, answered), (ticket_b, call_b)),
            Either::Right((answered, call_a)) => ((ticket_b, answered), (ticket_a, call_a)),
        };
        // A fast permanent error (a fallback's revoked key, a model it does
        // not have) must not beat a good answer still coming: it is the
        // answer only if the other racer has none either.
        if answered.as_ref().is_ok_and(|a| a.observed.classification.decision == Decision::Never) {
            let other_answer = call.await;
            let other_accepted =
                other_answer.as_ref().is_ok_and(|a| a.observed.classification.decision == Decision::Accept);
            let (winner, loser) = if other_accepted {
                ((other, other_answer), (first, answered))
            } else {
                ((first, answered), (other, other_answer))
            };
            let settled = self.settle(job, winner.0, winner.1)?;
            let report = loser.1.map_or_else(|_| AttemptReport::default(), |a| a.report);
            audit_discarded(self.store, loser.0.attempt, report)?;
            if let Some(current) = self.store.load_job()? {
                *job = current;
            }
            return Ok(settled);
        }
        let settled = self.settle(job, first, answered)?;
        if job.state() == JobState::Completed {
            worker::console_log!("onejob: attempt {} won the race; attempt {} lost it", first.attempt, other.attempt);
            *self.late.borrow_mut() = Some(LateAttempt { attempt: other.attempt, call });
            return Ok(settled);
        }
        if settled.is_none() {
            *self.late.borrow_mut() = Some(LateAttempt { attempt: other.attempt, call });
            return Ok(None);
        }
        // The first to answer failed: the job is the other racer's.
        self.settle(job, other, call.await)
    }

    /// Records an attempt's answer; `None` when it lost the job.
    fn settle(
        &self,
        job: &mut Job,
        ticket: AttemptTicket,
        answered: std::result::Result<Attempted, Streaming>,
    ) -> Result<Option<(AttemptTicket, Attempted)>> {
        // Hedged requests are not streamed: a stream here is a provider
        // answering SSE to a request that did not ask for it.
        let attempted = answered.unwrap_or_else(|_| transport_failure("the provider streamed an unrequested answer"));
        Ok(self.record(job, ticket, &attempted)?.then_some((ticket, attempted)))
    }

    /// The attempt's answer starts streaming: recorded before anyone reads it.
    fn start_stream(&self, job: &mut Job, ticket: AttemptTicket, streaming: Streaming) -> Result<Driven> {
        let read = job.version();
        let ticket = job
            .mark_streaming(ticket, now_ms())
            .map_err(|e| worker::Error::RustError(format!("stream refused: {e}")))?;
        self.store.start_streamed_response(ticket.attempt, &streaming.content_type)?;
        match self.store.update_job(read, job) {
            Ok(()) => Ok(Driven::Stream { ticket, streaming }),
            Err(StoreError::LostRace) => self.job_as_it_stands(job).map(Driven::Result),
            Err(StoreError::Failed(error)) => Err(error),
        }
    }

    /// Starts one upstream call to `choice`, observed (and checked against
    /// the route's contract) when it answers, and reported to the
    /// provider's breaker; `Err` when its answer streams.
    fn launch(&self, ticket: AttemptTicket, choice: &Choice, route: &Route) -> Launched {
        let settings = &self.config.settings;
        let provider = settings.providers.get(choice.provider).clone();
        let api_key = self.config.api_key(choice.provider).map(str::to_owned);
        let call = Call {
            target: self.submission.target.clone(),
            body: self.body_for(choice.model.as_deref()),
            content_type: self.submission.content_type.clone(),
            upstream_key: self.upstream_key.clone(),
            attempt: ticket.attempt,
            timeout_ms: settings.upstream_timeout_ms,
            stream: self.stream,
            headers: self.submission.provider_headers.clone(),
        };
        let retry_after_cap_ms = settings.retry_after_cap_ms;
        // A contract is about an assistant message: other endpoints
        // (embeddings, …) on the same route are not checked.
        let target = self.submission.target.split('?').next().unwrap_or("");
        let has_message = matches!(target, "/v1/chat/completions" | "/v1/messages");
        // A job type's own output contract comes first (its answer feeds
        // the effects); else the route's.
        let type_contract = self.submission.run.as_ref().and_then(|run| self.config.job_types.get(&run.job_type));
        let contract =
            type_contract.map(|t| t.output.clone()).or_else(|| route.contract.clone()).filter(|_| has_message);
        let env = self.env.clone();
        let probe = choice.probe;
        Box::pin(async move {
            let answered = upstream::call(provider.clone(), api_key, call).await;
            let (attempted, failed) = match answered {
                CallResult::Stream(streaming) => {
                    health::report(&env, &provider, Report { failed: false, probe }).await;
                    return Err(streaming);
                }
                answered => observe(answered, retry_after_cap_ms, contract.as_ref()),
            };
            health::report(&env, &provider, Report { failed, probe }).await;
            Ok(attempted)
        })
    }

    /// The request's body with `model` in it (unchanged when it already is,
    /// or when the body is not a JSON object). A rewritten body is
    /// re-serialised: its members may come out in another order, which no
    /// provider's API depends on.
    fn body_for(&self, model: Option<&str>) -> Rc<[u8]> {
        // The body as it came, copied once per job, shared by its attempts.
        let unchanged = || Rc::clone(self.shared_body.get_or_init(|| Rc::from(self.body)));
        match (&self.request, model) {
            (Some(Value::Object(request)), Some(model)) if self.model.as_deref() != Some(model) => {
                let mut request = request.clone();
                request.insert("model".into(), Value::from(model));
                serde_json::to_vec(&request).map(Rc::from).unwrap_or_else(|_| unchanged())
            }
            _ => unchanged(),
        }
    }

    /// Writes the attempt's outcome if it still holds the job. Returns
    /// `false` when it lost the job to another writer: then it is only
    /// audited as discarded, and `job` is reloaded.
    fn record(&self, job: &mut Job, ticket: AttemptTicket, attempted: &Attempted) -> Result<bool> {
        let now = now_ms();
        let report = attempted.report;
        let read = job.version();
        let decision = attempted.observed.classification.decision;
        let class = attempted.observed.classification.class;
        let applied = match decision {
            // A background job's provider refused the deployment's key: no
            // caller sees the 401, so it is a dead letter (and an alert).
            Decision::Never if class == ErrorClass::Auth && self.submission.background => {
                job.give_up(ticket, now, report)
            }
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
            match self.store.update_job(read, job) {
                Ok(()) => true,
                Err(StoreError::LostRace) => false,
                Err(StoreError::Failed(error)) => return Err(error),
            }
        };
        if written {
            return Ok(true);
        }
        let Some(current) = audit_discarded(self.store, ticket.attempt, report)? else {
            return Err(worker::Error::RustError("the job vanished during an attempt".into()));
        };
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
        let problem = admission::in_progress(self.submission.key.as_str(), admission::DEFAULT_RETRY_AFTER_MS);
        Ok(JobResult::problem(&problem, job.state(), None))
    }
}

/// The route that serves `model` with the API of `target`, or [`NoRoute`]
/// when none does (no route for the model, or none of its providers speaks
/// that API).
pub fn route_of<'c>(config: &'c Config, target: &str, model: Option<&str>) -> std::result::Result<&'c Route, NoRoute> {
    let providers = &config.settings.providers;
    let api = Api::of_path(target);
    match providers.route(model) {
        Some(route) if !route.rotation(providers, api, None).is_empty() => Ok(route),
        _ => Err(NoRoute(api)),
    }
}

/// No route serves the request's model with its API (the one kept here):
/// the `400 no-route` problem, built only where it is answered.
#[derive(Debug, Clone, Copy)]
pub struct NoRoute(Api);

impl NoRoute {
    /// The problem the caller is answered.
    pub fn problem(self) -> Problem {
        Problem::new(
            ProblemType::NoRoute,
            match self.0 {
                Api::OpenAi => "no route serves this model with the OpenAI API; see ROUTES",
                Api::Anthropic => "no route serves this model with the Anthropic Messages API; see ROUTES",
            },
        )
    }
}

/// Awaits a hedged attempt that lost the race and audits its answer (status,
/// usage) as `lost_race`: it was paid for, and never used. Returns whether
/// the audit was written.
pub async fn audit_late(store: &Store, late: LateAttempt) -> bool {
    let attempted = late.call.await.unwrap_or_else(|_| transport_failure("streamed"));
    match audit_discarded(store, late.attempt, attempted.report) {
        Ok(_) => {
            worker::console_log!("onejob: attempt {} answered after losing the race", late.attempt);
            true
        }
        Err(error) => {
            worker::console_error!("onejob: auditing attempt {} failed: {error}", late.attempt);
            false
        }
    }
}

/// Records a losing attempt's report on the stored job (a compare-and-swap
/// write of its own). Returns the job as it now stands.
fn audit_discarded(store: &Store, attempt: u32, report: AttemptReport) -> Result<Option<Job>> {
    let Some(mut current) = store.load_job()? else { return Ok(None) };
    let read = current.version();
    if current.note_discarded(attempt, now_ms(), report)
        && let Err(StoreError::Failed(error)) = store.update_job(read, &current)
    {
        return Err(error);
    }
    Ok(Some(current))
}

/// Judges a whole answer (or a failed call): how it is classified, what is
/// kept, and whether it counts against the provider's health. A 2xx outside
/// the route's contract is kept as a 502 `output-contract` and retried on
/// the next provider; it does not count against the provider's health.
fn observe(answered: CallResult, retry_after_cap_ms: u64, contract: Option<&Contract>) -> (Attempted, bool) {
    let (mut observed, mut response, usage) = match answered {
        CallResult::Reply(reply) => {
            let (observed, facts) = Observation::of_llm_reply(
                reply.status,
                &|name| reply.header(name),
                &reply.body,
                now_ms(),
                retry_after_cap_ms,
            );
            let response = StoredResponse { status: reply.status, content_type: reply.content_type, body: reply.body };
            (observed, response, facts.usage)
        }
        CallResult::Transport { failure, detail } => return (failed_below_http(failure, &detail), true),
        CallResult::Stream(_) => return (transport_failure("streamed"), false),
    };
    let failed = is_failure(observed.classification.decision);
    if observed.classification.decision == Decision::Accept
        && let Some(Err(violation)) = contract.map(|c| c.check(&response.body))
    {
        worker::console_warn!("onejob: an answer broke its route's contract: {}", violation.0);
        let problem = Problem::new(ProblemType::OutputContract, violation.0);
        response = problem_response(&problem);
        observed.classification = Classification { decision: Decision::Retry, class: ErrorClass::Contract };
    }
    let report = AttemptReport { status: observed.status, usage, error_class: Some(observed.classification.class) };
    (Attempted { observed, response, report }, failed)
}

/// An attempt whose answer cannot be judged: unknown (it may have been
/// processed), kept as a 502 problem.
fn transport_failure(detail: &str) -> Attempted {
    failed_below_http(TransportFailure::DroppedAfterSend, detail)
}

/// An attempt that failed below HTTP, kept as a 502 problem.
fn failed_below_http(failure: TransportFailure, detail: &str) -> Attempted {
    let observed = Observation::transport(failure);
    let response = problem_response(&Problem::new(ProblemType::UpstreamFailed, detail));
    let report = AttemptReport { status: None, usage: None, error_class: Some(observed.classification.class) };
    Attempted { observed, response, report }
}

fn problem_response(problem: &Problem) -> StoredResponse {
    StoredResponse {
        status: problem.status(),
        content_type: PROBLEM_CONTENT_TYPE.into(),
        body: problem.to_json().into_bytes(),
    }
}

/// Jitter needs no cryptographic randomness; `Math.random` spreads retries.
pub struct MathRandom;

impl RandomSource for MathRandom {
    fn next_u64(&mut self) -> u64 {
        let high = (js_sys::Math::random() * 4_294_967_296.0) as u64;
        let low = (js_sys::Math::random() * 4_294_967_296.0) as u64;
        (high << 32) | low
    }
}
