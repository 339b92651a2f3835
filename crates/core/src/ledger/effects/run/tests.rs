#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use serde_json::json;

use super::*;
use crate::identity::random::SplitMix64;
use crate::job::AttemptReport;
use crate::job_type::JobTypes;
use crate::job_type::effect::{EffectSpec, EffectTarget};
use crate::retry::classify::ErrorClass;

const RETRY: EffectRetry = EffectRetry { attempts: 3, base_ms: 100, cap_ms: 1_000 };
const T0: u64 = 1_000_000;

fn spec(name: &str, approve: bool) -> EffectSpec {
    EffectSpec {
        name: name.into(),
        approve,
        approval_ttl_ms: 60_000,
        retry: RETRY,
        target: EffectTarget::Webhook {
            url: "https://mail.example/send".into(),
            receipt_url: Some("https://mail.example/receipts".into()),
            secret: None,
            payload: json!({"to": "{{input.email}}"}),
        },
    }
}

fn planned(name: &str, approve: bool) -> Effect {
    Effect::plan(&spec(name, approve), "t:abc", &json!({"email": "a@b.c"}), &json!({}), T0)
}

fn defined(names: &[&str]) -> Vec<Defined> {
    names.iter().map(|n| Defined { name: (*n).into(), retry: RETRY }).collect()
}

/// A run and its randomness, fed as the Ledger would; every batch is
/// checked: at most one command that wants an answer, and it comes last.
struct Harness {
    run: Run,
    random: SplitMix64,
}

impl Harness {
    fn new(names: &[&str]) -> Self {
        Self { run: Run::new(defined(names)), random: SplitMix64::new(7) }
    }

    fn start(&mut self, now_ms: u64) -> Vec<Command> {
        let commands = self.run.start(&mut Inputs { now_ms, random: &mut self.random });
        well_formed(&commands);
        commands
    }

    fn on(&mut self, event: Event, now_ms: u64) -> Vec<Command> {
        let commands = self.run.on(event, &mut Inputs { now_ms, random: &mut self.random });
        well_formed(&commands);
        commands
    }

    /// Starts, and loads `stored`.
    fn loaded(&mut self, stored: Vec<Effect>, now_ms: u64) -> Vec<Command> {
        assert_eq!(self.start(now_ms).last(), Some(&Command::Load));
        self.on(Event::Loaded(stored), now_ms)
    }
}

fn well_formed(commands: &[Command]) {
    let answered: Vec<usize> = commands.iter().enumerate().filter(|(_, c)| c.wants_answer()).map(|(i, _)| i).collect();
    assert!(answered.len() <= 1, "two commands want an answer: {commands:?}");
    if let Some(i) = answered.first() {
        assert_eq!(*i + 1, commands.len(), "an answered command is not last: {commands:?}");
    }
}

/// The one `Persist` of a batch.
fn persisted(commands: &[Command]) -> (Effect, u64) {
    match commands.last() {
        Some(Command::Persist { effect, expected }) => (effect.clone(), *expected),
        other => panic!("expected a Persist, got {other:?} in {commands:?}"),
    }
}

fn dead_letters(commands: &[Command]) -> Vec<&EffectDeadLetter> {
    commands.iter().filter_map(|c| if let Command::DeadLetter(d) = c { Some(d) } else { None }).collect()
}

#[test]
fn a_run_keeps_the_alarm_close_then_reads_the_effects() {
    let mut h = Harness::new(&["email"]);
    assert_eq!(h.start(T0), vec![Command::Watch { at_ms: T0 + CLAIM_WATCH_MS }, Command::Load]);
    assert!(!h.run.is_done());
}

