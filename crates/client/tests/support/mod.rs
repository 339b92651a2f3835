//! Test support: a scripted `globalThis.fetch` (these tests check the SDK's
//! own logic; the end-to-end tests run it against the real gateway).
// Shared by several test crates; each uses a part of it.
#![allow(dead_code)]

use js_sys::{Function, JSON, Reflect};
use onejob_client::OneJob;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

const STUB: &str = r#"
globalThis.__onejob = { script: [], calls: [] };
globalThis.fetch = async (url, init = {}) => {
  const headers = new Headers(init.headers);
  globalThis.__onejob.calls.push({ url: String(url), key: headers.get("Idempotency-Key"),
    authorization: headers.get("Authorization"), body: init.body ?? null, at: performance.now() });
  const step = globalThis.__onejob.script.shift() ?? { status: 200 };
  if (step.delayMs) await new Promise((resolve) => setTimeout(resolve, step.delayMs));
  if (step.networkError) throw new TypeError("fetch failed");
  return new Response(step.body ?? JSON.stringify({ ok: true, n: globalThis.__onejob.calls.length }),
    { status: step.status ?? 200, headers: step.headers ?? {} });
};
"#;

/// Installs a fresh stub with `script` (a JSON array of steps:
/// `{status, headers, body, delayMs, networkError}`).
pub fn script(steps: &str) {
    Function::new_no_args(STUB).call0(&JsValue::UNDEFINED).expect("stub installs");
    let state = Reflect::get(&js_sys::global(), &"__onejob".into()).unwrap();
    Reflect::set(&state, &"script".into(), &JSON::parse(steps).expect("valid script")).unwrap();
}

/// A recorded call.
pub struct Call {
    pub key: String,
    pub authorization: Option<String>,
    pub at: f64,
}

pub fn calls() -> Vec<Call> {
    let state = Reflect::get(&js_sys::global(), &"__onejob".into()).unwrap();
    let calls: js_sys::Array = Reflect::get(&state, &"calls".into()).unwrap().unchecked_into();
    calls
        .iter()
        .map(|c| Call {
            key: Reflect::get(&c, &"key".into()).unwrap().as_string().unwrap_or_default(),
            authorization: Reflect::get(&c, &"authorization".into()).unwrap().as_string(),
            at: Reflect::get(&c, &"at".into()).unwrap().as_f64().unwrap_or(0.0),
        })
        .collect()
}

/// `new OneJob(options)` from a JS object literal (events collected in
/// `globalThis.__onejob_events`).
pub fn client(options: &str) -> OneJob {
    Function::new_no_args("globalThis.__onejob_events = [];").call0(&JsValue::UNDEFINED).unwrap();
    let build = Function::new_no_args(&format!(
        "return Object.assign({options}, {{ onEvent: (e) => globalThis.__onejob_events.push(e) }});"
    ));
    let options = build.call0(&JsValue::UNDEFINED).unwrap();
    OneJob::new(Some(options.unchecked_into())).expect("valid options")
}

/// The types of the events seen so far, with `backoff` reasons.
pub fn events() -> Vec<String> {
    let events: js_sys::Array = Reflect::get(&js_sys::global(), &"__onejob_events".into()).unwrap().unchecked_into();
    events.iter().map(|e| Reflect::get(&e, &"type".into()).unwrap().as_string().unwrap_or_default()).collect()
}

/// `oj.fetch(url, {method: "POST", body, signal}, {intent})`. The call is
/// made at once (as a click would); the returned future awaits its result.
pub fn post(
    oj: &OneJob,
    body: &str,
    intent: Option<&str>,
    signal: Option<&web_sys::AbortSignal>,
) -> impl std::future::Future<Output = Result<web_sys::Response, JsValue>> + use<> {
    let init = js_sys::Object::new();
    Reflect::set(&init, &"method".into(), &"POST".into()).unwrap();
    Reflect::set(&init, &"body".into(), &body.into()).unwrap();
    let headers = js_sys::Object::new();
    Reflect::set(&headers, &"Content-Type".into(), &"application/json".into()).unwrap();
    Reflect::set(&init, &"headers".into(), &headers).unwrap();
    if let Some(signal) = signal {
        Reflect::set(&init, &"signal".into(), signal).unwrap();
    }
    let options = js_sys::Object::new();
    if let Some(intent) = intent {
        Reflect::set(&options, &"intent".into(), &intent.into()).unwrap();
    }
    let promise = oj.fetch(
        JsValue::from("/v1/chat/completions").unchecked_into(),
        Some(init.unchecked_into()),
        Some(options.unchecked_into()),
    );
    let future = JsFuture::from(js_sys::Promise::from(JsValue::from(promise)));
    async move { Ok(future.await?.unchecked_into()) }
}

pub async fn text(response: &web_sys::Response) -> String {
    JsFuture::from(response.text().unwrap()).await.unwrap().as_string().unwrap()
}
