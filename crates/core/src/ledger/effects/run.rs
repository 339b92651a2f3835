//! A job type's effects as a sans-IO machine: what the effects runner
//! does, what an approval or an operator's action on an effect does, what
//! the effects planned from an answer are, and what a run job answers.
//!
//! [`Run`] is one run of the effects — the request that got the answer, a
//! queue delivery, the alarm, an approval or an operator starts one. The
//! Ledger feeds it [`Event`]s and performs the [`Command`]s it returns:
//! load the effects as stored, write one (a compare-and-swap on the version
//! it read), perform one at its destination, ask the destination for one's
//! receipt, record a dead letter, sleep, keep the alarm close. Time and the
//! retries' jitter come in with every event ([`Inputs`]).
//!
//! The rules it keeps:
//! - every claim and every record is a compare-and-swap on the effect's
//!   version; a write that loses adopts what is stored and performs nothing;
//! - the claim is durable before the effect is performed;
//! - a claimed effect that was never recorded (the runtime died in
//!   between) is never performed blindly: its destination is asked for its
//!   receipt first, and only a receipt found absent makes it ready again;
//! - an approval that ran out expires its effect, which never runs;
//! - an effect that comes to need an operator (dead, unknown, conflict) is
//!   one dead letter, once, when the write that made it so succeeded;
//! - one run goes on while it acts and waits for retries due within
//!   [`INLINE_WAIT_MS`], at most [`INLINE_BUDGET_MS`]; the alarm does the rest.
//!
//! Each batch of commands holds at most one command that wants an answer
//! (load, persist, perform, ask, sleep), and it is the batch's last. One
//! runner per object: the coordination's `effects_running` is the lock
//! (see [`crate::ledger::coordination`]); the machine does not take it.

use serde_json::{Value, json};

use crate::identity::random::RandomSource;
use crate::job::Job;
use crate::job_type::JobType;
use crate::job_type::effect::{self, Effect, EffectError, EffectRetry, EffectState, Found, Outcome, Step};
use crate::ledger::dead_letter::EFFECT_CLASS;
use crate::wire::ProblemType;

use crate::ledger::dead_letter;
use crate::ledger::effects::follow_up::{AfterPass, CLAIM_WATCH_MS, Ended};

pub use crate::ledger::effects::follow_up::{INLINE_BUDGET_MS, INLINE_WAIT_MS, LETTER_RETRY_MS};

/// What the deployment defines of one effect now: only those are run (one
/// a deploy removed is left as stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Defined {
    /// The effect's name in its job type.
    pub name: String,
    /// How its attempts are retried.
    pub retry: EffectRetry,
}

impl Defined {
    /// The effects `job_type` defines (none when the type is gone).
    pub fn of(job_type: Option<&JobType>) -> Vec<Self> {
        job_type
            .map(|t| t.effects.iter().map(|s| Self { name: s.name.clone(), retry: s.retry }).collect())
            .unwrap_or_default()
    }
}

/// The retry policy of the effect named `name` among `defined` (a webhook's
/// when the type no longer defines it).
pub fn retry_of(defined: &[Defined], name: &str) -> EffectRetry {
    defined.iter().find(|d| d.name == name).map_or(EffectRetry::WEBHOOK, |d| d.retry)
}

/// What comes with every event: the time and the jitter's randomness.
pub struct Inputs<'a> {
    /// Milliseconds since the epoch.
    pub now_ms: u64,
    /// The retries' jitter.
    pub random: &'a mut dyn RandomSource,
}