#[test]
fn a_ready_effect_is_claimed_durably_then_performed_then_recorded_by_its_claim_version() {
    let mut h = Harness::new(&["email"]);
    let (claimed, expected) = persisted(&h.loaded(vec![planned("email", false)], T0));
    assert_eq!((claimed.state, expected, claimed.version), (EffectState::Claimed, 1, 2));
    let perform = h.on(Event::Persisted(Ok(())), T0);
    assert_eq!(perform, vec![Command::Perform { effect: claimed.clone() }]);
    let receipt = json!({"status": 200});
    let (done, expected) =
        persisted(&h.on(Event::Performed(Performed::Outcome(Outcome::Done(receipt.clone()))), T0 + 5));
    assert_eq!((done.state, expected, done.receipt.clone()), (EffectState::Done, 2, Some(receipt)));
    // It acted: another pass, from storage.
    assert_eq!(h.on(Event::Persisted(Ok(())), T0 + 5), vec![Command::Load]);
    assert_eq!(h.on(Event::Loaded(vec![done]), T0 + 5), vec![Command::Finish]);
    assert!(h.run.is_done());
    assert_eq!(h.on(Event::Woke, T0 + 6), vec![], "a finished run is quiet");
}

#[test]
fn a_claim_that_loses_its_write_performs_nothing_and_adopts_the_stored_effect() {
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![planned("email", false)], T0);
    let mut other = planned("email", false);
    other.claim(T0);
    let next = h.on(Event::Persisted(Err(Some(Box::new(other.clone())))), T0);
    assert_eq!(next, vec![Command::Load], "nothing performed; a look again");
    assert_eq!(h.run.effects()[0], other);
}

#[test]
fn a_transient_failure_is_retried_after_its_backoff_in_the_run_when_soon_else_by_the_alarm() {
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![planned("email", false)], T0);
    h.on(Event::Persisted(Ok(())), T0);
    let failed = Outcome::Transient { status: Some(503), detail: "busy".into() };
    let (ready, _) = persisted(&h.on(Event::Performed(Performed::Outcome(failed)), T0));
    assert_eq!(ready.state, EffectState::Ready);
    assert!(ready.not_before_ms >= T0 && ready.not_before_ms <= T0 + RETRY.base_ms);
    assert!(dead_letters(&h.on(Event::Persisted(Ok(())), T0)).is_empty());
    // Due within the inline wait: the run sleeps, then looks again.
    let wait = ready.not_before_ms - T0;
    let after_load = h.on(Event::Loaded(vec![ready.clone()]), T0);
    if wait == 0 {
        assert!(matches!(after_load.last(), Some(Command::Persist { .. })), "due now: claimed again");
    } else {
        assert_eq!(after_load, vec![Command::Sleep { ms: wait }]);
        assert_eq!(h.on(Event::Woke, ready.not_before_ms), vec![Command::Load]);
    }
    // Due later than the inline wait: the run stops, the alarm goes on.
    let mut later = ready;
    later.not_before_ms = T0 + INLINE_WAIT_MS + 1;
    let mut h = Harness::new(&["email"]);
    assert_eq!(h.loaded(vec![later.clone()], T0), vec![Command::Finish]);
    assert_eq!(next_look_ms(&[later.clone()], &defined(&["email"]), false, T0), Some(later.not_before_ms));
    assert_eq!(
        next_look_ms(&[later.clone()], &defined(&["email"]), true, T0),
        Some(T0 + CLAIM_WATCH_MS),
        "no sooner than the watch while they run here"
    );
    assert_eq!(next_look_ms(&[later], &defined(&["other"]), false, T0), None, "an undefined effect is never run");
}

