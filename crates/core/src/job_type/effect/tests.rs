#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use serde_json::json;

use super::*;
use crate::identity::random::SplitMix64;

fn spec(approve: bool) -> EffectSpec {
    EffectSpec {
        name: "email".into(),
        approve,
        approval_ttl_ms: 1_000,
        retry: EffectRetry { attempts: 3, base_ms: 100, cap_ms: 1_000 },
        target: EffectTarget::Webhook {
            url: "https://mail.example/send".into(),
            receipt_url: None,
            secret: None,
            payload: json!({"to": "{{input.email}}", "category": "{{output.category}}"}),
        },
    }
}

fn planned(approve: bool) -> Effect {
    Effect::plan(&spec(approve), "t:abc", &json!({"email": "a@b.c"}), &json!({"category": "billing"}), 100)
}

const RETRY: EffectRetry = EffectRetry { attempts: 3, base_ms: 100, cap_ms: 1_000 };

#[test]
fn a_webhook_target_is_the_demo_inbox_only_by_its_url() {
    let payload = json!({"to": "{{input.email}}"});
    let target = |url: &str, receipt_url: Option<&str>| {
        EffectTarget::webhook(url.into(), receipt_url.map(str::to_owned), Some("signing-key".into()), payload.clone())
    };
    // As a deployment resolves `env:MAIL_URL` and `env:MAIL_RECEIPT_URL`.
    assert_eq!(
        target(INBOX_URL, Some(INBOX_URL)),
        Ok(EffectTarget::Inbox { payload: payload.clone(), receipts: true })
    );
    assert_eq!(target(INBOX_URL, None), Ok(EffectTarget::Inbox { payload: payload.clone(), receipts: false }));
    assert_eq!(
        target(INBOX_URL, Some("")),
        Ok(EffectTarget::Inbox { payload: payload.clone(), receipts: false }),
        "an empty receipt_url (an unset variable) is none"
    );
    assert_eq!(
        target("https://mail.example/send", Some("https://mail.example/receipts")),
        Ok(EffectTarget::Webhook {
            url: "https://mail.example/send".into(),
            receipt_url: Some("https://mail.example/receipts".into()),
            secret: Some("signing-key".into()),
            payload: payload.clone(),
        })
    );
    assert!(target(INBOX_URL, Some("https://mail.example/receipts")).is_err());
    assert!(target("https://mail.example/send", Some(INBOX_URL)).is_err());
}

#[test]
fn a_mail_to_the_demo_inbox_is_planned_as_a_webhook() {
    let mut inbox = spec(false);
    inbox.target = EffectTarget::Inbox { payload: json!({"to": "{{input.email}}"}), receipts: true };
    let effect = Effect::plan(&inbox, "t:abc", &json!({"email": "a@b.c"}), &json!({}), 100);
    assert_eq!(effect.kind, EffectKind::Webhook, "the inbox stands for a mail API");
    assert_eq!(effect.delivery_id, "t:abc:email");
    assert_eq!(effect.payload, json!({"to": "a@b.c"}));
    assert_eq!(effect.fingerprint, fingerprint_of(&json!({"to": "a@b.c"})));
}

#[test]
fn a_plan_has_its_delivery_id_payload_and_fingerprint() {
    let effect = planned(false);
    assert_eq!(effect.delivery_id, "t:abc:email");
    assert_eq!(effect.payload, json!({"to": "a@b.c", "category": "billing"}));
    assert_eq!(
        effect.fingerprint,
        fingerprint_of(&json!({"category": "billing", "to": "a@b.c"})),
        "key order is not identity"
    );
    assert_eq!(effect.state, EffectState::Ready);
    assert_eq!(effect.step(100), Step::Perform);
}

#[test]
fn claim_then_done_keeps_the_receipt_and_claims_no_more() {
    let mut rng = SplitMix64::new(1);
    let mut effect = planned(false);
    let read = effect.version;
    let attempt = effect.claim(100).unwrap();
    assert!(effect.version > read, "a claim is a new version (the store's compare-and-swap)");
    assert_eq!(effect.state, EffectState::Claimed);
    assert_eq!(effect.claim(100), None, "claimed: no second attempt");
    effect.finish(attempt, outcome_of_status(202, json!({"id": "m1"})), RETRY, 150, &mut rng);
    assert_eq!(effect.state, EffectState::Done);
    assert_eq!(effect.receipt, Some(json!({"status": 202, "body": {"id": "m1"}})));
    assert_eq!(effect.step(10_000), Step::Nothing);
    assert_eq!(effect.claim(10_000), None);
}

#[test]
fn transient_failures_back_off_then_die_when_attempts_are_spent() {
    let mut rng = SplitMix64::new(7);
    let mut effect = planned(false);
    let mut now = 100;
    for n in 1..=3 {
        let attempt = effect.claim(now).expect("due");
        assert_eq!(attempt, n);
        effect.finish(attempt, outcome_of_status(503, json!(null)), RETRY, now, &mut rng);
        if n < 3 {
            assert_eq!(effect.state, EffectState::Ready);
            assert!(effect.not_before_ms >= now && effect.not_before_ms <= now + RETRY.cap_ms);
            now = effect.not_before_ms;
        }
    }
    assert_eq!(effect.state, EffectState::Dead);
    assert!(effect.state.needs_operator());
    assert_eq!(effects_state(&[effect], 1), EffectsState::PartialSuccess);
}

