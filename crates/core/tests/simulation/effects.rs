//! A job type's effects, simulated: the real [`Run`] machine and the real
//! [`decide`] for approvers and operators, run against effect destinations
//! that keep what arrives under its delivery id and answer receipts (a
//! `d1` table that refuses a second row, webhooks that do not dedupe, with
//! or without a receipt URL), that fail transiently or for good, or time
//! out after the delivery landed; storage that keeps only what was written
//! (a compare-and-swap on each effect's version); follow-ups delivered at
//! least once (requests, queue redeliveries, the alarm); and crashes that
//! drop the object's memory at any step — also between "performed" and
//! "recorded" — after which the alarm restarts from what was persisted.
//!
//! The invariants, by the name a violation gives: `effect-once` (no effect
//! is performed again while its last attempt may have arrived, unless its
//! receipt was checked and found absent, or an operator resent it),
//! `claim-before-perform` (the claim is stored, at the version performed),
//! `effect-cas` (a write that succeeds expected the stored version; versions
//! only grow), `approval-before-perform` (an effect that needs an approval
//! runs only once approved, before its expiry), `done-means-delivered` (an
//! effect done by its own attempt or a receipt is at its destination),
//! `dead-letter-once` (one dead letter per time an effect comes to need an
//! operator, and only while it does; again only after a crash cut the
//! write that records it sent), `batch` (at most one command that
//! wants an answer, last), and after the drain `effect-settles` (each
//! effect done or expired, or in a state an operator sees and acts on:
//! dead, unknown, conflict), `dead-letter-recorded` (one that needs an
//! operator had its dead letter) and `no-stuck-run`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use onejob_core::job_type::effect::{Effect, EffectRetry, EffectSpec, EffectState, EffectTarget, Found, Outcome};
use onejob_core::ledger::effects::run::{self, Action, Command, Defined, Event, Inputs, Performed, Run, Then};
use serde_json::json;

use crate::rng::Rng;
use crate::scenario::T0;
use crate::trace::Trace;
use crate::world::Violation;

/// How long the busy part (follow-ups, approvers, operators, crashes) lasts.
const ACTIVE_MS: u64 = 90_000;
/// Steps at most (past it the effects did not settle: a livelock).
const MAX_STEPS: u64 = 4_000;

/// Where an effect goes, as simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A table keyed by delivery id: a second insert finds the row there.
    Table,
    /// A webhook with a receipt URL (it does not dedupe).
    Receipts,
    /// A webhook without one: a lost answer is unknown for good.
    NoReceipts,
}

/// What one perform does at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arrival {
    Done,
    /// 503: did not arrive.
    Transient,
    /// 400: did not arrive.
    Permanent,
    /// Arrived, but the answer was lost (a timeout after it landed).
    LandedUnanswered,
    /// Did not arrive, and no answer (a timeout before it landed).
    LostUnanswered,
    /// A table's insert found a row under the delivery id.
    RowThere,
}

struct Dest {
    kind: Kind,
    /// Weights of [`Arrival`]s: done, transient, permanent, landed-unanswered, lost-unanswered.
    weights: [u32; 5],
    /// Per mille of receipt lookups that fail.
    ask_fails: u32,
    /// Arrivals under the delivery id (the payload's fingerprint each).
    arrived: Vec<String>,
}

/// What the sim knows about one effect besides storage.
#[derive(Default, Clone)]
struct Watch {
    /// A perform whose delivery may have arrived, not yet proven absent.
    exposed: bool,
    /// Times it came to need an operator (by a write that succeeded).
    episodes: u32,
    /// Dead letters, by episode.
    letters: BTreeMap<u32, u32>,
    /// A crash came between a dead letter and the write that records it
    /// sent: the restart sends it again (the dead letters' table keeps one
    /// row per job, so the repeat is the same row).
    letter_unrecorded: bool,
}