#[test]
fn a_permanent_failure_is_one_dead_letter_once_its_record_is_written() {
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![planned("email", false)], T0);
    h.on(Event::Persisted(Ok(())), T0);
    let refused = Outcome::Permanent { status: Some(400), detail: "the receiver answered 400".into() };
    let (dead, _) = persisted(&h.on(Event::Performed(Performed::Outcome(refused)), T0));
    assert_eq!(dead.state, EffectState::Dead);
    assert!(dead.dead_letter_due, "the write that makes it dead says a letter is due");
    let after = h.on(Event::Persisted(Ok(())), T0);
    let letters = dead_letters(&after);
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].name, "email");
    assert_eq!(letters[0].last_status, Some(400));
    assert_eq!(letters[0].attempts, 1);
    assert_eq!(letters[0].state, EffectState::Dead);
    assert!(letters[0].detail.starts_with("effect email (dead): "), "{}", letters[0].detail);
    assert_eq!(after.len(), 1, "the letter alone: nothing is cleared before it is recorded");
    // Once it is recorded, the write that says the letter is out, by the version it read.
    let (sent, expected) = persisted(&h.on(Event::DeadLettered { recorded: true }, T0));
    assert_eq!(
        (sent.state, sent.dead_letter_due, expected, sent.version),
        (EffectState::Dead, false, dead.version, dead.version + 1)
    );
    assert_eq!(h.on(Event::Persisted(Ok(())), T0), vec![Command::Load]);
    // The next pass finds it dead: nothing, no second letter.
    assert_eq!(h.on(Event::Loaded(vec![sent]), T0), vec![Command::Finish]);
}

/// An effect the receiver refused for good, as the write that made it dead left it: its letter due.
fn dead_letter_due() -> Effect {
    let mut dead = planned("email", false);
    dead.claim(T0);
    let refused = Outcome::Permanent { status: Some(400), detail: "no".into() };
    dead.finish(1, refused, RETRY, T0, &mut SplitMix64::new(1));
    dead
}

#[test]
fn a_dead_letter_cut_off_by_a_crash_is_sent_after_the_restart_and_only_once() {
    let dead = dead_letter_due();
    assert!(dead.dead_letter_due);
    // The runtime died after the write that made it dead: the restart's run sends the letter.
    let mut h = Harness::new(&["email"]);
    let after = h.loaded(vec![dead.clone()], T0 + 60_000);
    assert_eq!(dead_letters(&after).len(), 1);
    let (sent, expected) = persisted(&h.on(Event::DeadLettered { recorded: true }, T0 + 60_000));
    assert_eq!((sent.dead_letter_due, expected), (false, dead.version));
    assert_eq!(h.on(Event::Persisted(Ok(())), T0 + 60_000), vec![Command::Finish]);
    // An operator who resent it first: no letter, the flag is gone with their write.
    let mut resent = dead.clone();
    assert_eq!(resent.resend("ops", RETRY, T0 + 1), Ok(true));
    assert!(!resent.dead_letter_due);
}

#[test]
fn a_dead_letter_the_database_did_not_record_stays_due_and_is_sent_by_a_later_run() {
    let dead = dead_letter_due();
    let mut h = Harness::new(&["email"]);
    assert_eq!(dead_letters(&h.loaded(vec![dead.clone()], T0)).len(), 1);
    // Not recorded: no write clears the flag, and this run does not try again.
    assert_eq!(h.on(Event::DeadLettered { recorded: false }, T0), vec![Command::Finish]);
    assert!(dead.dead_letter_due, "as stored: still due");
    // The alarm comes back for it, later (not at once: the database is down).
    let defined = defined(&["email"]);
    assert_eq!(next_look_ms(std::slice::from_ref(&dead), &defined, false, T0), Some(T0 + LETTER_RETRY_MS));
    // The next run sends it again, and clears it once it is recorded.
    let mut later = Harness::new(&["email"]);
    assert_eq!(dead_letters(&later.loaded(vec![dead.clone()], T0 + LETTER_RETRY_MS)).len(), 1);
    let (sent, _) = persisted(&later.on(Event::DeadLettered { recorded: true }, T0 + LETTER_RETRY_MS));
    assert!(!sent.dead_letter_due);
    assert_eq!(next_look_ms(&[sent], &defined, false, T0 + LETTER_RETRY_MS), None);
}

