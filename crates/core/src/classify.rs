//! What an outcome means for retrying: the table of DESIGN §4, in one place,
//! so the browser SDK and the edge can never disagree about it.
//!
//! | outcome | decision |
//! |---|---|
//! | 2xx | [`Decision::Accept`] |
//! | 2xx with `content_filter` or an empty completion | [`Decision::Never`]: a paid, final answer; retrying pays again for the same |
//! | `x-should-retry: true` / `false` on an error | [`Decision::Retry`] / [`Decision::Never`] (the server knows best) |
//! | 408, 409, 425, 429, 502, 503, 504 | [`Decision::Retry`] |
//! | 500 | [`Decision::RetryOnce`] |
//! | other 4xx, other 5xx | [`Decision::Never`] |
//! | connection refused/reset, DNS, timeout *before* the request was sent | [`Decision::Retry`] |
//! | any transport failure *after* the request was sent | [`Decision::Unknown`] |
//!
//! `Unknown` is not "failed": the provider may still finish and bill. Only a
//! caller whose resend carries the same idempotency key (the SDK talking to
//! onejob) may treat it as retryable; the edge must not call upstream again
//! until the attempt's lease has passed.

use serde::{Deserialize, Serialize};

use crate::job::Usage;

/// Where a transport-level failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    /// Could not connect (refused, DNS, TLS): the request never left.
    Connect,
    /// Timed out before the request had been sent.
    TimeoutBeforeSend,
    /// Timed out waiting for the response after the request was sent.
    TimeoutAfterSend,
    /// The connection was reset or closed after the request was sent.
    DroppedAfterSend,
}

/// What the body of a 2xx LLM answer said, as far as retrying cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyHint {
    /// Nothing notable.
    #[default]
    None,
    /// `finish_reason == "content_filter"`: retrying sends the same prompt
    /// into the same filter, and pays again.
    ContentFilter,
    /// A completion with no content: a paid answer, not a transient error.
    EmptyCompletion,
}

/// One observed outcome of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The call failed below HTTP.
    Transport(TransportFailure),
    /// An HTTP response arrived.
    Http {
        /// The status code.
        status: u16,
        /// The `x-should-retry` header, when present and `true`/`false`.
        should_retry: Option<bool>,
        /// What a 2xx body said.
        hint: BodyHint,
    },
}

impl Outcome {
    /// An HTTP response with no `x-should-retry` and no body hint.
    pub fn status(status: u16) -> Self {
        Self::Http { status, should_retry: None, hint: BodyHint::None }
    }
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The answer is final and good: keep it.
    Accept,
    /// Transient: retry with backoff, within the attempt cap and budget.
    Retry,
    /// Retry at most once more (500: often a bug, sometimes a blip).
    RetryOnce,
    /// Permanent: keep this response as the final answer, never retry.
    Never,
    /// The request may have been processed: never resend without the same
    /// idempotency key; the edge waits for the lease to end.
    Unknown,
}

/// A name for the kind of outcome, for audit trails, events and dashboards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// A 2xx.
    None,
    /// 2xx with `finish_reason == "content_filter"`.
    ContentFilter,
    /// 2xx with an empty completion.
    EmptyCompletion,
    /// 429.
    RateLimited,
    /// 408 or a timeout before the request was sent.
    Timeout,
    /// 409 or 425: a concurrent or too-early request.
    Conflict,
    /// 500.
    ServerError,
    /// 502, 503, 504.
    Unavailable,
    /// Any other 4xx.
    ClientError,
    /// Any other status.
    UnexpectedStatus,
    /// Could not connect.
    Connect,
    /// Timed out after sending: outcome unknown.
    TimeoutAfterSend,
    /// Connection dropped after sending: outcome unknown.
    DroppedAfterSend,
}

/// The decision and the class of an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classification {
    /// What to do next.
    pub decision: Decision,
    /// What happened, by name.
    pub class: ErrorClass,
}

/// Classifies an outcome by the table in this module's documentation.
pub fn classify(outcome: Outcome) -> Classification {
    use Decision::*;
    let (decision, class) = match outcome {
        Outcome::Transport(failure) => match failure {
            TransportFailure::Connect => (Retry, ErrorClass::Connect),
            TransportFailure::TimeoutBeforeSend => (Retry, ErrorClass::Timeout),
            TransportFailure::TimeoutAfterSend => (Unknown, ErrorClass::TimeoutAfterSend),
            TransportFailure::DroppedAfterSend => (Unknown, ErrorClass::DroppedAfterSend),
        },
        Outcome::Http { status, hint, .. } if (200..300).contains(&status) => match hint {
            BodyHint::None => (Accept, ErrorClass::None),
            BodyHint::ContentFilter => (Never, ErrorClass::ContentFilter),
            BodyHint::EmptyCompletion => (Never, ErrorClass::EmptyCompletion),
        },
        Outcome::Http { status, should_retry, .. } => {
            let class = match status {
                429 => ErrorClass::RateLimited,
                408 => ErrorClass::Timeout,
                409 | 425 => ErrorClass::Conflict,
                500 => ErrorClass::ServerError,
                502..=504 => ErrorClass::Unavailable,
                400..=499 => ErrorClass::ClientError,
                _ => ErrorClass::UnexpectedStatus,
            };
            let by_status = match class {
                ErrorClass::RateLimited | ErrorClass::Timeout | ErrorClass::Conflict | ErrorClass::Unavailable => Retry,
                ErrorClass::ServerError => RetryOnce,
                _ => Never,
            };
            let decision = match should_retry {
                Some(true) => Retry,
                Some(false) => Never,
                None => by_status,
            };
            (decision, class)
        }
    };
    Classification { decision, class }
}

