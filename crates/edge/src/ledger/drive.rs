//! The driver of a job: performs what the core's attempt machine
//! ([`onejob_core::ledger::request::drive::Drive`]) decides — asks the breakers, waits,
//! writes the job, calls providers, starts the hedge timer — until it has
//! the caller's answer. It decides nothing itself: placement, retries with
//! the core's full-jitter backoff within the job's attempt cap and the
//! tenant's retry budget, the hedge race and the audit of losers are the
//! machine's.
//!
//! Failover is a new attempt of the same job: after a failure the next
//! attempt goes to the route's next provider (see
//! [`onejob_core::upstream::providers::Route::rotation`]), skipping providers whose
//! breaker is open, and does not wait out the failed provider's backoff. A
//! route with `hedge_after_ms` races a second attempt on the next provider
//! when the first is slow; the first final answer wins the job by
//! compare-and-swap and the other, if it answers, is audited as `lost_race`.
//!
//! Every write is a compare-and-swap on the job's version. An attempt whose
//! write loses (another writer changed the job meanwhile) does not overwrite
//! the winner: it is recorded in the audit as discarded, and the caller gets
//! the job as it now stands.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use onejob_core::job::{AttemptTicket, Job};
use onejob_core::ledger::request::attempts;
use onejob_core::ledger::request::drive::shell::{self, Answered, Caller, LateWrite};
use onejob_core::ledger::request::drive::{
    Answer, Candidate, Command, Drive, DriveSetup, Ending, Event, Inputs, Placing, Routing,
};
use onejob_core::retry::classify::ErrorClass;
use onejob_core::telemetry::job_log::Logging;
use onejob_core::upstream::providers::{Api, NoRoute, Provider, RequestFacts, Route, with_model};
use worker::{Delay, Env, Result};

use crate::answer::{Reply, Streaming, header_of};
use crate::api::handoff::{JobMeta, Submission};
use crate::api::health::{self, Report};
use crate::env::budgets;
use crate::env::clock::now_ms;
use crate::env::config::{self, Config};
use crate::env::random::MathRandom;
use crate::error::EdgeError;
use crate::http::JobResult;
use crate::ledger::index::index_now;
use crate::ledger::store::{Store, StoreError};
use crate::ledger::stored;
use crate::upstream::{self, Call, CallResult};

pub struct Driver<'a> {
    config: &'a Config,
    env: &'a Env,
    store: &'a Store,
    submission: &'a Submission,
    body: &'a [u8],
    /// The job's key for the provider: derived from tenant + key.
    upstream_key: String,
    /// The model the request asked for: picks the route.
    model: Option<String>,
    /// The request asks for a streamed answer (`"stream": true`).
    stream: bool,
    api: Api,
    /// A hedged attempt that lost the race and has not answered yet.
    late: RefCell<Option<LateAttempt>>,
    /// The body, owned once for the calls that outlive this borrow.
    shared_body: OnceCell<Rc<[u8]>>,
    /// What the job's log lines have said (one per transition and attempt).
    log: RefCell<Logging>,
}

/// What driving a job produced for its caller.
pub enum Driven {
    /// A result (final, or one to ask again about later).
    Result(JobResult),
    /// The upstream is streaming its answer: the Ledger's pump takes it from
    /// here. `ticket` holds the job for the streaming attempt.
    Stream { ticket: AttemptTicket, streaming: Streaming },
}

/// An awaited piece of I/O (a breaker's permit, a timer, a call) and the
/// event it becomes for the machine. Each owns what it needs: a call may
/// outlive the request (a hedge's loser is awaited after the winner has answered).
type Pending = Pin<Box<dyn Future<Output = Event>>>;

/// A stream's body, by attempt, until the machine says whose it is.
type Streams = Rc<RefCell<Vec<(u32, Streaming)>>>;

/// A hedged attempt that lost the race but may still answer: its answer is
/// audited (it was paid for) and never used. The machine waits for it.
pub struct LateAttempt {
    drive: Drive,
    pending: FuturesUnordered<Pending>,
    tenant: String,
    target: String,
    model: Option<String>,
    log: Logging,
}