#[test]
fn a_letter_found_due_after_the_run_awaited_is_sent_only_from_the_effects_loaded_again() {
    // Seed 16696 of the simulation: the run loaded `email` dead with its
    // letter due, performed `a` first, and meanwhile an operator resent
    // `email`; the letter then went out for an effect no longer dead.
    let mut h = Harness::new(&["a", "email"]);
    let dead = dead_letter_due();
    let (claimed, _) = persisted(&h.loaded(vec![planned("a", false), dead.clone()], T0));
    assert_eq!(h.on(Event::Persisted(Ok(())), T0), vec![Command::Perform { effect: claimed }]);
    let (done, _) = persisted(&h.on(Event::Performed(Performed::Outcome(Outcome::Done(json!({})))), T0 + 5));
    assert_eq!(h.on(Event::Persisted(Ok(())), T0 + 5), vec![Command::Load], "the letter waits for a fresh read");
    let mut resent = dead.clone();
    assert_eq!(resent.resend("ops", RETRY, T0 + 3), Ok(true));
    let after = h.on(Event::Loaded(vec![done.clone(), resent]), T0 + 5);
    assert!(dead_letters(&after).is_empty(), "no letter for an effect an operator resent: {after:?}");
    // Still dead when read again: the letter goes, from what was read.
    let mut again = Harness::new(&["a", "email"]);
    persisted(&again.loaded(vec![planned("a", false), dead.clone()], T0));
    again.on(Event::Persisted(Ok(())), T0);
    again.on(Event::Performed(Performed::Outcome(Outcome::Done(json!({})))), T0 + 5);
    assert_eq!(again.on(Event::Persisted(Ok(())), T0 + 5), vec![Command::Load]);
    assert_eq!(dead_letters(&again.on(Event::Loaded(vec![done, dead]), T0 + 5)).len(), 1);
}

#[test]
fn a_record_that_loses_its_write_is_no_dead_letter() {
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![planned("email", false)], T0);
    h.on(Event::Persisted(Ok(())), T0);
    let refused = Outcome::Permanent { status: Some(400), detail: "no".into() };
    h.on(Event::Performed(Performed::Outcome(refused)), T0);
    let after = h.on(Event::Persisted(Err(None)), T0);
    assert!(dead_letters(&after).is_empty());
    assert_eq!(after, vec![Command::Load]);
}

#[test]
fn spent_attempts_make_a_transient_failure_dead() {
    let mut effect = planned("email", false);
    effect.max_attempts = 1;
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![effect], T0);
    h.on(Event::Persisted(Ok(())), T0);
    let failed = Outcome::Transient { status: Some(503), detail: "busy".into() };
    let (dead, _) = persisted(&h.on(Event::Performed(Performed::Outcome(failed)), T0));
    assert_eq!(dead.state, EffectState::Dead);
    assert_eq!(dead_letters(&h.on(Event::Persisted(Ok(())), T0)).len(), 1);
}

#[test]
fn an_unknown_outcome_stays_claimed_and_is_reconciled_later_never_sent_again_blindly() {
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![planned("email", false)], T0);
    h.on(Event::Persisted(Ok(())), T0);
    let lost = Outcome::Unknown { detail: "no answer".into() };
    let (claimed, _) = persisted(&h.on(Event::Performed(Performed::Outcome(lost)), T0));
    assert_eq!(claimed.state, EffectState::Claimed);
    assert!(claimed.not_before_ms > T0 + RETRY.cap_ms);
    assert!(dead_letters(&h.on(Event::Persisted(Ok(())), T0)).is_empty());
    let wait = claimed.not_before_ms - T0;
    let expected = if wait <= INLINE_WAIT_MS { Command::Sleep { ms: wait } } else { Command::Finish };
    assert_eq!(h.on(Event::Loaded(vec![claimed.clone()]), T0), vec![expected], "not due yet");
    // Later (the alarm): the destination is asked, not sent to.
    let mut h = Harness::new(&["email"]);
    let asked = h.loaded(vec![claimed.clone()], claimed.not_before_ms);
    assert_eq!(asked, vec![Command::AskReceipt { effect: claimed }]);
}

