//! The world around the Ledger, simulated: a virtual clock and an event
//! queue ordered by time (ties broken by the seed's generator), providers
//! that answer each call as their temper says, breakers, storage that keeps
//! only what was written (with a real compare-and-swap), an at-least-once
//! queue, an outbox alarm, callers that retry, and crashes that drop an
//! object's memory at any step (or between two commands of one step).
//!
//! The Ledger shell ([`World::perform`]) does what the Durable Object must:
//! it performs the [`Command`]s of the real [`Drive`] in order, answers a
//! `Persist` before any other event, and decides every request, adoption
//! and delivery with the core's own [`submit::decide`], [`submit::adopt`],
//! [`delivery::plan`] and [`delivery::after_drive`] (the shell's sequence as
//! the edge performs it). The invariants are checked as it goes and
//! after every step ([`World::check_all`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use onejob_core::identity::fingerprint::Fingerprint;
use onejob_core::job::answer;
use onejob_core::job::{AttemptOutcome, AttemptReport, AttemptTicket, Job, JobState, UnknownPolicy};
use onejob_core::ledger::background::delivery::{self, Verdict};
use onejob_core::ledger::background::delivery_machine::{self, DeliveryMachine};
use onejob_core::ledger::background::outbox;
use onejob_core::ledger::background::progress::Progress;
use onejob_core::ledger::background::tending::Step;
use onejob_core::ledger::background::wake;
use onejob_core::ledger::request::admission::{self, Admission, Arrival};
use onejob_core::ledger::request::attempts::{self, Attempted, StoredResponse};
use onejob_core::ledger::request::drive::{Answer, Command, Drive, DriveSetup, Ending, Event, Inputs, Placed, Routing};
use onejob_core::ledger::request::run_machine::{self, RunMachine};
use onejob_core::ledger::request::submit::{self, AdoptStep, Adoption, Check, Read, Request, Run};
use onejob_core::ledger::request::submit_machine::{self, SubmitMachine};
use onejob_core::retry::backoff::budget::RetryBudget;
use onejob_core::retry::classify::{ErrorClass, TransportFailure};
use onejob_core::upstream::providers::Api;
use onejob_core::wire::{Problem, ProblemType};

use crate::rng::Rng;
use crate::scenario::{CallerSpec, JobSpec, OUTBOX_DELAY_MS, REPLIES, RETENTION_MS, Reply, Scenario, T0, fingerprint};
use crate::trace::Trace;

/// Steps of the busy part of a run (callers, crashes) at most.
const ACTIVE_STEPS: u64 = 400;
/// How long the busy part lasts at most.
const ACTIVE_MS: u64 = 120_000;
/// Steps of a whole run at most: past it the world did not settle (a livelock).
const MAX_STEPS: u64 = 20_000;
/// Everything but the retention alarms happens before this.
const DRAIN_CUTOFF: u64 = T0 + RETENTION_MS - 60_000;
/// A stream's pump, in the Ledger's memory, holds the drive lock.
const PUMP: u32 = u32::MAX;
/// The lock a run or a delivery holds from its `Lock` op until its drive starts.
const LOCKED: u32 = u32::MAX - 1;
/// A background job whose message the queue lost gets a delivery within
/// this long (the outbox presumes it lost from the consumer's progress).
/// Before, a confirmed message was presumed lost only after 15 to 30
/// minutes (issue 34): this catches that.
const LOST_MESSAGE_BOUND_MS: u64 = 180_000;
/// The idempotency key (the same string for every job: each job is its own object).
const KEY: &str = "0123456789abcdef-simulated";

/// An invariant that did not hold.
#[derive(Debug, Clone)]
pub struct Violation {
    /// The seed.
    pub seed: u64,
    /// The step it was found at.
    pub step: u64,
    /// The invariant's name.
    pub check: &'static str,
    /// What was found.
    pub message: String,
}

/// What one seed's run gave.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Steps (events) run.
    pub steps: u64,
    /// What did not hold (the run stops at the first step that finds one).
    pub violations: Vec<Violation>,
    /// The trace's numbers.
    pub hash: u64,
    /// The trace's text hash (traced runs only).
    pub text_hash: u64,
    /// The trace (traced runs only).
    pub lines: Vec<String>,
    /// How often interesting things happened.
    pub stats: BTreeMap<&'static str, u64>,
}

/// Runs one seed.
pub fn run(seed: u64, traced: bool) -> Outcome {
    let mut world = World::new(seed, traced);
    world.run();
    // The same seed's job-type effects ([`crate::effects`]), in their own world.
    let mut effects = crate::effects::EffectsWorld::new(seed, traced);
    effects.run();
    let mut stats = world.stats;
    for (what, n) in effects.stats {
        *stats.entry(what).or_insert(0) += n;
    }
    let mut lines = world.trace.lines().to_vec();
    lines.extend(effects.trace.lines().iter().cloned());
    let mut violations = world.violations;
    violations.extend(effects.violations);
    Outcome {
        steps: world.steps + effects.steps,
        violations,
        hash: world.trace.hash() ^ effects.trace.hash().rotate_left(1),
        text_hash: world.trace.text_hash() ^ effects.trace.text_hash().rotate_left(1),
        lines,
        stats,
    }
}

/// Who a drive answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// A caller's request.
    Caller(usize),
    /// A queue delivery.
    Delivery(usize),
}

/// A drive in an object's memory.
struct Slot {
    drive: Drive,
    owner: Owner,
    /// It returned its `Finish`.
    finished: bool,
    /// The run it is part of, waiting for its end ([`RunMachine`]).
    run: Option<(RunMachine, Running)>,
}

/// What a run under the drive lock carries from one op to the next, as
/// the edge's `run` keeps it in locals.
#[derive(Clone)]
struct Running {
    job: Job,
    stored: bool,
    background: bool,
    /// The drive held the lock when it ended.
    holds_lock: bool,
    /// The drive's answer to its callers.
    res: Option<Res>,
    /// The streamed attempt handed to a pump.
    ticket: Option<AttemptTicket>,
    /// The background submission kept during the drive.
    later: Option<&'static Fingerprint>,
    /// When the answer says to ask again (a delivery defers the job by it).
    asked_ms: Option<u64>,
}

impl Running {
    fn new(job: Job, stored: bool, background: bool) -> Self {
        Self { job, stored, background, holds_lock: false, res: None, ticket: None, later: None, asked_ms: None }
    }
}

/// A stream's pump (a simplified stand-in for the edge's).
struct Pump {
    ticket: AttemptTicket,
    subscribers: Vec<usize>,
    chunks_left: u32,
    breaks: bool,
}

/// An object's memory: lost at a crash.
#[derive(Default)]
struct Memory {
    drives: BTreeMap<u32, Slot>,
    /// The drive holding the lock ([`PUMP`]: the stream's pump).
    driving: Option<u32>,
    waiters: Vec<usize>,
    pump: Option<Pump>,
    /// A background submission kept while a drive (not a pump) holds the
    /// lock, adopted when that drive ends without finishing the job (the
    /// edge's `Coordination::adopt_later`): its fingerprint.
    adopt_later: Option<&'static Fingerprint>,
    /// Sends of the job's message not resolved yet (the edge's
    /// `Coordination::is_sending`): the alarm does not send again meanwhile.
    sends_pending: u32,
    /// Queue deliveries under way here (the core's [`DeliveryMachine`]),
    /// by message: waiting for the quota's answer or for their drive.
    deliveries: BTreeMap<usize, DeliveryMachine>,
    /// Runs waiting for their quota's answer under the lock, by a number
    /// of their own.
    asking: BTreeMap<u32, (Owner, RunMachine, Running)>,
    /// The new job a run holding [`LOCKED`] is creating (the edge's
    /// `Coordination::begin_drive(creating)`): duplicates wait for it.
    creating: Option<Job>,
}

/// A streamed answer as kept.
#[derive(Debug, Clone)]
struct StreamRecord {
    content_type: String,
    events: Vec<Vec<u8>>,
}

/// An object's storage: only what was written.
#[derive(Default)]
struct Storage {
    job: Option<Job>,
    responses: BTreeMap<u32, StoredResponse>,
    streams: BTreeMap<u32, StreamRecord>,
    outbox: outbox::Outbox,
    background_request: bool,
    /// When the alarm rings, and its event.
    alarm: Option<(u64, u64)>,
    dead_lettered: bool,
}

/// One job's Durable Object.
#[derive(Default)]
struct Object {
    storage: Storage,
    memory: Memory,
    incarnation: u32,
    /// Drive ids never repeat, across incarnations: a stale event finds no drive.
    next_drive: u32,
    /// Retention deleted it.
    deleted: bool,
}

/// A provider call, out until its answer's time (whoever still listens).
#[derive(Debug, Clone)]
struct Call {
    job: usize,
    incarnation: u32,
    drive: u32,
    attempt: u32,
    provider: usize,
    reply: Reply,
    lease_end_ms: u64,
}

/// A caller (a submitter, for a background job).
struct Caller {
    job: usize,
    spec: CallerSpec,
    background: bool,
    tries_left: u32,
    pending: bool,
    seq: u32,
}

/// What a caller is answered.
#[derive(Debug, Clone)]
struct Res {
    response: StoredResponse,
    /// A final answer: every other final answer of the job must be the same bytes.
    is_final: bool,
    retry_after_ms: Option<u64>,
    /// Retrying cannot help (422, blocked).
    stop: bool,
}

impl Res {
    fn of(response: StoredResponse, is_final: bool, retry_after_ms: Option<u64>) -> Self {
        Self { response, is_final, retry_after_ms, stop: false }
    }

    fn problem(problem: &Problem) -> Self {
        Self {
            response: StoredResponse::problem(problem),
            is_final: false,
            retry_after_ms: problem.retry_after_ms,
            stop: !problem.kind.should_retry(),
        }
    }
}

/// A world event.
#[derive(Debug, Clone)]
enum Ev {
    Send {
        caller: usize,
    },
    WaitOver {
        caller: usize,
        seq: u32,
    },
    Placed {
        job: usize,
        drive: u32,
        choices: usize,
    },
    Woke {
        job: usize,
        drive: u32,
    },
    HedgeDue {
        job: usize,
        drive: u32,
        attempt: u32,
    },
    Answer {
        call: u64,
    },
    PumpTick {
        job: usize,
        incarnation: u32,
    },
    Deliver {
        message: usize,
    },
    Accepted {
        job: usize,
        incarnation: u32,
        send: u32,
    },
    Alarm {
        job: usize,
    },
    /// A delivery's quota answered (`spent`: the budget is used up).
    Quota {
        job: usize,
        message: usize,
        incarnation: u32,
        spent: bool,
    },
    /// A run's quota answered, before its claim.
    RunQuota {
        job: usize,
        run: u32,
        incarnation: u32,
        spent: bool,
    },
}

