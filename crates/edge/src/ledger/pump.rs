//! A job's answer while it streams. The Ledger, not a caller, owns the
//! upstream stream: a [`Pump`] reads it, cuts it into complete SSE events,
//! sends each to every subscriber at once and writes them to storage in
//! batches. Every caller — the first, a duplicate, a reader resuming from an
//! offset — is a subscriber: stored events after its offset, then the events
//! not yet written, then live ones, taken in one synchronous step so nothing
//! is missed or repeated at the hand-over. A caller that goes away drops only
//! its subscription; the pump goes on and the answer is kept.
//!
//! End-of-stream proves nothing: only the provider's terminal event
//! completes the job. Without it the job is `interrupted`, its partial stream
//! kept with one error event appended.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures_channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures_util::StreamExt;
use futures_util::future::{Either, select};
use onejob_core::job::{AttemptTicket, Job, JobState};
use onejob_core::ledger::stream_end::{Closing, StreamEnd as End};
use onejob_core::reply::Usage;
use onejob_core::sse::{
    Dialect, EventKind, FlushPolicy, Splitter, cancelled_event, classify_event, interrupted_event, merge_usage,
    usage_of,
};
use worker::{Delay, Result};

use crate::answer::Streaming;
use crate::env::clock::now_ms;
use crate::error::EdgeError;
use crate::http::{self, StreamHead};
use crate::ledger::memory::Memory;
use crate::ledger::store::{Store, StoreError};

/// An upstream silent this long is given up on (the stream is interrupted).
pub const IDLE_TIMEOUT_MS: u64 = 120_000;

/// A running stream renews its attempt's lease at least this often, also
/// while the upstream is silent, so a slow answer is never taken for a lost one.
const RENEW_EVERY_MS: u64 = 5_000;

/// The stream of the running attempt, as far as it has come.
pub struct Live {
    attempt: u32,
    content_type: String,
    /// Events already in storage.
    flushed: u64,
    /// Events after those, not yet written.
    tail: Vec<Vec<u8>>,
    subscribers: Vec<UnboundedSender<Vec<u8>>>,
}

/// Where the Ledger keeps its live stream (none when nothing streams).
pub type LiveSlot = Rc<RefCell<Option<Live>>>;

/// A subscriber's events, from its offset on.
pub struct Subscription {
    pub attempt: u32,
    pub content_type: String,
    /// The number of events before the first one it gets.
    pub from: u64,
    pub events: UnboundedReceiver<Vec<u8>>,
}

impl Subscription {
    /// The response that streams it to a caller, with `id:` lines when `ids`.
    pub fn into_response(self, key: &str, replayed: bool, ids: bool) -> Result<worker::Response> {
        let Self { attempt, content_type, from, events } = self;
        let head = StreamHead { attempt, content_type: &content_type, from };
        http::stream_response(head, events, key, replayed, ids)
    }
}

/// Starts a live stream in `slot`.
pub fn open(slot: &LiveSlot, attempt: u32, content_type: &str) {
    *slot.borrow_mut() = Some(Live {
        attempt,
        content_type: content_type.to_owned(),
        flushed: 0,
        tail: Vec::new(),
        subscribers: Vec::new(),
    });
}

/// Subscribes after the first `from` events, if a stream is live.
pub fn subscribe(slot: &LiveSlot, store: &Store, from: u64) -> Result<Option<Subscription>> {
    let mut guard = slot.borrow_mut();
    let Some(live) = guard.as_mut() else { return Ok(None) };
    let (sender, events) = unbounded();
    if from < live.flushed {
        for event in store.load_events(live.attempt, from, live.flushed)? {
            let _ = sender.unbounded_send(event);
        }
    }
    let skip = usize::try_from(from.saturating_sub(live.flushed)).unwrap_or(usize::MAX);
    for event in live.tail.iter().skip(skip) {
        let _ = sender.unbounded_send(event.clone());
    }
    live.subscribers.push(sender);
    Ok(Some(Subscription { attempt: live.attempt, content_type: live.content_type.clone(), from, events }))
}

