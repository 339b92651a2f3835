//! Test support: a scripted `globalThis.fetch` (these tests check the SDK's
//! own logic; the end-to-end tests run it against the real gateway).
// Shared by several test crates; each uses a part of it.
#![allow(dead_code)]

use js_sys::{Function, JSON, Reflect};
use onejob_client::OneJob;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

const STUB: &str = r#"
globalThis.__onejob = { script: [], calls: [], cancelled: 0 };
globalThis.fetch = async (url, init = {}) => {
  new Request(url, init); // throws TypeError exactly where fetch would (a GET with a body, say)
  const headers = new Headers(init.headers);
  globalThis.__onejob.calls.push({ url: String(url), key: headers.get("Idempotency-Key"),
    authorization: headers.get("Authorization"), method: init.method ?? "GET", body: init.body ?? null, at: performance.now() });
  const step = globalThis.__onejob.script.shift() ?? { status: 200 };
  if (step.delayMs) await new Promise((resolve) => setTimeout(resolve, step.delayMs));
  if (step.networkError) throw new TypeError("fetch failed");
  let body = step.body ?? JSON.stringify({ ok: true, n: globalThis.__onejob.calls.length });
  if (step.openBody) { // a body that stays open until read or cancelled, counting cancels
    const bytes = new TextEncoder().encode(body);
    body = new ReadableStream({ start: (c) => c.enqueue(bytes), cancel: () => { globalThis.__onejob.cancelled += 1; } });
  }
  if (step.drop) { // the connection drops once the body's bytes are read
    const bytes = new TextEncoder().encode(body);
    body = new ReadableStream({ start: (c) => c.enqueue(bytes), pull: (c) => c.error(new TypeError("terminated")) });
  }
  return new Response(body, { status: step.status ?? 200, headers: step.headers ?? {} });
};
"#;

/// Installs a fresh stub with `script` (a JSON array of steps:
/// `{status, headers, body, delayMs, networkError, openBody, drop}`).
pub fn script(steps: &str) {
    Function::new_no_args(STUB).call0(&JsValue::UNDEFINED).expect("stub installs");
    let state = Reflect::get(&js_sys::global(), &"__onejob".into()).unwrap();
    Reflect::set(&state, &"script".into(), &JSON::parse(steps).expect("valid script")).unwrap();
}

/// How many response bodies of the stub were cancelled (`openBody` steps).
pub fn cancelled() -> u32 {
    let state = Reflect::get(&js_sys::global(), &"__onejob".into()).unwrap();
    Reflect::get(&state, &"cancelled".into()).unwrap().as_f64().unwrap_or(0.0) as u32
}

/// A recorded call.
pub struct Call {
    pub url: String,
    pub key: String,
    pub authorization: Option<String>,
    pub method: String,
    pub body: Option<String>,
    pub at: f64,
}

pub fn calls() -> Vec<Call> {
    let state = Reflect::get(&js_sys::global(), &"__onejob".into()).unwrap();
    let calls: js_sys::Array = Reflect::get(&state, &"calls".into()).unwrap().unchecked_into();
    calls
        .iter()
        .map(|c| Call {
            url: Reflect::get(&c, &"url".into()).unwrap().as_string().unwrap_or_default(),
            key: Reflect::get(&c, &"key".into()).unwrap().as_string().unwrap_or_default(),
            authorization: Reflect::get(&c, &"authorization".into()).unwrap().as_string(),
            method: Reflect::get(&c, &"method".into()).unwrap().as_string().unwrap_or_default(),
            body: Reflect::get(&c, &"body".into()).unwrap().as_string(),
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

/// The intents of the `warning` events seen so far.
pub fn warnings() -> Vec<String> {
    let events: js_sys::Array = Reflect::get(&js_sys::global(), &"__onejob_events".into()).unwrap().unchecked_into();
    events
        .iter()
        .filter(|e| field(e, "type").as_deref() == Some("warning"))
        .filter_map(|e| field(&e, "intent"))
        .collect()
}

/// `oj.fetch(input, init)`, called at once; the future awaits its result.
pub fn fetch(
    oj: &OneJob,
    input: &JsValue,
    init: Option<&JsValue>,
) -> impl std::future::Future<Output = Result<web_sys::Response, JsValue>> + use<> {
    let promise = oj.fetch(input.clone().unchecked_into(), init.map(|i| i.clone().unchecked_into()), None);
    let future = JsFuture::from(js_sys::Promise::from(JsValue::from(promise)));
    async move { Ok(future.await?.unchecked_into()) }
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

/// A JS value from a JS expression (`js("({ method: 'GET' })")`).
pub fn js(expression: &str) -> JsValue {
    Function::new_no_args(&format!("return {expression};")).call0(&JsValue::UNDEFINED).unwrap()
}

/// `oj.intents()` as plain objects.
pub fn intents(oj: &OneJob) -> Vec<JsValue> {
    js_sys::Array::from(&JsValue::from(oj.intents())).iter().collect()
}

/// A string field of a JS object.
pub fn field(object: &JsValue, name: &str) -> Option<String> {
    Reflect::get(object, &name.into()).ok().and_then(|v| v.as_string())
}

/// Awaits `promise`, but rejects with "timed out" after `ms`: a hang must
/// fail the test, not stall the suite.
pub async fn within(ms: u32, promise: js_sys::Promise) -> Result<JsValue, JsValue> {
    let race = Function::new_with_args(
        "promise, ms",
        "return Promise.race([promise, new Promise((_, reject) => setTimeout(() => reject('timed out'), ms))]);",
    );
    let raced = race.call2(&JsValue::UNDEFINED, &promise, &ms.into()).unwrap();
    JsFuture::from(js_sys::Promise::from(raced)).await
}

/// `response.body.cancel()`.
pub fn cancel_body(response: &web_sys::Response) -> js_sys::Promise {
    let cancel = Function::new_with_args("response", "return response.body.cancel();");
    cancel.call1(&JsValue::UNDEFINED, response).unwrap().unchecked_into()
}

pub async fn text(response: &web_sys::Response) -> String {
    JsFuture::from(response.text().unwrap()).await.unwrap().as_string().unwrap()
}