impl Ev {
    fn code(&self) -> u64 {
        match self {
            Self::Send { .. } => 1,
            Self::WaitOver { .. } => 2,
            Self::Placed { .. } => 3,
            Self::Woke { .. } => 4,
            Self::HedgeDue { .. } => 5,
            Self::Answer { .. } => 6,
            Self::PumpTick { .. } => 7,
            Self::Deliver { .. } => 8,
            Self::Accepted { .. } => 9,
            Self::Alarm { .. } => 10,
            Self::Quota { .. } => 11,
            Self::RunQuota { .. } => 12,
        }
    }
}

/// The simulated world of one seed.
pub struct World {
    seed: u64,
    sc: Scenario,
    rng: Rng,
    now: u64,
    steps: u64,
    heap: BinaryHeap<Reverse<(u64, u64, u64)>>,
    events: BTreeMap<u64, Ev>,
    seq: u64,
    objects: Vec<Object>,
    callers: Vec<Caller>,
    calls: BTreeMap<u64, Call>,
    next_call: u64,
    /// Queue messages: the job each is for, and when it was sent.
    messages: Vec<(usize, u64)>,
    /// How far the consumer has got, as the queue's cursor sees it: the
    /// newest send a delivery brought, and when a delivery last came or
    /// ended (a delivery is a batch of one; it is open while its drive runs).
    cursor: Progress,
    /// Per job: when the queue last lost one of its messages, until a
    /// delivery of the job comes (the bound a lost job must move within).
    lost_at: Vec<Option<u64>>,
    budget: RetryBudget,
    /// Draining: no crashes, breakers let every call through.
    drain: bool,
    /// The first final answer of each job (and who got it).
    first_final: Vec<Option<(StoredResponse, String)>>,
    /// Each job's stored result once finished: the attempt it names and its bytes.
    winner: Vec<Option<(Option<u32>, StoredResponse)>>,
    /// The attempts called, per job.
    called: Vec<Vec<u32>>,
    /// What each attempt's call answered, judged (its response as kept).
    answered_with: BTreeMap<(usize, u32), StoredResponse>,
    /// Jobs the queue or the Ledger sent to the dead letters.
    dead_letters: Vec<bool>,
    /// A background submission of the job was answered `202`: it must run.
    accepted: Vec<bool>,
    trace: Trace,
    violations: Vec<Violation>,
    stats: BTreeMap<&'static str, u64>,
}

impl World {
    fn new(seed: u64, traced: bool) -> Self {
        let mut rng = Rng::new(seed);
        let sc = Scenario::draw(&mut rng);
        let jobs = sc.jobs.len();
        let mut world = Self {
            seed,
            budget: RetryBudget::new(sc.budget),
            sc,
            rng,
            now: T0,
            steps: 0,
            heap: BinaryHeap::new(),
            events: BTreeMap::new(),
            seq: 0,
            objects: (0..jobs).map(|_| Object::default()).collect(),
            callers: Vec::new(),
            calls: BTreeMap::new(),
            next_call: 0,
            messages: Vec::new(),
            cursor: Progress::default(),
            lost_at: vec![None; jobs],
            accepted: vec![false; jobs],
            drain: false,
            first_final: vec![None; jobs],
            winner: vec![None; jobs],
            called: vec![Vec::new(); jobs],
            answered_with: BTreeMap::new(),
            dead_letters: vec![false; jobs],
            trace: Trace::new(traced),
            violations: Vec::new(),
            stats: BTreeMap::new(),
        };
        world.describe();
        for job in 0..jobs {
            let spec: JobSpec = world.sc.jobs[job].clone();
            for caller in spec.callers {
                let at = T0 + caller.at_ms;
                let background = spec.background || caller.background;
                let id = world.add_caller(job, caller, background);
                world.schedule(at, Ev::Send { caller: id });
            }
        }
        world
    }

    fn describe(&mut self) {
        let sc = &self.sc;
        let lines: Vec<String> = if self.trace.traced() {
            let mut lines = vec![format!(
                "seed {}: {} providers {:?}, policy {:?}, backoff {:?}, budget {}, call timeout {} ms, crashes {}‰",
                self.seed,
                sc.profiles.len(),
                sc.profiles.iter().map(|p| p.name).collect::<Vec<_>>(),
                sc.policy,
                sc.backoff,
                sc.budget_capacity,
                sc.call_timeout_ms,
                sc.crash_per_mille
            )];
            for (j, spec) in sc.jobs.iter().enumerate() {
                let route = sc.providers.route(Some(&spec.model)).expect("route");
                lines.push(format!(
                    "job {j}: {}{} route {:?} hedge {:?}; callers {:?}",
                    if spec.background { "background" } else { "foreground" },
                    if spec.stream { " stream" } else { "" },
                    route.steps.iter().map(|s| s.provider).collect::<Vec<_>>(),
                    route.hedge_after_ms,
                    spec.callers
                ));
            }
            lines
        } else {
            Vec::new()
        };
        for line in lines {
            self.trace.line(|| line);
        }
    }

    fn add_caller(&mut self, job: usize, spec: CallerSpec, background: bool) -> usize {
        let tries_left = spec.tries;
        self.callers.push(Caller { job, spec, background, tries_left, pending: false, seq: 0 });
        self.callers.len() - 1
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

    fn schedule(&mut self, at: u64, event: Ev) {
        let tie = self.rng.next();
        self.seq += 1;
        self.heap.push(Reverse((at.max(self.now), tie, self.seq)));
        self.events.insert(self.seq, event);
    }

    /// The next event before `before`, with the clock moved to it
    /// (cancelled ones, a replaced alarm, are skipped).
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

    fn run(&mut self) {
        // The busy part: callers, deliveries and crashes.
        while self.steps < ACTIVE_STEPS
            && let Some(event) = self.pop(T0 + ACTIVE_MS)
        {
            if self.sc.crash_per_mille > 0 && self.rng.chance(self.sc.crash_per_mille) {
                let job = self.rng.below(self.objects.len() as u64) as usize;
                self.crash(job, "between steps");
            }
            self.step(event);
            self.check_all();
            if !self.violations.is_empty() {
                return;
            }
        }
        // The drain: no more crashes, every call let through; jobs nobody
        // asks about again are asked again once every lease is over, by a
        // fresh object (as after a restart).
        self.drain = true;
        self.trace.line(|| "-- drain".into());
        let rounds = 2 * self.sc.policy.max_attempts() + 4;
        for _ in 0..rounds {
            while let Some(event) = self.pop(DRAIN_CUTOFF) {
                self.step(event);
                self.check_all();
                if !self.violations.is_empty() {
                    return;
                }
                if self.steps > MAX_STEPS {
                    return self.violate("quiescence", format!("the world did not settle in {MAX_STEPS} steps"));
                }
            }
            let unsettled: Vec<usize> = (0..self.objects.len()).filter(|j| !self.settled(*j)).collect();
            if unsettled.is_empty() {
                break;
            }
            for job in unsettled {
                self.redrive(job);
            }
            if !self.violations.is_empty() {
                return;
            }
        }
        self.check_settled();
        if !self.violations.is_empty() {
            return;
        }
        // Retention: every object deletes what it kept.
        self.trace.line(|| "-- retention".into());
        while let Some(event) = self.pop(u64::MAX) {
            self.step(event);
            self.check_all();
            if !self.violations.is_empty() || self.steps > MAX_STEPS {
                return;
            }
        }
        for j in 0..self.objects.len() {
            let st = &self.objects[j].storage;
            if st.job.is_some() || !st.responses.is_empty() || !st.streams.is_empty() {
                self.violate("retention-cleans", format!("job {j}'s object kept its records past retention"));
            }
        }
    }

    fn step(&mut self, event: Ev) {
        self.steps += 1;
        self.trace.mix(self.now);
        self.trace.mix(event.code());
        let (step, at) = (self.steps, self.now - T0);
        self.trace.line(|| format!("{step:>5} +{at:>8}ms {event:?}"));
        match event {
            Ev::Send { caller } => self.submit(caller),
            Ev::WaitOver { caller, seq } => self.wait_over(caller, seq),
            Ev::Placed { job, drive, choices } => {
                let placed = self.breakers(choices);
                self.feed(job, drive, Some(Event::Placed(placed)));
            }
            Ev::Woke { job, drive } => self.feed(job, drive, Some(Event::Woke)),
            Ev::HedgeDue { job, drive, attempt } => self.feed(job, drive, Some(Event::HedgeDue { attempt })),
            Ev::Answer { call } => self.answered(call),
            Ev::PumpTick { job, incarnation } => self.pump(job, incarnation),
            Ev::Deliver { message } => self.deliver(message),
            Ev::Accepted { job, incarnation, send } => {
                if self.objects[job].incarnation == incarnation {
                    let memory = &mut self.objects[job].memory;
                    memory.sends_pending = memory.sends_pending.saturating_sub(1);
                    self.objects[job].storage.outbox.confirm(send, self.now);
                    self.arm(job);
                }
            }
            Ev::Alarm { job } => self.alarm(job),
            Ev::Quota { job, message, incarnation, spent } => self.quota_answered(job, message, incarnation, spent),
            Ev::RunQuota { job, run, incarnation, spent } => self.run_quota_answered(job, run, incarnation, spent),
        }
    }

    // ---- the shell: requests -------------------------------------------

    fn begin_request(&mut self, caller: usize) -> bool {
        let c = &mut self.callers[caller];
        if c.pending || c.tries_left == 0 {
            return false;
        }
        c.pending = true;
        c.tries_left -= 1;
        c.seq += 1;
        true
    }

    fn caller_fingerprint(&self, caller: usize) -> &'static Fingerprint {
        let c = &self.callers[caller];
        fingerprint(c.job, c.spec.other_payload)
    }

    /// The job as of now: time's transitions applied and written first
    /// (what the edge's `settle_by_time` does), a streaming job whose pump is
    /// not here settled as interrupted.
    fn settle_by_time(&mut self, j: usize, pump_here: bool) -> Option<Job> {
        let mut job = self.objects[j].storage.job.clone()?;
        let read = job.version();
        let mut changed = job.expire(self.now);
        changed |= !pump_here && job.settle_orphaned_stream(self.now);
        if changed {
            self.count("settled by time");
            if job.state() == JobState::Interrupted
                && !pump_here
                && let Some(attempt) = job.replayed_attempt().map(|a| a.number)
                && let Some(stream) = self.objects[j].storage.streams.get_mut(&attempt)
            {
                stream.events.push(b"event: error\ndata: {\"error\":\"the gateway lost the stream\"}\n\n".to_vec());
            }
            if let Err(current) = self.write(j, job.clone(), Some(read), "settle") {
                self.violate("cas", format!("the shell's own write lost to {:?}", current.map(|c| c.version())));
            }
        }
        Some(job)
    }

