//! `Ledger`: the Durable Object that owns one job (one per tenant + key).
//! It is glue: the core decides ([`onejob_core::admission::admit`]), the
//! [`crate::ledger::driver`] runs attempts, the [`crate::ledger::store`] keeps the job.
//!
//! Durable Objects run one event at a time, but an `.await` lets the next
//! request in. So everything from reading the job to recording the claim is
//! synchronous; one request at a time drives the job (`driving`), and every
//! duplicate that arrives meanwhile waits for that driver's result.
//!
//! No `RefCell` borrow is held across an `.await`, and nothing that comes
//! from a request or from storage is unwrapped: a panic here would throw
//! away the in-memory state of every object in the isolate.
//!
//! Everything in this folder serves only the Ledger: [`driver`] (the
//! attempts of a job), [`pump`] (a streamed answer), [`store`] and
//! [`stored`] (its SQLite tables and what a replay reads from them),
//! [`alarms`] (its one alarm), [`run`] (a job type's effects, after the
//! answer) and [`lock`] (the drive lock).
//!
//! May import: `api`, `http`, `env`, `answer`, `upstream`, `effects`, `ops`,
//! `queue`, `cache` and the core. Nothing imports it but `lib.rs`, which
//! exports the object: the routes reach it through [`crate::api`].

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{Either, select};
use onejob_core::admission::{self, Admission, Arrival};
use onejob_core::background::{self, Delivery, Outbox, OutboxStep};
use onejob_core::classify::ErrorClass;
use onejob_core::fingerprint::Fingerprint;
use onejob_core::job::{Job, JobState};
use onejob_core::key::IdempotencyKey;
use onejob_core::ledger::dead_letter;
use onejob_core::ledger::delivery::{self, Verdict};
use onejob_core::ledger::operator::{self, Resolution};
use onejob_core::ledger::wake::Ring;
use onejob_core::protocol::{JobView, Problem, ProblemType, header};
use onejob_core::providers::Api;
use onejob_core::quota;
use onejob_core::sse::Dialect;
use worker::{Delay, DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::answer::StoredResponse;
use crate::api::handoff::{self, DeadFacts, JobMeta, OperatorRequest, Submission};
use crate::api::ledger::{LedgerCall, Malformed};
use crate::api::meter;
use crate::cache;
use crate::env::clock::now_ms;
use crate::env::config::{self, Config};
use crate::env::random::MathRandom;
use crate::error::EdgeError;
use crate::http::{self, JobResult};
use crate::ledger::driver::{Driven, Driver};
use crate::ledger::pump::{LiveSlot, Pump, Subscription};
use crate::ledger::store::Store;
use crate::ops;
use crate::queue;

mod alarms;
mod driver;
mod lock;
mod pump;
mod run;
mod store;
mod stored;

use lock::{Coordination, DriveLock, Memory};

#[durable_object]
pub struct Ledger {
    state: State,
    env: Env,
    /// Who works on the job here (the core's coordination): a drive — the
    /// job being created until its first write (the driver may await a
    /// breaker before it claims, and a duplicate arriving meanwhile must see
    /// the job and wait for it, not start a second one), a background
    /// submission to adopt after it — a stream's pump, the effects runner.
    memory: Memory,
    /// Duplicates waiting for the driver's result.
    waiters: RefCell<Vec<oneshot::Sender<Handed>>>,
    /// The running attempt's stream, while it streams.
    live: LiveSlot,
    /// Set to cancel the running stream (its pump stops at its next wake).
    cancel: Rc<Cell<bool>>,
    /// The job version last written to the operators' index from here.
    indexed_version: Cell<u64>,
    /// True while the job's tokens are being counted against its quotas.
    metering: Rc<Cell<bool>>,
}

/// What a waiting duplicate is handed: the result, or the stream to follow.
enum Handed {
    Result(JobResult),
    Stream(Subscription),
}

impl DurableObject for Ledger {
    fn new(state: State, env: Env) -> Self {
        Self {
            state,
            env,
            memory: Memory::default(),
            waiters: RefCell::new(Vec::new()),
            live: Rc::new(RefCell::new(None)),
            cancel: Rc::new(Cell::new(false)),
            indexed_version: Cell::new(u64::MAX),
            metering: Rc::new(Cell::new(false)),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let Ok(config) = config::load(&self.env) else { return http::misconfigured() };
        let call = match LedgerCall::decode(&req.path(), req.bytes().await?) {
            Ok(call) => call,
            Err(Malformed(detail)) => return http::problem_of(ProblemType::Internal, detail),
        };
        // Whatever may change the job, the operators' index hears of it
        // after the answer.
        let mutates = call.mutates();
        let answer = match call {
            LedgerCall::Submit { submission, body } => self.submit(&config, submission, body).await,
            LedgerCall::View(query) => self.view(&query.key),
            LedgerCall::Stream(query) => self.resume_stream(&query.key, query.from.unwrap_or(0), query.ids),
            LedgerCall::Cancel(query) => self.cancel(&query.key),
            LedgerCall::Deliver => self.deliver(&config).await,
            LedgerCall::FollowUp => self.follow_up(&config).await.and_then(|()| Response::empty()),
            LedgerCall::Facts => self.facts(),
            LedgerCall::AdminView => self.admin_view(),
            LedgerCall::Enqueue(request) => self.kick(&config, &request).await,
            LedgerCall::Replay(request) => self.replay(&config, &request).await,
            LedgerCall::Resolve(request) => self.resolve(&config, &request).await,
            LedgerCall::Approve(request) => self.approve(&config, &request).await,
            LedgerCall::Effect(request) => self.effect_action(&config, &request).await,
        };
        if mutates {
            self.index_in_background();
        }
        answer.or_else(|error| {
            worker::console_error!("ledger: {error}");
            http::problem_of(ProblemType::Internal, "the ledger failed; the request may be retried with the same key")
        })
    }

    async fn alarm(&self) -> Result<Response> {
        let now = now_ms();
        // An unreadable record is not kept forever: it is deleted like an expired one.
        let job = self.store().load_job().unwrap_or_else(|error| {
            worker::console_error!("ledger: deleting an unreadable job: {error}");
            None
        });
        let ring = Ring::of(job.as_ref(), now, self.memory.borrow().is_busy());
        match (ring, job) {
            // Expired, or streaming, while something still runs here: look
            // again soon (the stream's watchdog).
            (Ring::Watch, _) => {
                alarms::set(&self.state, alarms::watchdog()).await?;
            }
            (Ring::Tend, Some(mut job)) => {
                // A stream whose pump is gone (restart, eviction, deploy) is settled.
                pump::settle_by_time(&self.store(), &mut job, now, self.memory.borrow().is_driving())?;
                let Ok(config) = config::load(&self.env) else {
                    return alarms::set(&self.state, alarms::retention(&job)).await.and(Response::empty());
                };
                // The outbox: a background job whose message may not exist
                // gets it again (deliveries dedup, so this is safe), until
                // it is left to operators.
                let outbox_delay_ms = config.settings.outbox_delay_ms;
                if !self.memory.borrow().is_driving() {
                    let outbox = self.store().load_outbox()?;
                    match background::outbox_step(&job, &outbox, outbox_delay_ms, now) {
                        OutboxStep::Send => self.enqueue(&config, &job, false).await?,
                        OutboxStep::GiveUp => {
                            worker::console_error!(
                                "ledger: no delivery took any of a background job's {} queue messages: it is left to operators (a dead letter of class {})",
                                outbox.sends(),
                                background::UNDELIVERED
                            );
                            self.store().change_outbox(&mut Outbox::give_up)?;
                        }
                        OutboxStep::Wait => {}
                    }
                }
                self.dead_letter_once(&job).await?;
                // A job type's answer not followed up yet (its stream's pump
                // could not ask), or effects that are due (a retry, an
                // approval's expiry, a claim left by a runtime that is gone).
                if !self.memory.borrow().is_driving() {
                    self.follow_up(&config).await?;
                }
                self.index_in_background();
                let outbox = self.store().load_outbox()?;
                let effects_due = self.effects_due(&config);
                alarms::set(&self.state, alarms::next(&job, &outbox, outbox_delay_ms, effects_due)).await?
            }
            // Expired (or nothing here): leave no table, row or alarm behind.
            (Ring::Tend | Ring::Delete, job) => {
                self.release_subject_at_expiry(job.as_ref()).await;
                self.state.storage().delete_alarm().await?;
                self.state.storage().delete_all().await?;
            }
        }
        Response::empty()
    }
}

impl Ledger {
    fn store(&self) -> Store {
        Store::new(self.state.storage().sql())
    }

    /// `GET /onejob/v1/jobs/{key}`: reads only; a fresh object stays empty.
    fn view(&self, key: &str) -> Result<Response> {
        let (Ok(key), Some(mut job)) = (IdempotencyKey::parse(key), self.store().load_job()?) else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        job.expire(now_ms()); // as of now, in memory only
        let mut view = JobView::new(key, &job);
        self.with_outbox(&mut view, &job)?;
        self.with_effects(&mut view)?;
        let mut response = Response::from_json(&view)?;
        if let Some(wait_ms) = operator::poll_after_ms(&job, now_ms()) {
            http::set_retry_after(response.headers_mut(), wait_ms)?;
        }
        http::with_cors(response)
    }

    /// A keyed request: the core admits it, the Ledger performs the decision.
    async fn submit(&self, config: &Config, submission: Submission, body: Vec<u8>) -> Result<Response> {
        let fingerprint = submission.fingerprint.clone();
        let store = self.store();
        let now = now_ms();
        // From here to the claim nothing awaits: no other request interleaves.
        let mut job = store.load_job()?;
        let stored = job.is_some();
        if job.is_none() {
            job = self.memory.borrow().creating().cloned();
        }
        if let Some(job) = job.as_mut() {
            pump::settle_by_time(&store, job, now, self.memory.borrow().is_driving())?;
        }
        let key = submission.key.as_str();
        let arrival = Arrival { key, fingerprint: &fingerprint, wait_ms: submission.wait_ms };
        let admitted = admission::admit(job.as_ref(), arrival, now, self.memory.borrow().is_driving());
        // A new job for a model no route serves is refused before anything
        // is written (a finished job of it is still replayed).
        if admitted == Admission::Run
            && job.is_none()
            && let Err(no_route) = driver::route_of(config, &submission.target, handoff::model_of(&body).as_deref())
        {
            return http::problem_about(&no_route.problem(), key, JobState::Pending);
        }
        if submission.background {
            return self.submit_background(config, &submission, &body, job, admitted, fingerprint).await;
        }
        match admitted {
            Admission::Replay => match job.as_ref() {
                Some(job) => self.run_answer(config, &submission, stored::finished_result(&store, job)?, true),
                None => Err(EdgeError::broken("replay without a job").into()),
            },
            Admission::Wait => match pump::subscribe(&self.live, &store, 0)? {
                // A duplicate of a streaming job follows the stream from its first event.
                Some(subscription) => subscription.into_response(key, true, false),
                None => self.wait_for_driver(config, &submission).await,
            },
            Admission::Refuse(problem) => {
                http::problem_about(&problem, key, job.as_ref().map_or(JobState::Pending, Job::state))
            }
            Admission::Run => {
                let (job, stored) = match job {
                    Some(job) => (job, stored),
                    None => {
                        let job = Job::new(fingerprint, now, config.settings.policy);
                        alarms::set_in_background(&self.state, alarms::retention(&job));
                        (job, false)
                    }
                };
                // Admitted to run: nobody drives the job (no await since admission).
                let Some(lock) = self.coordination().lock((!stored).then(|| job.clone())) else {
                    return Err(EdgeError::broken("admitted to run a job another drive holds").into());
                };
                self.drive(config, lock, &store, job, stored, &submission, &body).await
            }
        }
    }

    /// The in-memory coordination the drive lock guards.
    fn coordination(&self) -> Coordination<'_> {
        Coordination { memory: &self.memory, waiters: &self.waiters, live: &self.live }
    }

    /// Drives the job under `lock`, then fans the one result out to every
    /// duplicate that waited for it. Every return either hands the result
    /// out (`finish`), hands the lock to a stream's pump, or drops the lock,
    /// which releases it and fails the waiters (see [`lock`]).
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &self,
        config: &Config,
        lock: DriveLock<'_>,
        store: &Store,
        mut job: Job,
        stored: bool,
        submission: &Submission,
        body: &[u8],
    ) -> Result<Response> {
        // A new attempt draws on the tenant's (and user's) token budgets:
        // refused before the claim once one is spent.
        if let Some(problem) = self.over_quota(config, submission).await {
            // Not worth retrying until tomorrow: x-should-retry false (the
            // waiters get the body, which says when, without the header).
            let mut result = JobResult::problem(&problem, job.state(), None);
            result.retry_after_ms = None;
            lock.finish(&result);
            return http::problem_about(&problem, submission.key.as_str(), job.state());
        }
        if !stored && submission.run.is_some() {
            // A job type's subject is run once (`once_per`).
            if let Some(problem) = self.subject_taken(config, submission).await {
                let result = JobResult::problem(&problem, job.state(), None);
                lock.finish(&result);
                return http::problem_about(&problem, submission.key.as_str(), job.state());
            }
            // Its input and request are kept: the effects are planned from
            // them, also after a restart.
            store.save_request(&serde_json::to_string(submission)?, body)?;
        }
        let driver = Driver::new(config, &self.env, store, submission, body);
        let driven = driver.run(&mut job, stored).await;
        lock.created();
        if let Some(late) = driver.take_late() {
            // A hedge's loser is still out: audit what it cost when it
            // answers, then index the job again (the index written after
            // this response does not have the loser's tokens).
            let (env, store, metering) = (self.env.clone(), self.store(), Rc::clone(&self.metering));
            self.state.wait_until(async move {
                if driver::audit_late(&env, &store, late).await {
                    index_now(&env, &store, &metering).await;
                }
            });
        }
        let result = match driven? {
            Driven::Result(result) => result,
            Driven::Stream { ticket, streaming } => {
                pump::open(&self.live, ticket.attempt, &streaming.content_type);
                let pump = Pump::new(
                    Rc::clone(&self.live),
                    self.store(),
                    Rc::clone(&self.memory),
                    Rc::clone(&self.cancel),
                    job,
                    ticket,
                    streaming,
                )
                .speaking(Dialect::from(Api::of_path(&submission.target)));
                // Subscribed before the pump starts, so no event is missed;
                // a failure here drops the pump (the upstream call ends) and
                // the lock (the stream is closed, the waiters released).
                let own = pump::subscribe(&self.live, store, 0)?
                    .ok_or_else(|| EdgeError::broken("the stream closed before it was followed"))?;
                let mut handed = Vec::new();
                for _ in 0..self.waiters.borrow().len() {
                    if let Some(subscription) = pump::subscribe(&self.live, store, 0)? {
                        handed.push(subscription);
                    }
                }
                let waiters: Vec<_> = self.waiters.borrow_mut().drain(..).collect();
                for (waiter, subscription) in waiters.into_iter().zip(handed) {
                    let _ = waiter.send(Handed::Stream(subscription));
                }
                // The pump owns the stream from here and ends the drive at its end.
                lock.hand_to_pump(ticket.attempt);
                let (env, store, metering) = (self.env.clone(), self.store(), Rc::clone(&self.metering));
                let job_type_job = submission.run.is_some().then(|| submission.clone());
                self.state.wait_until(async move {
                    pump.run().await;
                    // The stream's end is the job's last change: index it.
                    index_now(&env, &store, &metering).await;
                    // A job type's effects wait for the whole answer: the
                    // Ledger is asked to run them now (its alarm would, later).
                    if let Some(submission) = job_type_job {
                        run::effects_after_stream(&env, &submission).await;
                    }
                });
                alarms::set_in_background(&self.state, alarms::watchdog());
                return own.into_response(submission.key.as_str(), false, false);
            }
        };
        // A job type's answer is in: its effects run before anyone is answered.
        self.after_answer(config, submission, run::ended_of(&result)).await;
        let adopt = lock.finish(&result);
        // A background submission came in meanwhile and the job is not
        // finished: the queue takes it from here.
        if let Some((later, later_body)) = adopt
            && !result.state.is_terminal()
        {
            self.adopt(config, &later, &later_body, later.fingerprint.clone()).await?;
        }
        // (A job type's answer is more than the stored response: not cached.)
        if result.state.is_terminal() && config.settings.result_cache && submission.run.is_none() {
            self.cache_in_background(submission, &job, &result);
        }
        self.run_answer(config, submission, result, false)
    }

    async fn wait_for_driver(&self, config: &Config, submission: &Submission) -> Result<Response> {
        let key = submission.key.as_str();
        let (sender, receiver) = oneshot::channel();
        self.waiters.borrow_mut().push(sender);
        match select(receiver, Delay::from(Duration::from_millis(submission.wait_ms))).await {
            // Replayed: only a finished job's stored result is a replay.
            Either::Left((Ok(Handed::Result(result)), _)) => {
                let replayed = result.state.is_terminal();
                self.run_answer(config, submission, result, replayed)
            }
            Either::Left((Ok(Handed::Stream(subscription)), _)) => subscription.into_response(key, true, false),
            // The wait ran out, or the driver failed without a result.
            _ => http::problem_about(
                &admission::in_progress(key, admission::DEFAULT_RETRY_AFTER_MS),
                key,
                JobState::InFlight,
            ),
        }
    }

    /// `POST /onejob/v1/jobs/{key}/cancel`: stops a streaming answer (the
    /// upstream call is aborted, what arrived is kept). Idempotent: a
    /// finished job is left as it is. Answers with the job as it stands
    /// (`202` while the cancel is under way).
    fn cancel(&self, key: &str) -> Result<Response> {
        let store = self.store();
        let (Ok(parsed), Some(job)) = (IdempotencyKey::parse(key), store.load_job()?) else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let streaming_here = self.live.borrow().is_some();
        let stops = match operator::cancel(&job, streaming_here) {
            Ok(stops) => stops,
            Err(refused) => return http::problem_about(&refused.problem(), key, job.state()),
        };
        self.cancel.set(stops);
        let status = if stops { 202 } else { 200 };
        http::with_cors(Response::from_json(&JobView::new(parsed, &job))?.with_status(status))
    }

    /// `GET /onejob/v1/jobs/{key}/stream?from=N`: the events after the first
    /// `N`, live while the job streams, from storage once it has finished.
    fn resume_stream(&self, key: &str, from: u64, ids: bool) -> Result<Response> {
        let store = self.store();
        if let Some(subscription) = pump::subscribe(&self.live, &store, from)? {
            return subscription.into_response(key, true, ids);
        }
        match store.load_job()? {
            Some(job) if job.state().is_terminal() => match stored::stream_after(&store, &job, from, ids)? {
                Some(result) => result.into_response(key, true),
                None => http::problem_of(ProblemType::JobNotFound, "this job's answer was not streamed"),
            },
            _ => http::problem_of(ProblemType::JobNotFound, "this tenant has no streamed job with that key"),
        }
    }

    /// Writes a finished result to KV after the response (a read-through
    /// cache for replays; the Ledger stays the authority).
    fn cache_in_background(&self, submission: &Submission, job: &Job, result: &JobResult) {
        let storage_id = submission.storage_id().to_string();
        let fingerprint = job.fingerprint().to_string();
        let ttl_s = job.expires_ms().saturating_sub(now_ms()) / 1000;
        let (env, result) = (self.env.clone(), result.clone());
        self.state.wait_until(async move {
            cache::store(&env, &storage_id, &fingerprint, &result, ttl_s).await;
        });
    }
}

