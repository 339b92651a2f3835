#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;
use crate::retry::classify::Decision;

fn headers(_: &str) -> Option<String> {
    None
}

#[test]
fn a_good_reply_is_accepted_and_kept_as_it_came() {
    let body = br#"{"choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#.to_vec();
    let (answer, failed) = judge_reply(200, &headers, "application/json".into(), body.clone(), None, 0, 60_000);
    assert_eq!(answer.decision(), Decision::Accept);
    assert!(!failed);
    assert_eq!(answer.response, StoredResponse { status: 200, content_type: "application/json".into(), body });
    assert_eq!(answer.report.status, Some(200));
    assert!(answer.report.usage.is_some());
}

#[test]
fn a_server_error_counts_against_the_breaker() {
    let (answer, failed) = judge_reply(503, &headers, "text/plain".into(), b"busy".to_vec(), None, 0, 60_000);
    assert_eq!(answer.decision(), Decision::Retry);
    assert!(failed);
}

#[test]
fn a_2xx_outside_the_contract_is_a_502_retried_elsewhere_and_not_held_against_the_provider() {
    let contract = Contract::parse(&serde_json::json!({"required_keys": ["answer"]})).expect("contract");
    let body = br#"{"choices":[{"message":{"content":"not json"}}]}"#.to_vec();
    let (answer, failed) = judge_reply(200, &headers, "application/json".into(), body, Some(&contract), 0, 60_000);
    assert_eq!(answer.decision(), Decision::Retry);
    assert_eq!(answer.observed.classification.class, ErrorClass::Contract);
    assert_eq!(answer.response.status, 502);
    assert_eq!(answer.response.content_type, PROBLEM_CONTENT_TYPE);
    assert!(!failed, "a broken contract is not the provider failing");
}

#[test]
fn a_dropped_call_is_unknown_and_kept_as_a_502_problem() {
    let answer = judge_transport(TransportFailure::DroppedAfterSend, "reset");
    assert_eq!(answer.decision(), Decision::Unknown);
    assert_eq!(answer.response.status, 502);
    assert_eq!(unjudgeable("streamed").decision(), Decision::Unknown);
    assert_eq!(judge_transport(TransportFailure::Connect, "refused").decision(), Decision::Retry);
}

#[test]
fn the_job_types_contract_comes_before_the_routes_and_only_for_assistant_messages() {
    let job_type = Contract::parse(&serde_json::json!({"required_keys": ["answer"]})).expect("contract");
    let route = Contract::parse(&serde_json::json!({"required_keys": ["other"]})).expect("contract");
    assert_eq!(contract_for("/v1/chat/completions", Some(&job_type), Some(&route)), Some(&job_type));
    assert_eq!(contract_for("/v1/messages?beta=1", None, Some(&route)), Some(&route));
    assert_eq!(contract_for("/v1/embeddings", Some(&job_type), Some(&route)), None);
}

#[test]
fn each_decision_makes_its_transition() {
    let of = |decision, class, background| Transition::of(Classification { decision, class }, background);
    assert_eq!(of(Decision::Accept, ErrorClass::None, false), Transition::Complete);
    assert_eq!(of(Decision::Never, ErrorClass::ClientError, true), Transition::Complete);
    // A refused key: the caller sees the 401; a background job is a dead letter at once.
    assert_eq!(of(Decision::Never, ErrorClass::Auth, false), Transition::Complete);
    assert_eq!(of(Decision::Never, ErrorClass::Auth, true), Transition::GiveUp);
    assert_eq!(of(Decision::Unknown, ErrorClass::Timeout, false), Transition::Unknown);
    assert_eq!(of(Decision::Retry, ErrorClass::RateLimited, false), Transition::Fail);
    assert_eq!(of(Decision::RetryOnce, ErrorClass::ServerError, false), Transition::Fail);
    assert!(!Transition::Unknown.keeps_response());
    assert!(Transition::Fail.keeps_response());
}

#[test]
fn a_fast_permanent_error_waits_for_the_other_racer_and_only_a_good_answer_beats_it() {
    assert_eq!(first_answer(Decision::Never), RaceCall::WaitForOther);
    assert_eq!(first_answer(Decision::Accept), RaceCall::First);
    assert_eq!(first_answer(Decision::Retry), RaceCall::First);
    assert!(other_wins(Decision::Accept));
    assert!(!other_wins(Decision::Never));
    assert!(!other_wins(Decision::Retry));
}

#[test]
fn waits_when_every_breaker_is_open_or_the_budget_is_spent() {
    assert_eq!(earliest_probe_ms(None), 1_000);
    assert_eq!(earliest_probe_ms(Some(0)), 1);
    assert_eq!(earliest_probe_ms(Some(2_500)), 2_500);
    assert_eq!(no_healthy_provider(2_500).retry_after_ms, Some(2_500));
    assert_eq!(ask_again_after_ms(true, None), Some(1_000));
    assert_eq!(ask_again_after_ms(true, Some(7_000)), Some(7_000));
    assert_eq!(ask_again_after_ms(false, Some(7_000)), None);
}