/// What performing an effect found.
#[derive(Debug, Clone, PartialEq)]
pub enum Performed {
    /// How the attempt went.
    Outcome(Outcome),
    /// The destination held a record under the delivery id already (a `d1`
    /// row): what it holds, to reconcile with.
    AlreadyThere(Found),
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The answer to [`Command::Load`]: the effects as stored (also how a
    /// run starts again after a restart: from what was persisted).
    Loaded(Vec<Effect>),
    /// The answer to [`Command::Persist`]: written, or lost to another
    /// writer (with the effect as it now stands; `None`: it is gone).
    Persisted(Result<(), Option<Box<Effect>>>),
    /// The answer to [`Command::Perform`].
    Performed(Performed),
    /// The answer to [`Command::AskReceipt`]: what the destination holds.
    Receipt(Found),
    /// A [`Command::Sleep`] is over.
    Woke,
    /// The answer to [`Command::DeadLetter`]: whether the operators'
    /// database recorded it. One that was not stays due (its flag stays
    /// set) and is sent again by a later run ([`next_look_ms`]).
    DeadLettered {
        /// It was recorded.
        recorded: bool,
    },
}

/// An effect's dead letter: it needs an operator (class [`EffectDeadLetter::CLASS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectDeadLetter {
    /// The effect's name.
    pub name: String,
    /// The last attempt's status (a webhook's).
    pub last_status: Option<u16>,
    /// Why, redacted ([`dead_letter::detail_of_effect`]).
    pub detail: String,
    /// Its attempts so far.
    pub attempts: u32,
    /// Its state (dead, unknown or conflict).
    pub state: EffectState,
}

impl EffectDeadLetter {
    /// The dead letters' class of an effect's.
    pub const CLASS: &'static str = EFFECT_CLASS;

    /// What its dead letter records: the answer was delivered, this part was not.
    pub fn facts(self) -> dead_letter::DeadFacts {
        dead_letter::DeadFacts {
            dead: true,
            error_class: Self::CLASS.into(),
            last_status: self.last_status,
            detail: self.detail,
            attempts: self.attempts,
        }
    }

    fn of(effect: &Effect) -> Self {
        Self {
            name: effect.name.clone(),
            last_status: effect.attempts.last().and_then(|a| a.status),
            detail: dead_letter::detail_of_effect(effect),
            attempts: effect.attempts.len() as u32,
            state: effect.state,
        }
    }
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Keep the alarm no later than this while the run goes on: if the
    /// runtime dies mid-effect, the alarm after the restart reconciles what
    /// was claimed. Wants no answer.
    Watch {
        /// When.
        at_ms: u64,
    },
    /// Read the effects as stored; answer with [`Event::Loaded`].
    Load,
    /// Write `effect` if its stored version is still `expected`; answer
    /// with [`Event::Persisted`] before anything else.
    Persist {
        /// The effect as it is to be stored.
        effect: Effect,
        /// The version the write expects to replace.
        expected: u64,
    },
    /// Perform the (claimed) effect at its destination; answer with [`Event::Performed`].
    Perform {
        /// The effect as claimed.
        effect: Effect,
    },
    /// Ask the effect's destination what it holds under its delivery id;
    /// answer with [`Event::Receipt`].
    AskReceipt {
        /// The claimed effect.
        effect: Effect,
    },
    /// Record a dead letter (and alert, if one is due); answer with
    /// [`Event::DeadLettered`] (only a recorded letter clears its flag).
    DeadLetter(EffectDeadLetter),
    /// Wait, then [`Event::Woke`].
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// The run is over: the alarm takes it from here ([`next_look_ms`]).
    Finish,
}

impl Command {
    /// Whether the Ledger answers it with an event.
    pub fn wants_answer(&self) -> bool {
        !matches!(self, Self::Watch { .. } | Self::Finish)
    }
}

/// Where one run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not started.
    New,
    /// Waits for [`Event::Loaded`].
    Loading,
    /// Waits for the write of an approval's expiry.
    Expiring,
    /// Waits for the write of a claim (of attempt `attempt`).
    Claiming,
    /// Waits for the destination's answer to an attempt.
    Performing,
    /// Waits for the write of an attempt's (or a reconciliation's) outcome.
    Recording,
    /// Waits for a receipt.
    Asking,
    /// Waits for the dead letter to be recorded.
    Sending,
    /// Waits for the write that records a dead letter as sent.
    Lettering,
    /// Waits for [`Event::Woke`].
    Sleeping,
    /// Finished.
    Done,
}

