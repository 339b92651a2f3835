//! How far the jobs queue's consumer has got: what lets a Ledger tell a
//! message still waiting in a backlog from one the queue lost.
//!
//! A Ledger knows only its own message: the queue accepted it, and no
//! delivery took it yet. That is a backlog, or a lost message (a local
//! queue loses what it holds when its process dies). A fixed wait cannot
//! tell the two apart: a short one sends every message of a long backlog
//! again and again, a long one leaves a lost job idle for as long.
//!
//! The consumer sees the queue go by. At each batch's start it tells one
//! [`QueueCursor`] (a Durable Object of its own) the newest send among the
//! batch's messages, and at its end that the batch is done. A Ledger whose
//! confirmed message no delivery took reads the cursor's [`Progress`] at
//! its looks and presumes the message lost ([`presumed_lost`]) when
//! - **overtaken**: the consumer has taken a message sent
//!   [`REORDER_MS`] or more after this one was due (the queue delivers
//!   about in order, so this one should have come first), or
//! - **idle**: no batch is open and none started or ended for
//!   [`IDLE_MS`] since this one was due (the queue has nothing left to
//!   deliver, so this one is not in it).
//!
//! The open batches are kept in the cursor's memory only: a runtime that
//! dies loses its batches with the cursor's memory, so after a restart the
//! consumer is seen idle at once instead of busy with batches that will
//! never end. A batch older than [`BATCH_LIMIT_MS`] (a consumer's longest
//! run) no longer counts as open, whatever became of it.

use serde::{Deserialize, Serialize};

/// How much later than a message a taken message must have been sent
/// before the first is presumed lost: the queue's reordering, at most.
pub const REORDER_MS: u64 = 10_000;

/// How long the consumer must have been idle, past a message's due time,
/// before that message is presumed lost: longer than a batch takes to
/// fill (`max_batch_timeout`) and reach the consumer.
pub const IDLE_MS: u64 = 10_000;

/// A batch open longer than this no longer makes the consumer busy: the
/// consumer's longest run (a queue consumer's wall-clock limit, 15 minutes).
pub const BATCH_LIMIT_MS: u64 = 15 * 60_000;

/// At most this many open batches are remembered (the consumer's
/// concurrency is far lower); beyond it, the oldest is forgotten.
pub const MAX_OPEN_BATCHES: usize = 1_024;

/// What the cursor tells a Ledger: how far the consumer has got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// The newest send (its `sent_ms`) among the messages batches brought.
    pub newest_sent_ms: u64,
    /// When a batch last started or ended (0: never).
    pub last_seen_ms: u64,
    /// Whether a batch is open (started, not ended, younger than
    /// [`BATCH_LIMIT_MS`]).
    pub busy: bool,
}

/// Whether a message the queue confirmed, due at `due_ms` and taken by no
/// delivery, is presumed lost at `now_ms`, given the consumer's `progress`
/// (see the module docs); `idle_ms`: how long the consumer must have been
/// idle ([`IDLE_MS`], or longer: see `Outbox`'s use).
pub fn presumed_lost(due_ms: u64, progress: &Progress, now_ms: u64, idle_ms: u64) -> bool {
    let overtaken = progress.newest_sent_ms >= due_ms.saturating_add(REORDER_MS);
    let idle = !progress.busy && now_ms >= progress.last_seen_ms.max(due_ms).saturating_add(idle_ms);
    overtaken || idle
}

/// What the consumer tells the cursor, or a Ledger asks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum CursorCall {
    /// A batch reached the consumer: `batch` names it (random), and its
    /// newest message was sent at `newest_sent_ms` (0: none says).
    Started {
        /// The batch's name, to end it with.
        batch: u64,
        /// The newest `sent_ms` among its messages.
        newest_sent_ms: u64,
    },
    /// The consumer settled every message of `batch`.
    Ended {
        /// The batch's name.
        batch: u64,
    },
    /// A Ledger reads the progress.
    Read,
}

