//! What the engine takes from its JavaScript host: the engine's own number
//! reading and writing, `crypto.getRandomValues`, and named `Error`s.

use onejob_core::canonical::Numbers;
use onejob_core::random::RandomSource;
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

/// The decimal digits of `n`, without `core::fmt` (whose number formatting
/// the SDK does not otherwise need).
pub fn digits(n: u64) -> String {
    let mut out = String::new();
    let mut rest = n;
    loop {
        out.insert(0, char::from(b'0' + (rest % 10) as u8));
        rest /= 10;
        if rest == 0 {
            return out;
        }
    }
}

/// A JS `Error` whose `name` lets TypeScript and `catch` blocks tell onejob's
/// failures apart (`err.name === "OneJobNetworkError"`).
pub fn error(name: &str, message: &str) -> JsValue {
    let error = JsError::new(message);
    error.set_name(name);
    error.into()
}

// `Error` declared here rather than taken from js-sys, whose runtime (its
// futures and JSPI support among it) the engine would otherwise link for
// these two calls.
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = Error)]
    type JsError;
    #[wasm_bindgen(constructor, js_class = "Error")]
    fn new(message: &str) -> JsError;
    #[wasm_bindgen(method, setter = name)]
    fn set_name(this: &JsError, name: &str);
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