    /// What the shell reads before the core decides a request: the job as
    /// stored (settled by time), the one a drive here is creating, who drives.
    fn read_for_decision(&mut self, j: usize) -> Read {
        let driving = self.objects[j].memory.driving;
        let stored = self.settle_by_time(j, driving.is_some());
        let memory = &self.objects[j].memory;
        let creating = match driving {
            Some(LOCKED) => memory.creating.clone(),
            _ => driving.and_then(|id| memory.drives.get(&id)).map(|slot| slot.drive.job().clone()),
        };
        let streaming = self.objects[j].memory.pump.is_some();
        Read { stored, creating, driving: driving.is_some(), streaming }
    }

    fn check_key_reuse(&mut self, job: Option<&Job>, fingerprint: &Fingerprint, op: &submit_machine::Op) {
        let Some(job) = job else { return };
        let reused = job.fingerprint() != fingerprint;
        let refused =
            matches!(op, submit_machine::Op::Refuse { problem, .. } if problem.kind == ProblemType::KeyReused);
        if reused != refused {
            self.violate("key-reuse", format!("another payload under the key: {reused}, decided {op:?}"));
        }
    }

    /// A request of `caller` (a background one: `Prefer: respond-async`),
    /// performed as the core's [`SubmitMachine`] gives it (the Ledger's
    /// `submit` performs the same machine); a run it admits goes on as a
    /// [`RunMachine`].
    fn submit(&mut self, caller: usize) {
        use submit_machine::{Context, Input, Op};
        if !self.begin_request(caller) {
            return;
        }
        let (j, background) = (self.callers[caller].job, self.callers[caller].background);
        let (fingerprint, wait_ms) = (self.caller_fingerprint(caller), self.callers[caller].spec.wait_ms);
        let (mut machine, mut input) = (SubmitMachine::new(), Input::Start);
        let (mut seen, mut stored) = (None, false);
        loop {
            let request = Request { arrival: Arrival { key: KEY, fingerprint, wait_ms }, keyless: None, background };
            let op = machine.on(input, Context { request, now_ms: self.now, policy: self.sc.policy });
            self.trace.line(|| format!("        submit caller {caller}: {}", short_submit_op(&op)));
            if op.answers() {
                self.check_key_reuse(seen.as_ref(), fingerprint, &op);
            }
            // A background request is accepted or answered at once; a foreground one never accepted.
            let wrong_mode = match op {
                Op::FollowStream | Op::Wait | Op::Run(_) => background,
                Op::Accepted(_) => !background,
                _ => false,
            };
            if wrong_mode {
                return self
                    .violate("plan-of-mode", format!("job {j}: a request (background {background}) was {op:?}"));
            }
            input = match op {
                Op::Read => {
                    let read = self.read_for_decision(j);
                    (seen, stored) = (read.stored.clone().or_else(|| read.creating.clone()), read.stored.is_some());
                    Input::Read(read)
                }
                // Every simulated route serves every model.
                Op::AskRoute => Input::Route(None),
                // Only a keyless request renews a job; these callers are keyed.
                Op::ReplaceEnded(_) => {
                    return self.violate("renew-of-keyed", format!("job {j}: a keyed request renewed it"));
                }
                // Kept (the first one, under a drive, not a stream's pump) to
                // adopt if the drive does not finish the job.
                Op::KeepForAdoption => {
                    let memory = &mut self.objects[j].memory;
                    if memory.driving.is_some_and(|id| id != PUMP) && memory.adopt_later.is_none() {
                        memory.adopt_later = Some(fingerprint);
                        self.count("adopt later");
                    }
                    Input::Done
                }
                Op::ClaimSubject => Input::Checked(None),
                Op::Adopt { .. } => {
                    self.adopt(j, fingerprint);
                    let Some(job) = self.objects[j].storage.job.clone() else { return };
                    Input::Adopted(job)
                }
                Op::Refuse { problem, .. } => return self.answer(caller, Res::problem(&problem)),
                Op::Replay { job, .. } => {
                    if !stored || !job.state().is_terminal() {
                        let state = job.state();
                        return self.violate("replay-of-finished", format!("job {j} replayed unfinished: {state:?}"));
                    }
                    self.count("replays");
                    let response = self.finished_result(j);
                    return self.answer(caller, Res::of(response, true, None));
                }
                Op::FollowStream => {
                    if let Some(pump) = self.objects[j].memory.pump.as_mut() {
                        pump.subscribers.push(caller);
                    }
                    return self.count("waiters");
                }
                Op::Wait => {
                    let seq = self.callers[caller].seq;
                    self.objects[j].memory.waiters.push(caller);
                    self.schedule(self.now + wait_ms, Ev::WaitOver { caller, seq });
                    return self.count("waiters");
                }
                Op::Accepted(_) => {
                    let poll = self.rng.range(1_000, 15_000);
                    let body = b"{\"accepted\":true}".to_vec();
                    let response = StoredResponse { status: 202, content_type: "application/json".into(), body };
                    self.accepted[j] = true;
                    return self.answer(caller, Res::of(response, false, Some(poll)));
                }
                Op::Run(Run { job, stored, created }) => {
                    let machine = RunMachine::for_caller(stored, created, false);
                    let running = Running::new(job, stored, false);
                    return self.perform_run(j, Owner::Caller(caller), machine, run_machine::Input::Start, running);
                }
            };
        }
    }

    fn wait_over(&mut self, caller: usize, seq: u32) {
        let c = &self.callers[caller];
        if !c.pending || c.seq != seq {
            return;
        }
        let memory = &mut self.objects[c.job].memory;
        let Some(at) = memory.waiters.iter().position(|w| *w == caller) else { return };
        memory.waiters.remove(at);
        self.answer(caller, Res::problem(&submit::wait_over(KEY).0));
    }

    /// Makes the job a background job (created if there is none) and sends
    /// its message, as the core's [`submit::adopt`] says.
    fn adopt(&mut self, j: usize, fingerprint: &Fingerprint) {
        let stored = self.objects[j].storage.job.clone();
        let Adoption { job, steps } = submit::adopt(stored, None, fingerprint, self.now, self.sc.policy);
        for step in steps {
            match step {
                AdoptStep::Insert(new) => {
                    if self.write(j, new, None, "adopt").is_err() {
                        return self.violate("cas", "inserting a new job failed".into());
                    }
                }
                AdoptStep::SaveMeta => {}
                AdoptStep::SaveRequest { .. } => self.objects[j].storage.background_request = true,
                AdoptStep::Update { read } => {
                    if self.write(j, job.clone(), Some(read), "adopt").is_err() {
                        return self.violate("cas", "marking the job background failed".into());
                    }
                }
                AdoptStep::Enqueue => self.enqueue(j),
                AdoptStep::DeadLetter => self.dead_letter_once(j),
            }
        }
        self.arm(j);
    }

    /// The stored result of a finished job (what a replay sends).
    fn finished_result(&self, j: usize) -> StoredResponse {
        let st = &self.objects[j].storage;
        let Some(job) = st.job.as_ref() else {
            return StoredResponse { status: 599, content_type: "text/plain".into(), body: b"no job".to_vec() };
        };
        match job.replayed_attempt() {
            Some(attempt) if attempt.streamed => match st.streams.get(&attempt.number) {
                Some(stream) => StoredResponse {
                    status: 200,
                    content_type: stream.content_type.clone(),
                    body: stream.events.concat(),
                },
                None => StoredResponse { status: 598, content_type: "text/plain".into(), body: b"no stream".to_vec() },
            },
            Some(attempt) => st
                .responses
                .get(&attempt.number)
                .cloned()
                .unwrap_or_else(|| StoredResponse::problem(&answer::dead_without_response(job))),
            None => StoredResponse::problem(&answer::dead_without_response(job)),
        }
    }

    fn answer(&mut self, caller: usize, res: Res) {
        let c = &mut self.callers[caller];
        if !c.pending {
            return;
        }
        c.pending = false;
        let (j, tries_left) = (c.job, c.tries_left);
        self.trace.mix(u64::from(res.response.status));
        self.trace.mix(res.response.body.len() as u64);
        self.trace.line(|| {
            format!(
                "        => caller {caller}: {} {}{} ({} B)",
                res.response.status,
                String::from_utf8_lossy(&res.response.body[..res.response.body.len().min(60)]),
                if res.is_final { " [final]" } else { "" },
                res.response.body.len()
            )
        });
        if res.is_final {
            self.count("final answers");
            self.check_final(j, &res.response, format!("caller {caller} at step {}", self.steps));
            return;
        }
        if tries_left > 0 && !res.stop {
            let delay = res.retry_after_ms.unwrap_or(1_000).clamp(50, 120_000) + self.rng.range(0, 500);
            self.schedule(self.now + delay, Ev::Send { caller });
        }
    }

    /// Every final answer of a job is its first, byte for byte.
    fn check_final(&mut self, j: usize, response: &StoredResponse, who: String) {
        match &self.first_final[j] {
            None => self.first_final[j] = Some((response.clone(), who)),
            Some((first, by)) if first != response => {
                let message = format!(
                    "job {j}: {who} got {} {:?}, but {by} got {} {:?}",
                    response.status,
                    String::from_utf8_lossy(&response.body),
                    first.status,
                    String::from_utf8_lossy(&first.body)
                );
                self.violate("answers-agree", message);
            }
            Some(_) => {}
        }
    }

    // ---- the shell: drives -------------------------------------------------

    fn setup(&self, j: usize, background: bool) -> DriveSetup {
        let spec = &self.sc.jobs[j];
        DriveSetup {
            background,
            stream: !background && spec.stream,
            model: Some(spec.model.clone()),
            api: Api::OpenAi,
            backoff: self.sc.backoff,
        }
    }

    fn start_drive(&mut self, j: usize, owner: Owner, machine: RunMachine, running: Running) {
        let (background, stored) = (running.background, running.stored);
        let drive = Drive::new(self.setup(j, background), running.job.clone(), stored, &self.sc.providers);
        let object = &mut self.objects[j];
        let id = object.next_drive;
        object.next_drive += 1;
        let run = Some((machine, running));
        object.memory.drives.insert(id, Slot { drive, owner, finished: false, run });
        object.memory.creating = None;
        object.memory.driving = Some(id);
        self.count("drives");
        self.feed(j, id, None);
    }

