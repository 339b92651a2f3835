//! What an outcome means for retrying: the table below, in one place,
//! so the browser SDK and the edge can never disagree about it.
//!
//! | outcome | decision |
//! |---|---|
//! | 2xx | [`Decision::Accept`] |
//! | 2xx with `content_filter` or an empty completion | [`Decision::Never`]: a paid, final answer; retrying pays again for the same |
//! | `x-should-retry: true` / `false` on an error | [`Decision::Retry`] / [`Decision::Never`] (the server knows best) |
//! | 408, 409, 425, 429, 502, 503, 504, 529 (Anthropic's "overloaded") | [`Decision::Retry`] |
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

use crate::retry::reply::BodyHint;

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

impl TransportFailure {
    /// What a fetch that failed without a response means, from its error's
    /// message. Only words that prove the request never left (a refused
    /// connection, a failed DNS lookup) make it [`Self::Connect`], which may
    /// be retried; anything else (reset, closed, lost) may have reached the
    /// provider: [`Self::DroppedAfterSend`], an unknown outcome.
    ///
    /// workerd reports a refused connection and one dropped after the
    /// request was sent with the same words ("Network connection lost"), so
    /// both are unknown there (the safe side: no second paid call).
    pub fn of_fetch_error(message: &str) -> Self {
        const NEVER_SENT: [&str; 4] = ["connection refused", "econnrefused", "dns lookup", "no such host"];
        let lower = message.to_ascii_lowercase();
        if NEVER_SENT.iter().any(|words| lower.contains(words)) { Self::Connect } else { Self::DroppedAfterSend }
    }
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
    /// 529: the provider is overloaded (Anthropic).
    Overloaded,
    /// 401 or 403: the provider refused the credential (a revoked or wrong
    /// key): final, and something only a human can fix.
    Auth,
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
    /// A streamed answer carried the provider's error event.
    StreamError,
    /// A streamed answer ended without the provider's terminal event.
    StreamInterrupted,
    /// A streamed answer was cancelled by a caller.
    Cancelled,
    /// A 2xx answer that did not meet its route's output contract: not
    /// accepted as the job's result; the next provider may be tried.
    Contract,
}

impl ErrorClass {
    /// The class's name in audits, dead letters and the operators' index
    /// (`rate_limited`, `auth`, …): its serialised form.
    pub fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
    }

    /// The class named `name` ([`ErrorClass::name`]), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::from(name)).ok()
    }
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
                529 => ErrorClass::Overloaded,
                401 | 403 => ErrorClass::Auth,
                400..=499 => ErrorClass::ClientError,
                _ => ErrorClass::UnexpectedStatus,
            };
            let by_status = match class {
                ErrorClass::RateLimited
                | ErrorClass::Timeout
                | ErrorClass::Conflict
                | ErrorClass::Unavailable
                | ErrorClass::Overloaded => Retry,
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

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn only_a_fetch_error_that_proves_the_request_never_left_is_a_connect_failure() {
        for never_left in
            ["connect ECONNREFUSED 127.0.0.1:9", "Connection refused", "DNS lookup failed", "no such host"]
        {
            assert_eq!(TransportFailure::of_fetch_error(never_left), TransportFailure::Connect, "{never_left}");
        }
        // workerd's words for a refused connection and a lost one alike: unknown.
        for maybe_sent in ["Network connection lost.", "connection reset by peer", "socket hang up", ""] {
            assert_eq!(
                TransportFailure::of_fetch_error(maybe_sent),
                TransportFailure::DroppedAfterSend,
                "{maybe_sent}"
            );
        }
    }

    fn decision(status: u16) -> Decision {
        classify(Outcome::status(status)).decision
    }

    #[test]
    fn status_table() {
        for s in [200, 201, 204] {
            assert_eq!(decision(s), Decision::Accept, "{s}");
        }
        for s in [408, 409, 425, 429, 502, 503, 504, 529] {
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
        assert_eq!(classify(Outcome::status(529)).class, ErrorClass::Overloaded);
        assert_eq!(classify(Outcome::status(401)).class, ErrorClass::Auth);
        assert_eq!(ErrorClass::RateLimited.name(), "rate_limited");
        assert_eq!(ErrorClass::Auth.name(), "auth");
        assert_eq!(classify(Outcome::status(403)).decision, Decision::Never);
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
        for hint in [BodyHint::ContentFilter, BodyHint::EmptyCompletion] {
            let c = classify(Outcome::Http { status: 200, should_retry: None, hint });
            assert_eq!(c.decision, Decision::Never);
        }
    }
}