#[derive(Debug, Clone)]
enum Ev {
    /// Someone runs the effects (a request, a queue redelivery, an operator's resolve).
    FollowUp,
    Alarm,
    Performed {
        incarnation: u32,
        effect: usize,
        arrival: Arrival,
    },
    Receipt {
        incarnation: u32,
        effect: usize,
    },
    Woke {
        incarnation: u32,
    },
    Approve,
    Operator {
        effect: usize,
        resend: bool,
    },
    Replay,
}

/// The effects' world of one seed.
pub struct EffectsWorld {
    seed: u64,
    rng: Rng,
    now: u64,
    pub steps: u64,
    heap: BinaryHeap<Reverse<(u64, u64, u64)>>,
    events: BTreeMap<u64, Ev>,
    seq: u64,
    specs: Vec<EffectSpec>,
    dests: Vec<Dest>,
    /// Storage: the effects as written.
    stored: Vec<Effect>,
    alarm: Option<u64>,
    /// Memory: the one runner (the coordination's `effects_running`).
    run: Option<Run>,
    incarnation: u32,
    crash_per_mille: u32,
    /// How often recording a dead letter fails (the operators' database is down), per mille.
    letter_fails_per_mille: u32,
    drain: bool,
    watch: Vec<Watch>,
    pub trace: Trace,
    pub violations: Vec<Violation>,
    pub stats: BTreeMap<&'static str, u64>,
}

impl EffectsWorld {
    /// The effects' world of `seed` (its own generator: the drive world's draws stay as they were).
    pub fn new(seed: u64, traced: bool) -> Self {
        let mut rng = Rng::new(seed ^ 0xEFFE_C750_0000_0001);
        let count = rng.range(1, 3) as usize;
        let mut specs = Vec::new();
        let mut dests = Vec::new();
        for i in 0..count {
            let base_ms = rng.range(50, 1_000);
            let retry =
                EffectRetry { attempts: rng.range(1, 5) as u32, base_ms, cap_ms: base_ms.max(rng.range(500, 8_000)) };
            let approve = rng.chance(250);
            let kind = [Kind::Table, Kind::Receipts, Kind::NoReceipts][rng.weighted(&[40, 45, 15])];
            let target = match kind {
                Kind::Table => EffectTarget::D1 {
                    database: "DB".into(),
                    table: "t".into(),
                    columns: serde_json::Map::from_iter([("to".into(), json!("{{input.to}}"))]),
                },
                _ => EffectTarget::Webhook {
                    url: "https://receiver.example/hook".into(),
                    receipt_url: (kind == Kind::Receipts).then(|| "https://receiver.example/receipts".into()),
                    secret: None,
                    payload: json!({"to": "{{input.to}}", "n": i}),
                },
            };
            specs.push(EffectSpec {
                name: format!("e{i}"),
                approve,
                approval_ttl_ms: rng.range(2_000, 60_000),
                retry,
                target,
            });
            let weights =
                [[800, 80, 20, 50, 50], [400, 300, 50, 120, 130], [200, 200, 300, 150, 150], [300, 100, 20, 300, 280]]
                    [rng.below(4) as usize];
            // Now and then a table holds another payload's row under the delivery id already.
            let arrived =
                if kind == Kind::Table && rng.chance(40) { vec!["another payload".into()] } else { Vec::new() };
            dests.push(Dest { kind, weights, ask_fails: [0, 50, 300][rng.below(3) as usize], arrived });
        }
        let crash_per_mille = [0, 20, 60, 120][rng.below(4) as usize];
        let letter_fails_per_mille = [0, 0, 200, 600][rng.below(4) as usize];
        let mut world = Self {
            seed,
            rng,
            now: T0,
            steps: 0,
            heap: BinaryHeap::new(),
            events: BTreeMap::new(),
            seq: 0,
            watch: vec![Watch::default(); count],
            specs,
            dests,
            stored: Vec::new(),
            alarm: None,
            run: None,
            incarnation: 0,
            crash_per_mille,
            letter_fails_per_mille,
            drain: false,
            trace: Trace::new(traced),
            violations: Vec::new(),
            stats: BTreeMap::new(),
        };
        world.describe();
        world
    }