/// Background jobs: `Prefer: respond-async` submissions, queue deliveries,
/// the outbox, and what operators do to a job.
impl Ledger {
    /// A background submission: `202` with the job, its message sent once
    /// (by the request that creates the job); a finished job is replayed.
    async fn submit_background(
        &self,
        config: &Config,
        submission: &Submission,
        body: &[u8],
        job: Option<Job>,
        admitted: Admission,
        fingerprint: Fingerprint,
    ) -> Result<Response> {
        let store = self.store();
        let key = submission.key.as_str();
        let now = now_ms();
        match admitted {
            Admission::Replay => match job.as_ref() {
                Some(job) => self.run_answer(config, submission, stored::finished_result(&store, job)?, true),
                None => Err(EdgeError::broken("replay without a job").into()),
            },
            Admission::Refuse(problem) if problem.kind == ProblemType::KeyReused => {
                http::problem_about(&problem, key, job.as_ref().map_or(JobState::Pending, Job::state))
            }
            // Being run right now (or created a moment ago by a request
            // still writing it): the running attempt finishes it, and nothing
            // may write the job under it. If that run does not finish it,
            // the job becomes a background job afterwards (see `drive`).
            _ if self.memory.borrow().is_driving() => {
                let job = job.unwrap_or_else(|| Job::new(fingerprint, now, config.settings.policy));
                if !job.is_background() {
                    self.memory.borrow_mut().adopt_later((submission.clone(), body.to_vec()));
                }
                self.accepted(&store, key, &job)
            }
            _ => {
                // A new job of a type run once per subject: the subject first.
                if job.is_none()
                    && let Some(problem) = self.subject_taken(config, submission).await
                {
                    return http::problem_about(&problem, key, JobState::Pending);
                }
                let job = self.adopt(config, submission, body, fingerprint).await?;
                self.accepted(&store, key, &job)
            }
        }
    }