#[test]
fn a_claimed_effect_found_on_restart_is_asked_for_first_and_sent_again_only_when_absent() {
    let mut claimed = planned("email", false);
    claimed.claim(T0);
    // Absent: ready again at once (the claimed attempt never arrived), then claimed anew.
    let mut h = Harness::new(&["email"]);
    assert_eq!(h.loaded(vec![claimed.clone()], T0 + 10), vec![Command::AskReceipt { effect: claimed.clone() }]);
    let (ready, expected) = persisted(&h.on(Event::Receipt(Found::Absent), T0 + 10));
    assert_eq!((ready.state, expected), (EffectState::Ready, claimed.version));
    assert_eq!(h.on(Event::Persisted(Ok(())), T0 + 10), vec![Command::Load], "due again: another pass");
    let (again, _) = persisted(&h.on(Event::Loaded(vec![ready]), T0 + 10));
    assert_eq!((again.state, again.attempts.len()), (EffectState::Claimed, 2));

    // The same payload there: done, never performed.
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![claimed.clone()], T0 + 10);
    let (done, _) = persisted(&h.on(Event::Receipt(Found::Same(json!({"ok": true}))), T0 + 10));
    assert_eq!((done.state, done.reconciled), (EffectState::Done, true));
    let after = h.on(Event::Persisted(Ok(())), T0 + 10);
    assert!(dead_letters(&after).is_empty());
    assert_eq!(after, vec![Command::Finish], "a reconciliation that settles it is not a reason to pass again");

    // Another payload, or no receipt source: an operator's, one dead letter each.
    for (found, state) in [
        (Found::Different { stored_fingerprint: "f".into() }, EffectState::Conflict),
        (Found::NoReceiptSource, EffectState::Unknown),
    ] {
        let mut h = Harness::new(&["email"]);
        h.loaded(vec![claimed.clone()], T0 + 10);
        let (settled, _) = persisted(&h.on(Event::Receipt(found), T0 + 10));
        assert_eq!(settled.state, state);
        let letters = dead_letters(&h.on(Event::Persisted(Ok(())), T0 + 10)).into_iter().cloned().collect::<Vec<_>>();
        assert_eq!(letters.len(), 1, "{state:?}");
        assert_eq!(letters[0].state, state);
    }

    // Asking failed: asked again later, still claimed, no letter.
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![claimed.clone()], T0 + 10);
    let (still, _) = persisted(&h.on(Event::Receipt(Found::CouldNotAsk { detail: "503".into() }), T0 + 10));
    assert_eq!(still.state, EffectState::Claimed);
    assert!(still.not_before_ms > T0 + 10);
    assert!(dead_letters(&h.on(Event::Persisted(Ok(())), T0 + 10)).is_empty());
}

#[test]
fn a_row_already_there_when_performing_is_reconciled_with_what_it_holds() {
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![planned("email", false)], T0);
    h.on(Event::Persisted(Ok(())), T0);
    let found = Performed::AlreadyThere(Found::Same(json!({"row": 1})));
    let (done, _) = persisted(&h.on(Event::Performed(found), T0));
    assert_eq!((done.state, done.reconciled), (EffectState::Done, true));
}

#[test]
fn an_approval_that_ran_out_expires_its_effect_which_never_runs() {
    let effect = planned("email", true);
    let expiry = effect.approval.as_ref().unwrap().expires_ms;
    let mut h = Harness::new(&["email"]);
    let (expired, expected) = persisted(&h.loaded(vec![effect.clone()], expiry));
    assert_eq!((expired.state, expected), (EffectState::Expired, 1));
    assert_eq!(h.on(Event::Persisted(Ok(())), expiry), vec![Command::Finish], "expiry is not an action");
    // Still waiting: nothing, the alarm looks at its expiry.
    let mut h = Harness::new(&["email"]);
    assert_eq!(h.loaded(vec![effect.clone()], T0), vec![Command::Finish]);
    assert_eq!(next_look_ms(&[effect], &defined(&["email"]), false, T0), Some(expiry));
}

#[test]
fn effects_the_deployment_no_longer_defines_are_left_as_stored() {
    let mut h = Harness::new(&["record"]);
    assert_eq!(h.loaded(vec![planned("email", false)], T0), vec![Command::Finish]);
}

