//! A call to an HTTP provider (an OpenAI-compatible API or Anthropic's
//! Messages API): the request with the provider's key, the answer read whole
//! or handed on as a stream, and what a failed fetch means.

use futures_util::future::{Either, select};
use onejob_core::retry::classify::TransportFailure;
use onejob_core::upstream::arrival::Receive;
use onejob_core::upstream::providers::UpstreamRequest;
use worker::{AbortController, Fetch, Headers, Method, Request, RequestInit};

use crate::answer::{Reply, Streaming};
use crate::env::clock::Sleep;
use crate::upstream::{Call, CallResult, timed_out};

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
        let length = header("Content-Length");
        Ok::<_, worker::Error>(
            match Receive::of(wants_stream, response.status_code(), &content_type, length.as_deref()) {
                Receive::Stream => Received::Stream(content_type, response.stream()?),
                Receive::TooLarge(len) => Received::TooLarge(len),
                Receive::Whole => {
                    let body = response.bytes().await?;
                    Received::Whole(response, body)
                }
            },
        )
    });
    match select(sent, timeout).await {
        Either::Left((Ok(Received::Whole(response, body)), _)) => {
            let header = |name: &str| response.headers().get(name).ok().flatten();
            CallResult::Reply(Reply::read_whole(response.status_code(), &header, body))
        }
        Either::Left((Ok(Received::TooLarge(len)), _)) => {
            controller.abort();
            CallResult::Reply(Reply::too_large(len))
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

/// The request core's [`UpstreamRequest`] describes, with the body.
fn build_request(base_url: &str, api_key: Option<&str>, call: &Call) -> Result<Request, String> {
    let described =
        UpstreamRequest::new(base_url, &call.target, api_key, &call.content_type, &call.upstream_key, &call.headers)?;
    let headers = Headers::new();
    for (name, value) in &described.headers {
        headers.set(name, value).map_err(|e| e.to_string())?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers);
    init.with_body(Some(js_sys::Uint8Array::from(&call.body[..]).into()));
    Request::new_with_init(&described.url, &init).map_err(|_| "cannot build the upstream request".to_owned())
}

/// What came back, before it is judged.
enum Received {
    Whole(worker::Response, Vec<u8>),
    Stream(String, worker::ByteStream),
    TooLarge(usize),
}

/// A fetch that failed without a response: what it means is core's
/// ([`TransportFailure::of_fetch_error`]).
fn transport_error(message: &str) -> CallResult {
    // The message may name the upstream's address: it goes to the log only.
    worker::console_warn!("onejob: upstream fetch failed: {message}");
    let failure = TransportFailure::of_fetch_error(message);
    CallResult::Transport { failure, detail: "the connection to the upstream failed".into() }
}