    /// Makes the job (created if there is none) a background job and sends
    /// its message, unless it already is one (queued or running: never a
    /// second message) or is finished. Returns the job as it stands.
    async fn adopt(
        &self,
        config: &Config,
        submission: &Submission,
        body: &[u8],
        fingerprint: Fingerprint,
    ) -> Result<Job> {
        let store = self.store();
        let now = now_ms();
        let mut job = match store.load_job()? {
            Some(job) => job,
            None => {
                let job = Job::new(fingerprint, now, config.settings.policy);
                store.insert_job(&job)?;
                let model = handoff::model_of(body);
                store.save_meta(&JobMeta {
                    tenant: submission.tenant.clone(),
                    user: submission.user.clone(),
                    key: submission.key.to_string(),
                    model,
                    metered: 0,
                })?;
                job
            }
        };
        if !job.is_background() && !job.state().is_terminal() {
            let read = job.version();
            job.run_in_background(now);
            let mut background = submission.clone();
            background.background = true;
            store.save_request(&serde_json::to_string(&background)?, body)?;
            store.update_job(read, &job)?;
            self.enqueue(config, &job, false).await?;
        }
        self.arm(config, &job);
        Ok(job)
    }

    /// `202` with the job's view and its messages sent so far.
    fn accepted(&self, store: &Store, key: &str, job: &Job) -> Result<Response> {
        let mut view = JobView::new(self.parse_key(key)?, job);
        view.enqueued = store.load_outbox()?.sends();
        self.with_effects(&mut view)?;
        http::accepted(&view)
    }