#[test]
fn effects_not_planned_yet_are_running_and_a_type_without_effects_is_completed() {
    assert_eq!(effects_state(&[], 2), EffectsState::Running);
    assert_eq!(effects_state(&[], 0), EffectsState::Completed);
}

#[test]
fn a_4xx_is_permanent_but_408_and_429_are_not() {
    assert!(matches!(outcome_of_status(400, json!(null)), Outcome::Permanent { .. }));
    assert!(matches!(outcome_of_status(422, json!(null)), Outcome::Permanent { .. }));
    assert!(matches!(outcome_of_status(408, json!(null)), Outcome::Transient { .. }));
    assert!(matches!(outcome_of_status(429, json!(null)), Outcome::Transient { .. }));
    assert!(matches!(outcome_of_status(409, json!(null)), Outcome::Unknown { .. }), "in progress at the receiver");
    let mut rng = SplitMix64::new(1);
    let mut effect = planned(false);
    let attempt = effect.claim(100).unwrap();
    effect.finish(attempt, outcome_of_status(400, json!(null)), RETRY, 100, &mut rng);
    assert_eq!(effect.state, EffectState::Dead, "never retried");
}

#[test]
fn a_claimed_effect_is_reconciled_never_performed_blindly() {
    let mut rng = SplitMix64::new(3);
    // The runtime died after the write and before the record.
    let mut effect = planned(false);
    effect.claim(100).unwrap();
    assert_eq!(effect.step(200), Step::Reconcile);
    assert_eq!(effect.claim(200), None);
    let mut same = effect.clone();
    same.reconcile(Found::Same(json!({"row": 1})), RETRY, 200, &mut rng);
    assert_eq!((same.state, same.reconciled), (EffectState::Done, true));
    assert_eq!(same.attempts.len(), 1, "no second attempt");
    let mut other = effect.clone();
    other.reconcile(Found::Different { stored_fingerprint: "ff".into() }, RETRY, 200, &mut rng);
    assert_eq!(other.state, EffectState::Conflict);
    let mut absent = effect.clone();
    absent.reconcile(Found::Absent, RETRY, 200, &mut rng);
    assert_eq!(absent.state, EffectState::Ready);
    assert_eq!(absent.claim(200), Some(2), "it never arrived: performed now");
    let mut blind = effect.clone();
    blind.reconcile(Found::NoReceiptSource, RETRY, 200, &mut rng);
    assert_eq!(blind.state, EffectState::Unknown);
    assert_eq!(blind.step(99_999), Step::Nothing, "not resent automatically");
    let mut later = effect;
    later.reconcile(Found::CouldNotAsk { detail: "down".into() }, RETRY, 200, &mut rng);
    assert_eq!(later.state, EffectState::Claimed);
    assert!(matches!(later.step(200), Step::WaitUntil(_) | Step::Reconcile));
}

#[test]
fn an_unknown_attempt_is_reconciled_after_a_wait() {
    let mut rng = SplitMix64::new(5);
    let mut effect = planned(false);
    let attempt = effect.claim(100).unwrap();
    effect.finish(attempt, Outcome::Unknown { detail: "timeout".into() }, RETRY, 100, &mut rng);
    assert_eq!(effect.state, EffectState::Claimed);
    assert!(effect.not_before_ms >= 100 + RETRY.cap_ms, "not asked before the longest retry wait");
    assert_eq!(effect.step(effect.not_before_ms), Step::Reconcile);
}

#[test]
fn approval_runs_it_once_and_only_in_time() {
    let mut effect = planned(true);
    assert_eq!(effect.state, EffectState::AwaitingApproval);
    assert_eq!(effect.step(100), Step::WaitUntil(1_100));
    assert_eq!(effect.claim(100), None, "nothing runs unapproved");
    assert_eq!(effects_state(std::slice::from_ref(&effect), 1), EffectsState::AwaitingApproval);
    let mut twice = effect.clone();
    assert_eq!(twice.approve("ops", 500), Ok(true));
    assert_eq!(twice.approve("ops", 600), Ok(false), "approving twice runs it once");
    assert_eq!(twice.claim(600), Some(1));
    assert_eq!(twice.approve("ops", 700), Ok(false));
    let mut late = effect.clone();
    assert_eq!(late.approve("ops", 1_100), Err(EffectError::ApprovalExpired));
    assert_eq!(late.state, EffectState::Expired);
    assert_eq!(late.claim(1_200), None);
    let mut never = effect;
    assert!(never.expire(5_000));
    assert_eq!(effects_state(&[never], 1), EffectsState::PartialSuccess);
    let mut plain = planned(false);
    assert_eq!(plain.approve("ops", 100), Err(EffectError::NotAwaitingApproval));
}

