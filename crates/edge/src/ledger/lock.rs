//! The drive lock: one request (or a queue delivery, then a stream's pump)
//! at a time runs a job's attempts; duplicates that arrive meanwhile wait
//! for its result.
//!
//! It is a guard, so no early return can leave it held: whatever path leaves
//! `drive` without handing the result out (an error's `?`, a panic-free
//! early exit) drops it, and the drop releases the lock, forgets the job
//! being created, fails every waiter (their wait ends with "in progress" at
//! once, not after their whole wait) and closes a live stream no pump feeds.

use std::cell::RefCell;

use futures_channel::oneshot;
use onejob_core::job::Job;

use super::memory::{AdoptLater, Memory};
use crate::http::JobResult;
use crate::ledger::stream::{self, LiveSlot, Subscription};

/// What a waiting duplicate is handed: the result, or the stream to follow.
pub(super) enum Handed {
    Result(JobResult),
    Stream(Subscription),
}

/// What the Ledger coordinates in memory while a job is driven (its fields).
pub(super) struct Coordination<'a> {
    /// Who runs the job (a drive, a stream's pump) and the job being created.
    pub memory: &'a Memory,
    /// Duplicates waiting for the driver's result.
    pub waiters: &'a RefCell<Vec<oneshot::Sender<Handed>>>,
    /// The running attempt's stream, while it streams.
    pub live: &'a LiveSlot,
}

impl<'a> Coordination<'a> {
    /// Takes the lock; `creating` is the job not stored yet, if it is new.
    /// `None` when someone already drives the job (admission saw it free:
    /// with no await in between, that does not happen).
    pub fn lock(self, creating: Option<Job>) -> Option<DriveLock<'a>> {
        self.memory.borrow_mut().begin_drive(creating).ok()?;
        Some(DriveLock { coordination: self, held: true })
    }
}

/// The held drive lock (see the module's documentation).
pub(super) struct DriveLock<'a> {
    coordination: Coordination<'a>,
    /// False once the lock was handed on (to a stream's pump) or released
    /// with a result.
    held: bool,
}

impl DriveLock<'_> {
    /// The job has been written (or will not be): duplicates read it from
    /// storage from now on.
    pub fn created(&self) {
        self.coordination.memory.borrow_mut().created();
    }

    /// Releases the lock and hands every waiting duplicate `result`.
    /// Returns the background submission kept meanwhile, to adopt.
    pub fn finish(mut self, result: &JobResult) -> Option<AdoptLater> {
        self.held = false;
        let coordination = &self.coordination;
        let later = coordination.memory.borrow_mut().finish_drive();
        let waiters: Vec<_> = coordination.waiters.borrow_mut().drain(..).collect();
        for waiter in waiters {
            let _ = waiter.send(Handed::Result(result.clone()));
        }
        later
    }

    /// The stream's pump owns the lock from here and ends the drive at the
    /// stream's end ([`crate::ledger::stream::Pump::run`]). The stream opens
    /// followed from its first event by every waiting duplicate (each
    /// handed its subscription) and by the caller (the one returned).
    pub fn hand_to_pump(mut self, attempt: u32, content_type: &str) -> Subscription {
        self.held = false;
        let coordination = &self.coordination;
        let waiters: Vec<_> = coordination.waiters.borrow_mut().drain(..).collect();
        let (own, followers) = stream::open(coordination.live, attempt, content_type, waiters.len());
        for (waiter, subscription) in waiters.into_iter().zip(followers) {
            let _ = waiter.send(Handed::Stream(subscription));
        }
        // A streamed answer is the caller's: nothing is adopted after it.
        let _ = coordination.memory.borrow_mut().hand_to_pump(attempt);
        own
    }
}