    fn describe(&mut self) {
        if !self.trace.traced() {
            return;
        }
        let line = format!(
            "effects of seed {}: crashes {}‰, dead letters unrecorded {}‰",
            self.seed, self.crash_per_mille, self.letter_fails_per_mille
        );
        self.trace.line(|| line);
        for (spec, dest) in self.specs.iter().zip(&self.dests) {
            let line = format!(
                "  effect {}: {:?} weights {:?} asks fail {}‰, approve {} (ttl {} ms), retry {:?}",
                spec.name, dest.kind, dest.weights, dest.ask_fails, spec.approve, spec.approval_ttl_ms, spec.retry
            );
            self.trace.line(|| line);
        }
    }

    fn defined(&self) -> Vec<Defined> {
        self.specs.iter().map(|s| Defined { name: s.name.clone(), retry: s.retry }).collect()
    }

    fn count(&mut self, what: &'static str) {
        *self.stats.entry(what).or_insert(0) += 1;
    }

    fn violate(&mut self, check: &'static str, message: String) {
        self.trace.line(|| format!("!! VIOLATION {check}: {message}"));
        if self.violations.len() < 5 {
            self.violations.push(Violation { seed: self.seed, step: self.steps, check, message });
        }
    }

    fn schedule(&mut self, at: u64, event: Ev) -> u64 {
        let tie = self.rng.next();
        self.seq += 1;
        self.heap.push(Reverse((at.max(self.now), tie, self.seq)));
        self.events.insert(self.seq, event);
        self.seq
    }

    fn pop(&mut self, before: u64) -> Option<Ev> {
        loop {
            let Reverse((at, _, seq)) = *self.heap.peek()?;
            if at >= before {
                return None;
            }
            self.heap.pop();
            if let Some(event) = self.events.remove(&seq) {
                self.now = self.now.max(at);
                return Some(event);
            }
        }
    }

    fn index_of(&self, name: &str) -> usize {
        self.specs.iter().position(|s| s.name == name).expect("a simulated effect")
    }

    /// Runs the world: the answer is in and the effects are planned; then
    /// follow-ups, approvers, operators and crashes; then the drain.
    pub fn run(&mut self) {
        let input = json!({"to": "a@b.c"});
        self.stored = self.specs.iter().map(|s| Effect::plan(s, "t:key", &input, &json!({}), self.now)).collect();
        self.trace.line(|| "  effects planned".into());
        self.schedule(self.now, Ev::FollowUp);
        for _ in 0..self.rng.range(0, 6) {
            let at = self.now + self.rng.range(0, ACTIVE_MS);
            self.schedule(at, Ev::FollowUp);
        }
        if self.specs.iter().any(|s| s.approve) {
            for _ in 0..self.rng.range(0, 2) {
                let at = self.now + self.rng.range(0, 70_000);
                self.schedule(at, Ev::Approve);
            }
        }
        for _ in 0..self.rng.range(0, 3) {
            let at = self.now + self.rng.range(5_000, ACTIVE_MS);
            let (effect, resend) = (self.rng.below(self.specs.len() as u64) as usize, self.rng.chance(600));
            self.schedule(at, Ev::Operator { effect, resend });
        }
        if self.rng.chance(200) {
            let at = self.now + self.rng.range(10_000, ACTIVE_MS);
            self.schedule(at, Ev::Replay);
        }
        while let Some(event) = self.pop(T0 + ACTIVE_MS) {
            if self.crash_per_mille > 0 && self.rng.chance(self.crash_per_mille / 2) {
                self.crash("between steps");
            }
            if self.step(event) {
                return;
            }
        }
        self.drain = true;
        self.trace.line(|| "  -- effects drain".into());
        while let Some(event) = self.pop(u64::MAX) {
            if self.step(event) {
                return;
            }
        }
        self.check_settled();
    }

