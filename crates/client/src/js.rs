//! Thin bindings to what every JS host has (`fetch`, `setTimeout`,
//! `crypto.getRandomValues`, `DOMException`), reached through `globalThis`
//! so the same build runs in browsers, Node ≥ 20 and workerd.

use js_sys::{Function, Promise, Reflect, Uint8Array};
use onejob_core::canonical::Numbers;
use onejob_core::random::RandomSource;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::AbortSignal;

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

/// Where `needle` first occurs in `haystack` (bytes: no `str` pattern
/// searcher is linked for it).
pub fn find(haystack: &str, needle: &str) -> Option<usize> {
    haystack.as_bytes().windows(needle.len()).position(|w| w == needle.as_bytes())
}

/// `globalThis[name]`, if it is defined.
pub fn global(name: &str) -> Option<JsValue> {
    Reflect::get(&js_sys::global(), &JsValue::from_str(name)).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

/// `promise.then(callback)`, with `callback` a JS function.
pub fn then(promise: &Promise, callback: JsValue) -> Promise {
    then_or(promise, callback, JsValue::UNDEFINED)
}

/// `promise.then(on_fulfilled, on_rejected)`, with JS functions (or undefined).
pub fn then_or(promise: &Promise, on_fulfilled: JsValue, on_rejected: JsValue) -> Promise {
    let then: Option<Function> = Reflect::get(promise, &"then".into()).ok().and_then(|t| t.dyn_into().ok());
    then.and_then(|then| then.call2(promise, &on_fulfilled, &on_rejected).ok())
        .map_or_else(|| promise.clone(), JsCast::unchecked_into)
}

/// Runs `callback` once, when `signal` aborts.
pub fn on_abort(signal: &AbortSignal, callback: impl FnOnce() + 'static) {
    let options = js_sys::Object::new();
    let _ = Reflect::set(&options, &"once".into(), &JsValue::TRUE);
    let add: Option<Function> = Reflect::get(signal, &"addEventListener".into()).ok().and_then(|a| a.dyn_into().ok());
    if let Some(add) = add {
        let _ = add.call3(signal, &"abort".into(), &Closure::once_into_js(callback), &options);
    }
}

/// Whether the host says it is offline (`navigator.onLine === false`); hosts
/// without the flag (Node, workerd) are never offline.
pub fn offline() -> bool {
    global("navigator").and_then(|n| Reflect::get(&n, &"onLine".into()).ok()).and_then(|v| v.as_bool()) == Some(false)
}

/// Resolves at the host's next `online` event or after `ms`, whichever is
/// first; rejects with the signal's reason as soon as it aborts. (A listener
/// or timer left behind only resolves a settled promise again.)
pub async fn online(ms: u64, signal: Option<&AbortSignal>) -> Result<(), JsValue> {
    if let Some(signal) = signal.filter(|s| s.aborted()) {
        return Err(signal.reason());
    }
    let signal = signal.cloned();
    let promise = Promise::new(&mut |resolve: Function, reject: Function| {
        let host = js_sys::global();
        let options = js_sys::Object::new();
        let _ = Reflect::set(&options, &"once".into(), &JsValue::TRUE);
        let add: Option<Function> =
            Reflect::get(&host, &"addEventListener".into()).ok().and_then(|a| a.dyn_into().ok());
        if let Some(add) = add {
            let _ = add.call3(&host, &"online".into(), &resolve, &options);
        }
        if let Some(set_timeout) = global("setTimeout").and_then(|f| f.dyn_into::<Function>().ok()) {
            let _ = set_timeout.call2(&JsValue::UNDEFINED, &resolve, &JsValue::from_f64(ms as f64));
        }
        if let Some(signal) = &signal {
            let aborted = signal.clone();
            on_abort(signal, move || {
                let _ = reject.call1(&JsValue::UNDEFINED, &aborted.reason());
            });
        }
    });
    JsFuture::from(promise).await.map(|_| ())
}

/// Cancels a response's body nobody will read, so its connection is freed.
/// A failed cancel is of no interest, but must not go unhandled: Node ends
/// the process on an unhandled rejection.
pub fn discard_body(response: &web_sys::Response) {
    if let Some(body) = response.body() {
        let _ = then_or(&body.cancel(), JsValue::UNDEFINED, Closure::once_into_js(|_: JsValue| JsValue::UNDEFINED));
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    js_sys::Date::now() as u64
}

/// `globalThis.fetch(url, init)`.
pub async fn fetch(url: &str, init: &JsValue) -> Result<web_sys::Response, JsValue> {
    let fetch: Function =
        global("fetch").ok_or_else(|| error("OneJobConfigError", "this runtime has no fetch()"))?.unchecked_into();
    let promise: Promise = fetch.call2(&JsValue::UNDEFINED, &JsValue::from_str(url), init)?.unchecked_into();
    Ok(JsFuture::from(promise).await?.unchecked_into())
}

/// Sleeps `ms`, or rejects with the signal's reason as soon as it aborts
/// (at once, not at the end of the wait).
pub async fn sleep(ms: u64, signal: Option<&AbortSignal>) -> Result<(), JsValue> {
    if let Some(signal) = signal.filter(|s| s.aborted()) {
        return Err(signal.reason());
    }
    let signal = signal.cloned();
    let promise = Promise::new(&mut |resolve: Function, reject: Function| {
        let set_timeout: Option<Function> = global("setTimeout").map(JsCast::unchecked_into);
        let clear_timeout: Option<Function> = global("clearTimeout").map(JsCast::unchecked_into);
        let Some(set_timeout) = set_timeout else {
            let _ = reject.call1(&JsValue::UNDEFINED, &error("OneJobConfigError", "this runtime has no setTimeout()"));
            return;
        };
        let timer = set_timeout.call2(&JsValue::UNDEFINED, &resolve, &JsValue::from_f64(ms as f64)).unwrap_or_default();
        if let Some(signal) = &signal {
            let aborted = signal.clone();
            on_abort(signal, move || {
                if let Some(clear) = clear_timeout {
                    let _ = clear.call1(&JsValue::UNDEFINED, &timer);
                }
                let _ = reject.call1(&JsValue::UNDEFINED, &aborted.reason());
            });
        }
    });
    JsFuture::from(promise).await.map(|_| ())
}

/// A JS `Error` whose `name` lets TypeScript and `catch` blocks tell onejob's
/// failures apart (`err.name === "OneJobNetworkError"`).
pub fn error(name: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    error.set_name(name);
    error.into()
}

/// `crypto.getRandomValues`: idempotency keys must not be guessable.
pub struct CryptoRandom;

impl RandomSource for CryptoRandom {
    fn next_u64(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        self.fill_bytes(&mut bytes);
        u64::from_le_bytes(bytes)
    }

    fn fill_bytes(&mut self, buf: &mut [u8]) {
        let array = Uint8Array::new_with_length(buf.len() as u32);
        let filled = global("crypto")
            .and_then(|crypto| {
                let get: Function = Reflect::get(&crypto, &"getRandomValues".into()).ok()?.dyn_into().ok()?;
                get.call1(&crypto, &array).ok()
            })
            .is_some();
        if filled {
            array.copy_to(buf);
        } else {
            // No Web Crypto (never the case in browsers, Node ≥ 20 or workerd):
            // fall back rather than fail, and say so.
            web_sys_console_warn("onejob: crypto.getRandomValues is unavailable; keys use Math.random");
            for byte in buf.iter_mut() {
                *byte = (js_sys::Math::random() * 256.0) as u8;
            }
        }
    }
}

fn web_sys_console_warn(message: &str) {
    if let Some(console) = global("console")
        && let Ok(warn) = Reflect::get(&console, &"warn".into()).and_then(|w| w.dyn_into::<Function>())
    {
        let _ = warn.call1(&console, &JsValue::from_str(message));
    }
}