#[test]
fn a_job_s_approval_reaches_every_effect_that_waits_and_says_why_when_none_does() {
    let waiting = || vec![planned(false), planned(true)];
    let mut effects = waiting();
    assert_eq!(approve_all(&mut effects, "ops", 500), Ok(true));
    assert_eq!(effects[1].state, EffectState::Ready);
    assert_eq!(effects[0], planned(false), "an effect without an approval is left alone");
    assert_eq!(approve_all(&mut effects, "ops", 600), Ok(false), "approved before: runs once");
    let mut late = waiting();
    assert_eq!(approve_all(&mut late, "ops", 1_100), Err(EffectError::ApprovalExpired));
    assert_eq!(late[1].state, EffectState::Expired, "the lapsed approval expired its effect");
    assert_eq!(approve_all(&mut [planned(false)], "ops", 100), Err(EffectError::NotAwaitingApproval));
    assert_eq!(EffectError::ApprovalExpired.problem_type(), crate::wire::ProblemType::ApprovalExpired);
    assert_eq!(EffectError::NotSettleable.problem_type(), crate::wire::ProblemType::NotResolvable);
}

#[test]
fn operators_resend_or_mark_done_only_what_needs_them() {
    let mut rng = SplitMix64::new(9);
    let mut effect = planned(false);
    for _ in 0..3 {
        let now = effect.not_before_ms;
        let attempt = effect.claim(now).unwrap();
        effect.finish(attempt, outcome_of_status(500, json!(null)), RETRY, now, &mut rng);
    }
    assert_eq!(effect.state, EffectState::Dead);
    assert_eq!(effect.resend("ops", RETRY, 9_000), Ok(true));
    assert_eq!(effect.resend("ops", RETRY, 9_000), Ok(false), "already on its way");
    let attempt = effect.claim(9_000).expect("a fresh allowance");
    assert_eq!(attempt, 4);
    effect.finish(attempt, outcome_of_status(200, json!({})), RETRY, 9_001, &mut rng);
    assert_eq!(effect.state, EffectState::Done);
    assert_eq!(effects_state(&[effect.clone()], 1), EffectsState::Completed);
    assert_eq!(effect.mark_done("ops", 9_002), Ok(false));
    let mut conflict = planned(false);
    conflict.claim(100);
    conflict.reconcile(Found::Different { stored_fingerprint: "x".into() }, RETRY, 100, &mut rng);
    assert_eq!(conflict.resend("ops", RETRY, 200), Err(EffectError::NotSettleable), "never overwrite");
    assert_eq!(conflict.mark_done("ops", 200), Ok(true));
}

#[test]
fn a_stale_report_changes_nothing() {
    let mut rng = SplitMix64::new(2);
    let mut effect = planned(false);
    let attempt = effect.claim(100).unwrap();
    effect.reconcile(Found::Absent, RETRY, 150, &mut rng);
    let second = effect.claim(150).unwrap();
    let before = effect.clone();
    effect.finish(attempt, outcome_of_status(200, json!({})), RETRY, 160, &mut rng);
    assert_eq!(effect, before, "attempt 1's late answer is not attempt 2's");
    effect.finish(second, outcome_of_status(200, json!({})), RETRY, 170, &mut rng);
    assert_eq!(effect.state, EffectState::Done);
}

#[test]
fn the_next_wake_is_the_earliest_due_effect() {
    let ready = planned(false);
    let waiting = planned(true);
    assert_eq!(next_wake_ms(std::slice::from_ref(&waiting), 100), Some(1_100));
    assert_eq!(next_wake_ms(&[waiting, ready], 100), Some(100));
    assert_eq!(next_wake_ms(&[], 100), None);
}

#[test]
fn a_state_s_name_is_its_wire_name() {
    use EffectState::*;
    for state in [AwaitingApproval, Ready, Claimed, Done, Dead, Unknown, Conflict, Expired] {
        assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
    }
}

#[test]
fn a_destination_is_asked_for_its_receipt_where_it_keeps_one() {
    let d1 = EffectTarget::D1 { database: "TICKETS".into(), table: "t".into(), columns: serde_json::Map::new() };
    assert_eq!(d1.receipt_source(), ReceiptSource::Row { database: "TICKETS", table: "t" });
    let webhook = |receipt_url: Option<&str>| EffectTarget::Webhook {
        url: "https://hooks.example/in".into(),
        receipt_url: receipt_url.map(str::to_owned),
        secret: None,
        payload: serde_json::Value::Null,
    };
    assert_eq!(
        webhook(Some("https://hooks.example/r")).receipt_source(),
        ReceiptSource::Url("https://hooks.example/r")
    );
    assert_eq!(webhook(None).receipt_source(), ReceiptSource::None);
    let inbox = |receipts| EffectTarget::Inbox { payload: serde_json::Value::Null, receipts };
    assert_eq!(inbox(true).receipt_source(), ReceiptSource::Inbox);
    assert_eq!(inbox(false).receipt_source(), ReceiptSource::None);
}