impl CursorCall {
    /// A batch named `batch` started, its messages sent at `sent_ms` (0:
    /// not said): the newest of them is what the cursor keeps.
    pub fn started(batch: u64, sent_ms: impl IntoIterator<Item = u64>) -> Self {
        CursorCall::Started { batch, newest_sent_ms: sent_ms.into_iter().max().unwrap_or(0) }
    }
}

/// What the cursor keeps in storage: the open batches are in memory only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Kept {
    /// See [`Progress::newest_sent_ms`].
    pub newest_sent_ms: u64,
    /// See [`Progress::last_seen_ms`].
    pub last_seen_ms: u64,
}

/// The `QueueCursor` object's state: what it keeps, and the batches open
/// in this runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCursor {
    kept: Kept,
    /// (batch, started at), oldest first.
    open: Vec<(u64, u64)>,
}

impl QueueCursor {
    /// A cursor that starts from what was kept (no batch open: a batch of
    /// a runtime before this one is gone with it).
    pub fn from_kept(kept: Kept) -> Self {
        Self { kept, open: Vec::new() }
    }

    /// What must be kept in storage.
    pub fn kept(&self) -> Kept {
        self.kept
    }

    /// Performs `call` at `now_ms`: the progress as it stands after it.
    pub fn answer(&mut self, call: CursorCall, now_ms: u64) -> Progress {
        match call {
            CursorCall::Started { batch, newest_sent_ms } => {
                self.kept.newest_sent_ms = self.kept.newest_sent_ms.max(newest_sent_ms);
                self.kept.last_seen_ms = self.kept.last_seen_ms.max(now_ms);
                if self.open.len() >= MAX_OPEN_BATCHES {
                    self.open.remove(0);
                }
                self.open.push((batch, now_ms));
            }
            CursorCall::Ended { batch } => {
                self.kept.last_seen_ms = self.kept.last_seen_ms.max(now_ms);
                self.open.retain(|(open, _)| *open != batch);
            }
            CursorCall::Read => {}
        }
        self.open.retain(|(_, started)| now_ms.saturating_sub(*started) < BATCH_LIMIT_MS);
        Progress {
            newest_sent_ms: self.kept.newest_sent_ms,
            last_seen_ms: self.kept.last_seen_ms,
            busy: !self.open.is_empty(),
        }
    }

