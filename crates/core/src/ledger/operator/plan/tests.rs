#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use serde_json::json;

use super::*;
use crate::job::test_job;
use crate::job::{AttemptReport, JobState};
use crate::job_type::effect::EffectError;
use crate::ledger::background::outbox::Outbox;
use crate::ledger::effects::run::Refusal;

fn background() -> Job {
    let mut job = test_job::new();
    job.run_in_background(0);
    job
}

fn dead_background() -> Job {
    let mut job = background();
    let ticket = job.claim(job.version(), 1, "p", None).expect("claim");
    job.give_up(ticket, 2, AttemptReport::default()).expect("dead");
    job
}

fn unknown_background() -> Job {
    let mut job = background();
    let ticket = job.claim(job.version(), 1, "p", None).expect("claim");
    job.mark_unknown(ticket, 2, AttemptReport::default()).expect("unknown");
    job
}

fn decided(then: Then) -> Decided {
    Decided { writes: Vec::new(), then }
}

/// A write of some effect (its content does not matter to the plan).
fn write(expected: u64) -> Write {
    let effect = crate::job_type::effect::Effect::plan(&test_job::webhook_spec(), "t:abc", &json!({}), &json!({}), 0);
    Write { effect, expected }
}

fn problem_kind(plan: &Plan) -> Option<ProblemType> {
    match &plan.reply {
        Reply::Problem(problem) => Some(problem.kind),
        _ => None,
    }
}

#[test]
fn a_kick_sends_only_a_background_job_s_message_again_and_logs_who_did() {
    let foreground = kick(&test_job::new(), "ops", "k");
    assert_eq!(problem_kind(&foreground), Some(ProblemType::NotBackground));
    assert!(foreground.perform.is_empty(), "a refusal sends nothing");
    let kicked = kick(&background(), "ops", "k");
    assert_eq!(kicked.perform, vec![Perform::Enqueue]);
    assert_eq!(kicked.reply, Reply::Enqueued);
    assert_eq!(kicked.log.as_deref(), Some("ops sent job k to the queue again"));
}

#[test]
fn an_effect_action_writes_then_runs_and_answers_as_the_run_or_refuses_after_its_writes() {
    let resend = Decided { writes: vec![write(3)], then: Then::Run { approved: false } };
    let plan = on_effects(resend, "ops", "k");
    assert_eq!(plan.perform, vec![Perform::WriteEffect(Box::new(write(3))), Perform::RunEffects]);
    assert_eq!(plan.reply, Reply::RunAnswer);
    assert_eq!(plan.log, None);

    // Nothing changed: the run's answer, no run.
    let unchanged = on_effects(decided(Then::Answer), "ops", "k");
    assert_eq!((unchanged.perform, unchanged.reply), (Vec::new(), Reply::RunAnswer));

    // A lapsed approval is written (expired), then refused; nothing runs.
    let lapsed = Decided { writes: vec![write(1)], then: Then::Refuse(Refusal::Effect(EffectError::ApprovalExpired)) };
    let plan = on_effects(lapsed, "ops", "k");
    assert_eq!(plan.perform, vec![Perform::WriteEffect(Box::new(write(1)))]);
    let (kind, detail) = Refusal::Effect(EffectError::ApprovalExpired).problem();
    assert_eq!(plan.reply, Reply::Problem(Problem::new(kind, detail)));

    let plan = on_effects(decided(Then::Refuse(Refusal::BadAction)), "ops", "k");
    assert_eq!(problem_kind(&plan), Some(ProblemType::InvalidQuery));
}

#[test]
fn an_approval_that_lets_an_effect_run_is_logged() {
    let plan = on_effects(decided(Then::Run { approved: true }), "ann", "k");
    assert_eq!(plan.log.as_deref(), Some("ann approved the effects of job k"));
    assert_eq!(plan.perform, vec![Perform::RunEffects]);
    let plan = on_effects(decided(Then::Run { approved: false }), "ann", "k");
    assert_eq!(plan.log, None, "approved before: nothing new to log");
}

#[test]
fn a_replay_of_a_job_type_s_dead_effects_resends_them_and_claims_no_subject() {
    let mut job = dead_background();
    let version = job.version();
    let resent = Decided { writes: vec![write(2)], then: Then::Replayed(vec!["mail".into()]) };
    let step = ReplayStep::Replay { claim_subject: true };
    assert!(!replay_claims_subject(&resent, step));
    let plan = replay(&mut job, resent, step, None, ("ops", "r1"), 5);
    assert_eq!(plan.perform, vec![Perform::WriteEffect(Box::new(write(2))), Perform::RunEffects]);
    assert_eq!(plan.reply, Reply::Replay { replayed: true, reason: None, effects: Some(vec!["mail".into()]) });
    assert_eq!(job.version(), version, "the job itself is not replayed");
}

