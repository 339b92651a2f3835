//! One remembered intent (core's [`IntentRecord`]) as the JavaScript shell
//! holds it: read from storage, counted per attempt, written back as JSON.
//!
//! The request (body included) is kept as the JSON text it is stored as, so a
//! record saved on every attempt never serialises its body again.

use onejob_core::identity::intent::{IntentRecord, IntentState, is_live};
use wasm_bindgen::prelude::*;

use crate::js;

#[wasm_bindgen]
pub struct Intent {
    pub(crate) record: IntentRecord,
    /// `{url, method, headers, body}` as stored, or `None`.
    pub(crate) request_json: Option<String>,
}

impl Intent {
    pub(crate) fn new(mut record: IntentRecord, request_json: Option<String>) -> Self {
        record.request = None;
        Self { record, request_json }
    }
}

#[wasm_bindgen]
impl Intent {
    /// A stored entry of `intent`, its request kept as the text it is stored
    /// as (core's [`IntentRecord::read_stored`]); `None` (`undefined`) when
    /// it is unreadable (corrupted or written by something else: one reason
    /// for all, the record's fields are not told apart) or another intent's,
    /// and [`crate::last_error`] says which, so the shell drops it with a warning.
    pub fn read(text: &str, intent: &str) -> Option<Intent> {
        let Some((record, request)) = IntentRecord::read_stored(text, &js::JsNumbers) else {
            return js::refuse("unreadable entry dropped");
        };
        if record.intent != intent {
            return js::refuse("entry belongs to another intent; dropped");
        }
        Some(Intent::new(record, request.map(str::to_owned)))
    }

    /// The intent's id: its name, or `fp:<fingerprint>`.
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> String {
        self.record.intent.clone()
    }

    /// The key every submission of the intent sends.
    #[wasm_bindgen(getter)]
    pub fn key(&self) -> String {
        self.record.key.as_str().to_owned()
    }

    /// Requests sent so far, across reloads.
    #[wasm_bindgen(getter)]
    pub fn attempts(&self) -> u32 {
        self.record.attempts
    }

    /// Milliseconds since the Unix epoch of the last change.
    #[wasm_bindgen(getter)]
    pub fn updated(&self) -> f64 {
        self.record.updated_ms as f64
    }

    /// Whether it still governs its intent at `now_ms`: unexpired and not
    /// delivered (records marked delivered come from SDK versions that kept them).
    pub fn live(&self, now_ms: f64) -> bool {
        is_live(&self.record, now_ms as u64) && self.record.state != IntentState::Delivered
    }

    /// What `resume()` re-sends, as stored (`{url, method, headers, body}`).
    #[wasm_bindgen(getter)]
    pub fn request(&self) -> Option<String> {
        self.request_json.clone()
    }

    /// Counts one request sent; returns the record to persist.
    pub fn attempt(&mut self, now_ms: f64) -> String {
        self.record.record_attempt(now_ms as u64);
        self.json()
    }

    /// Retries stopped without a final answer (the key is kept for
    /// `resume()`); returns the record to persist.
    #[wasm_bindgen(js_name = giveUp)]
    pub fn give_up(&mut self, now_ms: f64) -> String {
        self.record.mark_gave_up(now_ms as u64);
        self.json()
    }

    /// The record as stored (and as `intents()` shows it).
    pub fn json(&self) -> String {
        self.record.to_json_with(self.request_json.as_deref())
    }
}
