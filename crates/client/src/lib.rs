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

use std::cell::UnsafeCell;

use onejob_core::identity::fingerprint::{Fingerprint, request_target};
use wasm_bindgen::prelude::*;

pub use crate::engine::{Attempts, Engine};
pub use crate::intent::Intent;
pub use crate::js::last_error;
pub use crate::stream::EventSplitter;

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static HEAP: heap::Heap = heap::Heap::new();

/// The identity of a request, exactly as the gateway computes it (the same
/// core function): SHA-256 over the method, the URL's path and query (host
/// and fragment do not count), and the body's RFC 8785 canonical form, as 64
/// lower-case hex digits. A body that is not JSON is identified by its bytes
/// (the gateway refuses it anyway); no body is the empty one. The shell's
/// `fingerprint()` calls it through [`body_buffer`] and [`fingerprint_body`].
pub fn fingerprint(method: &str, url: &str, body: &[u8]) -> String {
    Fingerprint::of_json_or_bytes(method, &request_target(url), body, &js::JsNumbers).into()
}

/// The buffer a body to fingerprint is written into: the shell encodes the
/// body (UTF-16) as UTF-8 straight into the engine's memory with
/// `TextEncoder.encodeInto`, so it is transcoded once, natively, and never
/// copied or reallocated on its way in (wasm-bindgen's string passing copies
/// ASCII a character at a time in JavaScript, then reallocates twice for
/// the rest). Kept between calls, so a body of the same size reuses it.
struct BodyBuffer(UnsafeCell<Vec<u8>>);

// SAFETY: wasm32-unknown-unknown without atomics has a single thread, and
// the buffer is only reached through the two functions below, neither of
// which re-enters the other.
unsafe impl Sync for BodyBuffer {}

static BODY: BodyBuffer = BodyBuffer(UnsafeCell::new(Vec::new()));

/// The address of at least `capacity` bytes of the body buffer, for the
/// shell's `encodeInto` (into a view of the engine's memory, the instance's
/// exported `memory`, that it makes after this returns: a view made before
/// could be detached, since the reservation may grow the memory).
#[wasm_bindgen(js_name = bodyBuffer)]
pub fn body_buffer(capacity: usize) -> *mut u8 {
    // SAFETY: see `BodyBuffer`; no other reference to the buffer is live.
    let buffer = unsafe { &mut *BODY.0.get() };
    buffer.clear();
    buffer.reserve(capacity);
    buffer.as_mut_ptr()
}

/// [`fingerprint`] of the first `len` bytes of the body buffer (what
/// `encodeInto` wrote: valid UTF-8).
#[wasm_bindgen(js_name = fingerprintBody)]
pub fn fingerprint_body(method: &str, url: &str, len: usize) -> String {
    // SAFETY: see `BodyBuffer`.
    let buffer = unsafe { &mut *BODY.0.get() };
    let len = len.min(buffer.capacity());
    // SAFETY: the first `len` bytes were written by `encodeInto` (u8 has no
    // invalid values), within the capacity.
    unsafe { buffer.set_len(len) };
    let fingerprint = fingerprint(method, url, buffer);
    // A huge body's buffer is given back; a chat body's is kept for the next.
    if buffer.capacity() > 4 << 20 {
        *buffer = Vec::new();
    } else {
        buffer.clear();
    }
    fingerprint
}

/// The id of an intent: the app's name, or `fp:<fingerprint>` when unnamed;
/// `None` (see [`last_error`]) for a malformed fingerprint.
#[wasm_bindgen(js_name = intentId)]
pub fn intent_id(name: Option<String>, fingerprint: &str) -> Option<String> {
    let Some(fingerprint) = Fingerprint::parse(fingerprint) else {
        return js::refuse(MALFORMED_FINGERPRINT);
    };
    Some(onejob_core::identity::intent::intent_id(name.as_deref(), &fingerprint))
}

/// Why [`intent_id`] and [`Engine::submit`] refuse a fingerprint the engine
/// did not compute.
const MALFORMED_FINGERPRINT: &str = "onejob: malformed fingerprint";