impl<'a> Driver<'a> {
    pub fn new(config: &'a Config, env: &'a Env, store: &'a Store, submission: &'a Submission, body: &'a [u8]) -> Self {
        let upstream_key = submission.upstream_key();
        let RequestFacts { model, stream } = RequestFacts::of(body);
        let api = Api::of_path(&submission.target);
        Self {
            config,
            env,
            store,
            submission,
            body,
            upstream_key,
            model,
            stream,
            api,
            late: RefCell::new(None),
            shared_body: OnceCell::new(),
            log: RefCell::default(),
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
    pub async fn run(&self, job: &mut Job, stored: bool) -> Result<Driven> {
        let providers = &self.config.settings.providers;
        let route = match route_of(self.config, &self.submission.target, self.model.as_deref()) {
            Ok(route) => route,
            Err(no_route) => return Ok(Driven::Result(result_of(Answered::problem(&no_route.problem(), job.state())))),
        };
        let routing = Routing { providers, route };
        let setup = DriveSetup {
            background: self.submission.background,
            stream: self.stream,
            model: self.model.clone(),
            api: self.api,
            backoff: self.config.settings.backoff,
        };
        let submission = &self.submission;
        *self.log.borrow_mut() = Logging::of(
            self.config.settings.job_logs,
            &submission.tenant,
            || submission.storage_id(),
            stored.then_some(&*job),
        );
        let mut drive = Drive::new(setup, job.clone(), stored, providers);
        let mut pending: FuturesUnordered<Pending> = FuturesUnordered::new();
        let streams: Streams = Rc::default();
        let mut commands = with_inputs(&self.submission.tenant, |inputs| drive.start(routing, inputs));
        // Commands are performed until the machine gives the caller's answer;
        // meanwhile each awaited event goes back to it.
        let ending = loop {
            if let Some(ending) = self.perform(&mut drive, routing, commands, &mut pending, &streams)? {
                break ending;
            }
            let Some(event) = pending.next().await else {
                return Err(EdgeError::broken("the driver had nothing left to wait for").into());
            };
            commands = with_inputs(&self.submission.tenant, |inputs| drive.on(routing, event, inputs));
        };
        *job = drive.job().clone();
        if !drive.is_idle() {
            *self.late.borrow_mut() = Some(LateAttempt {
                drive,
                pending,
                tenant: self.submission.tenant.clone(),
                target: self.submission.target.clone(),
                model: self.model.clone(),
                log: self.log.take(),
            });
        }
        Ok(match Caller::of(ending, self.submission.key.as_str(), job.state()) {
            Caller::Answer(answered) => Driven::Result(result_of(answered)),
            Caller::Stored => Driven::Result(stored::finished_result(self.store, job)?),
            Caller::Stream { ticket } => {
                let position = streams.borrow().iter().position(|(attempt, _)| *attempt == ticket.attempt);
                let Some(position) = position else {
                    return Err(EdgeError::broken("a stream without its body").into());
                };
                let (_, streaming) = streams.borrow_mut().remove(position);
                Driven::Stream { ticket, streaming }
            }
            Caller::Broken(error) => return Err(EdgeError::Broken(error).into()),
        })
    }

    /// Performs `commands` in order (a write's answer goes back to the
    /// machine at once, before any other event). Returns the caller's
    /// answer once the machine gives it.
    fn perform(
        &self,
        drive: &mut Drive,
        routing: Routing<'_>,
        commands: Vec<Command>,
        pending: &mut FuturesUnordered<Pending>,
        streams: &Streams,
    ) -> Result<Option<Ending>> {
        let mut queue = VecDeque::from(commands);
        let mut ending = None;
        loop {
            // A result's response and its job: one statement.
            if let Some(pair) = shell::take_response_with_job(&mut queue) {
                let written = self.store.save_response_with_job(&pair);
                queue.extend(self.written(drive, routing, &pair.job, written)?);
                continue;
            }
            let Some(command) = queue.pop_front() else { break };
            match command {
                Command::Place { order } => pending.push(self.place(order)),
                Command::Sleep { ms } => pending.push(Box::pin(async move {
                    Delay::from(Duration::from_millis(ms)).await;
                    Event::Woke
                })),
                Command::HedgeAfter { attempt, ms } => pending.push(Box::pin(async move {
                    Delay::from(Duration::from_millis(ms)).await;
                    Event::HedgeDue { attempt }
                })),
                Command::Call { ticket, provider, model, probe } => {
                    pending.push(self.launch(ticket, provider, model, probe, routing.route, streams))
                }
                Command::Create { job } => {
                    let written = self.store.insert_job(&job, Some(&self.meta()));
                    queue.extend(self.written(drive, routing, &job, written)?);
                }
                Command::Persist { job, expected } => {
                    let written = self.store.update_job(expected, &job);
                    queue.extend(self.written(drive, routing, &job, written)?);
                }
                Command::SaveResponse { attempt, response, replace: false } => {
                    self.store.save_response(attempt, &response)?
                }
                Command::SaveResponse { attempt, response, replace: true } => {
                    self.store.keep_answer(attempt, &response)?
                }
                Command::OpenStream { attempt, content_type } => {
                    self.store.start_streamed_response(attempt, &content_type)?
                }
                Command::Finish(finished) => ending = Some(finished),
            }
        }
        Ok(ending)
    }

    /// Answers the machine's write of `job` ([`Event::Persisted`]), its log
    /// lines printed once it is written; returns what the machine does next.
    fn written(
        &self,
        drive: &mut Drive,
        routing: Routing<'_>,
        job: &Job,
        written: std::result::Result<(), StoreError>,
    ) -> Result<Vec<Command>> {
        let written = persisted(self.store, written, Store::load_job)?;
        print(self.log.borrow_mut().written(job, &written));
        let event = Event::Persisted(written);
        Ok(with_inputs(&self.submission.tenant, |inputs| drive.on(routing, event, inputs)))
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

    /// Asks the breakers of `order`, in order, which lets the attempt
    /// through (the first that does, as a call or as its half-open probe).
    fn place(&self, order: Vec<Candidate>) -> Pending {
        let env = self.env.clone();
        let providers: Vec<Provider> =
            order.iter().map(|c| self.config.settings.providers.get(c.provider).clone()).collect();
        Box::pin(async move {
            let mut placing = Placing::default();
            for provider in &providers {
                if let Some(placed) = placing.on(health::permit(&env, provider).await) {
                    return Event::Placed(placed);
                }
            }
            Event::Placed(placing.skipped())
        })
    }

    /// Starts one upstream call, judged (and checked against the output
    /// contract) when it answers, and reported to the provider's breaker.
    /// A streaming answer's body waits in `streams` for the pump.
    fn launch(
        &self,
        ticket: AttemptTicket,
        provider: usize,
        model: Option<String>,
        probe: bool,
        route: &Route,
        streams: &Streams,
    ) -> Pending {
        let settings = &self.config.settings;
        let provider_index = provider;
        let provider = settings.providers.get(provider_index).clone();
        let api_key = self.config.api_key(provider_index).map(str::to_owned);
        let mut headers = self.submission.provider_headers.clone();
        // Traced (telemetry on): the provider sees the attempt's own span as its parent.
        headers.extend(self.submission.trace.iter().flat_map(|trace| trace.headers_for_attempt(ticket.attempt)));
        let call = Call {
            target: self.submission.target.clone(),
            body: self.body_for(model.as_deref()),
            content_type: self.submission.content_type.clone(),
            upstream_key: self.upstream_key.clone(),
            attempt: ticket.attempt,
            timeout_ms: settings.upstream_timeout_ms,
            stream: self.stream,
            headers,
        };
        let retry_after_cap_ms = settings.retry_after_cap_ms;
        let job_type = self.submission.run.as_ref().and_then(|run| self.config.job_types.get(&run.job_type));
        let contract =
            attempts::contract_for(&self.submission.target, job_type.map(|t| &t.output), route.contract.as_ref())
                .cloned();
        let (env, streams) = (self.env.clone(), Rc::clone(streams));
        let attempt = ticket.attempt;
        Box::pin(async move {
            let answered = upstream::call(provider.clone(), api_key, call).await;
            let (answer, failed) = match answered {
                CallResult::Stream(streaming) => {
                    let content_type = streaming.content_type.clone();
                    streams.borrow_mut().push((attempt, streaming));
                    (Answer::Streams { content_type }, false)
                }
                CallResult::Reply(Reply { status, content_type, body, hints }) => {
                    let headers = |name: &str| header_of(&hints, name);
                    let (attempted, failed) = attempts::judge_reply(
                        status,
                        &headers,
                        content_type,
                        body,
                        contract.as_ref(),
                        now_ms(),
                        retry_after_cap_ms,
                    );
                    if attempted.observed.classification.class == ErrorClass::Contract {
                        worker::console_warn!("onejob: an answer broke its route's contract");
                    }
                    (Answer::Judged(attempted), failed)
                }
                CallResult::Transport { failure, detail } => {
                    (Answer::Judged(attempts::judge_transport(failure, &detail)), true)
                }
            };
            health::report(&env, &provider, Report { failed, probe }).await;
            Event::Answered { attempt, answer }
        })
    }

    /// The request's body with `model` in it ([`with_model`]); the body
    /// as it came is copied once per job, shared by its attempts.
    fn body_for(&self, model: Option<&str>) -> Rc<[u8]> {
        match model.and_then(|model| with_model(self.body, self.model.as_deref(), model)) {
            Some(rewritten) => Rc::from(rewritten),
            None => Rc::clone(self.shared_body.get_or_init(|| Rc::from(self.body))),
        }
    }
}

/// Prints a write's log lines (Workers Logs, Logpush and Tail Workers
/// read them; which and their shape are the core's, [`Logging`]).
fn print(lines: Vec<String>) {
    for line in lines {
        worker::console_log!("{line}");
    }
}

/// The caller's answer as a job's result.
fn result_of(answered: Answered) -> JobResult {
    let Answered { response, state, attempt, retry_after_ms } = answered;
    JobResult::of(response, state, attempt, retry_after_ms)
}

/// Runs `f` with the machine's inputs: now, `Math.random` jitter, and the tenant's retry budget.
fn with_inputs<T>(tenant: &str, f: impl FnOnce(&mut Inputs<'_>) -> T) -> T {
    budgets::with_budget(tenant, |budget| f(&mut Inputs { now_ms: now_ms(), random: &mut MathRandom, budget }))
}

/// What a machine is told of one of its compare-and-swap writes: written,
/// or a lost race answered with the row as it now stands (`now` reads it).
pub(super) fn persisted<T>(
    store: &Store,
    written: std::result::Result<(), StoreError>,
    now: impl FnOnce(&Store) -> Result<Option<T>>,
) -> Result<std::result::Result<(), Option<T>>> {
    match written {
        Ok(()) => Ok(Ok(())),
        Err(StoreError::LostRace) => Ok(Err(now(store)?)),
        Err(StoreError::Failed(error)) => Err(error),
    }
}

/// The route that serves `model` with the API of `target` ([`Providers::serving`]).
///
/// [`Providers::serving`]: onejob_core::upstream::providers::Providers::serving
pub fn route_of<'c>(config: &'c Config, target: &str, model: Option<&str>) -> std::result::Result<&'c Route, NoRoute> {
    config.settings.providers.serving(Api::of_path(target), model)
}

/// Awaits a hedged attempt that lost the race and has the machine audit its
/// answer (status, usage) as `lost_race`: it was paid for, and never used.
/// Once the audit is written the job is indexed again (the index written
/// after the caller's response does not have the loser's tokens).
pub async fn audit_late(env: Env, store: Store, metering: Rc<Cell<bool>>, late: LateAttempt) {
    if audit(&env, &store, late).await {
        worker::console_log!("onejob: an attempt answered after losing the race");
        index_now(&env, &store, &metering).await;
    }
}

/// The audit of [`audit_late`]; returns whether it was written.
async fn audit(env: &Env, store: &Store, late: LateAttempt) -> bool {
    let LateAttempt { mut drive, mut pending, tenant, target, model, mut log } = late;
    let Ok(config) = config::load(env) else { return false };
    let Ok(route) = route_of(&config, &target, model.as_deref()) else { return false };
    let routing = Routing { providers: &config.settings.providers, route };
    let mut written = false;
    while !drive.is_idle() {
        let Some(event) = pending.next().await else { break };
        let mut queue =
            VecDeque::from(shell::late_writes(with_inputs(&tenant, |inputs| drive.on(routing, event, inputs))));
        while let Some(LateWrite { job, expected }) = queue.pop_front() {
            let answer = match persisted(store, store.update_job(expected, &job), Store::load_job) {
                Ok(answer) => answer,
                Err(error) => {
                    worker::console_error!("onejob: auditing a late attempt failed: {error}");
                    return written;
                }
            };
            print(log.written(&job, &answer));
            written |= answer.is_ok();
            let event = Event::Persisted(answer);
            queue.extend(shell::late_writes(with_inputs(&tenant, |inputs| drive.on(routing, event, inputs))));
        }
    }
    written
}