impl Drop for DriveLock<'_> {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        let coordination = &self.coordination;
        // Dropping the senders ends each waiter's wait with "in progress".
        coordination.waiters.borrow_mut().clear();
        // A stream opened for this drive has no pump: its subscribers end.
        coordination.live.borrow_mut().take();
        let _ = coordination.memory.borrow_mut().finish_drive();
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use futures_channel::oneshot;
    use onejob_core::identity::fingerprint::{Body, Fingerprint};
    use onejob_core::job::{Job, JobPolicy, JobState, UnknownPolicy};
    use onejob_core::wire::{Problem, ProblemType};

    use super::{Coordination, Handed, Memory};
    use crate::http::JobResult;
    use crate::ledger::stream::{self, LiveSlot};

    /// The Ledger's coordination fields, as the Durable Object holds them.
    struct Fields {
        memory: Memory,
        waiters: RefCell<Vec<oneshot::Sender<Handed>>>,
        live: LiveSlot,
    }

    impl Fields {
        fn new() -> Self {
            Self { memory: Memory::default(), waiters: RefCell::new(Vec::new()), live: Rc::new(RefCell::new(None)) }
        }

        fn coordination(&self) -> Coordination<'_> {
            Coordination { memory: &self.memory, waiters: &self.waiters, live: &self.live }
        }

        fn driving(&self) -> bool {
            self.memory.borrow().is_driving()
        }

        fn creating(&self) -> bool {
            self.memory.borrow().creating().is_some()
        }

        /// A duplicate that arrived while the job is driven.
        fn wait(&self) -> oneshot::Receiver<Handed> {
            let (sender, receiver) = oneshot::channel();
            self.waiters.borrow_mut().push(sender);
            receiver
        }
    }

    fn new_job() -> Job {
        let policy = JobPolicy::new(4, 30_000, 60_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
        Job::new(Fingerprint::of_request("POST", "/v1/x", Body::Json(b"{}")).unwrap(), 1_000, policy)
    }

    /// What an early `?` in `drive` does: the lock goes out of scope unused.
    fn drive_that_fails(fields: &Fields) -> Result<(), &'static str> {
        let _lock = fields.coordination().lock(Some(new_job())).expect("free");
        let _stream = stream::open(&fields.live, 1, "text/event-stream", 0);
        let saved: Result<(), &'static str> = Err("saving the job type's request failed");
        saved?;
        Ok(())
    }

    #[test]
    fn a_drive_that_returns_early_releases_the_lock_and_fails_its_waiters() {
        let fields = Fields::new();
        let mut waiter = fields.wait();
        assert!(drive_that_fails(&fields).is_err());
        assert!(!fields.driving(), "the next request is admitted to run, not to wait");
        assert!(!fields.creating(), "no half-created job is seen by the next request");
        assert!(fields.live.borrow().is_none(), "no stream is left open that nothing feeds");
        assert!(fields.waiters.borrow().is_empty());
        // The waiter's wait ends now ("in progress"), not after its whole wait.
        assert!(matches!(waiter.try_recv(), Err(oneshot::Canceled)));
    }

    #[test]
    fn finishing_hands_every_waiter_the_result() {
        let fields = Fields::new();
        let waiters = [fields.wait(), fields.wait()];
        let lock = fields.coordination().lock(Some(new_job())).expect("free");
        assert!(fields.driving() && fields.creating());
        lock.created();
        assert!(!fields.creating() && fields.driving());
        let problem = Problem::new(ProblemType::QuotaExceeded, "spent");
        assert!(lock.finish(&JobResult::problem(&problem, JobState::Pending, None)).is_none());
        assert!(!fields.driving());
        for mut waiter in waiters {
            match waiter.try_recv() {
                Ok(Some(Handed::Result(result))) => assert_eq!(result.status, 429),
                _ => panic!("the waiter got no result"),
            }
        }
    }

    #[test]
    fn a_lock_handed_to_the_pump_stays_held_until_the_pump_ends() {
        let fields = Fields::new();
        let lock = fields.coordination().lock(None).expect("free");
        let own = lock.hand_to_pump(1, "text/event-stream");
        assert!(fields.driving(), "the pump clears it at the stream's end");
        assert!(fields.live.borrow().is_some());
        assert_eq!((own.attempt, own.from), (1, 0), "the caller follows from the first event");
    }

    #[test]
    fn every_waiter_is_handed_the_stream_from_its_first_event() {
        let fields = Fields::new();
        let waiters = [fields.wait(), fields.wait()];
        let lock = fields.coordination().lock(None).expect("free");
        let _own = lock.hand_to_pump(2, "text/event-stream");
        assert!(fields.waiters.borrow().is_empty());
        for mut waiter in waiters {
            match waiter.try_recv() {
                Ok(Some(Handed::Stream(subscription))) => assert_eq!((subscription.attempt, subscription.from), (2, 0)),
                _ => panic!("the waiter got no stream"),
            }
        }
    }
}
