//! # onejob (browser SDK): the engine
//!
//! The npm package `onejob` is a JavaScript shell (`js/sdk.js`: fetch,
//! timers, storage, promises, streams) around this engine, which makes every
//! decision with `onejob-core`, the very code the gateway runs:
//!
//! - [`fingerprint`]: a request's identity, exactly as the gateway computes it;
//! - [`intent_id`] and [`Engine::submit`]: which intent, and which key, a
//!   submission belongs to; [`Intent`]: a remembered intent and its stored form;
//! - [`Engine::next`]: after each try, deliver, wait (full jitter, honouring
//!   `Retry-After`, within the retry budget) or give up;
//! - [`EventSplitter`]: whole SSE events, so a dropped stream resumes exactly.
//!
//! Nothing here performs I/O or waits: the shell does, so the engine is small
//! and synchronous (no futures, no closures across the boundary).

mod engine;
#[cfg(target_arch = "wasm32")]
mod heap;
mod intent;
mod js;
mod stream;

use onejob_core::fingerprint::{Body, Fingerprint, request_target};
use wasm_bindgen::prelude::*;

pub use crate::engine::{Attempts, Engine};
pub use crate::intent::Intent;
pub use crate::stream::EventSplitter;

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static HEAP: heap::Heap = heap::Heap::new();

/// The identity of a request, exactly as the gateway computes it (the same
/// core function): SHA-256 over the method, the URL's path and query (host
/// and fragment do not count), and the body's RFC 8785 canonical form, as 64
/// lower-case hex digits. A body that is not JSON is identified by its bytes
/// (the gateway refuses it anyway). Synchronous; no request is made.
#[wasm_bindgen]
pub fn fingerprint(method: &str, url: &str, body: Option<String>) -> String {
    let bytes = body.as_deref().unwrap_or("").as_bytes();
    Fingerprint::of_url_with(method, url, Body::Json(bytes), &js::JsNumbers)
        .unwrap_or_else(|_| Fingerprint::of_bytes(method, &request_target(url), bytes))
        .as_str()
        .to_owned()
}

/// The id of an intent: the app's name, or `fp:<fingerprint>` when unnamed.
#[wasm_bindgen(js_name = intentId)]
pub fn intent_id(name: Option<String>, fingerprint: &str) -> Result<String, JsValue> {
    let fingerprint =
        Fingerprint::parse(fingerprint).ok_or_else(|| js::error("OneJobError", "onejob: malformed fingerprint"))?;
    Ok(onejob_core::intent::intent_id(name.as_deref(), &fingerprint))
}