    /// One event; true when the run must stop (a violation, or no end).
    fn step(&mut self, event: Ev) -> bool {
        self.steps += 1;
        self.trace.mix(self.now);
        let (step, at) = (self.steps, self.now - T0);
        self.trace.line(|| format!("  e{step:>4} +{at:>7}ms {event:?}"));
        match event {
            Ev::FollowUp => {
                self.count("effect follow-ups");
                self.begin_run();
            }
            Ev::Alarm => {
                self.alarm = None;
                self.count("effect alarms");
                // The alarm, while a run goes on here, only watches; else it runs them.
                if self.run.is_some() {
                    let look = run::next_look_ms(&self.stored, &self.defined(), true, self.now);
                    self.set_alarm(look.unwrap_or(self.now + 5_000));
                } else {
                    self.begin_run();
                }
            }
            Ev::Performed { incarnation, effect, arrival } => {
                if incarnation != self.incarnation {
                    self.trace.line(|| "        (its runtime is gone: the record is lost)".into());
                    self.count("effects performed, never recorded");
                } else {
                    let performed = self.answer_of(effect, arrival);
                    if matches!(performed, Performed::Outcome(Outcome::Transient { .. } | Outcome::Permanent { .. })) {
                        self.watch[effect].exposed = false;
                    }
                    self.feed(Event::Performed(performed));
                }
            }
            Ev::Receipt { incarnation, effect } => {
                if incarnation == self.incarnation {
                    let found = self.found(effect);
                    if found == Found::Absent {
                        self.watch[effect].exposed = false;
                    }
                    self.feed(Event::Receipt(found));
                }
            }
            Ev::Woke { incarnation } => {
                if incarnation == self.incarnation {
                    self.feed(Event::Woke);
                }
            }
            Ev::Approve => self.operate(Action::Approve, "approver"),
            Ev::Operator { effect, resend } => {
                let name = self.specs[effect].name.clone();
                let action = if resend { Action::Resend(name) } else { Action::MarkDone(name) };
                self.operate(action, "operator");
            }
            Ev::Replay => self.operate(Action::ReplayDead, "operator"),
        }
        self.check_all();
        if self.steps > MAX_STEPS {
            self.violate("effect-settles", format!("the effects did not settle in {MAX_STEPS} steps"));
        }
        !self.violations.is_empty()
    }

    /// What the destination answers a perform that did `arrival`.
    fn answer_of(&mut self, effect: usize, arrival: Arrival) -> Performed {
        match arrival {
            // The row was there already: the table tells what it holds.
            Arrival::RowThere => Performed::AlreadyThere(self.found(effect)),
            Arrival::Done => Performed::Outcome(Outcome::Done(json!({"arrived": true}))),
            Arrival::Transient => Performed::Outcome(Outcome::Transient { status: Some(503), detail: "busy".into() }),
            Arrival::Permanent => Performed::Outcome(Outcome::Permanent { status: Some(400), detail: "no".into() }),
            Arrival::LandedUnanswered | Arrival::LostUnanswered => {
                Performed::Outcome(Outcome::Unknown { detail: "no answer in time".into() })
            }
        }
    }

    /// What the destination holds under the effect's delivery id.
    fn found(&mut self, effect: usize) -> Found {
        let (kind, fails) = (self.dests[effect].kind, self.dests[effect].ask_fails);
        if kind == Kind::NoReceipts {
            return Found::NoReceiptSource;
        }
        if !self.drain && self.rng.chance(fails) {
            return Found::CouldNotAsk { detail: "the receipt URL answered 503".into() };
        }
        let fingerprint = self.stored.get(effect).map(|e| e.fingerprint.clone()).unwrap_or_default();
        match self.dests[effect].arrived.first() {
            None => Found::Absent,
            Some(f) if *f == fingerprint => Found::Same(json!({"arrived": true})),
            Some(f) => Found::Different { stored_fingerprint: f.clone() },
        }
    }

