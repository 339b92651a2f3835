//! One upstream call to one provider: the built-in demo provider, an
//! OpenAI-compatible API or Anthropic's Messages API, bounded by a timeout.
//! Retrying and failover are not done here: the driver decides, one attempt
//! per call, so every call is claimed and audited.
//!
//! A call owns what it sends, so it can outlive the request that started it:
//! a hedged attempt that lost the race is still awaited, to audit what it
//! cost.
//!
//! The demo provider is answered by [`crate::demo`]; HTTP providers by
//! [`http`]. May import: `env`, `answer`, `demo` (one way) and the core;
//! never `http` (the worker's responses) or `routes`.

use std::rc::Rc;

use futures_util::future::{Either, select};
use onejob_core::demo::DemoCall;
use onejob_core::retry::classify::TransportFailure;
use onejob_core::upstream::providers::{Endpoint, Provider};
use onejob_core::upstream::sse;

use crate::answer::{Reply, Streaming};
use crate::demo;
use crate::env::clock;

mod http;

/// How one call ended.
pub enum CallResult {
    Reply(Reply),
    /// A 2xx `text/event-stream` answer to a streamed request: its body is
    /// read by the Ledger's pump, event by event, not here.
    Stream(Streaming),
    Transport {
        failure: TransportFailure,
        detail: String,
    },
}

/// What to send.
pub struct Call {
    /// Path and query, e.g. `/v1/chat/completions?api-version=…`.
    pub target: String,
    /// The body, with the model the route names for this provider (shared
    /// by the attempts that send it unchanged).
    pub body: Rc<[u8]>,
    pub content_type: String,
    /// The job's key for the provider (tenant-scoped, never the client's own).
    pub upstream_key: String,
    pub attempt: u32,
    pub timeout_ms: u64,
    /// The request asked for a streamed answer (`"stream": true`).
    pub stream: bool,
    /// Provider headers the caller sent (`anthropic-version`, …).
    pub headers: Vec<(String, String)>,
}

/// Calls `provider` once, giving up after the call's timeout. A timeout is
/// reported as happening after the request was sent: the provider may have
/// it, so the outcome is unknown.
pub async fn call(provider: Provider, api_key: Option<String>, call: Call) -> CallResult {
    // Not `worker::Delay`: a hedge's loser is awaited past the response by
    // another task, which this timer must wake (see `clock::sleep`).
    let timeout = clock::sleep(call.timeout_ms);
    match &provider.endpoint {
        Endpoint::Demo { outage } => demo_call(*outage, &call, timeout).await,
        Endpoint::Http { base_url } => http::call(base_url, api_key.as_deref(), &call, timeout).await,
    }
}

/// A call to the demo provider, as the core plans it ([`onejob_core::demo::call`]).
async fn demo_call(outage: bool, call: &Call, timeout: clock::Sleep) -> CallResult {
    match onejob_core::demo::call(outage, call.stream, &call.target, &call.body, call.attempt) {
        DemoCall::Stream(paced) => {
            CallResult::Stream(Streaming { content_type: sse::MEDIA_TYPE.into(), body: demo::pace(paced), abort: None })
        }
        DemoCall::Answer(plan) => match select(Box::pin(demo::answer(plan)), timeout).await {
            Either::Left((reply, _)) => CallResult::Reply(reply),
            Either::Right(_) => timed_out(call.timeout_ms),
        },
    }
}

pub(super) fn timed_out(timeout_ms: u64) -> CallResult {
    CallResult::Transport {
        failure: TransportFailure::TimeoutAfterSend,
        detail: format!("the upstream did not answer within {timeout_ms} ms"),
    }
}