    /// The view's messages sent so far; a job the outbox gave up on waits
    /// for an operator.
    fn with_outbox(&self, view: &mut JobView, job: &Job) -> Result<()> {
        let outbox = self.store().load_outbox()?;
        view.enqueued = outbox.sends();
        view.waiting_for_operator |= background::undelivered(job, &outbox);
        Ok(())
    }

    /// Sends the job's message and records it: noted before the send (with
    /// the alarm for its resend set), confirmed once the queue accepted it.
    /// A failed send, or one a crash cut short, stays unconfirmed and is
    /// left to the outbox (the alarm sends it again). `by_operator`: an
    /// operator's kick, replay or resolve (a fresh run of sends).
    async fn enqueue(&self, config: &Config, job: &Job, by_operator: bool) -> Result<()> {
        let store = self.store();
        let Some((submission, _)) = store.load_request()? else {
            worker::console_warn!("ledger: a background job without its request cannot be queued");
            return Ok(());
        };
        let Ok(submission) = serde_json::from_str::<Submission>(&submission) else {
            return Err(EdgeError::Unreadable("request".into()).into());
        };
        let message = submission.message();
        // Noted before the send, beside the job, never in it: a send must
        // not change the version an attempt in flight holds. The alarm for
        // its resend is set before the send is made, so a runtime killed in
        // between still sends it again.
        let send = store
            .change_outbox(&mut |outbox| {
                outbox.note_send(now_ms(), by_operator, &mut MathRandom);
            })?
            .sends();
        alarms::set(&self.state, self.next_alarm(config, job)).await?;
        match queue::send_job(&self.env, config, &message).await {
            Ok(()) => {
                store.change_outbox(&mut |outbox| {
                    outbox.confirm(send, now_ms());
                })?;
            }
            Err(error) => {
                worker::console_warn!("ledger: queueing a background job failed (the outbox will retry): {error}")
            }
        }
        self.arm(config, job);
        Ok(())
    }

