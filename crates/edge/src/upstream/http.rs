//! A call to an HTTP provider (an OpenAI-compatible API or Anthropic's
//! Messages API): the request with the provider's key, the answer read whole
//! or handed on as a stream, and what a failed fetch means.

use futures_util::future::{Either, select};
use onejob_core::classify::TransportFailure;
use onejob_core::protocol::{PROBLEM_CONTENT_TYPE, Problem, ProblemType, header};
use onejob_core::providers::{Api, check_api_path};
use onejob_core::sse;
use worker::{AbortController, Fetch, Headers, Method, Request, RequestInit};

use crate::answer::{Reply, Streaming};
use crate::env::clock::Sleep;
use crate::upstream::{Call, CallResult, MAX_RESPONSE_BYTES, timed_out};

/// The Messages API version sent when the caller sent none.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Calls the provider at `base_url` once, until `timeout` (see [`super::call`]).
pub async fn call(base_url: &str, api_key: Option<&str>, call: &Call, timeout: Sleep) -> CallResult {
    let controller = AbortController::default();
    let signal = controller.signal();
    let request = match build_request(base_url, api_key, call) {
        Ok(request) => request,
        Err(detail) => return CallResult::Transport { failure: TransportFailure::Connect, detail },
    };
    let wants_stream = call.stream;
    let sent = Box::pin(async move {
        let mut response = Fetch::Request(request).send_with_signal(&signal).await?;
        let header = |name: &str| response.headers().get(name).ok().flatten();
        let content_type = header("Content-Type").unwrap_or_default();
        if wants_stream && (200..300).contains(&response.status_code()) && content_type.starts_with(sse::MEDIA_TYPE) {
            return Ok(Received::Stream(content_type, response.stream()?));
        }
        // A declared length over the limit is refused before it is read.
        if let Some(len) = header("Content-Length").and_then(|v| v.parse::<usize>().ok())
            && len > MAX_RESPONSE_BYTES
        {
            return Ok(Received::TooLarge(len));
        }
        let body = response.bytes().await?;
        Ok::<_, worker::Error>(Received::Whole(response, body))
    });
    match select(sent, timeout).await {
        Either::Left((Ok(Received::Whole(response, body)), _)) => CallResult::Reply(reply_of(&response, body)),
        Either::Left((Ok(Received::TooLarge(len)), _)) => {
            controller.abort();
            CallResult::Reply(too_large(len))
        }
        Either::Left((Ok(Received::Stream(content_type, body)), _)) => {
            CallResult::Stream(Streaming { content_type, body: Box::pin(body), abort: Some(controller) })
        }
        Either::Left((Err(error), _)) => transport_error(&error.to_string()),
        Either::Right(_) => {
            controller.abort();
            timed_out(call.timeout_ms)
        }
    }
}

fn build_request(base_url: &str, api_key: Option<&str>, call: &Call) -> Result<Request, String> {
    // `/v1/chat/completions` against a base URL that already ends in `/v1`
    // (`https://api.openai.com/v1`); one without it gets the whole path.
    let target = match base_url.ends_with("/v1") {
        true => call.target.strip_prefix("/v1").unwrap_or(&call.target),
        false => &call.target,
    };
    // The key goes with the request: a target that resolves outside the base
    // URL (dot segments, encoded slashes) is never sent. The gateway checks
    // every target first; this is the last line.
    check_api_path(&call.target).map_err(str::to_owned)?;
    let url = format!("{base_url}{target}");
    let headers = Headers::new();
    let set = |name: &str, value: &str| headers.set(name, value).map_err(|e| e.to_string());
    set("Content-Type", &call.content_type)?;
    set(header::IDEMPOTENCY_KEY, &call.upstream_key)?;
    for (name, value) in &call.headers {
        set(name, value)?;
    }
    match (Api::of_path(&call.target), api_key) {
        // Anthropic authenticates with x-api-key and needs a version.
        (Api::Anthropic, key) => {
            if let Some(key) = key {
                set("x-api-key", key)?;
            }
            if !call.headers.iter().any(|(name, _)| name == "anthropic-version") {
                set("anthropic-version", ANTHROPIC_VERSION)?;
            }
        }
        (Api::OpenAi, Some(key)) => set("Authorization", &format!("Bearer {key}"))?,
        (Api::OpenAi, None) => {}
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers);
    init.with_body(Some(js_sys::Uint8Array::from(&call.body[..]).into()));
    Request::new_with_init(&url, &init).map_err(|_| "cannot build the upstream request".to_owned())
}

/// The headers the retry rule reads, kept with the reply.
const HINT_HEADERS: [&str; 3] = [header::RETRY_AFTER, header::RETRY_AFTER_MS, header::SHOULD_RETRY];

/// What came back, before it is judged.
enum Received {
    Whole(worker::Response, Vec<u8>),
    Stream(String, worker::ByteStream),
    TooLarge(usize),
}

/// An answer over the size limit: kept as a final error (asking again would
/// pay for the same answer).
fn too_large(len: usize) -> Reply {
    let detail = format!("the provider's response of {len} bytes exceeds the {MAX_RESPONSE_BYTES}-byte limit");
    let mut reply = Reply::json(502, Problem::new(ProblemType::UpstreamFailed, detail).to_json().into_bytes());
    reply.content_type = PROBLEM_CONTENT_TYPE.into();
    reply.hints.push((header::SHOULD_RETRY, "false".into()));
    reply
}

fn reply_of(response: &worker::Response, body: Vec<u8>) -> Reply {
    if body.len() > MAX_RESPONSE_BYTES {
        return too_large(body.len());
    }
    let header = |name: &str| response.headers().get(name).ok().flatten();
    Reply {
        status: response.status_code(),
        content_type: header("Content-Type").unwrap_or_else(|| "application/json".into()),
        body,
        hints: HINT_HEADERS.iter().filter_map(|name| Some((*name, header(name)?))).collect(),
    }
}

/// A fetch that failed without a response. Only an error that proves the
/// request never left (a refused connection, a failed DNS lookup) is "not
/// sent" and may be retried; anything else (reset, closed, lost) may have
/// reached the provider, so the outcome is unknown.
///
/// workerd reports a refused connection and one dropped after the request
/// was sent with the same words ("Network connection lost"), and reads the
/// request body before it connects, so neither the error nor the body tells
/// them apart there: both are unknown (the safe side: no second paid call).
fn transport_error(message: &str) -> CallResult {
    // The message may name the upstream's address: it goes to the log only.
    worker::console_warn!("onejob: upstream fetch failed: {message}");
    let lower = message.to_ascii_lowercase();
    let never_left = NEVER_SENT.iter().any(|m| lower.contains(m));
    let failure = if never_left { TransportFailure::Connect } else { TransportFailure::DroppedAfterSend };
    CallResult::Transport { failure, detail: "the connection to the upstream failed".into() }
}

/// Words of errors that prove the request never left.
const NEVER_SENT: [&str; 4] = ["connection refused", "econnrefused", "dns lookup", "no such host"];