    /// Feeds one event to a drive (`None`: starts it) and performs its commands.
    fn feed(&mut self, j: usize, id: u32, event: Option<Event>) {
        let Some(mut slot) = self.objects[j].memory.drives.remove(&id) else {
            self.trace.line(|| format!("        (no drive j{j}#{id} here: dropped)"));
            return;
        };
        self.trace
            .line(|| format!("        drive j{j}#{id} <- {}", event.as_ref().map_or("start".into(), short_event)));
        let was_done = slot.finished;
        let before = self.budget.tokens();
        let route = self.sc.providers.route(Some(&self.sc.jobs[j].model)).expect("every job's model has a route");
        let routing = Routing { providers: &self.sc.providers, route };
        let commands = {
            let mut inputs = Inputs { now_ms: self.now, random: &mut self.rng, budget: &mut self.budget };
            match &event {
                None => slot.drive.start(routing, &mut inputs),
                Some(event) => slot.drive.on(routing, event.clone(), &mut inputs),
            }
        };
        let after = self.budget.tokens();
        self.check_budget(event.as_ref(), &commands, before, after);
        if was_done && commands.iter().any(|c| !matches!(c, Command::Persist { .. } | Command::Create { .. })) {
            self.violate("quiet-after-finish", format!("drive #{id} of job {j} answered, then: {commands:?}"));
        }
        self.objects[j].memory.drives.insert(id, slot);
        self.perform(j, id, commands);
        let memory = &mut self.objects[j].memory;
        if memory.drives.get(&id).is_some_and(|slot| slot.drive.is_idle()) {
            memory.drives.remove(&id);
        }
    }

    /// Performs a drive's commands in order, as the Durable Object must.
    fn perform(&mut self, j: usize, id: u32, commands: Vec<Command>) {
        let incarnation = self.objects[j].incarnation;
        let count = commands.len();
        let mut persisted = None;
        for (i, command) in commands.into_iter().enumerate() {
            if !self.drain && self.rng.chance(self.sc.crash_per_mille / 4) {
                self.crash(j, "between two commands");
                return;
            }
            self.trace.mix(command_code(&command));
            self.trace.line(|| format!("          -> {}", short_command(&command)));
            match command {
                Command::Place { order } => {
                    let at = self.now + self.rng.range(0, 3);
                    self.schedule(at, Ev::Placed { job: j, drive: id, choices: order.len() });
                }
                Command::Sleep { ms } => self.schedule(self.now + ms, Ev::Woke { job: j, drive: id }),
                Command::Persist { job, expected } => {
                    if i + 1 != count {
                        self.violate("persist-ends-batch", "commands followed a Persist in one batch".into());
                    }
                    persisted = Some(self.write(j, job, Some(expected), "drive"));
                }
                Command::Create { job } => {
                    if i + 1 != count {
                        self.violate("persist-ends-batch", "commands followed a Create in one batch".into());
                    }
                    persisted = Some(self.write(j, job, None, "drive"));
                }
                Command::SaveResponse { attempt, response, replace } => {
                    self.save_response(j, attempt, response, replace)
                }
                Command::OpenStream { attempt, content_type } => {
                    self.count("streams opened");
                    let streams = &mut self.objects[j].storage.streams;
                    if streams.insert(attempt, StreamRecord { content_type, events: Vec::new() }).is_some() {
                        self.violate("save-once", format!("job {j}'s attempt {attempt} opened its stream twice"));
                    }
                }
                Command::Call { ticket, provider, .. } => self.call(j, id, ticket, provider),
                Command::HedgeAfter { attempt, ms } => {
                    self.schedule(self.now + ms, Ev::HedgeDue { job: j, drive: id, attempt })
                }
                Command::Finish(ending) => self.finish(j, id, ending),
            }
            if self.objects[j].incarnation != incarnation {
                return;
            }
        }
        if let Some(result) = persisted {
            // Written: a crash now loses only what the drive would do next.
            if !self.drain && self.rng.chance(self.sc.crash_per_mille / 4) {
                return self.crash(j, "after a write");
            }
            self.feed(j, id, Some(Event::Persisted(result)));
        }
    }

    /// Storage's compare-and-swap: `expected` must be the stored version
    /// (`None`: nothing may be stored yet).
    // The drive's own `Event::Persisted` carries this result as it is.
    #[allow(clippy::result_large_err)]
    fn write(&mut self, j: usize, job: Job, expected: Option<u64>, who: &str) -> Result<(), Option<Job>> {
        let current = self.objects[j].storage.job.as_ref();
        let result = match (current, expected) {
            (None, None) => Ok(()),
            (Some(current), None) => Err(Some(current.clone())),
            (None, Some(_)) => Err(None),
            (Some(current), Some(expected)) if current.version() == expected => Ok(()),
            (Some(current), Some(_)) => Err(Some(current.clone())),
        };
        let stored_version = current.map(Job::version);
        self.trace.mix(job.version());
        match &result {
            Ok(()) => {
                self.trace.line(|| {
                    format!(
                        "          <- written by {who}: v{} {} ({} attempts)",
                        job.version(),
                        job.state().as_str(),
                        job.attempts().len()
                    )
                });
                if expected != stored_version {
                    self.violate("cas", format!("a write expecting {expected:?} replaced v{stored_version:?}"));
                }
                if stored_version.is_some_and(|v| job.version() <= v) {
                    self.violate("cas", format!("v{} written over v{stored_version:?}", job.version()));
                }
                self.objects[j].storage.job = Some(job);
            }
            Err(current) => {
                self.count("writes lost");
                let now = current.as_ref().map(Job::version);
                self.trace.line(|| format!("          <- {who}'s write lost (expected {expected:?}, stored {now:?})"));
            }
        }
        result
    }

    fn save_response(&mut self, j: usize, attempt: u32, response: StoredResponse, replace: bool) {
        let st = &mut self.objects[j].storage;
        let finished = st
            .job
            .as_ref()
            .filter(|job| job.state().is_terminal())
            .and_then(|job| job.replayed_attempt())
            .is_some_and(|a| a.number == attempt);
        let overwrites = !replace && st.responses.contains_key(&attempt);
        st.responses.insert(attempt, response);
        if finished {
            self.violate("result-stable", format!("job {j}'s result (attempt {attempt}) was written again"));
        }
        if overwrites {
            self.violate("save-once", format!("job {j}'s attempt {attempt} response overwritten without replace"));
        }
    }

    fn call(&mut self, j: usize, id: u32, ticket: AttemptTicket, provider: usize) {
        let policy = self.sc.policy;
        let incarnation = self.objects[j].incarnation;
        let stored = self.objects[j].storage.job.clone();
        // The claim is durable before the call.
        let claim = stored.as_ref().and_then(|job| job.attempts().iter().find(|a| a.number == ticket.attempt));
        let claimed = stored.as_ref().is_some_and(|job| job.state() == JobState::InFlight)
            && claim.is_some_and(|a| a.outcome == AttemptOutcome::Running && a.claimed_version == ticket.version);
        if !claimed {
            self.violate(
                "claim-before-call",
                format!("job {j}'s attempt {ticket:?} called, stored: {:?}", stored.as_ref().map(|s| s.state())),
            );
        }
        let started_ms = claim.map_or(self.now, |a| a.started_ms);
        if stored.as_ref().is_some_and(|job| job.attempts().iter().any(|a| a.streamed)) {
            self.violate("stream-never-recalled", format!("job {j} called again after its answer streamed"));
        }
        if self.called[j].contains(&ticket.attempt) {
            self.violate("one-call-per-attempt", format!("job {j}'s attempt {} called twice", ticket.attempt));
        }
        self.called[j].push(ticket.attempt);
        let cap = stored.as_ref().map_or(policy.max_attempts(), Job::max_attempts);
        if self.called[j].len() as u32 > cap {
            self.violate("attempt-cap", format!("job {j}: {} calls, cap {cap}", self.called[j].len()));
        }
        // No call while another attempt's lease is live, but a hedge's second racer.
        let route = self.sc.providers.route(Some(&self.sc.jobs[j].model)).expect("route");
        let hedged = route.hedge_after_ms.is_some() && !self.setup(j, false).stream;
        let live: Vec<Call> = self
            .calls
            .values()
            .filter(|c| c.job == j && c.attempt != ticket.attempt && c.lease_end_ms > self.now)
            .cloned()
            .collect();
        let hedge_of_own = live.len() == 1 && hedged && live[0].drive == id && live[0].incarnation == incarnation;
        if !live.is_empty() && !hedge_of_own {
            let message = format!(
                "job {j}'s attempt {} called while attempt(s) {:?} hold a live lease (hedged route: {hedged})",
                ticket.attempt,
                live.iter().map(|c| c.attempt).collect::<Vec<_>>()
            );
            self.violate("no-call-in-live-lease", message);
        }
        if !live.is_empty() {
            self.count("hedges");
        }
        let stream_asked = self.setup(j, false).stream;
        let (reply, latency) = self.draw_reply(provider, stream_asked);
        self.trace.mix(reply as u64);
        self.trace.mix(latency);
        self.trace.line(|| format!("             provider p{provider} will answer {reply:?} in {latency} ms"));
        let call = self.next_call;
        self.next_call += 1;
        let lease_end_ms = started_ms + policy.attempt_lease_ms();
        let record = Call { job: j, incarnation, drive: id, attempt: ticket.attempt, provider, reply, lease_end_ms };
        self.calls.insert(call, record);
        self.count("calls");
        self.schedule(self.now + latency, Ev::Answer { call });
    }

    fn draw_reply(&mut self, provider: usize, stream_asked: bool) -> (Reply, u64) {
        let profile = self.sc.profiles[provider];
        let mut reply = REPLIES[self.rng.weighted(&profile.weights)];
        if reply == Reply::Streams && !stream_asked && !self.rng.chance(300) {
            reply = Reply::Good;
        }
        if stream_asked && matches!(reply, Reply::Good | Reply::SlowGood) {
            reply = Reply::Streams;
        }
        let timeout = self.sc.call_timeout_ms;
        let latency = match reply {
            Reply::Good => self.rng.range(20, 600),
            Reply::SlowGood => self.rng.range(800, 2 * timeout),
            Reply::Connect => self.rng.range(1, 50),
            Reply::TimeoutBeforeSend => timeout.min(5_000),
            Reply::TimeoutAfterSend => timeout,
            Reply::Dropped => self.rng.range(50, timeout),
            Reply::Streams => self.rng.range(30, 400),
            _ => self.rng.range(10, 400),
        };
        // Slower than the call's timeout: it timed out after the request left.
        if latency > timeout {
            return (Reply::TimeoutAfterSend, timeout);
        }
        (reply, latency)
    }

