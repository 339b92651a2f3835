//! Complete SSE events for a streamed answer that resumes itself: the shell
//! hands the caller whole events only (cut by core's `sse::Splitter`, byte
//! for byte) and counts them, so after a dropped connection it asks the
//! gateway for the events after those (`…/stream?from=N`).

use onejob_core::upstream::sse::{Splitter, ends_stream};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
#[derive(Default)]
pub struct EventSplitter {
    splitter: Splitter,
    events: u32,
    ended: bool,
}

#[wasm_bindgen]
impl EventSplitter {
    #[wasm_bindgen(constructor)]
    pub fn new() -> EventSplitter {
        Self::default()
    }

    /// Adds received bytes; returns the events they complete, concatenated
    /// (empty when none is complete yet).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
        let events = self.splitter.push_joined(bytes);
        self.events = events.events as u32;
        self.ended = events.events > 0 && ends_stream(&events.bytes[events.last..]);
        events.bytes
    }

    /// How many events the last [`EventSplitter::push`] completed.
    #[wasm_bindgen(getter)]
    pub fn events(&self) -> u32 {
        self.events
    }

    /// Whether the last complete event ends the answer (`[DONE]`,
    /// `message_stop`, …): the whole answer is here.
    #[wasm_bindgen(getter)]
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Takes what follows the last complete event (an event cut short).
    pub fn rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.splitter).pending().to_vec()
    }
}