    fn begin_run(&mut self) {
        if self.run.is_some() {
            self.trace.line(|| "        (a runner is here: it looks again)".into());
            return;
        }
        self.count("effect runs");
        let mut run = Run::new(self.defined());
        let commands = run.start(&mut Inputs { now_ms: self.now, random: &mut self.rng });
        self.run = Some(run);
        self.perform(commands);
    }

    fn feed(&mut self, event: Event) {
        let Some(mut run) = self.run.take() else { return };
        self.trace.line(|| format!("        run <- {}", short_event(&event)));
        let commands = run.on(event, &mut Inputs { now_ms: self.now, random: &mut self.rng });
        self.run = Some(run);
        self.perform(commands);
    }

    /// Performs a batch, as the Ledger does (an answered command's event is fed back at once when synchronous).
    fn perform(&mut self, commands: Vec<Command>) {
        let answered: Vec<usize> =
            commands.iter().enumerate().filter(|(_, c)| c.wants_answer()).map(|(i, _)| i).collect();
        if answered.len() > 1 || answered.first().is_some_and(|i| i + 1 != commands.len()) {
            self.violate("batch", format!("commands after one that wants an answer: {commands:?}"));
        }
        let incarnation = self.incarnation;
        for command in commands {
            self.trace.line(|| format!("          -> {}", short_command(&command)));
            match command {
                Command::Watch { at_ms } => self.set_alarm(at_ms),
                Command::Load => {
                    let stored = self.stored.clone();
                    return self.feed(Event::Loaded(stored));
                }
                Command::Persist { effect, expected } => {
                    let written = self.write(effect, expected, "runner");
                    // A crash right after a write: memory is gone, storage stays.
                    if !self.drain && self.rng.chance(self.crash_per_mille / 4) {
                        return self.crash("after an effect's write");
                    }
                    return self.feed(Event::Persisted(written));
                }
                Command::Perform { effect } => return self.perform_effect(effect, incarnation),
                Command::AskReceipt { effect } => {
                    let i = self.index_of(&effect.name);
                    self.count("receipts asked");
                    let at = self.now + self.rng.range(5, 300);
                    self.schedule(at, Ev::Receipt { incarnation, effect: i });
                    return;
                }
                Command::DeadLetter(letter) => {
                    let i = self.index_of(&letter.name);
                    // The operators' database is down: the letter is not recorded.
                    if !self.drain && self.rng.chance(self.letter_fails_per_mille) {
                        self.count("dead letters unrecorded");
                        self.trace.line(|| "          (the dead letter could not be recorded)".into());
                        return self.feed(Event::DeadLettered { recorded: false });
                    }
                    let stored = self.stored[i].state;
                    let episode = self.watch[i].episodes;
                    let letters = self.watch[i].letters.entry(episode).or_insert(0);
                    *letters += 1;
                    let n = *letters;
                    self.count("effect dead letters");
                    let repeat_after_crash = std::mem::take(&mut self.watch[i].letter_unrecorded);
                    if (n > 1 && !repeat_after_crash) || !stored.needs_operator() || letter.state != stored {
                        self.violate(
                            "dead-letter-once",
                            format!(
                                "effect {} letter #{n} of episode {episode} as {:?}, stored {stored:?}",
                                letter.name, letter.state
                            ),
                        );
                    }
                    // A crash after the letter, before the write that records it sent.
                    if !self.drain && self.rng.chance(self.crash_per_mille / 2) {
                        self.watch[i].letter_unrecorded = true;
                        self.count("crashes after a dead letter");
                        return self.crash("after a dead letter");
                    }
                    return self.feed(Event::DeadLettered { recorded: true });
                }
                Command::Sleep { ms } => {
                    self.schedule(self.now + ms, Ev::Woke { incarnation });
                    return;
                }
                Command::Finish => {
                    self.run = None;
                    // The Ledger arms the alarm for the next look (it replaces
                    // the watch; none: only the job's retention, not simulated here).
                    match run::next_look_ms(&self.stored, &self.defined(), false, self.now) {
                        Some(at) => self.set_alarm(at),
                        None => {
                            if let Some(before) = self.alarm.take() {
                                self.events.remove(&before);
                            }
                        }
                    }
                    return;
                }
            }
        }
    }

