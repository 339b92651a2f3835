#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use serde_json::json;

use super::*;
use crate::job::test_job;
use crate::job::{AttemptReport, JobState};

/// A type `triage` run once per `ticket_id`, and a type `summary` with no subject.
fn job_types() -> JobTypes {
    let output = json!({"type": "object"});
    let prompt = json!({"system": "s", "user": "u"});
    let input = json!({"type": "object", "properties": {"ticket_id": {}}});
    let triage = json!({"model": "demo", "once_per": "ticket_id", "input": input, "prompt": prompt, "output": output});
    let summary = json!({"model": "demo", "input": input, "prompt": prompt, "output": output});
    JobTypes::from_json(&json!({"triage": triage, "summary": summary}).to_string()).expect("job types")
}

#[test]
fn a_job_holds_the_subject_its_input_names_when_its_type_has_one() {
    let types = job_types();
    let held = Subject::of(&types, "triage", &json!({"ticket_id": "T-7"})).expect("a subject");
    assert_eq!((held.type_name, held.subject.as_str()), ("triage", "T-7"));
    let number = Subject::of(&types, "triage", &json!({"ticket_id": 7})).expect("a subject");
    assert_eq!(number.subject, "7", "a non-text subject is its JSON");
    assert!(Subject::of(&types, "triage", &json!({})).is_none(), "the input names none");
    assert!(Subject::of(&types, "summary", &json!({"ticket_id": "T-7"})).is_none(), "the type names none");
    assert!(Subject::of(&types, "gone", &json!({"ticket_id": "T-7"})).is_none(), "the type is gone");
}

#[test]
fn a_claim_runs_the_job_when_free_and_refuses_it_when_held_or_unknown() {
    let types = job_types();
    let held = Subject::of(&types, "triage", &json!({"ticket_id": "T-7"})).expect("a subject");
    assert_eq!(held.refusal(Ok::<_, ()>(None), "k1", Some("u")), None);

    let taken = held.refusal(Ok::<_, ()>(Some(("u", "k0"))), "k1", Some("u")).expect("refused");
    assert_eq!(taken.kind, ProblemType::AlreadyRun);
    assert_eq!(taken.key.as_deref(), Some("k1"));
    assert_eq!(taken.job_key.as_deref(), Some("k0"), "the holder's own user sees its key");
    let other = held.refusal(Ok::<_, ()>(Some(("v", "k0"))), "k1", Some("u")).expect("refused");
    assert_eq!(other.job_key, None, "another user's key is not named");

    let unknown = held.refusal(Err("D1 down"), "k1", None).expect("refused");
    assert_eq!(unknown.kind, ProblemType::Internal);
    assert_eq!(unknown.retry_after_ms, Some(1_000), "the caller retries with the same key");
    assert_eq!(unknown.key.as_deref(), Some("k1"));
}

#[test]
fn an_expiring_job_frees_its_subject_unless_it_was_answered() {
    assert!(freed_at_expiry(None), "nothing readable: no answer");
    let running = test_job::new();
    assert!(freed_at_expiry(Some(&running)));
    let mut dead = test_job::new();
    let ticket = dead.claim(dead.version(), 1, "p", None).expect("claim");
    dead.give_up(ticket, 2, AttemptReport::default()).expect("dead");
    assert!(freed_at_expiry(Some(&dead)));
    let mut answered = test_job::new();
    let ticket = answered.claim(answered.version(), 1, "p", None).expect("claim");
    answered.complete(ticket, 2, AttemptReport { status: Some(200), ..AttemptReport::default() }).expect("done");
    assert_eq!(answered.state(), JobState::Completed);
    assert!(!freed_at_expiry(Some(&answered)), "an answered job keeps its subject");
}
