//! What the engine takes from its JavaScript host: the engine's own number
//! reading and writing and `crypto.getRandomValues`; and what it gives back
//! when it refuses a call (the reason, which the shell throws).

use std::cell::UnsafeCell;

use onejob_core::identity::canonical::Numbers;
use onejob_core::identity::random::RandomSource;
use onejob_core::retry::backoff::retry_after::{HostDates, HttpDates};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `Number(text)`: ECMAScript's StringToNumber, exact for JSON's grammar.
    #[wasm_bindgen(js_name = Number)]
    fn js_number(text: &str) -> f64;
    /// `String(n)`: `Number.prototype.toString`, the very algorithm RFC 8785 names.
    #[wasm_bindgen(js_name = String)]
    fn js_string(n: f64) -> String;
}

/// JSON numbers read and written by the JavaScript engine itself, so the
/// SDK ships neither a float parser nor a float printer (core's native
/// builds use `ryu`; both give ECMAScript's text, see `canonical::Numbers`).
pub struct JsNumbers;

impl Numbers for JsNumbers {
    fn value(&self, literal: &str) -> Option<f64> {
        Some(js_number(literal)).filter(|n| n.is_finite())
    }

    fn write(&self, literal: &str, out: &mut String) -> bool {
        match self.value(literal) {
            Some(n) => {
                out.push_str(&js_string(n));
                true
            }
            None => false,
        }
    }
}

#[wasm_bindgen]
extern "C" {
    /// `Date.parse(text)`: milliseconds since the epoch, NaN when unreadable.
    #[wasm_bindgen(js_namespace = Date, js_name = parse)]
    fn date_parse(text: &str) -> f64;
}

/// `Retry-After` HTTP-dates read by the JavaScript engine's `Date.parse`
/// (core's [`HostDates`] decides which text is handed over), so the SDK
/// ships no date parser of its own.
pub struct JsDates;

impl HttpDates for JsDates {
    fn epoch_ms(&self, date: &str) -> Option<u64> {
        HostDates(date_parse).epoch_ms(date)
    }
}

/// Why the last call that returned nothing (`undefined` in JavaScript)
/// refused, for the shell to throw as a named `Error`. Errors cross the
/// boundary as text: a `JsValue` anywhere in the engine's interface would
/// link wasm-bindgen's externref table and its glue (about 1 KB).
struct LastError(UnsafeCell<String>);

// SAFETY: wasm32-unknown-unknown without atomics has a single thread, and
// the text is only reached through the two functions below, neither of
// which re-enters the other.
unsafe impl Sync for LastError {}

static LAST_ERROR: LastError = LastError(UnsafeCell::new(String::new()));

/// Records why the call under way refuses; returns `None` for its caller.
pub fn refuse<T>(message: &str) -> Option<T> {
    // SAFETY: see `LastError`; no other reference to the text is live.
    let last = unsafe { &mut *LAST_ERROR.0.get() };
    last.clear();
    last.push_str(message);
    None
}

/// Why the last call that returned `undefined` refused.
#[wasm_bindgen(js_name = lastError)]
pub fn last_error() -> String {
    // SAFETY: see `LastError`.
    unsafe { &*LAST_ERROR.0.get() }.clone()
}

/// `crypto.getRandomValues` (browsers, Node ≥ 20 and workerd all have it):
/// idempotency keys must not be guessable.
pub struct CryptoRandom;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = crypto, js_name = getRandomValues)]
    fn get_random_values(buf: &mut [u8]);
}

impl RandomSource for CryptoRandom {
    fn next_u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        self.fill_bytes(&mut bytes);
        u64::from_le_bytes(bytes)
    }

    fn fill_bytes(&mut self, buf: &mut [u8]) {
        get_random_values(buf);
    }
}