    fn perform_effect(&mut self, effect: Effect, incarnation: u32) {
        let i = self.index_of(&effect.name);
        let stored = &self.stored[i];
        if stored.state != EffectState::Claimed || stored.version != effect.version {
            let message = format!(
                "effect {} performed at v{}, stored {:?} v{}",
                effect.name, effect.version, stored.state, stored.version
            );
            self.violate("claim-before-perform", message);
        }
        if let Some(approval) = effect.approval.as_ref()
            && approval.approved_ms.is_none_or(|at| at >= approval.expires_ms)
        {
            self.violate(
                "approval-before-perform",
                format!("effect {} performed without an approval in time: {approval:?}", effect.name),
            );
        }
        if self.watch[i].exposed {
            self.violate(
                "effect-once",
                format!(
                    "effect {} performed again while its last attempt may have arrived (no receipt found absent)",
                    effect.name
                ),
            );
        }
        self.watch[i].exposed = true;
        self.count("effects performed");
        let arrival =
            [Arrival::Done, Arrival::Transient, Arrival::Permanent, Arrival::LandedUnanswered, Arrival::LostUnanswered]
                [self.rng.weighted(&self.dests[i].weights)];
        let arrival = if self.drain && arrival == Arrival::LostUnanswered { Arrival::Done } else { arrival };
        let dest = &mut self.dests[i];
        // A table keeps one row per delivery id: a second insert finds it there.
        let row_there = dest.kind == Kind::Table && !dest.arrived.is_empty();
        let arrival = if row_there && arrival == Arrival::Done { Arrival::RowThere } else { arrival };
        if matches!(arrival, Arrival::Done | Arrival::LandedUnanswered) && !row_there {
            dest.arrived.push(effect.fingerprint.clone());
        }
        let latency = self.rng.range(5, 2_000);
        self.schedule(self.now + latency, Ev::Performed { incarnation, effect: i, arrival });
        // A crash between "performed" and "recorded": the delivery landed, the answer is never heard.
        if !self.drain && self.rng.chance(self.crash_per_mille / 2) {
            self.crash("between performed and recorded");
        }
    }

    /// Storage's compare-and-swap on one effect's version.
    fn write(&mut self, effect: Effect, expected: u64, who: &str) -> Result<(), Option<Box<Effect>>> {
        let i = self.index_of(&effect.name);
        let current = self.stored[i].clone();
        if current.version != expected {
            self.count("effect writes lost");
            self.trace.line(|| {
                format!("          <- {who}'s write lost (expected v{expected}, stored v{})", current.version)
            });
            return Err(Some(Box::new(current)));
        }
        if effect.version <= current.version {
            self.violate(
                "effect-cas",
                format!("effect {} v{} written over v{}", effect.name, effect.version, current.version),
            );
        }
        if !current.state.needs_operator() && effect.state.needs_operator() {
            self.watch[i].episodes += 1;
        }
        self.trace.mix(effect.version);
        self.trace.line(|| {
            format!("          <- written by {who}: {} v{} {}", effect.name, effect.version, effect.state.as_str())
        });
        self.stored[i] = effect;
        Ok(())
    }

    fn operate(&mut self, action: Action, who: &str) {
        self.count("operator actions");
        let decided = run::decide(self.stored.clone(), &action, who, &self.defined(), self.now);
        self.trace
            .line(|| format!("        {who} {action:?}: {} writes, then {:?}", decided.writes.len(), decided.then));
        for write in decided.writes {
            let i = self.index_of(&write.effect.name);
            let resent = write.effect.state == EffectState::Ready && self.stored[i].state.needs_operator();
            if self.write(write.effect, write.expected, who).is_err() {
                return self.violate("effect-cas", "an operator's write lost with no other writer between".into());
            }
            // The operator checked the destination: sending again is theirs.
            if resent {
                self.watch[i].exposed = false;
            }
        }
        if matches!(decided.then, Then::Run { .. } | Then::Replayed(_)) {
            self.begin_run();
        }
    }