    fn answered(&mut self, id: u64) {
        let Some(call) = self.calls.remove(&id) else { return };
        if self.objects[call.job].incarnation != call.incarnation {
            self.trace.line(|| "        (its runtime is gone: nobody hears it)".into());
            self.count("answers lost to a crash");
            return;
        }
        let answer = self.judge(&call);
        if let Answer::Judged(judged) = &answer {
            self.answered_with.insert((call.job, call.attempt), judged.response.clone());
            match judged.observed.classification.class {
                ErrorClass::Contract => self.count("contracts broken"),
                ErrorClass::TimeoutAfterSend | ErrorClass::DroppedAfterSend => self.count("unknown outcomes"),
                _ => {}
            }
        }
        self.feed(call.job, call.drive, Some(Event::Answered { attempt: call.attempt, answer }));
    }

    /// What the call's reply is, judged by the core.
    fn judge(&mut self, call: &Call) -> Answer {
        let (j, attempt, provider) = (call.job, call.attempt, call.provider);
        let route = self.sc.providers.route(Some(&self.sc.jobs[j].model)).expect("route").clone();
        // Under a contract, an answer in JSON with the key it asks for, or
        // (now and then) prose that breaks it.
        let content = if route.contract.is_some() && !self.rng.chance(300) {
            format!(r#"{{\"answer\":\"{j}.{attempt} by p{provider}\"}}"#)
        } else {
            format!("answer {j}.{attempt} by p{provider}")
        };
        let good = |finish: &str| {
            format!(
                r#"{{"id":"s-j{j}-a{attempt}-p{provider}","choices":[{{"message":{{"role":"assistant","content":"{content}"}},"finish_reason":"{finish}"}}],"usage":{{"prompt_tokens":9,"completion_tokens":{attempt},"total_tokens":{}}}}}"#,
                9 + attempt
            )
        };
        let error =
            |what: &str| format!(r#"{{"error":{{"message":"{what}","attempt":{attempt},"provider":{provider}}}}}"#);
        let http = |world: &mut Self, status: u16, headers: Vec<(&'static str, String)>, body: String| -> Answer {
            let lookup =
                |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone());
            let (attempted, _) = attempts::judge_reply(
                status,
                &lookup,
                "application/json".into(),
                body.into_bytes(),
                route.contract.as_ref(),
                world.now,
                60_000,
            );
            Answer::Judged(attempted)
        };
        let transport = |failure: TransportFailure, detail: &str| -> Answer {
            Answer::Judged(attempts::judge_transport(failure, detail))
        };
        match call.reply {
            Reply::Good | Reply::SlowGood => http(self, 200, vec![], good("stop")),
            Reply::ContentFilter => http(self, 200, vec![], good("content_filter")),
            Reply::Busy => http(self, 503, vec![], error("overloaded")),
            Reply::BusyRetryAfter => {
                let seconds = self.rng.range(1, 5).to_string();
                http(self, 503, vec![("Retry-After", seconds)], error("overloaded"))
            }
            Reply::RateLimited => {
                let ms = self.rng.range(100, 5_000).to_string();
                http(self, 429, vec![("retry-after-ms", ms)], error("rate limited"))
            }
            Reply::ServerError => http(self, 500, vec![], error("internal")),
            Reply::BadRequest => http(self, 400, vec![], error("bad request")),
            Reply::Unauthorized => http(self, 401, vec![], error("invalid key")),
            Reply::Connect => transport(TransportFailure::Connect, "connection refused"),
            Reply::TimeoutBeforeSend => transport(TransportFailure::TimeoutBeforeSend, "connect timeout"),
            Reply::TimeoutAfterSend => transport(TransportFailure::TimeoutAfterSend, "no answer in time"),
            Reply::Dropped => transport(TransportFailure::DroppedAfterSend, "connection reset"),
            Reply::Streams => Answer::Streams { content_type: "text/event-stream".into() },
        }
    }

    /// The breakers' answer to a `Place`: mostly the first candidate.
    fn breakers(&mut self, choices: usize) -> Placed {
        if self.drain {
            return Placed::Chosen { index: 0, probe: false };
        }
        match self.rng.weighted(&[820, 30, 70, 60, 20]) {
            0 => Placed::Chosen { index: 0, probe: false },
            1 => Placed::Chosen { index: 0, probe: true },
            2 => Placed::Chosen { index: self.rng.below(choices as u64) as usize, probe: false },
            3 => {
                self.count("breakers all open");
                Placed::Skipped { retry_after_ms: Some(self.rng.range(500, 30_000)) }
            }
            _ => {
                self.count("breakers all open");
                Placed::Skipped { retry_after_ms: None }
            }
        }
    }

    /// A drive's end: its run goes on from there.
    fn finish(&mut self, j: usize, id: u32, ending: Ending) {
        let Some(slot) = self.objects[j].memory.drives.get_mut(&id) else { return };
        slot.finished = true;
        let owner = slot.owner;
        let Some((machine, mut running)) = slot.run.take() else {
            return self.violate("run", format!("job {j}'s drive #{id} ended twice, or outside a run"));
        };
        self.trace.mix(ending_code(&ending));
        running.holds_lock = self.objects[j].memory.driving == Some(id);
        let driven = match ending {
            Ending::Stream { ticket } => {
                running.ticket = Some(ticket);
                run_machine::Driven::Stream
            }
            ending => {
                let retry_after_ms = match &ending {
                    Ending::Problem { problem, .. } => problem.retry_after_ms,
                    Ending::Answer { retry_after_ms, .. } => *retry_after_ms,
                    _ => None,
                };
                let state = self.objects[j].storage.job.as_ref().map_or(JobState::Pending, Job::state);
                running.res = Some(self.result_of(j, ending));
                run_machine::Driven::Result { state, retry_after_ms }
            }
        };
        self.perform_run(j, owner, machine, run_machine::Input::Driven(driven), running);
    }

    /// Performs a run's ops as the core's [`RunMachine`] gives them (the
    /// Ledger's `run` performs the same machine), until its drive starts
    /// (its end comes back to [`Self::finish`]) or the run is over.
    fn perform_run(
        &mut self,
        j: usize,
        owner: Owner,
        mut machine: RunMachine,
        input: run_machine::Input,
        running: Running,
    ) {
        use run_machine::{Input, Op};
        let (mut input, mut running) = (input, running);
        loop {
            let op = machine.on(input);
            self.trace.line(|| format!("        run: {}", short_run_op(&op)));
            input = match op {
                Op::ArmRetention => {
                    self.set_alarm(j, running.job.expires_ms());
                    Input::Done
                }
                Op::Lock => {
                    if self.objects[j].memory.driving.is_some() {
                        return self
                            .violate("one-driver", format!("a run of job {j} locked a job another drive holds"));
                    }
                    let memory = &mut self.objects[j].memory;
                    memory.driving = Some(LOCKED);
                    memory.creating = (!running.stored).then(|| running.job.clone());
                    Input::Done
                }
                // The meter answers later: other requests come in meanwhile.
                Op::Check(Check::Quota) => {
                    let spent = self.rng.chance(10);
                    let (at, incarnation) = (self.now + self.rng.range(1, 40), self.objects[j].incarnation);
                    let object = &mut self.objects[j];
                    let run = object.next_drive;
                    object.next_drive += 1;
                    object.memory.asking.insert(run, (owner, machine, running));
                    return self.schedule(at, Ev::RunQuota { job: j, run, incarnation, spent });
                }
                Op::Check(_) => Input::Checked(None),
                // As the edge's lock when it finishes with a refusal: the
                // waiters are handed it.
                Op::Refuse(refused) => {
                    let memory = &mut self.objects[j].memory;
                    if memory.driving == Some(LOCKED) {
                        memory.driving = None;
                    }
                    running.later = memory.adopt_later.take();
                    memory.creating = None;
                    let waiters = std::mem::take(&mut memory.waiters);
                    if running.later.is_some() {
                        self.count("background submission kept while a refused run asked");
                    }
                    let res = Res::problem(&refused.problem);
                    for waiter in waiters {
                        self.answer(waiter, Res { retry_after_ms: refused.waiters_retry_after_ms, ..res.clone() });
                    }
                    running.asked_ms = refused.problem.retry_after_ms;
                    if let Owner::Caller(caller) = owner {
                        self.answer(caller, res);
                    }
                    Input::Finished { kept_later: running.later.is_some() }
                }
                Op::Drive => return self.start_drive(j, owner, machine, running),
                Op::HandToPump => {
                    let Some(ticket) = running.ticket.take() else {
                        return self.violate("run", format!("job {j}: a stream handed on without its attempt"));
                    };
                    self.hand_to_pump(j, owner, ticket, running.holds_lock);
                    Input::Done
                }
                // A job type's effects are the effects' simulation's.
                Op::RunEffects => Input::Done,
                Op::Finish => {
                    let memory = &mut self.objects[j].memory;
                    let waiters = match running.holds_lock {
                        true => {
                            memory.driving = None;
                            running.later = memory.adopt_later.take();
                            std::mem::take(&mut memory.waiters)
                        }
                        false => Vec::new(),
                    };
                    let res = running.res.clone().unwrap_or_else(|| Res::problem(&admission::in_progress(KEY, 1_000)));
                    for waiter in waiters {
                        self.answer(waiter, res.clone());
                    }
                    Input::Finished { kept_later: running.later.is_some() }
                }
                Op::Adopt => {
                    if let Some(fingerprint) = running.later.take() {
                        self.count("adopted after a drive");
                        self.adopt(j, fingerprint);
                    }
                    Input::Done
                }
                Op::Answer { retry_after_ms } => {
                    running.asked_ms = retry_after_ms;
                    if let (Owner::Caller(caller), Some(res)) = (owner, running.res.clone()) {
                        self.answer(caller, res);
                    }
                    Input::Done
                }
                Op::LoadJob => Input::Job(self.objects[j].storage.job.clone()),
                Op::DeadLetter(_) => {
                    self.dead_letter_once(j);
                    Input::Done
                }
                Op::Arm(_) => {
                    self.arm(j);
                    Input::Done
                }
                Op::Over => {
                    if let Owner::Delivery(message) = owner {
                        self.delivery_done(j, message, running.asked_ms);
                    }
                    return;
                }
            };
        }
    }

    /// A run's quota answered: the run goes on (unless the object crashed
    /// meanwhile, which dropped its caller or left its delivery to the queue).
    fn run_quota_answered(&mut self, j: usize, run: u32, incarnation: u32, spent: bool) {
        if self.objects[j].incarnation != incarnation {
            return;
        }
        let Some((owner, machine, running)) = self.objects[j].memory.asking.remove(&run) else {
            return self.violate("run", format!("job {j}'s quota answered a run that is not here"));
        };
        let problem = spent.then(|| {
            self.count("quota spent at a run");
            Problem::new(ProblemType::QuotaExceeded, "spent").with_retry_after_ms(self.rng.range(1_000, 120_000))
        });
        self.perform_run(j, owner, machine, run_machine::Input::Checked(problem), running);
    }

    /// A streamed answer's pump takes the stream and the lock: the caller
    /// and the waiters follow it.
    fn hand_to_pump(&mut self, j: usize, owner: Owner, ticket: AttemptTicket, holds_lock: bool) {
        let chunks_left = self.rng.range(1, 4) as u32;
        let breaks = self.rng.chance(150);
        let memory = &mut self.objects[j].memory;
        let mut subscribers: Vec<usize> = match owner {
            Owner::Caller(caller) => vec![caller],
            Owner::Delivery(_) => Vec::new(),
        };
        if holds_lock {
            subscribers.append(&mut memory.waiters);
        }
        memory.pump = Some(Pump { ticket, subscribers, chunks_left, breaks });
        memory.driving = Some(PUMP);
        // A streamed answer is the caller's: nothing is adopted after it.
        memory.adopt_later = None;
        let tick = self.rng.range(10, (self.sc.policy.attempt_lease_ms() / 3).max(10));
        let incarnation = self.objects[j].incarnation;
        self.schedule(self.now + tick, Ev::PumpTick { job: j, incarnation });
    }

    /// What a drive's ending tells its callers.
    fn result_of(&mut self, j: usize, ending: Ending) -> Res {
        match ending {
            Ending::Answer { response, state, retry_after_ms, .. } => {
                let is_final = state.is_terminal() || (state == JobState::Unknown && retry_after_ms.is_none());
                Res::of(response, is_final, retry_after_ms)
            }
            Ending::Problem { problem, .. } => Res::problem(&problem),
            Ending::Stored => {
                let finished = self.objects[j].storage.job.as_ref().is_some_and(|job| job.state().is_terminal());
                if !finished {
                    self.violate("stored-is-finished", format!("job {j}: Finish(Stored) on an unfinished job"));
                    return Res::problem(&admission::in_progress(KEY, 1_000));
                }
                Res::of(self.finished_result(j), true, None)
            }
            Ending::InProgress => Res::problem(&admission::in_progress(KEY, admission::DEFAULT_RETRY_AFTER_MS)),
            Ending::Broken(why) => {
                self.violate("no-broken-ending", format!("job {j}: Finish(Broken({why:?}))"));
                Res::problem(&Problem::new(ProblemType::Internal, why))
            }
            Ending::Stream { .. } => unreachable!("a stream's ending is the pump's"),
        }
    }

    fn check_budget(&mut self, event: Option<&Event>, commands: &[Command], before: u32, after: u32) {
        if after > self.sc.budget_capacity {
            self.violate("budget", format!("{after} tokens in a budget of {}", self.sc.budget_capacity));
        }
        let paid = i64::from(before) - i64::from(after);
        let placed = commands.iter().any(|c| matches!(c, Command::Place { .. }));
        let retry = placed && matches!(event, Some(Event::Persisted(_)));
        if retry {
            self.count("retries");
        }
        if retry && paid != 5 && paid != 10 {
            self.violate("budget", format!("a retry was placed and the budget went {before} -> {after}"));
        }
        let deferred = commands.iter().any(|c| matches!(c, Command::Persist { .. } | Command::Create { .. }));
        if paid > 0 && !placed && !deferred {
            self.violate("budget", format!("{paid} tokens taken for no retry: {commands:?}"));
        }
    }

    // ---- the pump (a stand-in for the edge's) ----------------------------

    fn pump(&mut self, j: usize, incarnation: u32) {
        if self.objects[j].incarnation != incarnation {
            return;
        }
        let Some(mut pump) = self.objects[j].memory.pump.take() else { return };
        let attempt = pump.ticket.attempt;
        let Some(mut job) = self.objects[j].storage.job.clone() else { return };
        let read = job.version();
        if pump.chunks_left > 0 {
            let chunk = format!("data: {{\"chunk\":{},\"attempt\":{attempt}}}\n\n", pump.chunks_left).into_bytes();
            if let Some(stream) = self.objects[j].storage.streams.get_mut(&attempt) {
                stream.events.push(chunk);
            }
            // A long answer keeps its lease.
            match job.extend_lease(pump.ticket, self.now) {
                Ok(ticket) if self.write(j, job, Some(read), "pump").is_ok() => pump.ticket = ticket,
                _ => return self.end_pump(j, pump),
            }
            pump.chunks_left -= 1;
            self.objects[j].memory.pump = Some(pump);
            let tick = self.rng.range(10, (self.sc.policy.attempt_lease_ms() / 3).max(10));
            self.schedule(self.now + tick, Ev::PumpTick { job: j, incarnation });
            return;
        }
        let (last, settled) = if pump.breaks {
            let report = AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::StreamError) };
            (
                b"event: error\ndata: {\"error\":\"upstream broke\"}\n\n".to_vec(),
                job.interrupt(pump.ticket, self.now, report),
            )
        } else {
            let report = AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::None) };
            (b"data: [DONE]\n\n".to_vec(), job.complete(pump.ticket, self.now, report))
        };
        if settled.is_ok() {
            if let Some(stream) = self.objects[j].storage.streams.get_mut(&attempt) {
                stream.events.push(last);
            }
            let _ = self.write(j, job, Some(read), "pump");
        }
        self.end_pump(j, pump);
    }

    fn end_pump(&mut self, j: usize, pump: Pump) {
        self.objects[j].memory.driving = None;
        let finished = self.objects[j].storage.job.as_ref().is_some_and(|job| job.state().is_terminal());
        let res = if finished {
            Res::of(self.finished_result(j), true, None)
        } else {
            Res::problem(&admission::in_progress(KEY, 1_000))
        };
        for subscriber in pump.subscribers {
            self.answer(subscriber, res.clone());
        }
    }

    // ---- the queue, the outbox and the alarm -------------------------------

    /// Sends the job's message: noted first, then sent (the queue may refuse,
    /// lose or duplicate it), confirmed when the queue says so.
    fn enqueue(&mut self, j: usize) {
        let send = self.objects[j].storage.outbox.note_send(self.now, false, &mut self.rng);
        self.arm(j);
        self.count("messages sent");
        if self.rng.chance(50) {
            self.trace.line(|| "        (the queue refused the send)".into());
            return;
        }
        self.objects[j].memory.sends_pending += 1;
        let message = self.messages.len();
        self.messages.push((j, self.now));
        if self.rng.chance(10) {
            self.trace.line(|| format!("        (the queue lost message {message})"));
            self.lost_at[j] = Some(self.now);
        } else {
            let at = self.now + self.rng.range(5, 2_000);
            self.schedule(at, Ev::Deliver { message });
        }
        if self.rng.chance(150) {
            let at = self.now + self.rng.range(100, 8_000);
            self.schedule(at, Ev::Deliver { message });
        }
        let (at, incarnation) = (self.now + self.rng.range(1, 20), self.objects[j].incarnation);
        self.schedule(at, Ev::Accepted { job: j, incarnation, send });
    }

    /// A queue delivery, as the Ledger judges and runs it.
    fn deliver(&mut self, message: usize) {
        let (j, sent_ms) = self.messages[message];
        self.count("deliveries");
        self.cursor.newest_sent_ms = self.cursor.newest_sent_ms.max(sent_ms);
        self.cursor.last_seen_ms = self.now;
        if let Some(lost) = self.lost_at[j].take() {
            let waited = self.now - lost;
            let longest = self.stats.entry("wait after a lost message, s (max)").or_insert(0);
            *longest = (*longest).max(waited / 1_000);
            if waited > LOST_MESSAGE_BOUND_MS {
                self.violate(
                    "lost-job-moves",
                    format!("job {j}'s message was lost at {lost}: no delivery came for {} s", waited / 1_000),
                );
            }
        }
        self.perform_delivery(j, message, DeliveryMachine::new(), delivery_machine::Input::Start);
    }

    /// Performs a queue delivery's ops as the core's [`DeliveryMachine`]
    /// gives them (the Ledger's `deliver` performs the same machine), until
    /// it waits for its quota's answer or its drive (kept in the object's
    /// memory, fed again by [`Self::quota_answered`] and
    /// [`Self::delivery_done`]) or answers the queue.
    fn perform_delivery(
        &mut self,
        j: usize,
        message: usize,
        mut machine: DeliveryMachine,
        mut input: delivery_machine::Input,
    ) {
        use delivery_machine::{Input, Op};
        loop {
            let op = machine.on(input, self.now);
            self.trace.line(|| format!("        delivery: {}", short_delivery_op(&op)));
            input = match op {
                Op::ReadSettled => {
                    let driving = self.objects[j].memory.driving.is_some();
                    Input::Read { job: self.settle_by_time(j, driving), driving }
                }
                Op::LoadRequest => Input::Request { kept: self.objects[j].storage.background_request },
                Op::Lock => {
                    if self.objects[j].memory.driving.is_some() {
                        return self
                            .violate("one-driver", format!("a delivery of job {j} locked a job another drive holds"));
                    }
                    self.objects[j].memory.driving = Some(LOCKED);
                    Input::Done
                }
                Op::TakeMessage => {
                    self.objects[j].storage.outbox.taken(self.now);
                    Input::Done
                }
                Op::Arm(_) => {
                    self.arm(j);
                    Input::Done
                }
                // The meter answers later: other requests come in meanwhile.
                Op::AskQuota => {
                    let spent = self.rng.chance(30);
                    let (at, incarnation) = (self.now + self.rng.range(1, 40), self.objects[j].incarnation);
                    self.objects[j].memory.deliveries.insert(message, machine);
                    return self.schedule(at, Ev::Quota { job: j, message, incarnation, spent });
                }
                // As the edge's lock when dropped: waiting duplicates are
                // told the job is in progress.
                Op::Unlock => {
                    let memory = &mut self.objects[j].memory;
                    if memory.driving == Some(LOCKED) {
                        memory.driving = None;
                    }
                    memory.adopt_later = None;
                    for waiter in std::mem::take(&mut memory.waiters) {
                        self.answer(
                            waiter,
                            Res::problem(&admission::in_progress(KEY, admission::DEFAULT_RETRY_AFTER_MS)),
                        );
                    }
                    Input::Done
                }
                Op::Drive(job) => {
                    self.objects[j].memory.deliveries.insert(message, machine);
                    let (run, running) = (RunMachine::for_delivery(false), Running::new(job, true, true));
                    return self.perform_run(j, Owner::Delivery(message), run, run_machine::Input::Start, running);
                }
                Op::Tend(steps) => {
                    self.tend(j, steps);
                    Input::Done
                }
                Op::Record(verdict) => {
                    let st = &mut self.objects[j].storage;
                    if st.job.is_some() {
                        delivery::record(&mut st.outbox, verdict, self.now);
                    }
                    Input::Recorded { job: st.job.clone(), driving: self.objects[j].memory.driving.is_some() }
                }
                Op::Answer(verdict) => return self.verdict(message, j, verdict),
            };
        }
    }

    /// A delivery's quota answered: its delivery goes on (unless the
    /// object crashed meanwhile: the queue delivers the message again).
    fn quota_answered(&mut self, j: usize, message: usize, incarnation: u32, spent: bool) {
        if self.objects[j].incarnation != incarnation {
            return;
        }
        let Some(machine) = self.objects[j].memory.deliveries.remove(&message) else {
            return self.violate("delivery", format!("job {j}'s quota answered a delivery that is not here"));
        };
        self.count("quota asked by a delivery");
        let problem = spent.then(|| {
            self.count("quota spent at a delivery");
            Problem::new(ProblemType::QuotaExceeded, "spent").with_retry_after_ms(self.rng.range(1_000, 120_000))
        });
        self.perform_delivery(j, message, machine, delivery_machine::Input::Quota(problem));
    }

    /// A delivery's drive ended: its delivery goes on from there.
    fn delivery_done(&mut self, j: usize, message: usize, asked_ms: Option<u64>) {
        self.cursor.last_seen_ms = self.now;
        let Some(machine) = self.objects[j].memory.deliveries.remove(&message) else {
            return self.violate("delivery", format!("job {j}'s drive ended for a delivery that is not here"));
        };
        let job = self.objects[j].storage.job.clone();
        self.perform_delivery(j, message, machine, delivery_machine::Input::Driven { job, asked_ms });
    }

    /// Performs tending steps in order, as the Ledger's `tend` does.
    fn tend(&mut self, j: usize, steps: Vec<Step>) {
        for step in steps {
            match step {
                Step::Send(_) => self.enqueue(j),
                Step::GiveUpSending => {
                    self.count("outbox gave up");
                    self.objects[j].storage.outbox.give_up();
                }
                Step::Defer(delivery::Deferral { read, job }) => {
                    if self.write(j, job, Some(read), "defer").is_err() {
                        self.violate("cas", format!("job {j}'s deferral lost its write"));
                    }
                    self.arm(j);
                }
                Step::DeadLetter(_) => self.dead_letter_once(j),
                // A job type's follow-up is the effects' simulation's.
                Step::FollowUp => {}
            }
        }
    }

    /// The queue's side of a verdict (an acknowledged message may still come again).
    fn verdict(&mut self, message: usize, j: usize, verdict: Verdict) {
        self.trace.line(|| format!("        queue <- {verdict:?}"));
        match verdict {
            Verdict::Ack => {
                if self.rng.chance(30) {
                    let at = self.now + self.rng.range(1_000, 30_000);
                    self.schedule(at, Ev::Deliver { message });
                }
            }
            Verdict::Retry { delay_ms } => {
                let at = self.now + delay_ms + self.rng.range(0, 200);
                self.schedule(at, Ev::Deliver { message });
            }
            Verdict::Dead => self.dead_letters[j] = true,
        }
    }

    fn dead_letter_once(&mut self, j: usize) {
        let st = &mut self.objects[j].storage;
        let Some(job) = st.job.as_ref() else { return };
        if outbox::needs_operator(job, &st.outbox, self.now) && !st.dead_lettered {
            st.dead_lettered = true;
            self.dead_letters[j] = true;
            self.count("dead letters");
            self.trace.line(|| format!("        job {j} dead-lettered"));
        }
    }

    /// The queue's cursor, as a Ledger reads it: busy while a delivery's
    /// drive runs anywhere.
    fn progress(&mut self) -> Progress {
        self.count("cursor reads");
        let busy = self.objects.iter().any(|object| !object.memory.deliveries.is_empty());
        Progress { busy, ..self.cursor }
    }

    /// Sets the alarm for the job's next due time (outbox or retention).
    fn arm(&mut self, j: usize) {
        let st = &self.objects[j].storage;
        let Some(job) = st.job.as_ref() else { return };
        let at = wake::next_ms(job, &st.outbox, OUTBOX_DELAY_MS, None, self.now);
        self.set_alarm(j, at);
    }

    /// Sets the object's one alarm (replacing the one set before). One due
    /// already rings as soon as the runtime gets to it: a few ms later.
    fn set_alarm(&mut self, j: usize, at: u64) {
        if let Some((_, before)) = self.objects[j].storage.alarm.take() {
            self.events.remove(&before);
        }
        let at = if at <= self.now {
            self.count("alarms due at once");
            if self.objects[j].memory.driving.is_some() {
                // Due while a drive here runs: the alarm comes back at once,
                // and again, until the drive writes the job (see the report).
                self.count("alarms due at once while driving");
            }
            self.now + self.rng.range(5, 50)
        } else {
            at
        };
        self.schedule(at, Ev::Alarm { job: j });
        self.objects[j].storage.alarm = Some((at, self.seq));
    }

    /// The alarm, in the order the Ledger's `alarm` and `tend_at_alarm`
    /// run it: what the ring does ([`wake::Ring::of`]), whether the
    /// consumer's progress is read ([`wake::needs_progress`]), the tending
    /// steps ([`wake::tend`]) performed in order, then the next ring.
    fn alarm(&mut self, j: usize) {
        self.objects[j].storage.alarm = None;
        let driving = self.objects[j].memory.driving.is_some();
        match wake::Ring::of(self.objects[j].storage.job.clone(), self.now, driving) {
            wake::Ring::Watch => self.set_alarm(j, self.now + wake::WATCHDOG_MS),
            wake::Ring::Tend(job) => {
                let job = self.settle_by_time(j, driving).unwrap_or(job);
                let here = wake::Here { driving, sending: self.objects[j].memory.sends_pending > 0 };
                let outbox = self.objects[j].storage.outbox;
                let progress = wake::needs_progress(&job, &outbox, self.now, here).then(|| self.progress());
                let steps = wake::tend(&job, &outbox, OUTBOX_DELAY_MS, self.now, here, progress.as_ref());
                self.tend(j, steps);
                self.arm(j);
            }
            wake::Ring::Delete(_) => {
                self.trace.line(|| format!("        job {j}'s object deleted (retention)"));
                self.objects[j].storage = Storage::default();
                self.objects[j].deleted = true;
            }
        }
    }

    // ---- crashes -------------------------------------------------------------

    /// The object's memory is gone: its drives, waiters and pump. Callers
    /// connected to it see the connection drop (and retry); a delivery it
    /// was running is redelivered by the queue. Storage and the alarm stay.
    fn crash(&mut self, j: usize, when: &str) {
        self.count("crashes");
        self.trace.mix(0xC0A5_u64 + j as u64);
        self.trace.line(|| format!("        ** CRASH of job {j}'s object ({when})"));
        let object = &mut self.objects[j];
        object.incarnation += 1;
        let memory = std::mem::take(&mut object.memory);
        let mut callers: Vec<usize> = memory.waiters;
        // The deliveries under way here (asking the quota, or driving).
        let deliveries: Vec<usize> = memory.deliveries.keys().copied().collect();
        let owners = memory.drives.values().map(|slot| slot.owner).chain(memory.asking.values().map(|run| run.0));
        for owner in owners {
            if let Owner::Caller(caller) = owner {
                callers.push(caller);
            }
        }
        if let Some(pump) = memory.pump {
            callers.extend(pump.subscribers);
        }
        for caller in callers {
            let lost = Problem::new(ProblemType::Internal, "the connection dropped");
            let retry_after_ms = Some(self.rng.range(200, 2_000));
            self.answer(caller, Res { retry_after_ms, ..Res::problem(&lost) });
        }
        for message in deliveries {
            let at = self.now + self.rng.range(1_000, 10_000);
            self.schedule(at, Ev::Deliver { message });
        }
    }

    // ---- the drain and what must hold at its end -------------------------------

    /// Finished, or waiting for an operator in a way the machine says so.
    fn settled(&self, j: usize) -> bool {
        let object = &self.objects[j];
        let memory = &object.memory;
        let idle = memory.drives.is_empty()
            && memory.pump.is_none()
            && memory.deliveries.is_empty()
            && memory.asking.is_empty();
        let Some(job) = object.storage.job.as_ref() else { return false };
        let waiting_for_operator = (job.state() == JobState::Unknown
            && job.policy().unknown_policy() == UnknownPolicy::Block)
            || (job.is_background() && outbox::undelivered(job, &object.storage.outbox));
        idle && (job.state().is_terminal() || waiting_for_operator)
    }

    /// A job nobody asks about again is asked again, by a fresh object,
    /// once every lease is over.
    fn redrive(&mut self, j: usize) {
        let object = &self.objects[j];
        if !object.memory.drives.is_empty() || object.memory.pump.is_some() {
            let drives: Vec<u32> = object.memory.drives.keys().copied().collect();
            return self.violate("no-stuck-drive", format!("job {j}: drives {drives:?} wait for nothing"));
        }
        if self.sc.jobs[j].background {
            // The outbox's alarm re-drives a background job by itself.
            return;
        }
        self.count("drain redrives");
        self.crash(j, "drain restart");
        let policy = self.sc.policy;
        let other_payload = object_fingerprint(&self.objects[j]).is_some_and(|fp| fp == fingerprint(j, true));
        let spec = CallerSpec { at_ms: 0, wait_ms: 60_000, tries: 3, other_payload, background: false };
        let caller = self.add_caller(j, spec, false);
        let at = self.now + policy.attempt_lease_ms() + policy.unknown_lease_ms() + self.sc.backoff.cap_ms() + 1;
        self.schedule(at, Ev::Send { caller });
    }

    /// Every job is finished, or visibly waiting for an operator.
    fn check_settled(&mut self) {
        for j in 0..self.objects.len() {
            let object = &self.objects[j];
            let Some(job) = object.storage.job.clone() else {
                self.violate("no-job-lost", format!("job {j} was never stored"));
                continue;
            };
            let waits_for_operator =
                job.state() == JobState::Unknown && job.policy().unknown_policy() == UnknownPolicy::Block;
            if self.accepted[j] && !job.is_background() && !job.state().is_terminal() && !waits_for_operator {
                let state = job.state().as_str();
                self.violate(
                    "accepted-runs",
                    format!("job {j} was accepted in the background, left {state}, not adopted"),
                );
                continue;
            }
            if !self.settled(j) {
                let message = format!(
                    "job {j} left {} (background {}, {} attempts, outbox {:?}), memory idle {}",
                    job.state().as_str(),
                    job.is_background(),
                    job.attempts().len(),
                    object.storage.outbox.message(),
                    object.memory.drives.is_empty()
                );
                self.violate("no-job-lost", message);
                continue;
            }
            if job.is_background() {
                let needs_operator = outbox::needs_operator(&job, &object.storage.outbox, self.now);
                let dead = job.state() == JobState::Dead;
                if (needs_operator || dead) && !self.dead_letters[j] {
                    self.violate(
                        "no-job-lost",
                        format!("background job {j} ({}) never dead-lettered", job.state().as_str()),
                    );
                }
                if job.state() == JobState::Unknown && !needs_operator {
                    self.violate("no-job-lost", format!("background job {j} blocked but not shown to operators"));
                }
            } else if job.state() == JobState::Unknown {
                let arrival = Arrival { key: KEY, fingerprint: job.fingerprint(), wait_ms: 0 };
                let admitted = admission::admit(Some(&job), arrival, self.now, false);
                if !matches!(&admitted, Admission::Refuse(p) if p.kind == ProblemType::OutcomeBlocked) {
                    self.violate("no-job-lost", format!("blocked job {j} admitted as {admitted:?}"));
                }
            }
        }
    }

    /// The invariants on what is stored, after every step.
    fn check_all(&mut self) {
        for j in 0..self.objects.len() {
            if self.objects[j].deleted {
                continue;
            }
            let st = &self.objects[j].storage;
            let Some(job) = st.job.as_ref() else {
                if self.winner[j].is_some() {
                    self.violate("result-stable", format!("finished job {j} vanished before its retention"));
                }
                continue;
            };
            let mut found: Vec<(&'static str, String)> = Vec::new();
            if job.attempts().len() as u32 > job.max_attempts() {
                found.push((
                    "attempt-cap",
                    format!("job {j}: {} attempts, cap {}", job.attempts().len(), job.max_attempts()),
                ));
            }
            let running = job.attempts().iter().filter(|a| a.outcome == AttemptOutcome::Running).count();
            let hedged =
                self.sc.providers.route(Some(&self.sc.jobs[j].model)).is_some_and(|r| r.hedge_after_ms.is_some());
            if running > 2 || (running == 2 && !hedged) {
                found.push((
                    "no-call-in-live-lease",
                    format!("job {j}: {running} attempts running (hedged route: {hedged})"),
                ));
            }
            for attempt in job.attempts() {
                let answered = matches!(
                    attempt.outcome,
                    AttemptOutcome::Succeeded
                        | AttemptOutcome::Rejected
                        | AttemptOutcome::Failed
                        | AttemptOutcome::Interrupted
                        | AttemptOutcome::Cancelled
                );
                let kept = if attempt.streamed {
                    st.streams.contains_key(&attempt.number)
                } else {
                    st.responses.contains_key(&attempt.number)
                };
                if (answered || attempt.streamed) && !kept {
                    found.push((
                        "response-before-job",
                        format!(
                            "job {j} names attempt {} ({:?}) whose response is missing",
                            attempt.number, attempt.outcome
                        ),
                    ));
                }
            }
            if job.state().is_terminal() {
                let result = (job.replayed_attempt().map(|a| a.number), self.finished_result(j));
                // A completed job's result is its winner's answer, as the provider gave it.
                if job.state() == JobState::Completed {
                    let winner = job.replayed_attempt();
                    let won = winner
                        .is_some_and(|a| matches!(a.outcome, AttemptOutcome::Succeeded | AttemptOutcome::Rejected));
                    let given = winner.filter(|a| !a.streamed).and_then(|a| self.answered_with.get(&(j, a.number)));
                    if !won || given.is_some_and(|given| *given != result.1) {
                        found.push((
                            "result-is-the-winner",
                            format!(
                                "completed job {j} replays attempt {:?} ({:?}), {} B, not its winner's answer",
                                result.0,
                                winner.map(|a| a.outcome),
                                result.1.body.len()
                            ),
                        ));
                    }
                }
                match &self.winner[j] {
                    None => {
                        if let Some((first, by)) = &self.first_final[j]
                            && *first != result.1
                        {
                            found.push((
                                "answers-agree",
                                format!(
                                    "job {j}'s stored result {} {:?} is not what {by} got: {} {:?}",
                                    result.1.status,
                                    String::from_utf8_lossy(&result.1.body),
                                    first.status,
                                    String::from_utf8_lossy(&first.body)
                                ),
                            ));
                        }
                        self.count("jobs finished");
                        self.winner[j] = Some(result);
                    }
                    Some(winner) if *winner != result => found.push((
                        "result-stable",
                        format!("job {j}'s result changed from attempt {:?} to {:?}", winner.0, result.0),
                    )),
                    Some(_) => {}
                }
                // A finished job's result is also every later final answer's.
                if self.first_final[j].is_none() {
                    let stored = self.finished_result(j);
                    self.first_final[j] = Some((stored, format!("the stored result at step {}", self.steps)));
                }
            } else if self.winner[j].is_some() {
                found.push(("result-stable", format!("finished job {j} is {} again", job.state().as_str())));
            }
            for (check, message) in found {
                self.violate(check, message);
            }
        }
    }
}