impl Live {
    /// Hands an event to every subscriber still listening, and keeps it.
    fn publish(&mut self, event: Vec<u8>) {
        self.subscribers.retain(|subscriber| subscriber.unbounded_send(event.clone()).is_ok());
        self.tail.push(event);
    }

    fn pending_bytes(&self) -> usize {
        self.tail.iter().map(Vec::len).sum()
    }
}

/// Reads one attempt's upstream stream to its end and records the outcome.
pub struct Pump {
    slot: LiveSlot,
    store: Store,
    /// Who works on the job in the Ledger: the pump ends its drive at the end.
    memory: Memory,
    job: Job,
    ticket: AttemptTicket,
    streaming: Streaming,
    policy: FlushPolicy,
    /// Set by a caller's cancel: the pump stops at its next wake.
    cancel: Rc<Cell<bool>>,
    /// The last usage the stream reported, and its size so far.
    usage: Option<Usage>,
    size: u64,
    /// The provider's event format, from the first event.
    dialect: Dialect,
}

impl Pump {
    pub fn new(
        slot: LiveSlot,
        store: Store,
        memory: Memory,
        cancel: Rc<Cell<bool>>,
        job: Job,
        ticket: AttemptTicket,
        streaming: Streaming,
    ) -> Self {
        cancel.set(false);
        let policy = FlushPolicy::default();
        Self {
            slot,
            store,
            memory,
            job,
            ticket,
            streaming,
            policy,
            cancel,
            usage: None,
            size: 0,
            dialect: Dialect::OpenAi,
        }
    }