/// One run of a job's effects.
#[derive(Debug, Clone)]
pub struct Run {
    defined: Vec<Defined>,
    started_ms: u64,
    effects: Vec<Effect>,
    /// The effect the pass is at.
    index: usize,
    /// The pass did something (what it did may make another due).
    acted: bool,
    /// The earliest wait the pass found.
    wake: Option<u64>,
    /// The version the write being waited for expects.
    expected: u64,
    /// Effects whose dead letter could not be recorded in this run: not
    /// tried again before the next run (the alarm's, [`next_look_ms`]).
    unrecorded_letters: Vec<String>,
    /// The run awaited the outside world (a destination, a receipt, a
    /// letter, a sleep) since it last loaded the effects: an approver or an
    /// operator may have changed them meanwhile, so a dead letter found due
    /// in them is only sent after loading them again.
    stale: bool,
    phase: Phase,
}

impl Run {
    /// A run of the effects the deployment defines as `defined`.
    pub fn new(defined: Vec<Defined>) -> Self {
        Self {
            defined,
            started_ms: 0,
            effects: Vec::new(),
            index: 0,
            acted: false,
            wake: None,
            expected: 0,
            unrecorded_letters: Vec::new(),
            stale: false,
            phase: Phase::New,
        }
    }

    /// Starts the run: the watch, then the effects as stored.
    pub fn start(&mut self, inputs: &mut Inputs<'_>) -> Vec<Command> {
        self.started_ms = inputs.now_ms;
        self.phase = Phase::Loading;
        vec![Command::Watch { at_ms: inputs.now_ms + CLAIM_WATCH_MS }, Command::Load]
    }

    /// Whether the run is over.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// The effects as the run last saw them.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Feeds one event; returns what to do. An event the run does not wait
    /// for changes nothing (and asks for nothing).
    pub fn on(&mut self, event: Event, inputs: &mut Inputs<'_>) -> Vec<Command> {
        let now = inputs.now_ms;
        match (self.phase, event) {
            (Phase::Loading, Event::Loaded(effects)) => {
                self.effects = effects;
                self.stale = false;
                self.index = 0;
                self.acted = false;
                self.wake = None;
                self.pass(now)
            }
            (Phase::Sleeping, Event::Woke) => {
                self.phase = Phase::Loading;
                vec![Command::Load]
            }
            (Phase::Expiring, Event::Persisted(written)) => {
                if written.is_err() {
                    self.lost(written);
                }
                self.next(now)
            }
            (Phase::Claiming, Event::Persisted(Ok(()))) => {
                self.phase = Phase::Performing;
                self.stale = true;
                vec![Command::Perform { effect: self.effects[self.index].clone() }]
            }
            // Someone else changed it first: nothing is performed.
            (Phase::Claiming | Phase::Recording | Phase::Lettering, Event::Persisted(written @ Err(_))) => {
                self.lost(written);
                self.next(now)
            }
            (Phase::Performing, Event::Performed(performed)) => {
                let retry = retry_of(&self.defined, &self.effects[self.index].name);
                let effect = &mut self.effects[self.index];
                self.expected = effect.version;
                match performed {
                    Performed::Outcome(outcome) => {
                        let number = effect.attempts.last().map_or(0, |a| a.number);
                        effect.finish(number, outcome, retry, now, inputs.random);
                    }
                    Performed::AlreadyThere(found) => effect.reconcile(found, retry, now, inputs.random),
                }
                self.acted = true;
                self.phase = Phase::Recording;
                vec![Command::Persist { effect: effect.clone(), expected: self.expected }]
            }
            (Phase::Asking, Event::Receipt(found)) => {
                let retry = retry_of(&self.defined, &self.effects[self.index].name);
                let effect = &mut self.effects[self.index];
                self.expected = effect.version;
                effect.reconcile(found, retry, now, inputs.random);
                // A receipt found absent makes it due again at once.
                self.acted |= effect.step(now) == Step::Perform;
                self.phase = Phase::Recording;
                vec![Command::Persist { effect: effect.clone(), expected: self.expected }]
            }
            // The write made it need an operator: its dead letter, then the
            // write that says the letter is out.
            (Phase::Recording, Event::Persisted(Ok(()))) if self.effects[self.index].dead_letter_due => {
                self.send_dead_letter()
            }
            (Phase::Recording | Phase::Lettering, Event::Persisted(Ok(()))) => self.next(now),
            (Phase::Sending, Event::DeadLettered { recorded: true }) => {
                let effect = &mut self.effects[self.index];
                self.expected = effect.version;
                effect.dead_letter_sent();
                self.phase = Phase::Lettering;
                vec![Command::Persist { effect: effect.clone(), expected: self.expected }]
            }
            // Not recorded: its flag stays set (as stored), and a later run sends it.
            (Phase::Sending, Event::DeadLettered { recorded: false }) => {
                self.unrecorded_letters.push(self.effects[self.index].name.clone());
                self.next(now)
            }

            _ => Vec::new(),
        }
    }