fn object_fingerprint(object: &Object) -> Option<&Fingerprint> {
    object.storage.job.as_ref().map(Job::fingerprint)
}

fn short_submit_op(op: &submit_machine::Op) -> String {
    use submit_machine::Op;
    match op {
        Op::Refuse { problem, .. } => format!("refuse {} {}", problem.status(), problem.kind.slug()),
        Op::Replay { .. } => "replay".into(),
        Op::Accepted(_) => "accepted".into(),
        Op::Run(run) => format!("run v{} (stored {})", run.job.version(), run.stored),
        Op::Adopt { .. } => "adopt".into(),
        other => format!("{other:?}"),
    }
}

fn short_run_op(op: &run_machine::Op) -> String {
    use run_machine::Op;
    match op {
        Op::DeadLetter(_) => "dead letter".into(),
        Op::Arm(_) => "arm".into(),
        Op::Refuse(refused) => format!("refuse {:?}", refused.problem.kind),
        other => format!("{other:?}"),
    }
}

fn short_delivery_op(op: &delivery_machine::Op) -> String {
    use delivery_machine::Op;
    match op {
        Op::Arm(_) => "arm".into(),
        Op::Drive(job) => format!("drive v{}", job.version()),
        Op::Tend(steps) => format!("tend {steps:?}"),
        Op::Record(verdict) => format!("record {verdict:?}"),
        Op::Answer(verdict) => format!("answer {verdict:?}"),
        other => format!("{other:?}"),
    }
}