    /// The dialect of the events the pump adds, until the stream's first
    /// event says otherwise (the request's API, say).
    pub fn speaking(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    pub async fn run(mut self) {
        let end = self.pump().await;
        if let Err(error) = self.finish(end) {
            worker::console_error!("ledger: recording a streamed answer failed: {error}");
        }
        // Dropping the senders ends every subscriber's stream.
        *self.slot.borrow_mut() = None;
        self.memory.borrow_mut().end_stream();
    }

    async fn pump(&mut self) -> End {
        let mut splitter = Splitter::new();
        let mut last_flush = now_ms();
        let mut last_byte = now_ms();
        loop {
            let tick = Delay::from(Duration::from_millis(self.policy.max_delay_ms));
            let next = match select(self.streaming.body.next(), tick).await {
                Either::Left((next, _)) => Some(next),
                Either::Right(_) => None,
            };
            let mut ended = None;
            match next {
                Some(Some(Ok(bytes))) => {
                    last_byte = now_ms();
                    for event in splitter.push(&bytes) {
                        let kind = classify_event(&event);
                        self.note(&event);
                        if let Some(live) = self.slot.borrow_mut().as_mut() {
                            live.publish(event);
                        }
                        match kind {
                            EventKind::Data => {}
                            EventKind::Terminal => ended = Some(End::Complete),
                            EventKind::Error => ended = Some(End::Failed),
                        }
                        if ended.is_some() {
                            break;
                        }
                    }
                }
                Some(Some(Err(_))) => {
                    ended = Some(End::Interrupted("the connection to the provider failed mid-stream"))
                }
                Some(None) => ended = Some(End::Interrupted("the provider's stream ended before its last event")),
                None if now_ms().saturating_sub(last_byte) >= IDLE_TIMEOUT_MS => {
                    ended = Some(End::Interrupted("the provider sent nothing for 120 s"))
                }
                None => {}
            }
            if let Some(end) = ended {
                return end;
            }
            if self.cancel.get() {
                return End::Cancelled;
            }
            let pending = self.slot.borrow().as_ref().map_or(0, Live::pending_bytes);
            let since_flush = now_ms().saturating_sub(last_flush);
            if self.policy.should_flush(pending, since_flush, false) || since_flush >= RENEW_EVERY_MS {
                match self.flush(true) {
                    Ok(()) => last_flush = now_ms(),
                    Err(StoreError::LostRace) => return End::LostJob,
                    Err(StoreError::Failed(error)) => {
                        worker::console_error!("ledger: writing stream events failed: {error}");
                    }
                }
            }
        }
    }

    /// Writes the pending events; `renew` also restarts the attempt's lease
    /// (a long answer is not a lost one).
    fn flush(&mut self, renew: bool) -> std::result::Result<(), StoreError> {
        let mut guard = self.slot.borrow_mut();
        let Some(live) = guard.as_mut() else { return Ok(()) };
        if !live.tail.is_empty() {
            self.store.append_events(live.attempt, live.flushed, &live.tail)?;
            live.flushed += live.tail.len() as u64;
            live.tail.clear();
        }
        if renew {
            let read = self.job.version();
            self.ticket = self.job.extend_lease(self.ticket, now_ms()).map_err(|_| StoreError::LostRace)?;
            self.store.update_job(read, &self.job)?;
        }
        Ok(())
    }

    /// Records how the stream ended (the core's `StreamEnd` says what it means).
    fn finish(&mut self, end: End) -> Result<()> {
        if end.aborts_upstream()
            && let Some(abort) = self.streaming.abort.take()
        {
            abort.abort();
        }
        if end == End::LostJob {
            return Ok(());
        }
        let closing = end.closing().map(|closing| match closing {
            Closing::Interrupted(detail) => interrupted_event(detail, self.dialect),
            Closing::Cancelled => cancelled_event(self.dialect),
        });
        if let Some(event) = closing {
            self.note(&event);
            if let Some(live) = self.slot.borrow_mut().as_mut() {
                live.publish(event);
            }
        }
        let (usage, size) = (self.usage, self.size);
        self.flush(false)?;
        let read = self.job.version();
        if end.record(&mut self.job, self.ticket, now_ms(), usage).is_err() {
            return Err(EdgeError::broken("the streaming attempt no longer holds the job").into());
        }
        self.store.finish_streamed_response(self.ticket.attempt, size)?;
        self.store.update_job(read, &self.job)?;
        Ok(())
    }

    /// Counts an event's bytes and keeps the usage it reports, if any.
    fn note(&mut self, event: &[u8]) {
        if self.size == 0 {
            self.dialect = Dialect::of_first_event(event);
        }
        self.size += event.len() as u64;
        if event.windows(7).any(|w| w == b"\"usage\"")
            && let Some(usage) = usage_of(event)
        {
            self.usage = Some(merge_usage(self.usage, usage));
        }
    }
}

/// Applies what time and the object's memory decide before any request is
/// admitted: leases that ran out ([`Job::expire`]), and a stream whose pump
/// is not running (`pump_here` false: the runtime that ran it is gone),
/// which is interrupted at once, its stored events closed with the gateway's
/// error event. Writes only if something changed.
pub fn settle_by_time(store: &Store, job: &mut Job, now: u64, pump_here: bool) -> Result<()> {
    let read = job.version();
    let mut changed = job.expire(now);
    changed |= !pump_here && job.settle_orphaned_stream(now);
    if !changed {
        return Ok(());
    }
    if job.state() == JobState::Interrupted
        && !pump_here
        && let Some(attempt) = job.replayed_attempt().map(|a| a.number)
    {
        let stored = store.count_events(attempt)?;
        let first = store.load_events(attempt, 0, 1)?;
        let dialect = first.first().map_or(Dialect::OpenAi, |event| Dialect::of_first_event(event));
        let event = interrupted_event("the gateway lost the stream (its runtime was restarted)", dialect);
        store.append_events(attempt, stored, &[event])?;
    }
    store.update_job(read, job)?;
    Ok(())
}