    /// A write that lost: the effect as stored now is the run's.
    fn lost(&mut self, written: Result<(), Option<Box<Effect>>>) {
        if let Err(Some(current)) = written {
            self.effects[self.index] = *current;
        }
        self.acted = true;
    }

    /// The current effect's dead letter; once it is recorded, the write that
    /// clears its due flag. (One that no longer needs an operator — an
    /// operator acted on it — only has its flag cleared.)
    fn send_dead_letter(&mut self) -> Vec<Command> {
        let effect = &mut self.effects[self.index];
        if effect.state.needs_operator() {
            self.phase = Phase::Sending;
            self.stale = true;
            return vec![Command::DeadLetter(EffectDeadLetter::of(effect))];
        }
        self.expected = effect.version;
        effect.dead_letter_sent();
        self.phase = Phase::Lettering;
        vec![Command::Persist { effect: effect.clone(), expected: self.expected }]
    }

    /// On to the next effect of the pass.
    fn next(&mut self, now: u64) -> Vec<Command> {
        self.index += 1;
        self.pass(now)
    }

    /// Goes on with the pass from `index`: the first effect that needs a
    /// write, an attempt or a receipt; at its end, another pass, a sleep,
    /// or the end of the run.
    fn pass(&mut self, now: u64) -> Vec<Command> {
        while let Some(effect) = self.effects.get_mut(self.index) {
            if !self.defined.iter().any(|d| d.name == effect.name) {
                self.index += 1;
                continue;
            }
            // A dead letter due since before a restart (or an operator's
            // action on it: then only the flag is cleared).
            if effect.dead_letter_due && !self.unrecorded_letters.contains(&effect.name) {
                if self.stale {
                    self.phase = Phase::Loading;
                    return vec![Command::Load];
                }
                return self.send_dead_letter();
            }
            let read = effect.version;
            self.expected = read;
            if effect.expire(now) {
                self.phase = Phase::Expiring;
                return vec![Command::Persist { effect: effect.clone(), expected: read }];
            }
            match effect.step(now) {
                Step::Perform => {
                    if effect.claim(now).is_some() {
                        // The claim is written before the effect is attempted.
                        self.phase = Phase::Claiming;
                        return vec![Command::Persist { effect: effect.clone(), expected: read }];
                    }
                }
                // Claimed but never recorded: the runtime that claimed it is
                // gone (one runner per object records before it moves on).
                // Ask the destination first.
                Step::Reconcile => {
                    self.phase = Phase::Asking;
                    self.stale = true;
                    return vec![Command::AskReceipt { effect: effect.clone() }];
                }
                Step::WaitUntil(at) => self.wake = Some(self.wake.map_or(at, |w| w.min(at))),
                Step::Nothing => {}
            }
            self.index += 1;
        }
        match AfterPass::of(self.acted, self.wake, self.started_ms, now) {
            AfterPass::Again => {
                self.phase = Phase::Loading;
                vec![Command::Load]
            }
            AfterPass::Sleep(ms) => {
                self.phase = Phase::Sleeping;
                self.stale = true;
                vec![Command::Sleep { ms }]
            }
            AfterPass::Stop => {
                self.phase = Phase::Done;
                vec![Command::Finish]
            }
        }
    }
}

/// When the effects next need a look (for the alarm): the earliest due one
/// among those the deployment still `defined`, but no sooner than the watch
/// while they run here (their runner is busy, and records before it stops).
pub fn next_look_ms(effects: &[Effect], defined: &[Defined], running_here: bool, now_ms: u64) -> Option<u64> {
    crate::ledger::effects::follow_up::next_look_ms(
        effects,
        |name| defined.iter().any(|d| d.name == name),
        running_here,
        now_ms,
    )
}