#[test]
fn a_replay_is_refused_resends_an_undelivered_job_or_gives_a_dead_one_fresh_attempts_once() {
    let none = || decided(Then::NotReplayable);
    let mut foreground = test_job::new();
    let step = settle::replay_step(&foreground, &Outbox::default());
    let plan = replay(&mut foreground, none(), step, None, ("ops", "r1"), 5);
    assert_eq!(problem_kind(&plan), Some(ProblemType::NotBackground));

    let mut queued = background();
    let mut gave_up = Outbox::default();
    gave_up.give_up();
    let step = settle::replay_step(&queued, &gave_up);
    assert!(!replay_claims_subject(&none(), step));
    let plan = replay(&mut queued, none(), step, None, ("ops", "r1"), 5);
    assert_eq!(plan.perform, vec![Perform::ClearDeadLetter, Perform::Enqueue]);
    assert_eq!(plan.reply, Reply::Replay { replayed: true, reason: None, effects: None });

    let mut dead = dead_background();
    let read = dead.version();
    let step = settle::replay_step(&dead, &Outbox::default());
    assert!(replay_claims_subject(&none(), step), "a dead job freed its subject");
    let plan = replay(&mut dead, none(), step, None, ("ops", "r1"), 5);
    assert_eq!(plan.perform, vec![Perform::WriteJob { expected: read }, Perform::ClearDeadLetter, Perform::Enqueue]);
    assert_eq!(plan.reply, Reply::Replay { replayed: true, reason: None, effects: None });
    assert_eq!(dead.state(), JobState::Failed);
    // The same request again changes nothing.
    let again = replay(&mut dead, none(), ReplayStep::Replay { claim_subject: false }, None, ("ops", "r1"), 6);
    assert_eq!(
        (again.perform, again.reply),
        (
            Vec::new(),
            Reply::Replay { replayed: false, reason: Some("already replayed by this request"), effects: None }
        )
    );
    // Another request on a job that is not dead is refused.
    let plan = replay(&mut dead, none(), ReplayStep::Replay { claim_subject: false }, None, ("ops", "r2"), 7);
    assert_eq!(problem_kind(&plan), Some(ProblemType::NotReplayable));
}

#[test]
fn a_replay_whose_subject_another_job_took_is_refused_with_that_detail() {
    let mut dead = dead_background();
    let version = dead.version();
    let taken = Problem::new(ProblemType::AlreadyRun, "ticket \"7\" already has a triage job");
    let plan = replay(
        &mut dead,
        decided(Then::NotReplayable),
        ReplayStep::Replay { claim_subject: true },
        Some(taken),
        ("ops", "r1"),
        5,
    );
    assert_eq!(
        plan.reply,
        Reply::Problem(Problem::new(ProblemType::NotReplayable, "ticket \"7\" already has a triage job"))
    );
    assert!(plan.perform.is_empty());
    assert_eq!(dead.version(), version);
}

#[test]
fn a_resolution_stores_the_response_before_the_job_then_clears_sends_and_follows_up() {
    let body = json!({"ok": true});
    let mut job = unknown_background();
    let read = job.version();
    let plan = resolve(&mut job, (Some("succeeded"), None, Some(body.clone())), ("ops", "r1"), 3);
    assert_eq!(
        plan.perform,
        vec![
            Perform::SaveResponse {
                attempt: 2,
                status: 200,
                content_type: "application/json",
                body: serde_json::to_vec(&body).expect("json"),
            },
            Perform::WriteJob { expected: read },
            Perform::ClearDeadLetter,
            Perform::FollowUp,
        ]
    );
    assert_eq!(plan.reply, Reply::View);
    // Applied before: the view, nothing written.
    let again = resolve(&mut job, (Some("succeeded"), None, None), ("ops", "r1"), 4);
    assert_eq!((again.perform, again.reply), (Vec::new(), Reply::View));

    let mut job = unknown_background();
    let read = job.version();
    let plan = resolve(&mut job, (Some("retry"), None, None), ("ops", "r1"), 3);
    assert_eq!(
        plan.perform,
        vec![Perform::WriteJob { expected: read }, Perform::ClearDeadLetter, Perform::Enqueue, Perform::FollowUp]
    );
}

#[test]
fn a_resolution_is_refused_for_a_bad_action_or_a_job_not_the_operator_s_to_settle() {
    let mut job = unknown_background();
    let plan = resolve(&mut job, (Some("maybe"), None, None), ("ops", "r1"), 3);
    assert_eq!(problem_kind(&plan), Some(ProblemType::InvalidQuery));
    let mut queued = background();
    let plan = resolve(&mut queued, (Some("retry"), None, None), ("ops", "r1"), 3);
    assert_eq!(problem_kind(&plan), Some(ProblemType::NotResolvable));
    assert!(plan.perform.is_empty());
}