    /// Sets the alarm for the job's next due time (outbox or retention).
    fn arm(&self, config: &Config, job: &Job) {
        alarms::set_in_background(&self.state, self.next_alarm(config, job));
    }

    /// The job's next due time: its outbox, its effects, or its retention.
    fn next_alarm(&self, config: &Config, job: &Job) -> worker::ScheduledTime {
        let outbox = self.store().load_outbox().unwrap_or_else(|error| {
            worker::console_error!("ledger: reading the outbox failed: {error}");
            Outbox::default()
        });
        alarms::next(job, &outbox, config.settings.outbox_delay_ms, self.effects_due(config))
    }

    /// A queue delivery: the core judges it; at most one attempt runs.
    async fn deliver(&self, config: &Config) -> Result<Response> {
        let store = self.store();
        let now = now_ms();
        let mut job = store.load_job()?;
        if let Some(job) = job.as_mut() {
            pump::settle_by_time(&store, job, now, self.memory.borrow().is_driving())?;
        }
        let judged = background::on_delivery(job.as_ref(), now, self.memory.borrow().is_driving());
        let verdict = match delivery::without_run(judged, job.as_ref(), now) {
            Some(verdict) => {
                // A job that needs an operator is dead-lettered now, once: its
                // runtime may have died before the dead letter went out, and
                // after its lease nothing else looks again before retention
                // (found by the simulation: SIM_EDGE_AS_IS=1, seed 232426).
                if let Some(job) = job.as_ref() {
                    self.dead_letter_once(job).await?;
                }
                // A redelivery of a finished job type's job: what follows its
                // answer, and effects due or claimed by a runtime that is
                // gone, are settled now.
                if judged == Delivery::Ack
                    && job.as_ref().is_some_and(|j| j.state() == JobState::Completed)
                    && !self.memory.borrow().is_driving()
                {
                    self.follow_up(config).await?;
                }
                verdict
            }
            None => match (job, store.load_request()?) {
                (Some(mut job), Some((submission, body))) => {
                    let submission: Submission = serde_json::from_str(&submission)?;
                    // This delivery runs the job from here: a duplicate that
                    // arrives while the quota is asked must find it taken.
                    let Some(lock) = self.coordination().lock(None) else {
                        return Err(EdgeError::broken("a delivery judged to run a job another drive holds").into());
                    };
                    // It took the message: from here the attempt's lease
                    // covers the job, not the outbox. The alarm is set for
                    // soon: if it finds the job being run, it looks again
                    // when the lease ends (a crash mid-call is sent again then).
                    store.change_outbox(&mut |outbox| outbox.taken(now))?;
                    self.arm(config, &job);
                    if let Some(problem) = self.over_quota(config, &submission).await {
                        drop(lock);
                        // Over budget: the job waits for the next day (the
                        // alarm sends it again then).
                        self.defer(config, &mut job, problem.retry_after_ms.unwrap_or(0))?;
                        Verdict::Ack
                    } else {
                        // The caller is the queue: its response is not what matters, the job is.
                        let answer = self.drive(config, lock, &store, job, true, &submission, &body).await?;
                        let mut job = store.load_job()?;
                        // No attempt could be made (no route, every provider's
                        // breaker open): the job waits for the next probe.
                        let asked_ms = answer.headers().get(header::RETRY_AFTER_MS)?.and_then(|v| v.parse().ok());
                        if let Some(waiting) = job.as_mut()
                            && let Some(wait_ms) = delivery::no_attempt_wait_ms(waiting, asked_ms)
                        {
                            self.defer(config, waiting, wait_ms)?;
                        }
                        if let Some(job) = job.as_ref() {
                            self.dead_letter_once(job).await?;
                        }
                        delivery::after_run(job.as_ref(), now_ms())
                    }
                }
                _ => Verdict::Ack,
            },
        };
        self.delivered(config, &verdict)?;
        Response::from_json(&verdict)
    }

