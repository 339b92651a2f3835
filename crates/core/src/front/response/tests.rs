#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;
use crate::wire::ProblemType;

fn get<'a>(headers: &'a HeaderList, name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

fn head(state: JobState, retry_after_ms: Option<u64>) -> ResultHead<'static> {
    ResultHead { content_type: "application/json", key: "k", state, attempt: None, replayed: false, retry_after_ms }
}

#[test]
fn cors_exposes_onejobs_headers() {
    let headers = cors();
    assert_eq!(get(&headers, "Access-Control-Allow-Origin"), Some("*"));
    let exposed = get(&headers, "Access-Control-Expose-Headers").unwrap();
    assert!(exposed.contains(header::IDEMPOTENCY_KEY) && exposed.contains(header::SHOULD_RETRY));
}

#[test]
fn a_preflight_allows_valid_requested_names_only() {
    let allowed =
        |requested: Option<&str>| get(&preflight(requested), "Access-Control-Allow-Headers").unwrap().to_owned();
    assert_eq!(allowed(None), ALWAYS_ALLOWED);
    assert_eq!(
        allowed(Some(" x-stainless-os ,anthropic-version,, ")),
        format!("{ALWAYS_ALLOWED}, x-stainless-os, anthropic-version")
    );
    assert_eq!(allowed(Some("bad header")), ALWAYS_ALLOWED);
    assert_eq!(allowed(Some("x-a\r\nx-b")), ALWAYS_ALLOWED);
    let many = vec!["x-h"; MAX_REQUESTED_HEADERS + 1].join(",");
    assert_eq!(allowed(Some(&many)), ALWAYS_ALLOWED);
    let enough = vec!["x-h"; MAX_REQUESTED_HEADERS].join(",");
    assert_ne!(allowed(Some(&enough)), ALWAYS_ALLOWED);
    let long = format!("x-{}", "a".repeat(MAX_REQUESTED_BYTES));
    assert_eq!(allowed(Some(&long)), ALWAYS_ALLOWED);
    let headers = preflight(None);
    assert_eq!(get(&headers, "Access-Control-Allow-Methods"), Some("GET, POST, OPTIONS"));
    assert_eq!(get(&headers, "Access-Control-Max-Age"), Some("86400"));
    assert_eq!(get(&headers, "Vary"), Some("Access-Control-Request-Headers"));
}

#[test]
fn retry_after_is_whole_seconds_at_least_one() {
    let seconds = |ms| get(&retry_after(ms), header::RETRY_AFTER).unwrap().to_owned();
    assert_eq!(seconds(0), "1");
    assert_eq!(seconds(1), "1");
    assert_eq!(seconds(1000), "1");
    assert_eq!(seconds(1001), "2");
    assert_eq!(get(&retry_after(1500), header::RETRY_AFTER_MS), Some("1500"));
}

#[test]
fn problems_say_whether_and_when_to_retry() {
    let plain = problem(&Problem::new(ProblemType::NotFound, "x"));
    assert_eq!(get(&plain, "Content-Type"), Some(PROBLEM_CONTENT_TYPE));
    assert_eq!(get(&plain, header::SHOULD_RETRY), Some("false"));
    assert_eq!(get(&plain, header::RETRY_AFTER), None);
    let busy = problem(&Problem::new(ProblemType::RequestInProgress, "x").with_retry_after_ms(2500));
    assert_eq!(get(&busy, header::SHOULD_RETRY), Some("true"));
    assert_eq!(get(&busy, header::RETRY_AFTER), Some("3"));
    assert_eq!(get(&busy, header::RETRY_AFTER_MS), Some("2500"));
}

#[test]
fn a_background_jobs_202_says_where_and_when() {
    let headers = accepted("test-0123456789abcdef", JobState::Pending);
    assert_eq!(get(&headers, "Location"), Some("/onejob/v1/jobs/test-0123456789abcdef"));
    assert_eq!(get(&headers, header::RETRY_AFTER), Some("1"));
    assert_eq!(get(&headers, "Preference-Applied"), Some("respond-async"));
    assert_eq!(get(&headers, header::JOB_STATE), Some("pending"));
    assert_eq!(get(&headers, header::IDEMPOTENCY_KEY), Some("test-0123456789abcdef"));
}

#[test]
fn a_result_says_retry_only_with_a_time_while_unfinished() {
    let unfinished = result(&head(JobState::Unknown, Some(1200)));
    assert_eq!(get(&unfinished, header::SHOULD_RETRY), Some("true"));
    assert_eq!(get(&unfinished, header::RETRY_AFTER), Some("2"));
    for finished in [head(JobState::Dead, Some(1200)), head(JobState::Unknown, None), head(JobState::Completed, None)] {
        let headers = result(&finished);
        assert_eq!(get(&headers, header::SHOULD_RETRY), Some("false"));
        assert_eq!(get(&headers, header::RETRY_AFTER), None);
    }
    let plain = result(&head(JobState::Completed, None));
    assert_eq!(get(&plain, "Content-Type"), Some("application/json"));
    assert_eq!(get(&plain, header::IDEMPOTENCY_KEY), Some("k"));
    assert_eq!(get(&plain, header::JOB_STATE), Some("completed"));
    assert_eq!(get(&plain, header::ATTEMPT), None);
    assert_eq!(get(&plain, header::IDEMPOTENT_REPLAYED), None);
    assert_eq!(get(&plain, "Cache-Control"), None);
    let replayed = result(&ResultHead {
        content_type: "text/event-stream; charset=utf-8",
        attempt: Some(2),
        replayed: true,
        ..head(JobState::Completed, None)
    });
    assert_eq!(get(&replayed, header::ATTEMPT), Some("2"));
    assert_eq!(get(&replayed, header::IDEMPOTENT_REPLAYED), Some("true"));
    assert_eq!(get(&replayed, "Cache-Control"), Some("no-cache"));
    assert_eq!(get(&replayed, "Content-Encoding"), Some("identity"));
}

#[test]
fn a_live_stream_is_in_flight_and_never_asked_to_retry() {
    let headers = stream("text/event-stream", "k", 3, false);
    assert_eq!(get(&headers, header::JOB_STATE), Some("in_flight"));
    assert_eq!(get(&headers, header::ATTEMPT), Some("3"));
    assert_eq!(get(&headers, header::SHOULD_RETRY), Some("false"));
    assert_eq!(get(&headers, header::IDEMPOTENT_REPLAYED), None);
    assert_eq!(get(&headers, "Cache-Control"), Some("no-cache"));
    assert_eq!(get(&stream("text/event-stream", "k", 1, true), header::IDEMPOTENT_REPLAYED), Some("true"));
    assert_eq!(get(&about_job("k", JobState::Pending), header::JOB_STATE), Some("pending"));
}