/// What an LLM response body says, read in one pass: the hint [`classify`]
/// cares about and the token usage the audit trail records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyFacts {
    /// See [`body_hint`].
    pub hint: BodyHint,
    /// The OpenAI-style `usage` object, when present and well-formed.
    pub usage: Option<Usage>,
}

/// Reads an LLM response body once for its [`ReplyFacts`].
pub fn read_reply(body: &[u8]) -> ReplyFacts {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return ReplyFacts::default();
    };
    let usage = value.get("usage").and_then(|u| Usage::deserialize(u).ok());
    ReplyFacts { hint: hint_of(&value), usage }
}

/// Reads an LLM response body for the hints [`classify`] cares about:
/// an OpenAI-style `choices[].finish_reason == "content_filter"`, or every
/// choice with empty content and no tool calls. Bodies that are not chat or
/// completion objects (embeddings, say) give [`BodyHint::None`].
pub fn body_hint(body: &[u8]) -> BodyHint {
    read_reply(body).hint
}

fn hint_of(value: &serde_json::Value) -> BodyHint {
    let Some(choices) = value.get("choices").and_then(|c| c.as_array()) else {
        return BodyHint::None;
    };
    if choices.iter().any(|c| c.get("finish_reason").and_then(|f| f.as_str()) == Some("content_filter")) {
        return BodyHint::ContentFilter;
    }
    let is_empty = |choice: &serde_json::Value| {
        let message = choice.get("message");
        let text = message
            .and_then(|m| m.get("content"))
            .or_else(|| choice.get("text"))
            .and_then(|t| t.as_str())
            .unwrap_or("");
        let has_tool_calls =
            message.and_then(|m| m.get("tool_calls")).and_then(|t| t.as_array()).is_some_and(|calls| !calls.is_empty());
        text.trim().is_empty() && !has_tool_calls
    };
    if choices.is_empty() || choices.iter().all(is_empty) { BodyHint::EmptyCompletion } else { BodyHint::None }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn decision(status: u16) -> Decision {
        classify(Outcome::status(status)).decision
    }

    #[test]
    fn status_table() {
        for s in [200, 201, 204] {
            assert_eq!(decision(s), Decision::Accept, "{s}");
        }
        for s in [408, 409, 425, 429, 502, 503, 504] {
            assert_eq!(decision(s), Decision::Retry, "{s}");
        }
        assert_eq!(decision(500), Decision::RetryOnce);
        for s in [400, 401, 403, 404, 405, 413, 422, 451, 501, 505, 302, 100] {
            assert_eq!(decision(s), Decision::Never, "{s}");
        }
    }

    #[test]
    fn classes_name_what_happened() {
        assert_eq!(classify(Outcome::status(429)).class, ErrorClass::RateLimited);
        assert_eq!(classify(Outcome::status(503)).class, ErrorClass::Unavailable);
        assert_eq!(classify(Outcome::status(400)).class, ErrorClass::ClientError);
        assert_eq!(classify(Outcome::status(200)).class, ErrorClass::None);
    }

    #[test]
    fn server_header_overrides_the_status_table_on_errors_only() {
        let with = |status, should_retry| {
            classify(Outcome::Http { status, should_retry: Some(should_retry), hint: BodyHint::None }).decision
        };
        assert_eq!(with(400, true), Decision::Retry);
        assert_eq!(with(503, false), Decision::Never);
        assert_eq!(with(200, true), Decision::Accept);
    }

    #[test]
    fn transport_failures_split_on_whether_the_request_left() {
        let d = |f| classify(Outcome::Transport(f)).decision;
        assert_eq!(d(TransportFailure::Connect), Decision::Retry);
        assert_eq!(d(TransportFailure::TimeoutBeforeSend), Decision::Retry);
        assert_eq!(d(TransportFailure::TimeoutAfterSend), Decision::Unknown);
        assert_eq!(d(TransportFailure::DroppedAfterSend), Decision::Unknown);
    }

    #[test]
    fn llm_body_hints_are_final_and_never_retried() {
        let filtered = br#"{"choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":""}}]}"#;
        assert_eq!(body_hint(filtered), BodyHint::ContentFilter);
        let empty = br#"{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"  "}}]}"#;
        assert_eq!(body_hint(empty), BodyHint::EmptyCompletion);
        let tool =
            br#"{"choices":[{"finish_reason":"tool_calls","message":{"content":null,"tool_calls":[{"id":"1"}]}}]}"#;
        assert_eq!(body_hint(tool), BodyHint::None);
        let fine = br#"{"choices":[{"finish_reason":"stop","message":{"content":"billing"}}]}"#;
        assert_eq!(body_hint(fine), BodyHint::None);
        assert_eq!(body_hint(br#"{"data":[{"embedding":[0.1]}]}"#), BodyHint::None);
        assert_eq!(body_hint(b"not json"), BodyHint::None);
        let with_usage = br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#;
        let facts = read_reply(with_usage);
        assert_eq!(facts.hint, BodyHint::None);
        assert_eq!(facts.usage, Some(Usage { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }));
        assert_eq!(read_reply(br#"{"usage":{"prompt_tokens":"many"}}"#).usage, None);
        for hint in [BodyHint::ContentFilter, BodyHint::EmptyCompletion] {
            let c = classify(Outcome::Http { status: 200, should_retry: None, hint });
            assert_eq!(c.decision, Decision::Never);
        }
    }
}
