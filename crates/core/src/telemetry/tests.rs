#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::build::{ReplaySource, RequestFacts, request_spans};
use super::log::JobLog;
use super::span::{SpanKind, StatusCode, Value};
use super::trace::RequestTrace;
use super::*;
use crate::identity::fingerprint::{Body, Fingerprint};
use crate::identity::key::IdempotencyKey;
use crate::identity::random::SplitMix64;
use crate::job::view::JobView;
use crate::job::{AttemptReport, Job, JobPolicy, UnknownPolicy};
use crate::retry::classify::ErrorClass;
use crate::retry::reply::Usage;

const T0: u64 = 1_700_000_000_000;
const KEY: &str = "telemetry-test-key-0001";

fn job() -> Job {
    let fp = Fingerprint::of_url("POST", "/v1/chat/completions", Body::Json(br#"{"model":"m"}"#)).unwrap();
    let policy = JobPolicy::new(3, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
    Job::new(fp, T0, policy)
}

/// A failover: attempt 1 to `primary` 503s at T0+100, attempt 2 to `backup` succeeds at T0+300.
fn failed_over() -> Job {
    let mut job = job();
    let first = job.claim(0, T0 + 10, "primary", Some("p-model")).unwrap();
    let failed = AttemptReport { status: Some(503), usage: None, error_class: Some(ErrorClass::Unavailable) };
    job.fail(first, T0 + 100, failed).unwrap();
    let second = job.claim(job.version(), T0 + 110, "backup", Some("b-model")).unwrap();
    let usage = Usage { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 };
    job.complete(second, T0 + 300, AttemptReport { status: Some(200), usage: Some(usage), error_class: None }).unwrap();
    job
}

fn storage_id() -> StorageId {
    StorageId::of("acme", None, &IdempotencyKey::parse(KEY).unwrap())
}

fn facts<'a>(trace: &'a RequestTrace, digest: &'a str, replayed: Option<ReplaySource>) -> RequestFacts<'a> {
    RequestFacts {
        trace,
        method: "POST",
        route: "/v1/chat/completions",
        started_ms: T0,
        ended_ms: T0 + 320,
        status: 200,
        tenant: "acme",
        key_digest: digest,
        model: Some("gpt-test"),
        response_model: Some("b-model-2024"),
        state: Some("completed"),
        answered_by: Some(2),
        replayed,
        job_type: None,
        content: None,
    }
}

fn string(value: Option<&Value>) -> &str {
    match value {
        Some(Value::Str(text)) => text,
        other => panic!("not a string: {other:?}"),
    }
}

#[test]
fn a_failover_is_a_request_span_with_an_attempt_span_per_provider() {
    let trace = RequestTrace::start(
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        None,
        &mut SplitMix64::new(3),
    );
    let digest = key_digest(&storage_id());
    let view = JobView::new(IdempotencyKey::parse(KEY).unwrap(), &failed_over());
    let kind = |name: &str| if name == "primary" { "openai".to_owned() } else { "anthropic".to_owned() };
    let spans = request_spans(&facts(&trace, &digest, None), Some(&view), &kind);
    assert_eq!(spans.len(), 3);
    let (request, first, second) = (&spans[0], &spans[1], &spans[2]);
    assert_eq!(request.kind, SpanKind::Server);
    assert_eq!(request.parent, trace.parent, "the caller's span is the request span's parent");
    assert_eq!(request.name, "POST /v1/chat/completions");
    assert_eq!(request.attribute("onejob.replayed"), Some(&Value::Bool(false)));
    assert_eq!(request.attribute("onejob.upstream_calls"), Some(&Value::Int(2)));
    assert_eq!(request.attribute("gen_ai.usage.output_tokens"), Some(&Value::Int(7)));
    assert_eq!(string(request.attribute("onejob.key.digest")), digest);
    for attempt in [first, second] {
        assert_eq!(attempt.parent, Some(request.span_id));
        assert_eq!(attempt.trace_id, request.trace_id);
        assert_eq!(attempt.kind, SpanKind::Client);
    }
    assert_eq!(first.span_id, trace.attempt_span_id(1), "the id the upstream call's traceparent named");
    assert_eq!(first.name, "chat p-model");
    assert_eq!(string(first.attribute("gen_ai.provider.name")), "openai");
    assert_eq!(string(first.attribute("gen_ai.system")), "openai");
    assert_eq!(first.attribute("http.response.status_code"), Some(&Value::Int(503)));
    assert_eq!(string(first.attribute("error.type")), "unavailable");
    assert_eq!(string(first.attribute("onejob.attempt.outcome")), "failed");
    assert_eq!(first.status, StatusCode::Error);
    assert_eq!(first.start_ns, (T0 + 10) * 1_000_000);
    assert_eq!(first.end_ns, (T0 + 100) * 1_000_000);
    assert_eq!(second.attribute("onejob.attempt"), Some(&Value::Int(2)));
    assert_eq!(string(second.attribute("gen_ai.request.model")), "b-model");
    assert_eq!(string(second.attribute("gen_ai.response.model")), "b-model-2024");
    assert_eq!(second.attribute("gen_ai.usage.input_tokens"), Some(&Value::Int(11)));
    assert_eq!(second.status, StatusCode::Unset);
    assert!(second.attribute("error.type").is_none());
    // Nothing of the key in any exported byte.
    let resource = span::Resource { service_name: "onejob".into(), service_version: "0".into() };
    let bodies = span::encode_batches(&resource, &spans, 512, 1 << 20);
    assert_eq!(bodies.len(), 1);
    assert!(!bodies[0].contains(KEY));
    assert!(bodies[0].contains(&first.span_id.to_hex()));
}

#[test]
fn a_replay_is_one_span_and_attempts_of_an_earlier_request_are_not_this_ones() {
    let trace = RequestTrace::start(None, None, &mut SplitMix64::new(4));
    let digest = key_digest(&storage_id());
    let view = JobView::new(IdempotencyKey::parse(KEY).unwrap(), &failed_over());
    let none = |_: &str| String::new();
    for source in [ReplaySource::Ledger, ReplaySource::Cache] {
        let spans = request_spans(&facts(&trace, &digest, Some(source)), Some(&view), &none);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].attribute("onejob.replayed"), Some(&Value::Bool(true)));
        assert_eq!(string(spans[0].attribute("onejob.replay.source")), source.as_str());
        assert_eq!(spans[0].parent, None, "a new trace's root");
    }
    let mut later = facts(&trace, &digest, None);
    later.started_ms = T0 + 105;
    let spans = request_spans(&later, Some(&view), &none);
    assert_eq!(spans.len(), 2, "only attempt 2 started after this request came");
    assert_eq!(spans[1].attribute("onejob.attempt"), Some(&Value::Int(2)));
}

#[test]
fn content_only_when_opted_in() {
    let trace = RequestTrace::start(None, None, &mut SplitMix64::new(5));
    let digest = key_digest(&storage_id());
    let mut with = facts(&trace, &digest, None);
    assert!(request_spans(&with, None, &|_| String::new())[0].attribute("gen_ai.input.messages").is_none());
    with.content = Some(("prompt", "completion"));
    let spans = request_spans(&with, None, &|_| String::new());
    assert_eq!(string(spans[0].attribute("gen_ai.input.messages")), "prompt");
    assert_eq!(truncated("héllo", 2), "h");
    assert_eq!(truncated("hello", 10), "hello");
}

#[test]
fn the_key_digest_is_short_tenant_scoped_and_not_the_key() {
    let key = IdempotencyKey::parse(KEY).unwrap();
    let digest = key_digest(&StorageId::of("acme", None, &key));
    assert_eq!(digest.len(), 16);
    assert_ne!(digest, key_digest(&StorageId::of("other", None, &key)));
    assert!(!KEY.contains(&digest));
}

#[test]
fn one_log_line_per_transition_and_per_ended_attempt() {
    let mut job = job();
    let mut log = JobLog::new("acme", "d1g35t", None);
    let first = job.claim(0, T0 + 10, "primary", Some("p-model")).unwrap();
    let lines = log.lines(&job);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["onejob"], "transition");
    assert_eq!((line["from"].as_str(), line["to"].as_str()), (Some("new"), Some("in_flight")));
    assert_eq!(line["tenant"], "acme");
    assert_eq!(line["key_digest"], "d1g35t");
    assert!(log.lines(&job).is_empty(), "nothing changed, nothing logged");
    let failed = AttemptReport { status: Some(503), usage: None, error_class: Some(ErrorClass::Unavailable) };
    job.fail(first, T0 + 100, failed).unwrap();
    let lines = log.lines(&job);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let transition: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!((transition["from"].as_str(), transition["to"].as_str()), (Some("in_flight"), Some("failed")));
    let attempt: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(attempt["onejob"], "attempt");
    assert_eq!(attempt["attempt"], 1);
    assert_eq!(attempt["provider"], "primary");
    assert_eq!(attempt["model"], "p-model");
    assert_eq!(attempt["status"], 503);
    assert_eq!(attempt["outcome"], "failed");
    assert_eq!(attempt["error_class"], "unavailable");
    assert_eq!(attempt["latency_ms"], 90);
    assert!(lines[1].starts_with(r#"{"onejob":"attempt","#), "the kind comes first: {}", lines[1]);
    // A log that starts from a stored job logs only what comes next.
    let mut resumed = JobLog::new("acme", "d1g35t", Some(&job));
    assert!(resumed.lines(&job).is_empty());
}