#[test]
fn one_run_stops_at_its_budget_and_leaves_the_rest_to_the_alarm() {
    let mut h = Harness::new(&["email"]);
    h.start(T0);
    let late = T0 + INLINE_BUDGET_MS + 1;
    let mut done = planned("email", false);
    done.state = EffectState::Done;
    // Even a pass that acted stops past the budget.
    let mut a = planned("a", false);
    a.max_attempts = 0; // claims nothing
    assert_eq!(h.on(Event::Loaded(vec![done, a]), late), vec![Command::Finish]);
    let mut h = Harness::new(&["email"]);
    h.loaded(vec![planned("email", false)], T0);
    h.on(Event::Persisted(Ok(())), T0);
    h.on(Event::Performed(Performed::Outcome(Outcome::Done(json!({})))), late);
    assert_eq!(h.on(Event::Persisted(Ok(())), late), vec![Command::Finish]);
}

#[test]
fn several_effects_are_taken_in_order_one_write_at_a_time() {
    let mut h = Harness::new(&["a", "b"]);
    let (a, _) = persisted(&h.loaded(vec![planned("a", false), planned("b", false)], T0));
    assert_eq!(a.name, "a");
    h.on(Event::Persisted(Ok(())), T0);
    h.on(Event::Performed(Performed::Outcome(Outcome::Done(json!({})))), T0);
    let (b, _) = persisted(&h.on(Event::Persisted(Ok(())), T0));
    assert_eq!((b.name.as_str(), b.state), ("b", EffectState::Claimed));
}

#[test]
fn an_event_the_run_does_not_wait_for_changes_nothing() {
    let mut h = Harness::new(&["email"]);
    assert_eq!(h.on(Event::Woke, T0), vec![], "not started");
    h.loaded(vec![planned("email", false)], T0);
    assert_eq!(h.on(Event::Receipt(Found::Absent), T0), vec![], "a claim's write is awaited");
    assert_eq!(h.on(Event::Loaded(vec![]), T0), vec![]);
    assert!(matches!(h.on(Event::Persisted(Ok(())), T0).as_slice(), [Command::Perform { .. }]));
}

#[test]
fn an_approval_lets_waiting_effects_run_once_and_a_late_one_expires_them() {
    let waiting = planned("email", true);
    let decided = decide(vec![waiting.clone(), planned("record", false)], &Action::Approve, "ops", &[], T0 + 1);
    assert_eq!(decided.then, Then::Run { approved: true });
    assert_eq!(decided.writes.len(), 1, "only the effect that changed is written");
    assert_eq!(decided.writes[0].expected, waiting.version);
    assert_eq!(decided.writes[0].effect.state, EffectState::Ready);
    // Twice: runs once (nothing to write).
    let approved = decided.writes[0].effect.clone();
    let again = decide(vec![approved], &Action::Approve, "ops", &[], T0 + 2);
    assert_eq!((again.writes.len(), again.then), (0, Then::Run { approved: false }));
    // Too late: the effect is written expired, and the approval refused.
    let expiry = waiting.approval.as_ref().unwrap().expires_ms;
    let late = decide(vec![waiting.clone()], &Action::Approve, "ops", &[], expiry);
    assert_eq!(late.then, Then::Refuse(Refusal::Effect(EffectError::ApprovalExpired)));
    assert_eq!(late.writes[0].effect.state, EffectState::Expired);
    // Nothing waits for one.
    let none = decide(vec![planned("record", false)], &Action::Approve, "ops", &[], T0);
    assert_eq!(none.then, Then::Refuse(Refusal::Effect(EffectError::NotAwaitingApproval)));
    assert_eq!(Refusal::Effect(EffectError::ApprovalExpired).problem().0, ProblemType::ApprovalExpired);
}

