//! Turning `fetch(input, init)` arguments into one request onejob can
//! fingerprint, persist and re-send.

use js_sys::{Function, Reflect};
use onejob_core::fingerprint::{Body, Fingerprint, request_target};
use onejob_core::intent::SavedRequest;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{AbortSignal, Headers};

use crate::js;
use crate::options::config_error;

/// A request ready to send (and re-send).
#[derive(Clone)]
pub struct Outgoing {
    pub url: String,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    pub signal: Option<AbortSignal>,
}

/// Whether `input` is a `Request` object (its body must be read first).
pub fn is_request(input: &JsValue) -> bool {
    input.is_instance_of::<web_sys::Request>()
}

/// Reads a `Request` input into plain `(url, init)` form.
pub async fn unpack_request(input: &JsValue, init: &JsValue) -> Result<(JsValue, JsValue), JsValue> {
    let get = |obj: &JsValue, name: &str| Reflect::get(obj, &name.into()).unwrap_or(JsValue::UNDEFINED);
    let merged = js_sys::Object::new();
    for name in ["method", "headers", "signal"] {
        let from_init = if init.is_object() { get(init, name) } else { JsValue::UNDEFINED };
        let value = if from_init.is_undefined() { get(input, name) } else { from_init };
        Reflect::set(&merged, &name.into(), &value)?;
    }
    let body = if init.is_object() { get(init, "body") } else { JsValue::UNDEFINED };
    // A GET or HEAD `Request` has no body; reading one gives "", which fetch refuses.
    let bodiless = get(&merged, "method").as_string().is_some_and(|m| is_bodiless(&m));
    let body = if body.is_undefined() && !bodiless {
        let clone: Function = get(input, "clone").dyn_into()?;
        let copy = clone.call0(input)?;
        let text: Function = get(&copy, "text").dyn_into()?;
        JsFuture::from(js_sys::Promise::from(text.call0(&copy)?)).await?
    } else {
        body
    };
    Reflect::set(&merged, &"body".into(), &body)?;
    Ok((get(input, "url"), merged.into()))
}

/// Reads `(input, init)` where `input` is a URL string or `URL`.
pub fn normalize(input: &JsValue, init: &JsValue, endpoint: Option<&str>) -> Result<Outgoing, JsValue> {
    let get = |name: &str| {
        if init.is_object() {
            Reflect::get(init, &name.into()).unwrap_or(JsValue::UNDEFINED)
        } else {
            JsValue::UNDEFINED
        }
    };
    // A string, or a `URL` (whose toString() is its href).
    let raw = input.as_string().unwrap_or_else(|| js_sys::Object::from(input.clone()).to_string().into());
    let url = resolve(&raw, endpoint)?;
    let method = get("method").as_string().unwrap_or_else(|| "GET".into()).to_ascii_uppercase();
    let headers = header_pairs(&get("headers"))?;
    let body = match get("body") {
        v if v.is_undefined() || v.is_null() => None,
        v => Some(
            v.as_string()
                .ok_or_else(|| config_error("fetch body must be a string (onejob fingerprints and persists it)"))?,
        ),
    };
    if body.is_some() && is_bodiless(&method) {
        // fetch would throw a TypeError, which must not look like a network error.
        return Err(config_error("a GET or HEAD request cannot have a body"));
    }
    let signal = get("signal").dyn_into::<AbortSignal>().ok();
    Ok(Outgoing { url, method, headers, body, signal })
}

fn is_bodiless(method: &str) -> bool {
    method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
}

/// An absolute URL: relative inputs resolve against `endpoint` (or the page).
fn resolve(raw: &str, endpoint: Option<&str>) -> Result<String, JsValue> {
    let base = endpoint.map(str::to_owned).or_else(|| {
        js::global("location").and_then(|l| Reflect::get(&l, &"href".into()).ok()).and_then(|h| h.as_string())
    });
    let url = match &base {
        Some(base) if js::find(raw, "://").is_none() => {
            let joined = if raw.starts_with('/') || base.ends_with('/') {
                [base.as_str(), raw].concat()
            } else {
                [base.as_str(), "/", raw].concat()
            };
            web_url(&joined, None).or_else(|_| web_url(raw, Some(base)))?
        }
        _ => web_url(raw, None)?,
    };
    Ok(url)
}

fn web_url(url: &str, base: Option<&str>) -> Result<String, JsValue> {
    let parsed = match base {
        Some(base) => js_sys::Reflect::construct(&url_class()?, &js_sys::Array::of2(&url.into(), &base.into())),
        None => js_sys::Reflect::construct(&url_class()?, &js_sys::Array::of1(&url.into())),
    }
    .map_err(|_| config_error(&["not a URL: ", url].concat()))?;
    Ok(js_sys::Object::from(parsed).to_string().into())
}

fn url_class() -> Result<Function, JsValue> {
    js::global("URL").and_then(|c| c.dyn_into().ok()).ok_or_else(|| config_error("this runtime has no URL class"))
}

/// Header pairs from anything `new Headers(...)` accepts.
fn header_pairs(init_headers: &JsValue) -> Result<Vec<(String, String)>, JsValue> {
    let headers = if init_headers.is_undefined() || init_headers.is_null() {
        Headers::new()?
    } else {
        let class: Function =
            js::global("Headers").ok_or_else(|| config_error("this runtime has no Headers class"))?.dyn_into()?;
        js_sys::Reflect::construct(&class, &js_sys::Array::of1(init_headers))?.dyn_into()?
    };
    let mut pairs = Vec::new();
    let iterator = js_sys::try_iter(&headers)?.ok_or_else(|| config_error("headers are not iterable"))?;
    for entry in iterator {
        let entry: js_sys::Array = entry?.dyn_into()?;
        if let (Some(name), Some(value)) = (entry.get(0).as_string(), entry.get(1).as_string()) {
            pairs.push((name, value));
        }
    }
    Ok(pairs)
}

impl Outgoing {
    /// The request's fingerprint, computed by the core exactly as the edge does.
    pub fn fingerprint(&self) -> Fingerprint {
        let bytes = self.body.as_deref().unwrap_or("").as_bytes();
        // Not JSON: the edge answers 400 anyway; the bytes still identify it.
        Fingerprint::of_url_with(&self.method, &self.url, Body::Json(bytes), &js::JsNumbers)
            .unwrap_or_else(|_| Fingerprint::of_bytes(&self.method, &request_target(&self.url), bytes))
    }

    /// What `resume()` needs after a reload; the credential is not stored.
    pub fn saved(&self) -> SavedRequest {
        let headers = self
            .headers
            .iter()
            .filter(|(name, _)| {
                !name.eq_ignore_ascii_case("authorization") && !name.eq_ignore_ascii_case("idempotency-key")
            })
            .cloned()
            .collect();
        SavedRequest { url: self.url.clone(), method: self.method.clone(), headers, body: self.body.clone() }
    }

    pub fn from_saved(saved: &SavedRequest) -> Self {
        Self {
            url: saved.url.clone(),
            method: saved.method.clone(),
            headers: saved.headers.clone(),
            body: saved.body.clone(),
            signal: None,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}
