//! Scripted drives: events in, the exact commands out.
//!
//! Each test builds the job the Ledger would store next to the drive (the
//! same transitions, applied by hand) and asserts the commands are exactly
//! those, in order.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;
use crate::identity::fingerprint::{Body, Fingerprint};
use crate::identity::random::SplitMix64;
use crate::job::{JobPolicy, UnknownPolicy};
use crate::retry::backoff::Jitter;
use crate::retry::classify::TransportFailure;
use crate::wire::ProblemType;

const T0: u64 = 1_700_000_000_000;
/// The backoff between attempts: no jitter, so the wait is exactly this.
const BACKOFF_MS: u64 = 100;

/// Two demo providers `a` and `b`, one route over both for every model
/// (hedged after `hedge_after_ms` when set).
fn providers(names: &[&str], hedge_after_ms: Option<u64>) -> Providers {
    let list: Vec<String> = names.iter().map(|n| format!(r#"{{"name":"{n}","kind":"demo"}}"#)).collect();
    let steps: Vec<String> = names.iter().map(|n| format!(r#"{{"provider":"{n}"}}"#)).collect();
    let hedge = hedge_after_ms.map(|ms| format!(r#","hedge_after_ms":{ms}"#)).unwrap_or_default();
    let routes = format!(r#"{{"*":{{"providers":[{}]{hedge}}}}}"#, steps.join(","));
    Providers::parse(&format!("[{}]", list.join(",")), Some(&routes)).expect("providers")
}

fn setup(background: bool) -> DriveSetup {
    DriveSetup {
        background,
        stream: false,
        model: None,
        api: Api::OpenAi,
        backoff: Backoff::new(BACKOFF_MS, 1_000, Jitter::None).expect("backoff"),
    }
}

fn new_job(max_attempts: u32) -> Job {
    let fingerprint = Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).expect("fingerprint");
    let policy =
        JobPolicy::new(max_attempts, 30_000, 60_000, 86_400_000, UnknownPolicy::RetryAfterLease).expect("policy");
    Job::new(fingerprint, T0, policy)
}

/// What the Ledger gives every event: the clock, randomness and the budget.
struct World {
    providers: Providers,
    now_ms: u64,
    random: SplitMix64,
    budget: RetryBudget,
}

impl World {
    fn new(providers: Providers) -> Self {
        Self { providers, now_ms: T0, random: SplitMix64::new(7), budget: RetryBudget::default() }
    }

    fn routing(&self) -> Routing<'_> {
        Routing { providers: &self.providers, route: self.providers.route(None).expect("route") }
    }

    fn start(&mut self, drive: &mut Drive) -> Vec<Command> {
        let providers = self.providers.clone();
        let routing = Routing { providers: &providers, route: providers.route(None).expect("route") };
        let mut inputs = Inputs { now_ms: self.now_ms, random: &mut self.random, budget: &mut self.budget };
        drive.start(routing, &mut inputs)
    }

    fn on(&mut self, drive: &mut Drive, event: Event) -> Vec<Command> {
        let providers = self.providers.clone();
        let routing = Routing { providers: &providers, route: providers.route(None).expect("route") };
        let mut inputs = Inputs { now_ms: self.now_ms, random: &mut self.random, budget: &mut self.budget };
        drive.on(routing, event, &mut inputs)
    }

    fn drive(&self, background: bool, job: Job, stored: bool) -> Drive {
        Drive::new(setup(background), job, stored, &self.providers)
    }
}

fn reply(status: u16, headers: &[(&str, &str)], body: &str, now_ms: u64) -> Attempted {
    let lookup = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| (*v).to_owned());
    attempts::judge_reply(status, &lookup, "application/json".into(), body.as_bytes().to_vec(), None, now_ms, 60_000).0
}

const GOOD: &str = r#"{"choices":[{"message":{"content":"hi"}}]}"#;

fn answered(attempt: u32, answer: &Attempted) -> Event {
    Event::Answered { attempt, answer: Answer::Judged(answer.clone()) }
}

fn candidate(provider: usize, wait_ms: u64) -> Candidate {
    Candidate { provider, model: None, wait_ms }
}

fn chosen(index: usize) -> Event {
    Event::Placed(Placed::Chosen { index, probe: false })
}

fn call(ticket: AttemptTicket, provider: usize) -> Command {
    Command::Call { ticket, provider, model: None, probe: false }
}

fn save(attempt: u32, answer: &Attempted) -> Command {
    Command::SaveResponse { attempt, response: answer.response.clone(), replace: false }
}

/// A drive of a new job up to its first call on provider `a`; returns the
/// job as stored after the claim and the ticket.
fn first_call(world: &mut World, drive: &mut Drive, job: &Job) -> (Job, AttemptTicket) {
    let mut stored = job.clone();
    let ticket = stored.claim(0, world.now_ms, "a", None).expect("claim");
    let order = world.routing().route.steps.iter().map(|s| candidate(s.provider, 0)).collect();
    assert_eq!(world.start(drive), vec![Command::Place { order }]);
    assert_eq!(world.on(drive, chosen(0)), vec![Command::Create { job: stored.clone() }]);
    let mut commands = vec![call(ticket, 0)];
    if let Some(ms) = world.routing().route.hedge_after_ms {
        commands.push(Command::HedgeAfter { attempt: ticket.attempt, ms });
    }
    assert_eq!(world.on(drive, Event::Persisted(Ok(()))), commands);
    (stored, ticket)
}

#[test]
fn the_first_call_s_claim_is_one_insert_before_the_call() {
    let mut world = World::new(providers(&["a", "b"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    // Place, then a single write (the job's insert with its claim: no
    // `expected`), and only once it is written, the call.
    let (stored, ticket) = first_call(&mut world, &mut drive, &job);
    assert_eq!(ticket, AttemptTicket { attempt: 1, version: 1 });
    assert_eq!(stored.state(), JobState::InFlight);
    assert_eq!(drive.job(), &stored);
    assert!(!drive.is_done());
}

#[test]
fn an_accepted_answer_is_saved_then_the_job_naming_it_then_the_caller_answered() {
    let mut world = World::new(providers(&["a", "b"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (mut stored, ticket) = first_call(&mut world, &mut drive, &job);
    world.now_ms += 250;
    let good = reply(200, &[], GOOD, world.now_ms);
    let read = stored.version();
    stored.complete(ticket, world.now_ms, good.report).expect("complete");
    assert_eq!(
        world.on(&mut drive, answered(1, &good)),
        vec![save(1, &good), Command::Persist { job: stored.clone(), expected: read }]
    );
    let ending = Ending::Answer {
        response: good.response.clone(),
        state: JobState::Completed,
        attempt: Some(1),
        retry_after_ms: None,
    };
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(ending)]);
    assert!(drive.is_idle());
    assert_eq!(drive.into_job(), stored);
}

#[test]
fn a_503_sends_the_next_attempt_to_the_next_provider_and_the_same_one_after_the_backoff() {
    let mut world = World::new(providers(&["a", "b"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (mut stored, ticket) = first_call(&mut world, &mut drive, &job);
    world.now_ms += 40;
    let busy = reply(503, &[], "busy", world.now_ms);
    let read = stored.version();
    stored.fail(ticket, world.now_ms, busy.report).expect("fail");
    assert_eq!(
        world.on(&mut drive, answered(1, &busy)),
        vec![save(1, &busy), Command::Persist { job: stored.clone(), expected: read }]
    );
    // The next provider owes nothing; the one that failed owes the backoff.
    let order = vec![candidate(1, 0), candidate(0, BACKOFF_MS)];
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Place { order }]);
    let read = stored.version();
    let second = stored.claim(read, world.now_ms, "b", None).expect("claim");
    assert_eq!(world.on(&mut drive, chosen(0)), vec![Command::Persist { job: stored.clone(), expected: read }]);
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![call(second, 1)]);
    assert_eq!(world.budget.tokens(), 500 - 5, "the retry was paid for");
}

#[test]
fn a_503_on_the_only_provider_waits_out_the_backoff_before_the_claim() {
    let mut world = World::new(providers(&["a"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (mut stored, ticket) = first_call(&mut world, &mut drive, &job);
    let busy = reply(503, &[], "busy", world.now_ms);
    stored.fail(ticket, world.now_ms, busy.report).expect("fail");
    assert_eq!(world.on(&mut drive, answered(1, &busy)).len(), 2);
    let order = vec![candidate(0, BACKOFF_MS)];
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Place { order }]);
    assert_eq!(world.on(&mut drive, chosen(0)), vec![Command::Sleep { ms: BACKOFF_MS }]);
    world.now_ms += BACKOFF_MS;
    let read = stored.version();
    let second = stored.claim(read, world.now_ms, "a", None).expect("claim");
    assert_eq!(world.on(&mut drive, Event::Woke), vec![Command::Persist { job: stored.clone(), expected: read }]);
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![call(second, 0)]);
}

#[test]
fn a_record_that_loses_its_compare_and_swap_is_audited_and_the_caller_told_the_job_as_it_stands() {
    // Another writer changed the job while the call was out (here: it was
    // made a background job); the attempt's answer loses to it.
    let mut world = World::new(providers(&["a"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (stored, ticket) = first_call(&mut world, &mut drive, &job);
    world.now_ms += 250;
    let mut current = stored.clone();
    assert!(current.run_in_background(world.now_ms));
    let good = reply(200, &[], GOOD, world.now_ms);
    let mut mine = stored.clone();
    mine.complete(ticket, world.now_ms, good.report).expect("complete");
    assert_eq!(
        world.on(&mut drive, answered(1, &good)),
        vec![save(1, &good), Command::Persist { job: mine, expected: stored.version() }]
    );
    let mut audited = current.clone();
    assert!(audited.note_discarded(1, world.now_ms, good.report));
    assert_eq!(
        world.on(&mut drive, Event::Persisted(Err(Some(current.clone())))),
        vec![Command::Persist { job: audited.clone(), expected: current.version() }]
    );
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(Ending::InProgress)]);
    assert!(drive.is_idle());
}

#[test]
fn a_late_answer_whose_attempt_was_taken_for_lost_is_only_audited() {
    // Its lease ran out while the call was out, both leases then, and
    // another request's attempt won the job: the late answer renews its
    // lease first, that write loses, and the caller gets the stored result.
    let mut world = World::new(providers(&["a"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (stored, ticket) = first_call(&mut world, &mut drive, &job);
    let mut current = stored.clone();
    assert!(current.expire(world.now_ms + 30_000));
    world.now_ms += 30_000 + 60_000;
    let other = current.claim(current.version(), world.now_ms, "a", None).expect("claim after both leases");
    let good = reply(200, &[], GOOD, world.now_ms);
    current.complete(other, world.now_ms, good.report).expect("complete");
    let mut renewed = stored.clone();
    renewed.extend_lease(ticket, world.now_ms).expect("renew");
    assert_eq!(
        world.on(&mut drive, answered(1, &good)),
        vec![Command::Persist { job: renewed, expected: stored.version() }]
    );
    let mut audited = current.clone();
    assert!(audited.note_discarded(1, world.now_ms, good.report));
    assert_eq!(
        world.on(&mut drive, Event::Persisted(Err(Some(current.clone())))),
        vec![Command::Persist { job: audited, expected: current.version() }]
    );
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(Ending::Stored)]);
}

#[test]
fn a_late_answer_nobody_took_for_lost_is_still_the_job_s_answer() {
    let mut world = World::new(providers(&["a"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (mut stored, ticket) = first_call(&mut world, &mut drive, &job);
    world.now_ms += 45_000;
    let good = reply(200, &[], GOOD, world.now_ms);
    let read = stored.version();
    let renewed = stored.extend_lease(ticket, world.now_ms).expect("renew");
    assert_eq!(
        world.on(&mut drive, answered(1, &good)),
        vec![Command::Persist { job: stored.clone(), expected: read }]
    );
    let read = stored.version();
    stored.complete(renewed, world.now_ms, good.report).expect("complete");
    assert_eq!(
        world.on(&mut drive, Event::Persisted(Ok(()))),
        vec![save(1, &good), Command::Persist { job: stored.clone(), expected: read }]
    );
    let ending = Ending::Answer {
        response: good.response.clone(),
        state: JobState::Completed,
        attempt: Some(1),
        retry_after_ms: None,
    };
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(ending)]);
}

/// A hedged drive up to its two calls out: attempt 1 on `a`, 2 on `b`.
fn race(world: &mut World, drive: &mut Drive, job: &Job) -> (Job, AttemptTicket, AttemptTicket) {
    let (mut stored, first) = first_call(world, drive, job);
    world.now_ms += 300;
    assert_eq!(world.on(drive, Event::HedgeDue { attempt: 1 }), vec![Command::Place { order: vec![candidate(1, 0)] }]);
    let read = stored.version();
    let second = stored.hedge(read, world.now_ms, "b", None).expect("hedge");
    assert_eq!(world.on(drive, chosen(0)), vec![Command::Persist { job: stored.clone(), expected: read }]);
    assert_eq!(world.on(drive, Event::Persisted(Ok(()))), vec![call(second, 1)]);
    (stored, first, second)
}

#[test]
fn in_a_hedge_race_a_fast_400_waits_for_the_other_racer_whose_200_wins() {
    let mut world = World::new(providers(&["a", "b"], Some(300)));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (mut stored, first, _) = race(&mut world, &mut drive, &job);
    world.now_ms += 20;
    let refused = reply(400, &[], r#"{"error":"no such model"}"#, world.now_ms);
    // Held: nothing is written, nobody is answered.
    assert_eq!(world.on(&mut drive, answered(2, &refused)), vec![]);
    world.now_ms += 500;
    let good = reply(200, &[], GOOD, world.now_ms);
    let read = stored.version();
    stored.complete(first, world.now_ms, good.report).expect("complete");
    assert_eq!(
        world.on(&mut drive, answered(1, &good)),
        vec![save(1, &good), Command::Persist { job: stored.clone(), expected: read }]
    );
    // The 400 is audited (it was paid), then the 200 is the answer.
    let read = stored.version();
    assert!(stored.note_discarded(2, world.now_ms, refused.report));
    assert_eq!(
        world.on(&mut drive, Event::Persisted(Ok(()))),
        vec![Command::Persist { job: stored.clone(), expected: read }]
    );
    let ending = Ending::Answer {
        response: good.response.clone(),
        state: JobState::Completed,
        attempt: Some(1),
        retry_after_ms: None,
    };
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(ending)]);
    assert!(drive.is_idle());
    assert_eq!(drive.job().completed_by(), Some(1));
}

#[test]
fn a_racer_that_lost_is_audited_when_it_answers_after_the_caller_was_answered() {
    let mut world = World::new(providers(&["a", "b"], Some(300)));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (mut stored, _, second) = race(&mut world, &mut drive, &job);
    world.now_ms += 50;
    let good = reply(200, &[], GOOD, world.now_ms);
    let read = stored.version();
    stored.complete(second, world.now_ms, good.report).expect("complete");
    assert_eq!(
        world.on(&mut drive, answered(2, &good)),
        vec![save(2, &good), Command::Persist { job: stored.clone(), expected: read }]
    );
    let ending = Ending::Answer {
        response: good.response.clone(),
        state: JobState::Completed,
        attempt: Some(2),
        retry_after_ms: None,
    };
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(ending)]);
    assert!(drive.is_done() && !drive.is_idle(), "attempt 1 is still out");
    world.now_ms += 2_000;
    let late = reply(200, &[], r#"{"choices":[{"message":{"content":"late"}}]}"#, world.now_ms);
    let read = stored.version();
    assert!(stored.note_discarded(1, world.now_ms, late.report));
    // Audited only: its response is never kept, the job's result stays attempt 2's.
    assert_eq!(
        world.on(&mut drive, answered(1, &late)),
        vec![Command::Persist { job: stored.clone(), expected: read }]
    );
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![]);
    assert!(drive.is_idle());
    assert_eq!(drive.job().completed_by(), Some(2));
}

#[test]
fn a_background_job_s_transient_failure_is_deferred_to_the_queue() {
    let mut world = World::new(providers(&["a"], None));
    let mut job = new_job(4);
    assert!(job.run_in_background(T0));
    let mut stored = job.clone();
    let mut drive = world.drive(true, job.clone(), true);
    assert_eq!(world.start(&mut drive), vec![Command::Place { order: vec![candidate(0, 0)] }]);
    let read = stored.version();
    let ticket = stored.claim(read, world.now_ms, "a", None).expect("claim");
    assert_eq!(world.on(&mut drive, chosen(0)), vec![Command::Persist { job: stored.clone(), expected: read }]);
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![call(ticket, 0)]);
    let refused = attempts::judge_transport(TransportFailure::Connect, "refused");
    let read = stored.version();
    stored.fail(ticket, world.now_ms, refused.report).expect("fail");
    assert_eq!(
        world.on(&mut drive, answered(1, &refused)),
        vec![save(1, &refused), Command::Persist { job: stored.clone(), expected: read }]
    );
    // No sleep here: the job's next attempt waits in the queue.
    let read = stored.version();
    stored.defer_until(world.now_ms + BACKOFF_MS, world.now_ms);
    assert_eq!(
        world.on(&mut drive, Event::Persisted(Ok(()))),
        vec![Command::Persist { job: stored.clone(), expected: read }]
    );
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(Ending::InProgress)]);
    assert_eq!(drive.job().not_before_ms(), T0 + BACKOFF_MS);
    assert_eq!(drive.job().state(), JobState::Failed);
}

#[test]
fn when_every_breaker_is_open_the_caller_gets_a_503_no_healthy_provider() {
    let mut world = World::new(providers(&["a", "b"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    assert_eq!(world.start(&mut drive).len(), 1);
    let skipped = Event::Placed(Placed::Skipped { retry_after_ms: Some(5_000) });
    let problem = attempts::no_healthy_provider(5_000);
    assert_eq!(problem.kind, ProblemType::NoHealthyProvider);
    assert_eq!(problem.status(), 503);
    assert_eq!(
        world.on(&mut drive, skipped),
        vec![Command::Finish(Ending::Problem { problem, state: JobState::Pending })]
    );
    // Nothing was written: the job was never stored.
    assert!(drive.is_idle());
    assert!(drive.job().attempts().is_empty());
}

#[test]
fn an_unknown_outcome_stops_the_drive_and_keeps_no_response() {
    let mut world = World::new(providers(&["a", "b"], None));
    let job = new_job(4);
    let mut drive = world.drive(false, job.clone(), false);
    let (mut stored, ticket) = first_call(&mut world, &mut drive, &job);
    world.now_ms += 30_000;
    let dropped = attempts::judge_transport(TransportFailure::TimeoutAfterSend, "timed out");
    let read = stored.version();
    stored.mark_unknown(ticket, world.now_ms, dropped.report).expect("unknown");
    assert_eq!(
        world.on(&mut drive, answered(1, &dropped)),
        vec![Command::Persist { job: stored.clone(), expected: read }]
    );
    let unknown = crate::job::answer::unknown_outcome(&stored, world.now_ms);
    let ending = Ending::Answer {
        response: StoredResponse::problem(&unknown.problem),
        state: JobState::Unknown,
        attempt: Some(1),
        retry_after_ms: Some(60_000),
    };
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(ending)]);
    assert_eq!(world.budget.tokens(), 500, "an unknown outcome is not retried, and costs nothing");
}

/// Found by the simulation (seed 7438; also 293, 1585, 8718 of the first
/// 10,000): a call answers after its attempt's lease ran out. Meanwhile a
/// duplicate's look expired the job (unknown), and, its unknown lease over
/// with no attempt left, it died naming that attempt as its last, so it
/// replays "gave up, the last outcome was unknown" (a 502), and did to a
/// caller. The late answer must not become that dead job's result: its
/// response, kept under the attempt's number, is not kept before the drive
/// knows the attempt still holds the job.
#[test]
fn a_late_answer_never_rewrites_the_result_of_a_job_that_died_meanwhile() {
    let mut world = World::new(providers(&["a"], None));
    let job = new_job(1);
    let mut drive = world.drive(false, job.clone(), false);
    let (stored, _) = first_call(&mut world, &mut drive, &job);
    let mut dead = stored.clone();
    assert!(dead.expire(T0 + 30_000), "the attempt's lease ran out: unknown");
    assert!(dead.expire(T0 + 30_000 + 60_000), "the unknown lease too, no attempt left: dead");
    assert_eq!(dead.state(), JobState::Dead);
    world.now_ms = T0 + 100_000;
    let late = reply(200, &[], GOOD, world.now_ms);
    let commands = world.on(&mut drive, answered(1, &late));
    assert!(
        !commands.iter().any(|c| matches!(c, Command::SaveResponse { attempt: 1, .. })),
        "attempt 1's response is what the dead job replays: kept before the drive knows it holds the job: {commands:?}"
    );
    // The lease is renewed first; that write loses to the dead job, and
    // the late answer is only audited.
    let mut renewed = stored.clone();
    renewed.extend_lease(AttemptTicket { attempt: 1, version: 1 }, world.now_ms).expect("renew");
    assert_eq!(commands, vec![Command::Persist { job: renewed, expected: stored.version() }]);
    let mut audited = dead.clone();
    assert!(audited.note_discarded(1, world.now_ms, late.report));
    assert_eq!(
        world.on(&mut drive, Event::Persisted(Err(Some(dead.clone())))),
        vec![Command::Persist { job: audited, expected: dead.version() }]
    );
    assert_eq!(world.on(&mut drive, Event::Persisted(Ok(()))), vec![Command::Finish(Ending::Stored)]);
}

#[test]
fn placing_takes_the_first_breaker_that_lets_the_attempt_through() {
    let mut placing = Placing::default();
    assert_eq!(placing.on(Permit::Skip { retry_after_ms: 900 }), None);
    assert_eq!(placing.on(Permit::Probe), Some(Placed::Chosen { index: 1, probe: true }));
    let mut placing = Placing::default();
    assert_eq!(placing.on(Permit::Call), Some(Placed::Chosen { index: 0, probe: false }));
}

#[test]
fn placing_with_every_breaker_open_waits_for_the_earliest_probe() {
    let mut placing = Placing::default();
    for ms in [900, 300, 600] {
        assert_eq!(placing.on(Permit::Skip { retry_after_ms: ms }), None);
    }
    assert_eq!(placing.skipped(), Placed::Skipped { retry_after_ms: Some(300) });
    assert_eq!(Placing::default().skipped(), Placed::Skipped { retry_after_ms: None }, "no candidate");
}
