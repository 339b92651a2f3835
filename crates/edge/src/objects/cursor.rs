//! `QueueCursor`: the Durable Object that knows how far the jobs queue's
//! consumer has got ([`onejob_core::ledger::background::progress`]), so a Ledger
//! can tell its message waiting in a backlog from one the queue lost.
//!
//! One object for the queue. The consumer tells it each batch's start and
//! end ([`crate::api::cursor`]); a Ledger reads it only at a look at a
//! confirmed message no delivery took yet. The open batches stay in this
//! object's memory: a runtime that dies loses them, and so its batches.

use std::cell::RefCell;

use onejob_core::ledger::background::progress::{CursorCall, Kept, QueueCursor as Cursor};
use worker::{DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::env::clock::now_ms;

/// Where the kept part is stored.
const STORAGE_KEY: &str = "cursor";

#[durable_object]
pub struct QueueCursor {
    state: State,
    /// The cursor, loaded on first use.
    cursor: RefCell<Option<Cursor>>,
}

impl DurableObject for QueueCursor {
    fn new(state: State, _env: Env) -> Self {
        Self { state, cursor: RefCell::new(None) }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        // Everything that awaits comes before the cursor is read, so no
        // other call runs between its read and its write.
        let Ok(call) = serde_json::from_slice::<CursorCall>(&req.bytes().await?) else {
            return Response::error("malformed cursor call", 400);
        };
        // Taken out of memory, not copied (it is put back below). A storage
        // read holds the object's input gate: nothing runs meanwhile.
        let loaded = self.cursor.borrow_mut().take();
        let mut cursor = match loaded {
            Some(cursor) => cursor,
            None => Cursor::from_kept(
                self.state.storage().get::<Kept>(STORAGE_KEY).await.ok().flatten().unwrap_or_default(),
            ),
        };
        let progress = cursor.answer(call, now_ms());
        let kept = cursor.kept();
        *self.cursor.borrow_mut() = Some(cursor);
        if Cursor::writes(&call) {
            self.state.storage().put(STORAGE_KEY, &kept).await?;
        }
        Response::from_json(&progress)
    }
}