#[test]
fn an_operator_resends_or_marks_done_only_an_effect_that_needs_one() {
    let mut dead = planned("email", false);
    dead.state = EffectState::Dead;
    let resent = decide(vec![dead.clone()], &Action::Resend("email".into()), "ops", &defined(&["email"]), T0);
    assert_eq!(resent.then, Then::Run { approved: false });
    assert_eq!(resent.writes[0].effect.state, EffectState::Ready);
    assert_eq!(resent.writes[0].effect.max_attempts, RETRY.attempts, "a fresh allowance");
    let marked = decide(vec![dead.clone()], &Action::MarkDone("email".into()), "ops", &[], T0);
    assert_eq!(marked.writes[0].effect.state, EffectState::Done);
    // Already on its way / done: answered as it stands, no write, no run.
    let ready = planned("email", false);
    let on_its_way = decide(vec![ready.clone()], &Action::Resend("email".into()), "ops", &[], T0);
    assert_eq!((on_its_way.writes.len(), on_its_way.then), (0, Then::Answer));
    let refused = decide(vec![ready], &Action::MarkDone("email".into()), "ops", &[], T0);
    assert_eq!(refused.then, Then::Refuse(Refusal::Effect(EffectError::NotSettleable)));
    let missing = decide(vec![dead], &Action::Resend("nope".into()), "ops", &[], T0);
    assert_eq!(missing.then, Then::Refuse(Refusal::NoSuchEffect));
    assert_eq!(Action::on_effect("email", Some("resend")), Action::Resend("email".into()));
    assert_eq!(Action::on_effect("email", Some("mark_done")), Action::MarkDone("email".into()));
    let planned_one = vec![planned("email", false)];
    let bad = decide(planned_one.clone(), &Action::on_effect("email", Some("delete")), "ops", &[], T0);
    assert_eq!((bad.writes.len(), bad.then), (0, Then::Refuse(Refusal::BadAction)));
    let bad_and_missing = decide(planned_one, &Action::on_effect("nope", None), "ops", &[], T0);
    assert_eq!(bad_and_missing.then, Then::Refuse(Refusal::NoSuchEffect), "the effect is looked for first");
    assert_eq!(Refusal::BadAction.problem().0, ProblemType::InvalidQuery);
    assert_eq!(Refusal::NoSuchEffect.problem().0, ProblemType::NotFound);
}

#[test]
fn a_replay_resends_only_dead_effects_never_an_unknown_one() {
    let mut dead = planned("a", false);
    dead.state = EffectState::Dead;
    let mut unknown = planned("b", false);
    unknown.state = EffectState::Unknown;
    let replayed = decide(vec![dead, unknown.clone()], &Action::ReplayDead, "ops", &[], T0);
    assert_eq!(replayed.then, Then::Replayed(vec!["a".into()]));
    assert_eq!(replayed.writes.len(), 1);
    let nothing = decide(vec![unknown], &Action::ReplayDead, "ops", &[], T0);
    assert_eq!(nothing, Decided { writes: vec![], then: Then::NotReplayable });
}

fn triage() -> JobTypes {
    let definition = json!({
        "triage": {
            "model": "demo",
            "input": {"type": "object", "properties": {"email": {"type": "string"}}},
            "prompt": {"system": "Classify.", "user": "{{input.email}}"},
            "output": {"type": "object", "required": ["category"], "properties": {"category": {"type": "string"}}},
            "effects": [
                {"name": "email", "kind": "webhook", "url": "https://mail.example/send",
                 "payload": {"to": "{{input.email}}", "category": "{{output.category}}"}}
            ]
        }
    });
    JobTypes::from_json(&definition.to_string()).expect("a job type")
}

fn answered_job(status: u16) -> Job {
    let mut job = crate::job::test_job::new();
    let ticket = job.claim(job.version(), 1, "p", None).expect("claim");
    let report = AttemptReport { status: Some(status), usage: None, error_class: Some(ErrorClass::None) };
    job.complete(ticket, 2, report).expect("complete");
    job
}

fn reply(content: &str) -> Vec<u8> {
    json!({"choices": [{"message": {"role": "assistant", "content": content}}]}).to_string().into_bytes()
}