    /// What the queue does with a delivered message is what the outbox
    /// knows of it: acknowledged (taken), or handed back to be delivered
    /// again after a delay. A fresh object is left as it is (no tables).
    fn delivered(&self, config: &Config, verdict: &Verdict) -> Result<()> {
        let store = self.store();
        let Some(job) = store.load_job()? else { return Ok(()) };
        store.change_outbox(&mut |outbox| match *verdict {
            Verdict::Retry { delay_ms } => outbox.requeued(now_ms(), delay_ms),
            Verdict::Ack | Verdict::Dead => outbox.taken(now_ms()),
        })?;
        // A driver here arms the alarm when it is done (a stream's watchdog
        // must not be replaced meanwhile).
        if !self.memory.borrow().is_driving() {
            self.arm(config, &job);
        }
        Ok(())
    }

    /// A background job's next attempt waits `wait_ms` (a CAS write; the
    /// alarm sends it again then).
    fn defer(&self, config: &Config, job: &mut Job, wait_ms: u64) -> Result<()> {
        let read = job.version();
        job.defer_until(now_ms() + wait_ms, now_ms());
        self.store().update_job(read, job)?;
        self.arm(config, job);
        Ok(())
    }

    /// A background job that needs an operator (dead, or unknown under
    /// `UNKNOWN_POLICY=block` once its lease is over) goes to the dead-letter
    /// queue, once: whatever made it so (a delivery, a lease that ran out
    /// with the runtime gone, the alarm).
    async fn dead_letter_once(&self, job: &Job) -> Result<()> {
        let store = self.store();
        if !background::needs_operator(job, &store.load_outbox()?, now_ms()) || store.dead_lettered()? {
            return Ok(());
        }
        let Some((submission, _)) = store.load_request()? else { return Ok(()) };
        let submission: Submission = serde_json::from_str(&submission)?;
        let message = submission.message();
        match queue::send_dead_letter(&self.env, &message).await {
            Ok(()) => store.note_dead_lettered(now_ms())?,
            // The next alarm or delivery tries again.
            Err(error) => worker::console_warn!("ledger: sending a dead letter failed: {error}"),
        }
        Ok(())
    }

