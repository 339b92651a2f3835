//! `Ledger`: the Durable Object that owns one job (one per tenant + key).
//! The core decides (`onejob_core::ledger`, `admission`, `background`); this
//! folder performs. This file decodes one [`LedgerCall`], hands it to its handler and rings the alarm:
//! [`submit`] (a keyed request, the drive under its drive lock, waiters), [`keyless`] (a keyless job
//! renewed), [`background`] (deliveries, the outbox, dead letters), [`operator`], [`index`] (the
//! operators' index, quota metering), [`drive`] (performs the core's attempt machine), [`stream`] (a
//! streamed answer), [`store`]/[`stored`] (its SQLite tables and what it knows of them, a replay),
//! [`alarms`], [`effects`] (a job type's effects), [`memory`], [`savings`] (answers given without a call).
//!
//! An `.await` lets the next request in: from reading the job to recording
//! the claim nothing awaits, one request at a time drives the job, and its
//! duplicates wait for its result. No `RefCell` borrow is held across an
//! `.await`, and nothing from a request or storage is unwrapped (a panic would drop every object's
//! memory in the isolate).
//!
//! May import: `api`, `http`, `env`, `answer`, `upstream`, `effects`, `ops`,
//! `queue`, `cache`, `error` and the core; only `lib.rs` imports it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use futures_channel::oneshot;
use onejob_core::identity::key::IdempotencyKey;
use onejob_core::job::Job;
use onejob_core::ledger::background::wake::{self, Here, Ring};
use onejob_core::wire::ProblemType;
use worker::{DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::api::cursor;
use crate::api::ledger::{LedgerCall, Malformed};
use crate::env::{clock::now_ms, config};
use crate::error::EdgeError;
use crate::http;
use crate::ledger::store::{Known, Store};
use crate::ledger::stream::LiveSlot;

mod alarms;
mod background;
mod drive;
mod effects;
mod index;
mod keyless;
mod lock;
mod memory;
mod operator;
mod savings;
mod store;
mod stored;
mod stream;
mod submit;

use lock::{Coordination, Handed};
use memory::Memory;

#[durable_object]
pub struct Ledger {
    state: State,
    env: Env,
    /// Who works on the job here: a drive (and the job it is creating), a
    /// stream's pump, the effects runner ([`memory`]).
    memory: Memory,
    /// Duplicates waiting for the driver's result.
    waiters: RefCell<Vec<oneshot::Sender<Handed>>>,
    /// The running attempt's stream, while it streams.
    live: LiveSlot,
    /// Set to cancel the running stream (its pump stops at its next wake).
    cancel: Rc<Cell<bool>>,
    /// What this object knows of its tables and its job ([`store::Known`]).
    known: Rc<Known>,
    /// The job version last written to the operators' index from here.
    indexed_version: Cell<u64>,
    /// The job version last written to the KV cache from here.
    cached_version: Cell<Option<u64>>,
    /// True while the job's tokens are being counted against its quotas.
    metering: Rc<Cell<bool>>,
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
            known: Rc::default(),
            indexed_version: Cell::new(u64::MAX),
            cached_version: Cell::new(None),
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
        let ring = Ring::of(job, now, self.memory.borrow().is_busy());
        match ring {
            // Expired, or streaming, while something still runs here: look again soon (the watchdog).
            Ring::Watch => alarms::set(&self.state, alarms::watchdog()).await?,
            Ring::Tend(job) => self.tend_at_alarm(job, now).await?,
            // Expired (or nothing here): leave no table, row or alarm behind.
            Ring::Delete(job) => {
                self.release_subject_at_expiry(job.as_ref()).await;
                self.state.storage().delete_alarm().await?;
                self.state.storage().delete_all().await?;
                self.store().forget_all();
            }
        }
        Response::empty()
    }
}

impl Ledger {
    fn store(&self) -> Store {
        Store::new(self.state.storage().sql(), Rc::clone(&self.known))
    }

    /// The alarm's tending of a live job ([`wake::tend`]): a stream whose pump is gone (restart, eviction, deploy)
    /// settled; a background job's message sent again (deliveries dedup, so this is safe) until it is left to
    /// operators; its dead letter; a job type's answer not followed up yet (its stream's pump could not ask) or
    /// effects that are due (a retry, an approval's expiry, a claim left by a runtime that is gone). Then the
    /// index, and the next alarm.
    async fn tend_at_alarm(&self, mut job: Job, now: u64) -> Result<()> {
        stream::settle_by_time(&self.store(), &mut job, now, self.memory.borrow().is_driving())?;
        let Ok(config) = config::load(&self.env) else {
            return alarms::set(&self.state, alarms::retention(&job)).await;
        };
        let outbox_delay_ms = config.settings.outbox_delay_ms;
        let here = self.here();
        let mut outbox = self.store().load_outbox()?;
        // A confirmed message no delivery took: whether the queue lost it
        // depends on how far the consumer has got. Reading it lets other
        // calls in, so the job and its outbox are read again after it.
        let progress = match wake::needs_progress(&job, &outbox, now, here) {
            true => cursor::read(&self.env).await,
            false => None,
        };
        if progress.is_some() {
            let Some(current) = self.store().load_job()? else { return Ok(()) };
            (job, outbox) = (current, self.store().load_outbox()?);
        }
        let steps = wake::tend(&job, &outbox, outbox_delay_ms, now, self.here(), progress.as_ref());
        self.tend(&config, steps).await?;
        self.index_in_background();
        let outbox = self.store().load_outbox()?;
        alarms::set(&self.state, alarms::next(&job, &outbox, outbox_delay_ms, self.effects_due(&config))).await
    }

    /// What runs here, as the alarm's tending sees it.
    fn here(&self) -> Here {
        let memory = self.memory.borrow();
        Here { driving: memory.is_driving(), sending: memory.is_sending() }
    }

    /// The in-memory coordination the drive lock guards.
    fn coordination(&self) -> Coordination<'_> {
        Coordination { memory: &self.memory, waiters: &self.waiters, live: &self.live }
    }

    /// A job key the Ledger was handed (checked by the gateway already).
    fn parse_key(&self, key: &str) -> Result<IdempotencyKey> {
        IdempotencyKey::parse(key).map_err(|e| EdgeError::Malformed(e.to_string()).into())
    }
}