fn short_event(event: &Event) -> String {
    match event {
        Event::Placed(placed) => format!("Placed({placed:?})"),
        Event::Woke => "Woke".into(),
        Event::Persisted(Ok(())) => "Persisted(Ok)".into(),
        Event::Persisted(Err(current)) => format!("Persisted(lost to v{:?})", current.as_ref().map(Job::version)),
        Event::Answered { attempt, answer: Answer::Judged(a) } => {
            format!("Answered(a{attempt}: {})", short_attempted(a))
        }
        Event::Answered { attempt, answer: Answer::Streams { .. } } => format!("Answered(a{attempt}: streams)"),
        Event::HedgeDue { attempt } => format!("HedgeDue(a{attempt})"),
    }
}

fn short_attempted(a: &Attempted) -> String {
    format!("{:?} {:?} {}", a.decision(), a.observed.classification.class, a.response.status)
}

fn short_command(command: &Command) -> String {
    match command {
        Command::Place { order } => format!(
            "Place {:?}",
            order.iter().map(|c| format!("p{} wait {}", c.provider, c.wait_ms)).collect::<Vec<_>>()
        ),
        Command::Sleep { ms } => format!("Sleep {ms} ms"),
        Command::Persist { job, expected } => format!(
            "Persist v{} {} ({} attempts, completed_by {:?}) expecting {:?}",
            job.version(),
            job.state().as_str(),
            job.attempts().len(),
            job.completed_by(),
            Some(expected)
        ),
        Command::Create { job } => format!(
            "Persist v{} {} ({} attempts, completed_by {:?}) expecting None",
            job.version(),
            job.state().as_str(),
            job.attempts().len(),
            job.completed_by()
        ),
        Command::SaveResponse { attempt, response, replace } => {
            format!("SaveResponse a{attempt} {} ({} B) replace {replace}", response.status, response.body.len())
        }
        Command::OpenStream { attempt, content_type } => format!("OpenStream a{attempt} {content_type}"),
        Command::Call { ticket, provider, probe, .. } => {
            format!("Call a{}@v{} p{provider}{}", ticket.attempt, ticket.version, if *probe { " (probe)" } else { "" })
        }
        Command::HedgeAfter { attempt, ms } => format!("HedgeAfter a{attempt} {ms} ms"),
        Command::Finish(ending) => format!("Finish({})", short_ending(ending)),
    }
}

