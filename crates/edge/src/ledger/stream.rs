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
use onejob_core::job::{AttemptTicket, Job};
use onejob_core::ledger::stream::end::{self, StreamEnd as End};
use onejob_core::ledger::stream::finish::{self, Finished};
use onejob_core::ledger::stream::read::{Arrived, StreamReader};
use onejob_core::upstream::sse::Dialect;
use worker::{Delay, Result};

use crate::answer::Streaming;
use crate::env::clock::now_ms;
use crate::error::EdgeError;
use crate::http::{self, StreamHead};
use crate::ledger::memory::Memory;
use crate::ledger::store::{Store, StoreError};

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

/// Starts a live stream in `slot`, followed from its first event by its
/// caller (the first subscription) and `waiters` more (nothing is
/// published or stored yet: nothing is missed).
pub fn open(slot: &LiveSlot, attempt: u32, content_type: &str, waiters: usize) -> (Subscription, Vec<Subscription>) {
    let mut live =
        Live { attempt, content_type: content_type.to_owned(), flushed: 0, tail: Vec::new(), subscribers: Vec::new() };
    let own = live.follow();
    let followers = (0..waiters).map(|_| live.follow()).collect();
    *slot.borrow_mut() = Some(live);
    (own, followers)
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
    /// A subscriber from the first event, before any was published.
    fn follow(&mut self) -> Subscription {
        let (sender, events) = unbounded();
        self.subscribers.push(sender);
        Subscription { attempt: self.attempt, content_type: self.content_type.clone(), from: 0, events }
    }

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
    /// Set by a caller's cancel: the pump stops at its next wake.
    cancel: Rc<Cell<bool>>,
    /// What the stream says so far, and what to do next (the core's).
    reader: StreamReader,
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
        let reader = StreamReader::new(Dialect::OpenAi, now_ms());
        Self { slot, store, memory, job, ticket, streaming, cancel, reader }
    }

    /// The dialect of the events the pump adds, until the stream's first
    /// event says otherwise (the request's API, say).
    pub fn speaking(mut self, dialect: Dialect) -> Self {
        self.reader = StreamReader::new(dialect, now_ms());
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

    /// Reads the upstream until the reader says the stream ended,
    /// publishing its events and writing them as it says.
    async fn pump(&mut self) -> End {
        loop {
            let tick = Delay::from(Duration::from_millis(self.reader.tick_ms()));
            let next = match select(self.streaming.body.next(), tick).await {
                Either::Left((next, _)) => Some(next),
                Either::Right(_) => None,
            };
            let arrived = Arrived::of(next.as_ref().map(|item| item.as_ref().map(|read| read.as_deref())));
            let read = self.reader.on(arrived, self.cancel.get(), now_ms());
            self.publish(read.events);
            if let Some(end) = read.end {
                return end;
            }
            let pending = self.slot.borrow().as_ref().map_or(0, Live::pending_bytes);
            if self.reader.write_due(pending, now_ms()) {
                match self.write_pending().and_then(|()| self.renew_lease()) {
                    Ok(()) => self.reader.wrote(now_ms()),
                    Err(StoreError::LostRace) => return End::LostJob,
                    Err(StoreError::Failed(error)) => {
                        worker::console_error!("ledger: writing stream events failed: {error}");
                    }
                }
            }
        }
    }

    /// Hands events to the live stream's subscribers.
    fn publish(&self, events: Vec<Vec<u8>>) {
        if let Some(live) = self.slot.borrow_mut().as_mut() {
            events.into_iter().for_each(|event| live.publish(event));
        }
    }

    /// Writes the pending events.
    fn write_pending(&mut self) -> std::result::Result<(), StoreError> {
        let mut guard = self.slot.borrow_mut();
        let Some(live) = guard.as_mut() else { return Ok(()) };
        if !live.tail.is_empty() {
            self.store.append_events(live.attempt, live.flushed, &live.tail)?;
            live.flushed += live.tail.len() as u64;
            live.tail.clear();
        }
        Ok(())
    }

    /// Restarts the attempt's lease (a long answer is not a lost one).
    fn renew_lease(&mut self) -> std::result::Result<(), StoreError> {
        let read = self.job.version();
        self.ticket = self.job.extend_lease(self.ticket, now_ms()).map_err(|_| StoreError::LostRace)?;
        self.store.update_job(read, &self.job)
    }

    /// Records how the stream ended ([`finish::finish`] says what it
    /// means and what is left to write).
    fn finish(&mut self, end: End) -> Result<()> {
        if end.aborts_upstream()
            && let Some(abort) = self.streaming.abort.take()
        {
            abort.abort();
        }
        let read = self.job.version();
        let finished = finish::finish(&mut self.reader, end, &mut self.job, self.ticket, now_ms());
        let Some(Finished { closing, size, recorded }) = finished else { return Ok(()) };
        // Readers and stored events are closed even when the job moved on.
        self.publish(closing.into_iter().collect());
        self.write_pending()?;
        recorded.map_err(|_| EdgeError::broken("the streaming attempt no longer holds the job"))?;
        self.store.finish_streamed_response(self.ticket.attempt, size)?;
        self.store.update_job(read, &self.job)?;
        Ok(())
    }
}

/// Performs what time and the object's memory settle before any request
/// is admitted ([`end::settle_by_time`]): the job written if it
/// changed, after a stream no pump will close is closed with the gateway's
/// error event. `pump_here` false: the runtime that ran the pump is gone.
pub fn settle_by_time(store: &Store, job: &mut Job, now: u64, pump_here: bool) -> Result<()> {
    let read = job.version();
    let settled = end::settle_by_time(job, now, pump_here);
    if let Some(attempt) = settled.close_stream {
        let stored = store.count_events(attempt)?;
        let first = store.load_events(attempt, 0, 1)?;
        let event = finish::lost_pump_event(first.first().map(Vec::as_slice));
        store.append_events(attempt, stored, &[event])?;
    }
    if settled.changed {
        store.update_job(read, job)?;
    }
    Ok(())
}