/// What an approver or an operator does to a job's effects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `POST …/approve`: every effect waiting for an approval may run, once.
    Approve,
    /// Send a dead or unknown effect again, with a fresh allowance.
    Resend(String),
    /// Record that a dead, unknown or conflicting effect did happen.
    MarkDone(String),
    /// An operator's replay of a run job whose answer is in: its dead effects again.
    ReplayDead,
    /// An action on the named effect that is neither (refused, once the
    /// effect is found).
    Unknown(String),
}

impl Action {
    /// An action on one effect, as the operator's request names it.
    pub fn on_effect(name: &str, action: Option<&str>) -> Self {
        match action {
            Some("resend") => Self::Resend(name.to_owned()),
            Some("mark_done") => Self::MarkDone(name.to_owned()),
            _ => Self::Unknown(name.to_owned()),
        }
    }
}

/// Why an action is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The job has no effect of that name.
    NoSuchEffect,
    /// Neither `resend` nor `mark_done`.
    BadAction,
    /// The effect's own refusal.
    Effect(EffectError),
}

impl Refusal {
    /// The problem type and detail it is answered with.
    pub fn problem(self) -> (ProblemType, String) {
        match self {
            Self::NoSuchEffect => (ProblemType::NotFound, "this job has no effect of that name".into()),
            Self::BadAction => (ProblemType::InvalidQuery, "action must be resend or mark_done".into()),
            Self::Effect(error) => (error.problem_type(), error.to_string()),
        }
    }
}

/// A write an action asks for: `effect` over the stored version `expected`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The effect as it is to be stored.
    pub effect: Effect,
    /// The version it replaces.
    pub expected: u64,
}

/// What follows an action's writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Then {
    /// Run the effects, then answer as the run (`approved`: this approval
    /// let some effect run).
    Run {
        /// An approval let an effect run now.
        approved: bool,
    },
    /// Answer as the run, without a run (nothing changed).
    Answer,
    /// Answer the refusal (after the writes: a lapsed approval expires its effect).
    Refuse(Refusal),
    /// A replay: run the effects, then answer which were resent.
    Replayed(Vec<String>),
    /// A replay finds no dead effect: the job's own replay applies.
    NotReplayable,
}

/// An action's writes and what follows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    /// The writes, in order (each a compare-and-swap).
    pub writes: Vec<Write>,
    /// What follows once they are written.
    pub then: Then,
}

/// What `action` by `by` does to the `stored` effects at `now_ms`.
pub fn decide(stored: Vec<Effect>, action: &Action, by: &str, defined: &[Defined], now_ms: u64) -> Decided {
    let mut writes = Vec::new();
    let then = match action {
        Action::Approve => {
            let mut effects = stored;
            let read: Vec<u64> = effects.iter().map(|e| e.version).collect();
            let approval = effect::approve_all(&mut effects, by, now_ms);
            for (effect, expected) in effects.into_iter().zip(read) {
                if effect.version != expected {
                    writes.push(Write { effect, expected });
                }
            }
            match approval {
                Ok(approved) => Then::Run { approved },
                Err(error) => Then::Refuse(Refusal::Effect(error)),
            }
        }
        Action::Resend(name) | Action::MarkDone(name) | Action::Unknown(name) => {
            match stored.into_iter().find(|e| &e.name == name) {
                None => Then::Refuse(Refusal::NoSuchEffect),
                Some(mut effect) => {
                    let expected = effect.version;
                    let done = match action {
                        Action::Resend(_) => effect.resend(by, retry_of(defined, name), now_ms),
                        Action::MarkDone(_) => effect.mark_done(by, now_ms),
                        _ => return Decided { writes, then: Then::Refuse(Refusal::BadAction) },
                    };
                    match done {
                        Ok(true) => {
                            writes.push(Write { effect, expected });
                            Then::Run { approved: false }
                        }
                        Ok(false) => Then::Answer,
                        Err(error) => Then::Refuse(Refusal::Effect(error)),
                    }
                }
            }
        }
        Action::ReplayDead => {
            // Only dead effects: an unknown one may have arrived, so only an
            // operator who checked resends it (one effect at a time).
            if !stored.iter().any(|e| e.state == EffectState::Dead) {
                return Decided { writes, then: Then::NotReplayable };
            }
            let mut resent = Vec::new();
            for mut effect in stored.into_iter().filter(|e| e.state == EffectState::Dead) {
                let expected = effect.version;
                if effect.resend(by, retry_of(defined, &effect.name), now_ms) == Ok(true) {
                    resent.push(effect.name.clone());
                    writes.push(Write { effect, expected });
                }
            }
            Then::Replayed(resent)
        }
    };
    Decided { writes, then }
}