    /// Whether `call` changes what is kept (so the object writes it).
    pub fn writes(call: &CursorCall) -> bool {
        !matches!(call, CursorCall::Read)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const T0: u64 = 1_700_000_000_000;

    fn progress(newest_sent_ms: u64, last_seen_ms: u64, busy: bool) -> Progress {
        Progress { newest_sent_ms, last_seen_ms, busy }
    }

    #[test]
    fn a_message_in_a_backlog_that_drains_is_never_presumed_lost() {
        // The consumer is working through messages sent before this one was due.
        let due = T0 + 5_000;
        for now in [T0 + 20_000, T0 + 600_000, T0 + 3_600_000] {
            assert!(!presumed_lost(due, &progress(due + REORDER_MS - 1, now - 1, true), now, IDLE_MS));
            // Between two batches, for less than IDLE_MS.
            assert!(!presumed_lost(due, &progress(due - 1_000, now - IDLE_MS + 1, false), now, IDLE_MS));
        }
    }

    #[test]
    fn a_message_overtaken_by_a_later_one_is_presumed_lost() {
        let due = T0;
        assert!(presumed_lost(due, &progress(due + REORDER_MS, T0 + 20_000, true), T0 + 20_000, IDLE_MS));
        assert!(!presumed_lost(due, &progress(due + REORDER_MS - 1, T0 + 20_000, true), T0 + 20_000, IDLE_MS));
    }

    #[test]
    fn a_message_not_delivered_by_an_idle_consumer_is_presumed_lost() {
        let due = T0;
        // Idle since before the message was due: IDLE_MS after its due time.
        let idle = progress(T0 - 60_000, T0 - 30_000, false);
        assert!(!presumed_lost(due, &idle, due + IDLE_MS - 1, IDLE_MS));
        assert!(presumed_lost(due, &idle, due + IDLE_MS, IDLE_MS));
        // A batch ended after it was due: IDLE_MS after that.
        let ended = progress(T0 - 1, T0 + 4_000, false);
        assert!(!presumed_lost(due, &ended, T0 + 4_000 + IDLE_MS - 1, IDLE_MS));
        assert!(presumed_lost(due, &ended, T0 + 4_000 + IDLE_MS, IDLE_MS));
        // A message due later (handed back with a delay) is not late before then.
        assert!(!presumed_lost(T0 + 60_000, &idle, T0 + 60_000 + IDLE_MS - 1, IDLE_MS));
    }

    #[test]
    fn the_cursor_follows_batches_and_forgets_them_with_its_runtime() {
        let mut cursor = QueueCursor::default();
        assert_eq!(cursor.answer(CursorCall::Read, T0), Progress::default());
        let p = cursor.answer(CursorCall::Started { batch: 1, newest_sent_ms: T0 - 500 }, T0);
        assert_eq!(p, progress(T0 - 500, T0, true));
        let p = cursor.answer(CursorCall::Started { batch: 2, newest_sent_ms: T0 - 900 }, T0 + 10);
        assert_eq!(p, progress(T0 - 500, T0 + 10, true), "the newest send only grows");
        assert_eq!(cursor.answer(CursorCall::Ended { batch: 1 }, T0 + 20), progress(T0 - 500, T0 + 20, true));
        assert_eq!(cursor.answer(CursorCall::Ended { batch: 2 }, T0 + 30), progress(T0 - 500, T0 + 30, false));
        assert!(!cursor.answer(CursorCall::Ended { batch: 7 }, T0 + 40).busy, "an unknown batch");
        assert!(QueueCursor::writes(&CursorCall::Ended { batch: 7 }) && !QueueCursor::writes(&CursorCall::Read));

        // A batch open when the runtime died: the new runtime's cursor
        // starts from what was kept, with no batch open.
        cursor.answer(CursorCall::Started { batch: 3, newest_sent_ms: T0 + 50 }, T0 + 50);
        assert!(cursor.answer(CursorCall::Read, T0 + 60).busy);
        let mut restarted = QueueCursor::from_kept(cursor.kept());
        assert_eq!(restarted.answer(CursorCall::Read, T0 + 5_000), progress(T0 + 50, T0 + 50, false));

        // A batch that never ends stops counting after BATCH_LIMIT_MS.
        assert!(cursor.answer(CursorCall::Read, T0 + 50 + BATCH_LIMIT_MS - 1).busy);
        assert!(!cursor.answer(CursorCall::Read, T0 + 50 + BATCH_LIMIT_MS).busy);
    }

    #[test]
    fn open_batches_are_bounded() {
        let mut cursor = QueueCursor::default();
        for batch in 0..(MAX_OPEN_BATCHES as u64 + 10) {
            cursor.answer(CursorCall::Started { batch, newest_sent_ms: 0 }, T0);
        }
        assert_eq!(cursor.open.len(), MAX_OPEN_BATCHES);
        assert_eq!(cursor.open[0].0, 10, "the oldest forgotten first");
    }

    #[test]
    fn calls_travel_as_json() {
        let call = CursorCall::Started { batch: 9, newest_sent_ms: 12 };
        let json = serde_json::to_string(&call).unwrap();
        assert_eq!(json, r#"{"call":"started","batch":9,"newest_sent_ms":12}"#);
        assert_eq!(serde_json::from_str::<CursorCall>(&json).unwrap(), call);
        assert_eq!(serde_json::from_str::<CursorCall>(r#"{"call":"read"}"#).unwrap(), CursorCall::Read);
        assert_eq!(CursorCall::started(3, [5, 0, 9, 2]), CursorCall::Started { batch: 3, newest_sent_ms: 9 });
        assert_eq!(CursorCall::started(3, []), CursorCall::Started { batch: 3, newest_sent_ms: 0 });
    }
}