    fn set_alarm(&mut self, at: u64) {
        if let Some(before) = self.alarm.take() {
            self.events.remove(&before);
        }
        let at = at.max(self.now + 5);
        self.alarm = Some(self.schedule(at, Ev::Alarm));
    }

    /// Memory is gone (the runner with it); storage and the alarm stay.
    fn crash(&mut self, when: &str) {
        self.count("effect crashes");
        self.incarnation += 1;
        self.trace.mix(0xC0A5);
        self.trace.line(|| format!("        ** CRASH ({when})"));
        self.run = None;
        if self.alarm.is_none() {
            // The runtime restarts on its alarm (the watch a run keeps, or the armed one).
            let at = self.now + 5_000;
            self.set_alarm(at);
        }
    }

    fn check_all(&mut self) {
        for i in 0..self.stored.len() {
            let effect = &self.stored[i];
            let marked = effect.events.iter().any(|e| e.what == "marked_done");
            if effect.state == EffectState::Done && !marked && self.dests[i].arrived.is_empty() {
                let message = format!("effect {} is done, its destination has nothing", effect.name);
                self.violate("done-means-delivered", message);
            }
        }
    }

    fn check_settled(&mut self) {
        if self.run.is_some() {
            self.violate("no-stuck-run", "a runner is left with nothing to wait for".into());
        }
        for (i, effect) in self.stored.clone().into_iter().enumerate() {
            // Every time an effect came to need an operator, they were told.
            let episode = self.watch[i].episodes;
            if effect.state.needs_operator() && self.watch[i].letters.get(&episode).is_none_or(|n| *n == 0) {
                self.violate(
                    "dead-letter-recorded",
                    format!("effect {} needs an operator (episode {episode}): no dead letter", effect.name),
                );
            }
            let settled =
                matches!(effect.state, EffectState::Done | EffectState::Expired) || effect.state.needs_operator();
            if !settled {
                self.violate("effect-settles", format!("effect {} left {}", effect.name, effect.state.as_str()));
            }
            self.count(match effect.state {
                EffectState::Done => "effects done",
                EffectState::Expired => "effects expired",
                EffectState::Dead => "effects dead",
                EffectState::Unknown => "effects unknown",
                EffectState::Conflict => "effects in conflict",
                _ => "effects unsettled",
            });
        }
    }
}

fn short_event(event: &Event) -> String {
    match event {
        Event::Loaded(effects) => format!(
            "Loaded({})",
            effects
                .iter()
                .map(|e| format!("{} v{} {}", e.name, e.version, e.state.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Event::Persisted(Ok(())) => "Persisted(Ok)".into(),
        Event::Persisted(Err(current)) => format!("Persisted(lost to v{:?})", current.as_ref().map(|e| e.version)),
        Event::Performed(performed) => format!("Performed({performed:?})"),
        Event::Receipt(found) => format!("Receipt({found:?})"),
        Event::Woke => "Woke".into(),
        Event::DeadLettered { recorded } => format!("DeadLettered(recorded: {recorded})"),
    }
}

fn short_command(command: &Command) -> String {
    match command {
        Command::Persist { effect, expected } => {
            format!("Persist {} v{} {} expecting v{expected}", effect.name, effect.version, effect.state.as_str())
        }
        Command::Perform { effect } => {
            format!("Perform {} v{} (attempt {})", effect.name, effect.version, effect.attempts.len())
        }
        Command::AskReceipt { effect } => format!("AskReceipt {} v{}", effect.name, effect.version),
        Command::DeadLetter(letter) => format!("DeadLetter {} {:?}", letter.name, letter.state),
        other => format!("{other:?}"),
    }
}