fn short_ending(ending: &Ending) -> String {
    match ending {
        Ending::Answer { response, state, attempt, retry_after_ms } => {
            format!("Answer {} {} a{attempt:?} retry_after {retry_after_ms:?}", response.status, state.as_str())
        }
        Ending::Problem { problem, state } => {
            format!("Problem {} {} {}", problem.status(), problem.kind.slug(), state.as_str())
        }
        other => format!("{other:?}"),
    }
}

fn command_code(command: &Command) -> u64 {
    match command {
        Command::Place { order } => 100 + order.len() as u64,
        Command::Sleep { ms } => 200 + ms,
        Command::Persist { job, .. } | Command::Create { job } => 300 + job.version(),
        Command::SaveResponse { attempt, .. } => 400 + u64::from(*attempt),
        Command::OpenStream { attempt, .. } => 500 + u64::from(*attempt),
        Command::Call { ticket, provider, .. } => 600 + u64::from(ticket.attempt) * 10 + *provider as u64,
        Command::HedgeAfter { ms, .. } => 700 + ms,
        Command::Finish(ending) => 800 + ending_code(ending),
    }
}

fn ending_code(ending: &Ending) -> u64 {
    match ending {
        Ending::Answer { response, .. } => u64::from(response.status),
        Ending::Problem { problem, .. } => 1_000 + u64::from(problem.status()),
        Ending::Stored => 2_000,
        Ending::InProgress => 2_001,
        Ending::Stream { .. } => 2_002,
        Ending::Broken(_) => 2_003,
    }
}
