#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use serde_json::json;

use super::*;

fn check(samples: Vec<Value>, path: Option<&str>) -> CheckRequest {
    CheckRequest { model: "triage".into(), samples, path: path.map(str::to_owned) }
}

fn openai(content: &str) -> Vec<u8> {
    json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})
        .to_string()
        .into_bytes()
}

fn no_headers(_: &str) -> Option<String> {
    None
}

fn reply(status: u16, body: &[u8], contract: Option<&Contract>) -> SampleResult {
    let answer = Answer::Reply { status, headers: &no_headers, body, now_ms: 0 };
    SampleResult::of(0, 5, answer, contract)
}

#[test]
fn a_check_needs_1_to_10_request_bodies_and_a_safe_path() {
    assert_eq!(check(vec![json!({})], None).path().unwrap(), "/v1/chat/completions");
    assert_eq!(check(vec![json!({}); MAX_SAMPLES], Some("/v1/messages")).path().unwrap(), "/v1/messages");
    let refused = |c: CheckRequest| c.path().unwrap_err().problem();
    assert_eq!(refused(check(vec![], None)).detail, "send 1 to 10 samples");
    assert_eq!(refused(check(vec![json!({}); MAX_SAMPLES + 1], None)).detail, "send 1 to 10 samples");
    assert_eq!(
        refused(check(vec![json!({}), json!("x")], None)).detail,
        "sample 1 is not a JSON object (a request body)"
    );
    let path = refused(check(vec![json!({})], Some("/v1/../admin")));
    assert_eq!(path.kind, ProblemType::InvalidQuery);
    assert!(path.detail.starts_with("path: "));
    // The samples are checked before the path.
    assert_eq!(refused(check(vec![], Some("/nope"))).detail, "send 1 to 10 samples");
}

#[test]
fn each_provider_gets_its_model_and_no_stream() {
    let c = check(vec![json!({})], None);
    assert_eq!(c.model_at(Some("gpt-4o")), "gpt-4o");
    assert_eq!(c.model_at(None), "triage");
    let body = sample_body(&json!({"model": "x", "stream": true, "messages": []}), "gpt-4o");
    assert_eq!(body, json!({"model": "gpt-4o", "messages": []}));
}