    /// An operator sends the job's message again.
    async fn kick(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let Some(job) = self.store().load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        if !job.is_background() {
            return http::problem_of(ProblemType::NotBackground, "only a background job has a queue message");
        }
        worker::console_log!("ledger: {} sent job {} to the queue again", request.by, request.key);
        self.enqueue(config, &job, true).await?;
        let enqueued = self.store().load_outbox()?.sends();
        http::with_cors(Response::from_json(&serde_json::json!({ "enqueued": enqueued }))?.with_status(202))
    }

    /// An operator gives a dead background job a fresh allowance of attempts.
    async fn replay(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        // A job type's answer is in but some effect did not happen: only
        // those effects go again.
        if let Some(answer) = self.replay_effects(config, request).await? {
            return Ok(answer);
        }
        let store = self.store();
        let Some(mut job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        if !job.is_background() {
            return http::problem_of(ProblemType::NotBackground, "only a background job can be replayed");
        }
        // The outbox gave up on it (no delivery took any of its messages):
        // once the queue is fixed, a fresh run of sends.
        if background::undelivered(&job, &store.load_outbox()?) {
            store.clear_dead_lettered()?;
            self.enqueue(config, &job, true).await?;
            return Response::from_json(&serde_json::json!({ "replayed": true }));
        }
        // A dead job of a type run once per subject freed its subject: it
        // runs again only if no other job took it meanwhile.
        if job.state() == JobState::Dead
            && let Some(problem) = self.subject_for_replay(config).await
        {
            return http::problem_of(ProblemType::NotReplayable, problem.detail);
        }
        let read = job.version();
        let grant = job.policy().max_attempts();
        match job.replay_dead(read, grant, &request.by, &request.request, now_ms()) {
            Ok(true) => {
                store.update_job(read, &job)?;
                store.clear_dead_lettered()?;
                self.enqueue(config, &job, true).await?;
                Response::from_json(&serde_json::json!({ "replayed": true }))
            }
            Ok(false) => Response::from_json(
                &serde_json::json!({ "replayed": false, "reason": "already replayed by this request" }),
            ),
            Err(error) => http::problem_of(ProblemType::NotReplayable, error.to_string()),
        }
    }

    /// An operator settles an unknown job: succeeded with a given response,
    /// or one new attempt now.
    async fn resolve(&self, config: &Config, request: &OperatorRequest) -> Result<Response> {
        let store = self.store();
        let Some(mut job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let read = job.version();
        let now = now_ms();
        let resolution = match Resolution::read(request.action.as_deref(), request.status, request.body.clone()) {
            Ok(resolution) => resolution,
            Err(refused) => return http::problem(&refused.problem()),
        };
        let outcome = match resolution {
            Resolution::Succeeded { status, body } => {
                match job.resolve_succeeded(read, status, &request.by, &request.request, now) {
                    Ok(Some(attempt)) => {
                        let response = StoredResponse {
                            status,
                            content_type: "application/json".into(),
                            body: serde_json::to_vec(&body)?,
                        };
                        store.save_response(attempt, &response)?;
                        Ok(true)
                    }
                    Ok(None) => Ok(false),
                    Err(error) => Err(error),
                }
            }
            Resolution::Retry => job.allow_attempt(read, &request.by, &request.request, now),
        };
        match outcome {
            Ok(changed) => {
                if changed {
                    store.update_job(read, &job)?;
                    store.clear_dead_lettered()?;
                    if operator::requeue_after_resolve(&job) {
                        self.enqueue(config, &job, true).await?;
                    }
                    // Resolved with an answer: a job type's subject is
                    // answered and its effects follow.
                    self.follow_up(config).await?;
                }
                let view = JobView::new(self.parse_key(&request.key)?, &job);
                http::with_cors(Response::from_json(&view)?)
            }
            Err(error) => http::problem_of(ProblemType::NotResolvable, error.to_string()),
        }
    }

    /// What a dead letter records about this job.
    fn facts(&self) -> Result<Response> {
        let store = self.store();
        let Some(job) = store.load_job()? else {
            return http::problem_of(ProblemType::JobNotFound, "no job here");
        };
        let last = job.attempts().last();
        let outbox = store.load_outbox()?;
        let (error_class, detail) = if background::undelivered(&job, &outbox) {
            let detail = format!("no queue delivery took any of its {} messages", outbox.sends());
            (background::UNDELIVERED.to_owned(), detail)
        } else {
            let detail = last
                .and_then(|a| store.load_response(a.number).ok().flatten())
                .map(|response| dead_letter::detail_of_body(&response.body))
                .unwrap_or_default();
            (last.and_then(|a| a.error_class).map_or_else(|| "unknown".into(), ErrorClass::name), detail)
        };
        let facts = DeadFacts {
            dead: background::needs_operator(&job, &outbox, now_ms()),
            error_class,
            last_status: last.and_then(|a| a.status),
            detail,
            attempts: job.attempts().len() as u32,
        };
        Response::from_json(&facts)
    }

    /// The refusal of a new attempt whose tenant's or user's token budget
    /// for today is spent (quotas fail open: a meter that cannot be reached
    /// does not stop the job).
    async fn over_quota(&self, config: &Config, submission: &Submission) -> Option<Problem> {
        let limits = config.settings_quota_limits(&submission.tenant);
        if limits.tenant_tokens_per_day.is_none() && limits.user_tokens_per_day.is_none() {
            return None;
        }
        let allowed = meter::allows(&self.env, &submission.tenant, submission.user.as_deref(), limits).await;
        if allowed.unwrap_or(true) {
            return None;
        }
        let retry_after_ms = onejob_core::quota::until_next_day_ms(now_ms());
        Some(
            Problem::new(ProblemType::QuotaExceeded, "this tenant's or user's token budget for today is spent")
                .with_key(submission.key.as_str())
                .with_retry_after_ms(retry_after_ms),
        )
    }

    /// Updates the operators' index after the response, if the job changed
    /// since this object last did.
    fn index_in_background(&self) {
        let store = self.store();
        // One integer read on every replay; the job itself only when it changed.
        let Ok(Some(version)) = store.job_version() else { return };
        if version == self.indexed_version.get() {
            return;
        }
        self.indexed_version.set(version);
        let (env, metering) = (self.env.clone(), Rc::clone(&self.metering));
        self.state.wait_until(async move { index_now(&env, &store, &metering).await });
    }

    /// The job for an operator: its view, whose it is, and its stored result.
    fn admin_view(&self) -> Result<Response> {
        let store = self.store();
        let (Some(mut job), Some(meta)) = (store.load_job()?, store.load_meta()?) else {
            return http::problem_of(ProblemType::JobNotFound, "no job with that key");
        };
        job.expire(now_ms());
        let result = match job.replayed_attempt() {
            Some(attempt) if attempt.streamed => {
                let events = store.load_events(attempt.number, 0, u64::MAX)?;
                let body: Vec<u8> = events.concat().into_iter().take(64 * 1024).collect();
                Some(serde_json::json!({ "status": 200, "content_type": "text/event-stream", "body": String::from_utf8_lossy(&body) }))
            }
            Some(attempt) => store.load_response(attempt.number)?.map(|response| {
                let body: Vec<u8> = response.body.into_iter().take(64 * 1024).collect();
                serde_json::json!({ "status": response.status, "content_type": response.content_type, "body": String::from_utf8_lossy(&body) })
            }),
            None => None,
        };
        let mut view = JobView::new(self.parse_key(&meta.key)?, &job);
        // The same count the tenant's view shows (the operator's console says
        // "background (N queue messages)" from it).
        self.with_outbox(&mut view, &job)?;
        self.with_effects(&mut view)?;
        let mut view = serde_json::to_value(view)?;
        if let Some(object) = view.as_object_mut() {
            object.insert("tenant".into(), meta.tenant.into());
            object.insert("user".into(), meta.user.into());
            object.insert("model".into(), meta.model.into());
            object.insert("result".into(), result.unwrap_or(serde_json::Value::Null));
        }
        Response::from_json(&view)
    }

    fn parse_key(&self, key: &str) -> Result<IdempotencyKey> {
        IdempotencyKey::parse(key).map_err(|e| EdgeError::Malformed(e.to_string()).into())
    }
}

/// Writes the job's row in the operators' index (errors are logged: the
/// index is for looking, the Ledger stays the authority), after counting
/// the job's new tokens against its quotas.
async fn index_now(env: &Env, store: &Store, metering: &Cell<bool>) {
    let Ok(config) = config::load(env) else { return };
    if !config.quotas.is_empty() {
        meter_new_tokens(env, store, metering).await;
    }
    let (Ok(Some(meta)), Ok(Some(job))) = (store.load_meta(), store.load_job()) else { return };
    if let Err(error) = ops::index_job(env, &config, &meta, &job).await {
        worker::console_warn!("ledger: indexing the job failed: {error}");
    }
}

/// Counts the job's tokens not counted yet against its tenant's and user's
/// quotas: added, then marked as counted, so a failed add leaves them to
/// the next index of the job instead of losing them. One count at a time
/// per object (`metering`): a count that finds one running leaves its
/// tokens to it, and the running one looks again before it stops.
async fn meter_new_tokens(env: &Env, store: &Store, metering: &Cell<bool>) {
    if metering.replace(true) {
        return;
    }
    while let (Ok(Some(mut meta)), Ok(Some(job))) = (store.load_meta(), store.load_job()) {
        let Some(new) = quota::unmetered(job.attempts(), meta.metered) else { break };
        if let Err(error) = meter::add(env, &meta.tenant, meta.user.as_deref(), new).await {
            worker::console_warn!("ledger: counting tokens against quotas failed (counted later): {error}");
            break;
        }
        meta.metered += new;
        if let Err(error) = store.update_meta(&meta) {
            worker::console_warn!("ledger: marking tokens as counted failed: {error}");
            break;
        }
    }
    metering.set(false);
}
