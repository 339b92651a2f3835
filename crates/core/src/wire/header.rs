//! Header names. HTTP header names are case-insensitive; these are the
//! spellings onejob sends.

/// The client's key for one intent.
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// `true` on a response that was replayed from storage, not freshly made.
pub const IDEMPOTENT_REPLAYED: &str = "Idempotent-Replayed";
/// The job's state after this request (`completed`, `dead`, …).
pub const JOB_STATE: &str = "OneJob-Job-State";
/// The number of the attempt whose result this is.
pub const ATTEMPT: &str = "OneJob-Attempt";
/// Seconds to wait before retrying (RFC 9110).
pub const RETRY_AFTER: &str = "Retry-After";
/// Milliseconds to wait before retrying (OpenAI SDK convention).
pub const RETRY_AFTER_MS: &str = "retry-after-ms";
/// `true`/`false`: whether the client should retry (OpenAI SDK convention).
pub const SHOULD_RETRY: &str = "x-should-retry";
/// RFC 7240; onejob reads `wait=N` (seconds to wait for an in-flight job).
pub const PREFER: &str = "Prefer";

/// Every header a browser must be allowed to read (CORS
/// `Access-Control-Expose-Headers`).
pub const EXPOSED: &[&str] = &[
    IDEMPOTENCY_KEY,
    IDEMPOTENT_REPLAYED,
    JOB_STATE,
    ATTEMPT,
    RETRY_AFTER,
    RETRY_AFTER_MS,
    SHOULD_RETRY,
    "Location",
    "Preference-Applied",
    // W3C Trace Context: the request's span, with telemetry on.
    "traceparent",
];

/// Reads an `x-should-retry` header value: `true` or `false` (any case);
/// anything else is no opinion.
pub fn parse_should_retry(value: &str) -> Option<bool> {
    match value.trim() {
        v if v.eq_ignore_ascii_case("true") => Some(true),
        v if v.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn should_retry_values() {
        assert_eq!(parse_should_retry("true"), Some(true));
        assert_eq!(parse_should_retry(" FALSE "), Some(false));
        assert_eq!(parse_should_retry("yes"), None);
    }
}