#[test]
fn answers_are_judged_against_the_contract() {
    let contract = Contract::parse(&json!({"required_keys": ["category"]})).unwrap();
    let good = reply(200, &openai(r#"{"category": "billing"}"#), Some(&contract));
    assert_eq!((good.status, good.accepted, good.contract.as_str()), (Some(200), true, "ok"));
    let outside = reply(200, &openai(r#"{"other": 1}"#), Some(&contract));
    assert!(outside.accepted && outside.contract != "ok" && outside.contract != "none");
    let refused = reply(503, b"{}", Some(&contract));
    assert_eq!((refused.accepted, refused.contract.as_str()), (false, "not checked (no answer)"));
    let uncontracted = reply(200, &openai("hi"), None);
    assert_eq!((uncontracted.accepted, uncontracted.contract.as_str()), (true, "none"));
    let streamed = SampleResult::of(1, 5, Answer::Stream, None);
    assert_eq!(
        (streamed.status, streamed.accepted, streamed.contract.as_str()),
        (Some(200), false, "not checked (streamed)")
    );
    let dropped = SampleResult::of(2, 5, Answer::Transport("timeout"), Some(&contract));
    assert_eq!((dropped.status, dropped.contract.as_str(), dropped.sample), (None, "not checked (timeout)", 2));
}

#[test]
fn a_provider_is_safe_when_every_sample_is_accepted_within_the_contract() {
    let contract = Contract::parse(&json!({"required_keys": ["category"]})).unwrap();
    let good = || reply(200, &openai(r#"{"category": "billing"}"#), Some(&contract));
    assert!(ProviderResult::of("a".into(), "m".into(), vec![good(), good()]).safe);
    assert!(ProviderResult::of("a".into(), "m".into(), vec![reply(200, &openai("hi"), None)]).safe);
    let mixed = ProviderResult::of("a".into(), "m".into(), vec![good(), reply(500, b"{}", Some(&contract))]);
    assert!(!mixed.safe);
    assert_eq!(mixed.model.as_deref(), Some("m"));
    assert!(!ProviderResult::of("a".into(), "m".into(), vec![reply(200, &openai("{}"), Some(&contract))]).safe);
}

/// `openai` (OpenAI's API) and `demo` (both APIs), one route `triage`
/// over both (`demo` asked for its own model), with a contract when
/// `contract`.
fn two_providers(contract: bool) -> Providers {
    let list = r#"[{"name":"openai","kind":"openai","base_url":"https://a.example/v1"},{"name":"demo","kind":"demo"}]"#;
    let contract = if contract { r#","contract":{"required_keys":["team"]}"# } else { "" };
    let steps = r#"[{"provider":"openai"},{"provider":"demo","model":"demo-x"}]"#;
    let routes = format!(r#"{{"triage":{{"providers":{steps}{contract}}}}}"#);
    Providers::parse(list, Some(&routes)).expect("providers")
}

#[test]
fn a_check_calls_the_providers_of_its_route_that_speak_its_path_s_api() {
    let providers = two_providers(false);
    let chat = check(vec![json!({})], None).plan(&providers).unwrap();
    assert_eq!(chat.path, "/v1/chat/completions");
    assert_eq!(chat.contract, None);
    assert_eq!(chat.calls, vec![(0, "triage".to_owned()), (1, "demo-x".to_owned())]);
    // OpenAI's API is no fallback for a Messages request.
    let messages = check(vec![json!({})], Some("/v1/messages")).plan(&providers).unwrap();
    assert_eq!(messages.calls, vec![(1, "demo-x".to_owned())]);
}

#[test]
fn a_check_of_a_model_no_route_serves_or_of_a_bad_body_is_refused_before_any_call() {
    let providers = two_providers(false);
    let other = CheckRequest { model: "other".into(), samples: vec![json!({})], path: None };
    let refused = other.plan(&providers).unwrap_err().problem();
    assert_eq!((refused.kind, refused.detail.as_str()), (ProblemType::NoRoute, "no route serves this model"));
    assert_eq!(check(vec![], None).plan(&providers).unwrap_err().problem().kind, ProblemType::InvalidQuery);
}

#[test]
fn a_check_s_report_says_whether_the_route_has_a_contract() {
    let providers = two_providers(true);
    let plan = check(vec![json!({})], None).plan(&providers).unwrap();
    assert!(plan.contract.is_some());
    let results = vec![ProviderResult::of("demo".into(), "triage".into(), vec![])];
    let report = plan.report("triage", &results);
    assert_eq!(report["model"], "triage");
    assert_eq!(report["path"], "/v1/chat/completions");
    assert_eq!(report["contract"], true);
    assert_eq!(report["providers"][0]["name"], "demo");
    assert_eq!(report["providers"][0]["safe"], true);
}

#[test]
fn the_providers_page_asks_the_breakers_there_are_and_shows_the_rest_closed() {
    use crate::retry::breaker::{Breaker, BreakerState, HealthView};
    let single = Providers::single(Some("https://up.example/v1"));
    assert_eq!(with_breaker(&single).count(), 0, "UPSTREAM's passthrough has no breaker: none is asked");
    assert_eq!(providers_page(&single, &[])["providers"][0]["state"], "closed");
    let passthrough = Providers::parse(
        r#"[{"name":"a","kind":"openai","base_url":"https://a.example/v1"},{"name":"b","kind":"demo"}]"#,
        Some(r#"{"*":{"providers":[{"provider":"a"},{"provider":"b","model":"m"}],"hedge_after_ms":50}}"#),
    )
    .unwrap();
    let asked: Vec<(usize, &str)> = with_breaker(&passthrough).collect();
    assert_eq!(asked, vec![(0, "a"), (1, "b")]);
    let open = HealthView {
        state: BreakerState::Open,
        consecutive_failures: 3,
        calls: 4,
        failures: 3,
        error_rate: 0.75,
        retry_after_ms: 900,
        ..Breaker::default().view(0)
    };
    let page = providers_page(&passthrough, &[(0, open)]);
    let a = &page["providers"][0];
    assert_eq!(
        (a["name"].as_str(), a["kind"].as_str(), a["breaker"].as_bool()),
        (Some("a"), Some("openai"), Some(true))
    );
    assert_eq!(
        (a["state"].as_str(), a["calls"].as_u64(), a["retry_after_ms"].as_u64()),
        (Some("open"), Some(4), Some(900))
    );
    assert_eq!(a["error_rate"], 0.75);
    let b = &page["providers"][1];
    assert_eq!(
        (b["state"].as_str(), b["calls"].as_u64(), b["error_rate"].as_f64()),
        (Some("closed"), Some(0), Some(0.0))
    );
    assert_eq!(b["transitions"], json!([]));
    assert_eq!(
        page["routes"],
        json!([{"model": "*", "providers": [{"provider": "a", "model": null}, {"provider": "b", "model": "m"}], "hedge_after_ms": 50, "contract": false}])
    );
}