#[test]
fn effects_are_planned_from_the_input_and_the_answer_only_for_an_answer_in_the_contract() {
    let types = triage();
    let triage = types.get("triage");
    let input = json!({"email": "a@b.c"});
    let good = reply(r#"{"category":"billing"}"#);
    let job = answered_job(200);
    let effects = plan(triage, &job, Some(&good), "t:abc", &input, T0).expect("planned");
    assert_eq!(effects.len(), 1);
    assert_eq!(effects[0].payload, json!({"to": "a@b.c", "category": "billing"}));
    assert_eq!(effects[0].delivery_id, "t:abc:email");
    assert_eq!(plan(None, &job, Some(&good), "t:abc", &input, T0), Err(NoPlan::TypeGone));
    assert_eq!(plan(triage, &job, None, "t:abc", &input, T0), Err(NoPlan::Nothing));
    let unfinished = crate::job::test_job::new();
    assert_eq!(plan(triage, &unfinished, Some(&good), "t:abc", &input, T0), Err(NoPlan::Nothing));
    assert!(matches!(plan(triage, &job, Some(&reply("prose")), "t:abc", &input, T0), Err(NoPlan::ContractBroken(_))));
}

#[test]
fn effects_are_planned_once_and_a_plan_not_made_is_logged_only_when_worth_it() {
    let types = triage();
    let triage = ("triage", types.get("triage"));
    let input = json!({"email": "a@b.c"});
    let good = reply(r#"{"category":"billing"}"#);
    let job = answered_job(200);
    let Planning::Write(effects) = plan_once(false, triage, &job, Some(&good), ("t:abc", &input), T0) else {
        panic!("planned")
    };
    assert_eq!(effects.len(), 1);
    assert_eq!(plan_once(true, triage, &job, Some(&good), ("t:abc", &input), T0), Planning::Nothing, "once");
    assert_eq!(
        plan_once(false, ("triage", None), &job, Some(&good), ("t:abc", &input), T0),
        Planning::Warn("job type triage is gone; its effects are not planned".into())
    );
    assert!(matches!(
        plan_once(false, triage, &job, Some(&reply("prose")), ("t:abc", &input), T0),
        Planning::Warn(warning) if warning.starts_with("the stored answer breaks the contract now")
    ));
    let failed = answered_job(500);
    assert_eq!(plan_once(false, triage, &failed, Some(&good), ("t:abc", &input), T0), Planning::Nothing);
}

#[test]
fn a_plan_not_made_is_worth_a_warning_only_when_the_type_or_its_contract_changed() {
    assert_eq!(
        NoPlan::TypeGone.warning("triage").as_deref(),
        Some("job type triage is gone; its effects are not planned")
    );
    let broken = NoPlan::ContractBroken("category is missing".into());
    assert_eq!(
        broken.warning("triage").as_deref(),
        Some("the stored answer breaks the contract now: category is missing")
    );
    assert_eq!(NoPlan::Nothing.warning("triage"), None);
}

#[test]
fn a_run_job_answers_its_type_key_output_and_effects_unless_it_streamed_or_failed() {
    assert!(answers_as_run(200, "application/json"));
    assert!(!answers_as_run(200, "text/event-stream; charset=utf-8"));
    assert!(!answers_as_run(502, "application/problem+json"));
    let types = triage();
    let answer = reply(r#"{"category":"bug"}"#);
    let before = run_answer("triage", types.get("triage"), "k", &answer, &[]);
    assert_eq!(
        before,
        json!({"type": "triage", "key": "k", "state": "running", "output": {"category": "bug"}, "effects": []})
    );
    let mut done = planned("email", false);
    done.state = EffectState::Done;
    let after = run_answer("triage", types.get("triage"), "k", &answer, &[done]);
    assert_eq!(after["state"], "completed");
    assert_eq!(after["effects"][0]["state"], "done");
    let gone = run_answer("triage", None, "k", &answer, &[]);
    assert_eq!((gone["state"].clone(), gone["output"].clone()), (json!("completed"), Value::Null));
}
