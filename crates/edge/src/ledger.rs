//! `Ledger`: the Durable Object that owns one job (one per tenant + key).
//! It is glue: the core decides ([`onejob_core::admission::admit`]), the
//! [`crate::driver`] runs attempts, the [`crate::store`] keeps the job.
//!
//! Durable Objects run one event at a time, but an `.await` lets the next
//! request in. So everything from reading the job to recording the claim is
//! synchronous; one request at a time drives the job (`driving`), and every
//! duplicate that arrives meanwhile waits for that driver's result.
//!
//! No `RefCell` borrow is held across an `.await`, and nothing that comes
//! from a request or from storage is unwrapped: a panic here would throw
//! away the in-memory state of every object in the isolate.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{Either, select};
use onejob_core::admission::{self, Admission, Arrival};
use onejob_core::fingerprint::Fingerprint;
use onejob_core::job::{Job, JobState};
use onejob_core::key::{IdempotencyKey, StorageId};
use onejob_core::protocol::{JobView, Problem, ProblemType};
use onejob_core::providers::Api;
use onejob_core::sse::Dialect;
use worker::{Delay, DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::alarms;
use crate::cache;
use crate::clock::now_ms;
use crate::config::{self, Config};
use crate::driver::{self, Driven, Driver};
use crate::handoff::{self, JobQuery, Submission};
use crate::http::{self, JobResult};
use crate::store::Store;
use crate::stored;
use crate::stream::{self, LiveSlot, Pump, Subscription};

#[durable_object]
pub struct Ledger {
    state: State,
    env: Env,
    /// True while one request (or a stream's pump) is running the job's attempts.
    driving: Rc<Cell<bool>>,
    /// The job being created by the driver, until its first write: the
    /// driver may await (asking a provider's breaker) before it claims, and
    /// a duplicate arriving meanwhile must see the job (its fingerprint) and
    /// wait for it, not start a second one.
    creating: RefCell<Option<Job>>,
    /// Duplicates waiting for the driver's result.
    waiters: RefCell<Vec<oneshot::Sender<Handed>>>,
    /// The running attempt's stream, while it streams.
    live: LiveSlot,
    /// Set to cancel the running stream (its pump stops at its next wake).
    cancel: Rc<Cell<bool>>,
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
            driving: Rc::new(Cell::new(false)),
            creating: RefCell::new(None),
            waiters: RefCell::new(Vec::new()),
            live: Rc::new(RefCell::new(None)),
            cancel: Rc::new(Cell::new(false)),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let Ok(config) = config::load(&self.env) else { return http::misconfigured() };
        let body = req.bytes().await?;
        let answer = match req.path().as_str() {
            "/submit" => match handoff::decode(body) {
                Some((submission, body)) => self.submit(&config, submission, body).await,
                None => http::problem_of(ProblemType::Internal, "malformed submission"),
            },
            route => match (route, serde_json::from_slice::<JobQuery>(&body)) {
                ("/view", Ok(query)) => self.view(&query.key),
                ("/stream", Ok(query)) => self.resume_stream(&query.key, query.from.unwrap_or(0), query.ids),
                ("/cancel", Ok(query)) => self.cancel(&query.key),
                (_, Ok(_)) => http::problem_of(ProblemType::NotFound, "unknown ledger route"),
                (_, Err(_)) => http::problem_of(ProblemType::Internal, "malformed job query"),
            },
        };
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
        match job {
            // Expired, or streaming, while an attempt still runs here: look
            // again soon (the stream's watchdog).
            Some(job) if (job.is_expired(now) || job.is_streaming()) && self.driving.get() => {
                alarms::set(&self.state, alarms::watchdog()).await?;
            }
            Some(mut job) if !job.is_expired(now) => {
                // A stream whose pump is gone (restart, eviction, deploy) is settled.
                stream::settle_by_time(&self.store(), &mut job, now, self.driving.get())?;
                alarms::set(&self.state, alarms::retention(&job)).await?
            }
            // Expired (or nothing here): leave no table, row or alarm behind.
            _ => {
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
        http::with_cors(Response::from_json(&JobView::new(key, &job))?)
    }

    /// A keyed request: the core admits it, the Ledger performs the decision.
    async fn submit(&self, config: &Config, submission: Submission, body: Vec<u8>) -> Result<Response> {
        let Some(fingerprint) = Fingerprint::parse(&submission.fingerprint) else {
            return http::problem_of(ProblemType::Internal, "malformed fingerprint");
        };
        let store = self.store();
        let now = now_ms();
        // From here to the claim nothing awaits: no other request interleaves.
        let mut job = store.load_job()?;
        let stored = job.is_some();
        if job.is_none() && self.driving.get() {
            job = self.creating.borrow().clone();
        }
        if let Some(job) = job.as_mut() {
            stream::settle_by_time(&store, job, now, self.driving.get())?;
        }
        let key = submission.key.as_str();
        let arrival = Arrival { key, fingerprint: &fingerprint, wait_ms: submission.wait_ms };
        match admission::admit(job.as_ref(), arrival, now, self.driving.get()) {
            Admission::Replay => match job.as_ref() {
                Some(job) => stored::finished_result(&store, job)?.into_response(key, true),
                None => Err(worker::Error::RustError("replay without a job".into())),
            },
            Admission::Wait => match stream::subscribe(&self.live, &store, 0)? {
                // A duplicate of a streaming job follows the stream from its first event.
                Some(subscription) => http::stream_response(subscription, key, true),
                None => self.wait_for_driver(key, submission.wait_ms).await,
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
                self.drive(config, &store, job, stored, &submission, &body).await
            }
        }
    }

    /// Becomes the job's driver, then fans the one result out to every
    /// duplicate that waited for it.
    async fn drive(
        &self,
        config: &Config,
        store: &Store,
        mut job: Job,
        stored: bool,
        submission: &Submission,
        body: &[u8],
    ) -> Result<Response> {
        self.driving.set(true);
        if !stored {
            *self.creating.borrow_mut() = Some(job.clone());
        }
        let driver = Driver::new(config, &self.env, store, submission, body);
        let driven = driver.run(&mut job, stored).await;
        self.creating.borrow_mut().take();
        if let Some(late) = driver.take_late() {
            // A hedge's loser is still out: audit what it cost when it answers.
            self.state.wait_until(driver::audit_late(self.store(), late));
        }
        let result = match driven {
            Ok(Driven::Result(result)) => result,
            Ok(Driven::Stream { ticket, streaming }) => {
                // The pump owns the stream from here and clears `driving` at its end.
                stream::open(&self.live, ticket.attempt, &streaming.content_type);
                let pump = Pump::new(
                    Rc::clone(&self.live),
                    self.store(),
                    Rc::clone(&self.driving),
                    Rc::clone(&self.cancel),
                    job,
                    ticket,
                    streaming,
                )
                .speaking(match Api::of_path(&submission.target) {
                    Api::Anthropic => Dialect::Anthropic,
                    Api::OpenAi => Dialect::OpenAi,
                });
                let waiters: Vec<_> = self.waiters.borrow_mut().drain(..).collect();
                for waiter in waiters {
                    if let Some(subscription) = stream::subscribe(&self.live, store, 0)? {
                        let _ = waiter.send(Handed::Stream(subscription));
                    }
                }
                let own = stream::subscribe(&self.live, store, 0)?;
                self.state.wait_until(pump.run());
                alarms::set_in_background(&self.state, alarms::watchdog());
                return match own {
                    Some(subscription) => http::stream_response(subscription, &submission.key, false),
                    None => Err(worker::Error::RustError("the stream closed before it was followed".into())),
                };
            }
            Err(error) => {
                self.driving.set(false);
                // Dropping the senders releases the waiters with "in progress".
                self.waiters.borrow_mut().clear();
                return Err(error);
            }
        };
        self.driving.set(false);
        let waiters: Vec<_> = self.waiters.borrow_mut().drain(..).collect();
        for waiter in waiters {
            let _ = waiter.send(Handed::Result(result.clone()));
        }
        if result.state.is_terminal() && config.settings.result_cache {
            self.cache_in_background(submission, &job, &result);
        }
        result.into_response(&submission.key, false)
    }

    async fn wait_for_driver(&self, key: &str, wait_ms: u64) -> Result<Response> {
        let (sender, receiver) = oneshot::channel();
        self.waiters.borrow_mut().push(sender);
        match select(receiver, Delay::from(Duration::from_millis(wait_ms))).await {
            // Replayed: only a finished job's stored result is a replay.
            Either::Left((Ok(Handed::Result(result)), _)) => {
                let replayed = result.state.is_terminal();
                result.into_response(key, replayed)
            }
            Either::Left((Ok(Handed::Stream(subscription)), _)) => http::stream_response(subscription, key, true),
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
        if !job.state().is_terminal() && !streaming_here {
            return http::problem_about(
                &Problem::new(ProblemType::NotCancellable, "only a job whose answer is streaming can be cancelled"),
                key,
                job.state(),
            );
        }
        self.cancel.set(streaming_here);
        let status = if streaming_here { 202 } else { 200 };
        http::with_cors(Response::from_json(&JobView::new(parsed, &job))?.with_status(status))
    }

    /// `GET /onejob/v1/jobs/{key}/stream?from=N`: the events after the first
    /// `N`, live while the job streams, from storage once it has finished.
    fn resume_stream(&self, key: &str, from: u64, ids: bool) -> Result<Response> {
        let store = self.store();
        if let Some(subscription) = stream::subscribe(&self.live, &store, from)? {
            return http::stream_response_with(subscription, key, true, ids);
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
        let Ok(key) = IdempotencyKey::parse(&submission.key) else { return };
        let storage_id = StorageId::derive(&submission.tenant, &key).to_string();
        let fingerprint = job.fingerprint().to_string();
        let ttl_s = job.expires_ms().saturating_sub(now_ms()) / 1000;
        let (env, result) = (self.env.clone(), result.clone());
        self.state.wait_until(async move {
            cache::store(&env, &storage_id, &fingerprint, &result, ttl_s).await;
        });
    }
}