/// Why no effect is planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoPlan {
    /// The job type is gone from the deployment.
    TypeGone,
    /// The type has no effects, or the job has no answer they follow.
    Nothing,
    /// The stored answer breaks the type's contract now.
    ContractBroken(String),
}

impl NoPlan {
    /// What the Ledger logs about it (`job_type`: the stored job's type),
    /// if anything: a type gone or a contract broken since the answer is
    /// worth a warning; a job with nothing to plan is not.
    pub fn warning(&self, job_type: &str) -> Option<String> {
        match self {
            Self::TypeGone => Some(format!("job type {job_type} is gone; its effects are not planned")),
            Self::ContractBroken(violation) => Some(format!("the stored answer breaks the contract now: {violation}")),
            Self::Nothing => None,
        }
    }
}

/// The effects of a finished job of `job_type`, planned once from its
/// `input` and its stored `answer` (the body of its replayed attempt).
pub fn plan(
    job_type: Option<&JobType>,
    job: &Job,
    answer: Option<&[u8]>,
    storage_id: &str,
    input: &Value,
    now_ms: u64,
) -> Result<Vec<Effect>, NoPlan> {
    let job_type = job_type.ok_or(NoPlan::TypeGone)?;
    let answered = Ended::of_job(job).is_some_and(|ended| ended.answered());
    let answer = answer.filter(|_| answered && !job_type.effects.is_empty()).ok_or(NoPlan::Nothing)?;
    let output = job_type.output_of(answer).map_err(|violation| NoPlan::ContractBroken(violation.0))?;
    Ok(job_type.effects.iter().map(|spec| Effect::plan(spec, storage_id, input, &output, now_ms)).collect())
}

/// What the Ledger does about a finished run job's effects: write the
/// plan, log why there is none, or nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planning {
    /// Store these effects (the plan, made once).
    Write(Vec<Effect>),
    /// No plan, and this is worth a warning ([`NoPlan::warning`]).
    Warn(String),
    /// Nothing: planned already, or nothing to plan.
    Nothing,
}

/// The effects of a finished job of `job_type` (named `type_name`; `None`:
/// gone from the deployment), planned once: nothing when they are
/// `planned` already, else [`plan`] from its `input` and stored `answer`.
pub fn plan_once(
    planned: bool,
    (type_name, job_type): (&str, Option<&JobType>),
    job: &Job,
    answer: Option<&[u8]>,
    (storage_id, input): (&str, &Value),
    now_ms: u64,
) -> Planning {
    if planned {
        return Planning::Nothing;
    }
    match plan(job_type, job, answer, storage_id, input, now_ms) {
        Ok(effects) => Planning::Write(effects),
        Err(no_plan) => no_plan.warning(type_name).map_or(Planning::Nothing, Planning::Warn),
    }
}

/// Whether a job type's result is answered as a run (`{type, key, state,
/// output, effects}`): a 2xx that did not stream (a streamed answer is
/// answered as a stream; its effects follow it).
pub fn answers_as_run(status: u16, content_type: &str) -> bool {
    (200..300).contains(&status) && !content_type.starts_with("text/event-stream")
}

/// The answer of a run job of `job_type` (`None`: gone from the
/// deployment) under `key`: its type, key, where its effects stand, its
/// output (read from `answer`) and its effects. Before its effects are
/// planned (a duplicate may get here first), they are running.
pub fn run_answer(type_name: &str, job_type: Option<&JobType>, key: &str, answer: &[u8], effects: &[Effect]) -> Value {
    let output = job_type.and_then(|t| t.output_of(answer).ok()).unwrap_or(Value::Null);
    let state = effect::effects_state(effects, job_type.map_or(0, |t| t.effects.len()));
    json!({ "type": type_name, "key": key, "state": state, "output": output, "effects": effects })
}

#[cfg(test)]
mod tests;
