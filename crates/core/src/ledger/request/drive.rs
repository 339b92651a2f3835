//! One drive of a job — a caller's (or a queue delivery's) run of attempts —
//! as a sans-IO machine.
//!
//! The Ledger feeds it [`Event`]s and performs the [`Command`]s it returns:
//! ask the breakers where the next attempt goes, wait, write the job, call
//! a provider, start the hedge timer, keep a response, and finally answer
//! the caller ([`Ending`]). Time, randomness and the tenant's retry budget
//! come in with every event ([`Inputs`]); the same events give the same
//! commands, which is what lets the simulation (`crates/core/tests/simulation.rs`) run it
//! against simulated providers and crashes.
//!
//! The rules it keeps:
//! - every job write is a compare-and-swap on the version it read
//!   ([`Command::Persist`]), or the job's first write with its owner
//!   ([`Command::Create`]); a write that loses leaves the winner alone;
//! - the claim is durable before the provider is called;
//! - a response is kept before the job that names it, and only by an
//!   attempt that still holds the job: an answer after its attempt's lease
//!   ran out (anyone who looked meanwhile took the attempt for lost) first
//!   renews the lease, a write that proves it ([`Job::extend_lease`]);
//! - failover: after a failure the next attempt goes to the route's next
//!   provider; time a server asked for is owed to that provider alone;
//! - a hedge races a second attempt on another provider when the first is
//!   slow; a fast permanent error does not beat a good answer still coming
//!   ([`attempts::first_answer`]); a racer that lost is audited when it
//!   answers, never used.
//!
//! The Ledger must answer a [`Command::Persist`] or [`Command::Create`] (with
//! [`Event::Persisted`]) before it feeds any other event: storage writes
//! are synchronous in a Durable Object, so no other event can come between.

use crate::identity::random::RandomSource;
use crate::job::{AttemptReport, AttemptTicket, Job, JobState};
use crate::retry::backoff::Backoff;
use crate::retry::backoff::budget::RetryBudget;
use crate::retry::backoff::retries::{Retries, Step, UnknownOutcomes};
use crate::retry::breaker::Permit;
use crate::upstream::providers::{Api, Providers, Route};
use crate::wire::Problem;

use crate::ledger::request::attempts::{self, Attempted, RaceCall, StoredResponse, Transition};

/// What stays the same for one drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriveSetup {
    /// A background job: no caller waits, so a transient failure waits in
    /// the queue, and a refused key is a dead letter at once.
    pub background: bool,
    /// The request asks for a streamed answer (never hedged).
    pub stream: bool,
    /// The model the request names (a route step may send another).
    pub model: Option<String>,
    /// The API the request speaks.
    pub api: Api,
    /// The job's backoff between attempts.
    pub backoff: Backoff,
}

/// The deployment's providers and the route the request's model takes.
#[derive(Debug, Clone, Copy)]
pub struct Routing<'a> {
    /// Every provider (breakers are asked by index).
    pub providers: &'a Providers,
    /// The request's route.
    pub route: &'a Route,
}

/// What comes with every event: the time, randomness for the backoff's
/// jitter, and the tenant's retry budget.
pub struct Inputs<'a> {
    /// Milliseconds since the epoch.
    pub now_ms: u64,
    /// The jitter's randomness.
    pub random: &'a mut dyn RandomSource,
    /// The tenant's retry budget (shared by its jobs).
    pub budget: &'a mut RetryBudget,
}

/// A provider the next attempt may go to, in the order to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The provider's index in the deployment's list.
    pub provider: usize,
    /// The model name sent to it.
    pub model: Option<String>,
    /// How long to wait before calling it (the backoff or time it asked for).
    pub wait_ms: u64,
}

/// Which candidate the breakers let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// The candidate at `index` of the order: a normal call, or its
    /// breaker's half-open probe.
    Chosen {
        /// Its index in [`Command::Place`]'s order.
        index: usize,
        /// It goes as the breaker's probe.
        probe: bool,
    },
    /// Every breaker is open; the earliest probe is in this long (none: no candidate).
    Skipped {
        /// Milliseconds to the earliest probe.
        retry_after_ms: Option<u64>,
    },
}

/// The breakers' answers for a [`Command::Place`]'s candidates, asked in
/// order, folded into where the attempt goes: the first that lets it
/// through (as a call or as its half-open probe), or, when every breaker is
/// open, the earliest probe.
#[derive(Debug, Default)]
pub struct Placing {
    asked: usize,
    retry_after_ms: Option<u64>,
}

impl Placing {
    /// The next candidate's breaker answered `permit`: `Some` once one is chosen.
    pub fn on(&mut self, permit: Permit) -> Option<Placed> {
        let index = self.asked;
        self.asked += 1;
        match permit {
            Permit::Call => Some(Placed::Chosen { index, probe: false }),
            Permit::Probe => Some(Placed::Chosen { index, probe: true }),
            Permit::Skip { retry_after_ms } => {
                self.retry_after_ms = Some(self.retry_after_ms.map_or(retry_after_ms, |ms| ms.min(retry_after_ms)));
                None
            }
        }
    }

    /// Every candidate's breaker was asked and none let the attempt through.
    pub fn skipped(self) -> Placed {
        Placed::Skipped { retry_after_ms: self.retry_after_ms }
    }
}

/// A provider's answer to one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A whole reply (or a failed call), judged by [`attempts::judge_reply`] / [`attempts::judge_transport`].
    Judged(Attempted),
    /// The reply streams: the Ledger's pump takes it from here.
    Streams {
        /// Its `Content-Type`.
        content_type: String,
    },
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The breakers' answer to [`Command::Place`].
    Placed(Placed),
    /// A [`Command::Sleep`] is over.
    Woke,
    /// The answer to [`Command::Persist`] and [`Command::Create`]: written, or lost to another
    /// writer (with the job as it now stands; `None`: it is gone).
    Persisted(Result<(), Option<Job>>),
    /// An attempt's call answered.
    Answered {
        /// The attempt.
        attempt: u32,
        /// What it answered.
        answer: Answer,
    },
    /// The hedge timer of `attempt` ([`Command::HedgeAfter`]) ran out.
    HedgeDue {
        /// The attempt it was started for.
        attempt: u32,
    },
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Ask the breakers, in this order, which candidate takes the attempt;
    /// answer with [`Event::Placed`].
    Place {
        /// The candidates.
        order: Vec<Candidate>,
    },
    /// Wait, then [`Event::Woke`].
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// Write the job: a compare-and-swap on `expected` (its version as
    /// read). Answer with [`Event::Persisted`] before anything else.
    Persist {
        /// The job as it is to be stored.
        job: Job,
        /// The version the write expects to replace.
        expected: u64,
    },
    /// The job's first write, with who it belongs to (nothing may be stored
    /// under its key yet). Answer with [`Event::Persisted`] before anything else.
    Create {
        /// The job as it is to be stored.
        job: Job,
    },
    /// Keep an attempt's response (before the job that names it).
    /// `replace`: it replaces what the attempt kept so far.
    SaveResponse {
        /// The attempt.
        attempt: u32,
        /// What is kept.
        response: StoredResponse,
        /// Replace an earlier one.
        replace: bool,
    },
    /// An attempt's answer starts streaming: its response is opened (the
    /// job that says so follows).
    OpenStream {
        /// The attempt.
        attempt: u32,
        /// Its `Content-Type`.
        content_type: String,
    },
    /// Call a provider; answer with [`Event::Answered`].
    Call {
        /// The attempt holding the job.
        ticket: AttemptTicket,
        /// The provider's index.
        provider: usize,
        /// The model name sent to it.
        model: Option<String>,
        /// The call is its breaker's half-open probe.
        probe: bool,
    },
    /// Start the hedge timer; [`Event::HedgeDue`] when it runs out.
    HedgeAfter {
        /// The attempt it is for.
        attempt: u32,
        /// Milliseconds.
        ms: u64,
    },
    /// The caller's answer: the drive is over (a racer that lost may still
    /// answer: keep feeding its [`Event::Answered`] until [`Drive::is_idle`]).
    Finish(Ending),
}

/// How a drive ends for its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// This response.
    Answer {
        /// What the caller gets.
        response: StoredResponse,
        /// The job's state.
        state: JobState,
        /// The attempt it is from.
        attempt: Option<u32>,
        /// When to ask again (a transient failure out of budget).
        retry_after_ms: Option<u64>,
    },
    /// A problem before any attempt (no healthy provider).
    Problem {
        /// The problem.
        problem: Problem,
        /// The job's state.
        state: JobState,
    },
    /// The job is finished with another attempt's answer: its stored result.
    Stored,
    /// The job is still being worked on by someone else: "in progress".
    InProgress,
    /// The answer streams; the attempt holding `ticket` is the pump's.
    Stream {
        /// The streaming attempt.
        ticket: AttemptTicket,
    },
    /// A transition the job refused (a bug, or storage changed under it).
    Broken(String),
}

/// An attempt whose call is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flight {
    ticket: AttemptTicket,
    provider: usize,
}

/// Where the next attempt goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Choice {
    provider: usize,
    model: Option<String>,
    probe: bool,
    wait_ms: u64,
}

/// What the drive is waiting for.
#[derive(Debug, Clone, PartialEq)]
enum Phase {
    /// The breakers' answer for the next attempt.
    Placing(Vec<Candidate>),
    /// Time owed before calling `choice`.
    Owing(Choice),
    /// One call out (`hedge`: its timer may still start a second).
    Calling { flight: Flight, hedge: bool },
    /// One call out, the breakers asked where its hedge goes.
    HedgePlacing { flight: Flight, order: Vec<Candidate> },
    /// Two calls out.
    Racing(Flight, Flight),
    /// One racer answered with a permanent error; the other is awaited.
    Holding { held: Flight, answer: Attempted, other: Flight },
    /// A write is out; `Then` says what follows it.
    Persisting(Box<Then>),
    /// The caller has its answer (or the drive has not started).
    Done,
}

/// What follows a write.
#[derive(Debug, Clone, PartialEq)]
enum Then {
    /// The claim: call.
    Claimed { choice: Choice, ticket: AttemptTicket },
    /// The hedge's claim: call it too and race.
    Hedged { first: Flight, choice: Choice, ticket: AttemptTicket },
    /// An answer recorded: what follows it.
    Recorded { flight: Flight, answer: Attempted, rest: Rest },
    /// A streamed answer's start recorded: the pump's.
    Streaming(AttemptTicket),
    /// Audits of attempts whose answers are not used, then `after`.
    Audited { pending: Vec<(u32, AttemptReport)>, after: After },
    /// A background job's next attempt deferred: the queue has it.
    Deferred,
    /// An answer after its attempt's lease ran out: the lease renewed, so
    /// the attempt still holds the job and its answer is settled.
    Renewed { flight: Flight, settle: Settle },
}

/// An answer that settles its attempt, held while a renewed lease is written.
#[derive(Debug, Clone, PartialEq)]
enum Settle {
    /// A whole answer, to record.
    Record(Attempted, Rest),
    /// A stream's start, to open.
    Stream(String),
}

/// The other racer, when an answer is recorded.
#[derive(Debug, Clone, PartialEq)]
enum Rest {
    /// No other attempt is out.
    Alone,
    /// The other racer is still out.
    Other(Flight),
    /// The other racer answered and lost: it is audited.
    Loser(u32, AttemptReport),
}

/// What follows the audits.
#[derive(Debug, Clone, PartialEq)]
enum After {
    /// The retry step for the attempt that settled the job.
    Step(Flight, Attempted),
    /// The caller is told the job as it stands.
    AsItStands,
    /// Nothing: the caller was answered before.
    Idle,
}

/// One drive of a job.
#[derive(Debug, Clone)]
pub struct Drive {
    setup: DriveSetup,
    job: Job,
    stored: bool,
    retries: Retries,
    /// When each provider may be called again (time its server asked for).
    not_before_ms: Vec<u64>,
    /// The backoff the last failure asked for, owed if the same provider goes next.
    backoff_ms: u64,
    phase: Phase,
    /// A racer that lost and has not answered: audited when it does.
    late: Option<Flight>,
}

/// What one event's handling works with: the routing, the inputs, and the
/// commands produced so far.
struct Cx<'c, 'r, 'i> {
    routing: Routing<'r>,
    inputs: &'c mut Inputs<'i>,
    out: Vec<Command>,
}

impl Cx<'_, '_, '_> {
    fn push(&mut self, command: Command) {
        self.out.push(command);
    }
    fn now_ms(&self) -> u64 {
        self.inputs.now_ms
    }
}

impl Drive {
    /// A drive of `job` (claimable; `stored`: it has been written before).
    pub fn new(setup: DriveSetup, job: Job, stored: bool, providers: &Providers) -> Self {
        // Nothing dedups a resend to the provider: an unknown outcome stops the drive.
        let retries = Retries::new(setup.backoff, UnknownOutcomes::Stop);
        let not_before_ms = vec![0; providers.list().len()];
        Self { setup, job, stored, retries, not_before_ms, backoff_ms: 0, phase: Phase::Done, late: None }
    }

    /// The job as this drive last wrote (or was told) it.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The job, once the drive is over.
    pub fn into_job(self) -> Job {
        self.job
    }

    /// Whether nothing more is awaited: the caller has its answer and no racer is out.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Done && self.late.is_none()
    }

    /// Whether the caller has its answer ([`Command::Finish`] was returned).
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Starts the drive: the first attempt's placement.
    pub fn start(&mut self, routing: Routing<'_>, inputs: &mut Inputs<'_>) -> Vec<Command> {
        let mut cx = Cx { routing, inputs, out: Vec::new() };
        self.place(&mut cx);
        cx.out
    }

    /// Takes one event; returns the commands to perform, in order.
    pub fn on(&mut self, routing: Routing<'_>, event: Event, inputs: &mut Inputs<'_>) -> Vec<Command> {
        let mut cx = Cx { routing, inputs, out: Vec::new() };
        let phase = std::mem::replace(&mut self.phase, Phase::Done);
        self.handle(phase, event, &mut cx);
        cx.out
    }

    fn handle(&mut self, phase: Phase, event: Event, cx: &mut Cx<'_, '_, '_>) {
        match (phase, event) {
            (Phase::Persisting(then), Event::Persisted(written)) => self.persisted(*then, written, cx),
            (Phase::Placing(order), Event::Placed(placed)) => match placed {
                Placed::Chosen { index, probe } => match order.get(index) {
                    Some(candidate) => {
                        let choice = Choice::of(candidate, probe);
                        if choice.wait_ms > 0 {
                            cx.push(Command::Sleep { ms: choice.wait_ms });
                            self.phase = Phase::Owing(choice);
                        } else {
                            self.claim(choice, cx);
                        }
                    }
                    None => self.finish(Ending::Broken("the breakers chose no candidate".into()), cx),
                },
                Placed::Skipped { retry_after_ms } => {
                    let problem = attempts::no_healthy_provider(attempts::earliest_probe_ms(retry_after_ms));
                    self.finish(Ending::Problem { problem, state: self.job.state() }, cx);
                }
            },
            (Phase::Owing(choice), Event::Woke) => self.claim(choice, cx),
            (Phase::Calling { flight, .. }, Event::Answered { attempt, answer })
                if attempt == flight.ticket.attempt =>
            {
                match answer {
                    Answer::Judged(answer) => self.record(flight, answer, Rest::Alone, cx),
                    // Past the first byte the provider is never called again
                    // automatically: the job says so before anyone reads a byte.
                    Answer::Streams { content_type } if self.hedged(cx).is_none() => {
                        self.open_stream(flight, content_type, cx)
                    }
                    // A hedged request is not streamed: a stream is a provider
                    // answering SSE to a request that did not ask for it.
                    answer @ Answer::Streams { .. } => self.record(flight, unstreamed(answer), Rest::Alone, cx),
                }
            }
            (Phase::Calling { flight, hedge: true }, Event::HedgeDue { attempt })
                if attempt == flight.ticket.attempt =>
            {
                self.hedge(flight, cx)
            }
            // The first answered while the breakers were asked: no hedge
            // leaves (a call never sent must not be paid for after the race).
            (Phase::HedgePlacing { flight, .. }, Event::Answered { attempt, answer })
                if attempt == flight.ticket.attempt =>
            {
                self.record(flight, unstreamed(answer), Rest::Alone, cx)
            }
            (Phase::HedgePlacing { flight, order }, Event::Placed(placed)) => match placed {
                Placed::Chosen { index, probe } if index < order.len() => {
                    let choice = Choice::of(&order[index], probe);
                    let read = self.job.version();
                    let name = &cx.routing.providers.get(choice.provider).name;
                    match self.job.hedge(read, cx.now_ms(), name, choice.model.as_deref()) {
                        Ok(ticket) => self.persist(Some(read), Then::Hedged { first: flight, choice, ticket }, cx),
                        Err(_) => self.phase = Phase::Calling { flight, hedge: false },
                    }
                }
                _ => self.phase = Phase::Calling { flight, hedge: false },
            },
            (Phase::Racing(a, b), Event::Answered { attempt, answer })
                if attempt == a.ticket.attempt || attempt == b.ticket.attempt =>
            {
                let (first, other) = if attempt == a.ticket.attempt { (a, b) } else { (b, a) };
                let answer = unstreamed(answer);
                match attempts::first_answer(answer.decision()) {
                    RaceCall::WaitForOther => self.phase = Phase::Holding { held: first, answer, other },
                    RaceCall::First => self.record(first, answer, Rest::Other(other), cx),
                }
            }
            (Phase::Holding { held, answer, other }, Event::Answered { attempt, answer: other_answer })
                if attempt == other.ticket.attempt =>
            {
                let other_answer = unstreamed(other_answer);
                let ((winner, won), (loser, lost)) = if attempts::other_wins(other_answer.decision()) {
                    ((other, other_answer), (held, answer))
                } else {
                    ((held, answer), (other, other_answer))
                };
                self.record(winner, won, Rest::Loser(loser.ticket.attempt, lost.report), cx);
            }
            (Phase::Done, Event::Answered { attempt, answer })
                if self.late.is_some_and(|l| l.ticket.attempt == attempt) =>
            {
                self.late = None;
                self.audit(vec![(attempt, unstreamed(answer).report)], After::Idle, cx);
            }
            // Anything else is stale (a timer of an attempt no longer out, a
            // placement the phase moved past): nothing changes.
            (phase, _) => self.phase = phase,
        }
    }

    /// Whether the route races a second attempt (never for a streamed request).
    fn hedged(&self, cx: &Cx<'_, '_, '_>) -> Option<u64> {
        cx.routing.route.hedge_after_ms.filter(|_| !self.setup.stream)
    }

    /// Asks where the next attempt goes.
    fn place(&mut self, cx: &mut Cx<'_, '_, '_>) {
        let last = self.job.attempts().last().map(|a| a.provider.clone());
        let order = self.candidates(cx, last.as_deref(), None, self.backoff_ms, true);
        if order.is_empty() {
            let problem = attempts::no_healthy_provider(attempts::earliest_probe_ms(None));
            return self.finish(Ending::Problem { problem, state: self.job.state() }, cx);
        }
        cx.push(Command::Place { order: order.clone() });
        self.phase = Phase::Placing(order);
    }

    /// The core's placement of the next attempt, as candidates.
    fn candidates(
        &self,
        cx: &Cx<'_, '_, '_>,
        last: Option<&str>,
        except: Option<usize>,
        backoff_ms: u64,
        may_wait: bool,
    ) -> Vec<Candidate> {
        let Routing { providers, route } = cx.routing;
        route
            .placement(providers, self.setup.api, last, except, &self.not_before_ms, backoff_ms, cx.now_ms(), may_wait)
            .into_iter()
            .map(|p| Candidate {
                provider: p.step.provider,
                model: p.step.model.clone().or_else(|| self.setup.model.clone()),
                wait_ms: p.wait_ms,
            })
            .collect()
    }

    /// Claims the job for an attempt on `choice`: durable before the call.
    fn claim(&mut self, choice: Choice, cx: &mut Cx<'_, '_, '_>) {
        let read = self.job.version();
        let name = &cx.routing.providers.get(choice.provider).name;
        match self.job.claim(read, cx.now_ms(), name, choice.model.as_deref()) {
            Ok(ticket) => {
                // A job not stored yet is written with its first claim (one write, not two).
                let expected = self.stored.then_some(read);
                self.stored = true;
                self.persist(expected, Then::Claimed { choice, ticket }, cx);
            }
            Err(error) => self.finish(Ending::Broken(format!("claim refused: {error}")), cx),
        }
    }

    /// Starts a second attempt racing a slow first one, if one is left and
    /// another provider is healthy (a hedge never waits).
    fn hedge(&mut self, flight: Flight, cx: &mut Cx<'_, '_, '_>) {
        let name = cx.routing.providers.get(flight.provider).name.clone();
        let order = self.candidates(cx, Some(&name), Some(flight.provider), 0, false);
        if self.job.attempts_left() == 0 || order.is_empty() {
            self.phase = Phase::Calling { flight, hedge: false };
            return;
        }
        cx.push(Command::Place { order: order.clone() });
        self.phase = Phase::HedgePlacing { flight, order };
    }

    /// Records an attempt's answer if it still holds the job.
    fn record(&mut self, flight: Flight, answer: Attempted, rest: Rest, cx: &mut Cx<'_, '_, '_>) {
        // An answer that keeps no response (unknown) changes nothing a
        // replay reads: its write finds out by itself whether it holds the job.
        if !Transition::of(answer.observed.classification, self.setup.background).keeps_response() {
            return self.record_held(flight, answer, rest, cx);
        }
        if let Some(Settle::Record(answer, rest)) = self.renew_if_late(flight, Settle::Record(answer, rest), cx) {
            self.record_held(flight, answer, rest, cx);
        }
    }

    /// An answer that came after its attempt's lease ran out: whoever
    /// looked at the job meanwhile took the attempt for lost, and the job
    /// may since have died naming it, so its answer is kept (keyed by the
    /// attempt's number) only once a write renewing its lease went
    /// through. Returns `settle` when the lease still holds (or cannot be
    /// renewed: the transition finds out), `None` when the renewal is out.
    fn renew_if_late(&mut self, flight: Flight, settle: Settle, cx: &mut Cx<'_, '_, '_>) -> Option<Settle> {
        if self.job.lease_remaining_ms(cx.now_ms()) > 0 {
            return Some(settle);
        }
        let read = self.job.version();
        match self.job.extend_lease(flight.ticket, cx.now_ms()) {
            Ok(ticket) => {
                self.persist(Some(read), Then::Renewed { flight: Flight { ticket, ..flight }, settle }, cx);
                None
            }
            Err(_) => Some(settle),
        }
    }

    /// Records the answer of an attempt whose lease holds.
    fn record_held(&mut self, flight: Flight, answer: Attempted, rest: Rest, cx: &mut Cx<'_, '_, '_>) {
        let read = self.job.version();
        let transition = Transition::of(answer.observed.classification, self.setup.background);
        match transition.apply(&mut self.job, flight.ticket, cx.now_ms(), answer.report) {
            Ok(()) => {
                // The response first (keyed by attempt: no one else writes
                // it), then the job that points at it.
                if transition.keeps_response() {
                    let response = answer.response.clone();
                    cx.push(Command::SaveResponse { attempt: flight.ticket.attempt, response, replace: false });
                }
                self.persist(Some(read), Then::Recorded { flight, answer, rest }, cx);
            }
            // It no longer holds the job: only audited.
            Err(_) => self.lost(flight, answer.report, rest, cx),
        }
    }

    /// An attempt lost the job to another writer: it is audited as
    /// discarded, and the caller gets the job as it now stands.
    fn lost(&mut self, flight: Flight, report: AttemptReport, rest: Rest, cx: &mut Cx<'_, '_, '_>) {
        let mut pending = vec![(flight.ticket.attempt, report)];
        match rest {
            Rest::Alone => {}
            Rest::Loser(attempt, report) => pending.push((attempt, report)),
            // The other racer is late: audited when it answers.
            Rest::Other(other) => self.late = Some(other),
        }
        self.audit(pending, After::AsItStands, cx);
    }

    /// The answer starts streaming: recorded before anyone reads it.
    fn open_stream(&mut self, flight: Flight, content_type: String, cx: &mut Cx<'_, '_, '_>) {
        if let Some(Settle::Stream(content_type)) = self.renew_if_late(flight, Settle::Stream(content_type), cx) {
            self.open_stream_held(flight, content_type, cx);
        }
    }

    /// Opens the stream of an attempt whose lease holds.
    fn open_stream_held(&mut self, flight: Flight, content_type: String, cx: &mut Cx<'_, '_, '_>) {
        let read = self.job.version();
        match self.job.mark_streaming(flight.ticket, cx.now_ms()) {
            Ok(ticket) => {
                cx.push(Command::OpenStream { attempt: ticket.attempt, content_type });
                self.persist(Some(read), Then::Streaming(ticket), cx);
            }
            Err(error) => self.finish(Ending::Broken(format!("stream refused: {error}")), cx),
        }
    }

    /// Notes each attempt of `pending` as discarded on the job (a write
    /// each), then goes on with `after`.
    fn audit(&mut self, mut pending: Vec<(u32, AttemptReport)>, after: After, cx: &mut Cx<'_, '_, '_>) {
        while !pending.is_empty() {
            let (attempt, report) = pending.remove(0);
            let read = self.job.version();
            if self.job.note_discarded(attempt, cx.now_ms(), report) {
                return self.persist(Some(read), Then::Audited { pending, after }, cx);
            }
        }
        match after {
            After::Step(flight, answer) => self.step(flight, answer, cx),
            After::AsItStands => self.as_it_stands(cx),
            After::Idle => {}
        }
    }

    /// What a write's answer leads to.
    fn persisted(&mut self, then: Then, written: Result<(), Option<Job>>, cx: &mut Cx<'_, '_, '_>) {
        let current = match written {
            Ok(()) => {
                return self.written(then, cx);
            }
            Err(current) => current,
        };
        let Some(current) = current else {
            return self.finish(Ending::Broken("the job vanished during an attempt".into()), cx);
        };
        // The write lost to another writer: from the job as it now stands.
        self.job = current;
        match then {
            Then::Recorded { flight, answer, rest } => self.lost(flight, answer.report, rest, cx),
            // An audit that lost is dropped (it only adds to the trail).
            Then::Audited { pending, after } => self.audit(pending, after, cx),
            Then::Hedged { first, .. } => {
                self.late = Some(first);
                self.as_it_stands(cx);
            }
            // The attempt was taken for lost: its answer is only audited.
            Then::Renewed { flight, settle: Settle::Record(answer, rest) } => {
                self.lost(flight, answer.report, rest, cx)
            }
            Then::Claimed { .. } | Then::Streaming(_) | Then::Deferred | Then::Renewed { .. } => self.as_it_stands(cx),
        }
    }

    /// What follows a write that went through.
    fn written(&mut self, then: Then, cx: &mut Cx<'_, '_, '_>) {
        match then {
            Then::Claimed { choice, ticket } => {
                let flight = Flight { ticket, provider: choice.provider };
                cx.push(Command::Call { ticket, provider: choice.provider, model: choice.model, probe: choice.probe });
                let hedge_after_ms = self.hedged(cx);
                if let Some(ms) = hedge_after_ms {
                    cx.push(Command::HedgeAfter { attempt: ticket.attempt, ms });
                }
                self.phase = Phase::Calling { flight, hedge: hedge_after_ms.is_some() };
            }
            Then::Hedged { first, choice, ticket } => {
                cx.push(Command::Call { ticket, provider: choice.provider, model: choice.model, probe: choice.probe });
                self.phase = Phase::Racing(first, Flight { ticket, provider: choice.provider });
            }
            Then::Recorded { flight, answer, rest } => match rest {
                Rest::Alone => self.step(flight, answer, cx),
                Rest::Loser(attempt, report) => self.audit(vec![(attempt, report)], After::Step(flight, answer), cx),
                // The job is won: the other racer is late.
                Rest::Other(other) if self.job.state() == JobState::Completed => {
                    self.late = Some(other);
                    self.step(flight, answer, cx);
                }
                // The first to answer failed: the job is the other racer's.
                Rest::Other(other) => self.phase = Phase::Calling { flight: other, hedge: false },
            },
            Then::Streaming(ticket) => self.finish(Ending::Stream { ticket }, cx),
            Then::Audited { pending, after } => self.audit(pending, after, cx),
            Then::Deferred => self.as_it_stands(cx),
            Then::Renewed { flight, settle: Settle::Record(answer, rest) } => {
                self.record_held(flight, answer, rest, cx)
            }
            Then::Renewed { flight, settle: Settle::Stream(content_type) } => {
                self.open_stream_held(flight, content_type, cx)
            }
        }
    }

    /// What follows an answer that settled the job: the caller's answer, or
    /// the next attempt after the backoff.
    fn step(&mut self, flight: Flight, answer: Attempted, cx: &mut Cx<'_, '_, '_>) {
        let attempt = flight.ticket.attempt;
        let state = self.job.state();
        if state.is_terminal() && self.job.replayed_attempt().is_some_and(|a| a.number != attempt) {
            // The job's answer is another attempt's: its stored response is
            // the result, so the first answer is the one every replay gives.
            return self.finish(Ending::Stored, cx);
        }
        let may_try_again = state == JobState::Failed;
        let step = self.retries.next(&answer.observed, may_try_again, cx.inputs.budget, cx.inputs.random);
        match step {
            Step::Deliver => {
                let ending =
                    Ending::Answer { response: answer.response, state, attempt: Some(attempt), retry_after_ms: None };
                self.finish(ending, cx);
            }
            // A background job waits in the queue, not here.
            Step::Wait(ms) if self.setup.background => {
                let read = self.job.version();
                self.job.defer_until(cx.now_ms() + ms, cx.now_ms());
                self.persist(Some(read), Then::Deferred, cx);
            }
            Step::Wait(ms) => {
                // Time the provider's server asked for is owed to it alone.
                if let Some(server_ms) = answer.observed.server_delay_ms
                    && let Some(owed) = self.not_before_ms.get_mut(flight.provider)
                {
                    *owed = cx.now_ms() + server_ms;
                }
                self.backoff_ms = ms;
                self.place(cx);
            }
            // Unknown: this attempt's outcome, or a hedge's other racer's.
            Step::GiveUp if state == JobState::Unknown => {
                let unknown = crate::job::answer::unknown_outcome(&self.job, cx.now_ms());
                let response = StoredResponse::problem(&unknown.problem);
                // The last attempt (or UNKNOWN_POLICY=block): this answer is
                // the job's, kept before anyone reads it, so the dead job
                // replays what its caller got.
                if let Some(last) = unknown.final_attempt {
                    cx.push(Command::SaveResponse { attempt: last, response: response.clone(), replace: true });
                }
                let attempt = unknown.final_attempt.unwrap_or(attempt);
                let retry_after_ms = unknown.problem.retry_after_ms;
                self.finish(Ending::Answer { response, state, attempt: Some(attempt), retry_after_ms }, cx);
            }
            // Out of attempts (dead: final) or of budget (ask again later).
            Step::GiveUp => {
                let retry_after_ms = attempts::ask_again_after_ms(may_try_again, answer.observed.server_delay_ms);
                let ending =
                    Ending::Answer { response: answer.response, state, attempt: Some(attempt), retry_after_ms };
                self.finish(ending, cx);
            }
        }
    }

    /// The caller is told the job as it now stands: its stored result once
    /// finished, else that it is in progress.
    fn as_it_stands(&mut self, cx: &mut Cx<'_, '_, '_>) {
        let ending = if self.job.state().is_terminal() { Ending::Stored } else { Ending::InProgress };
        self.finish(ending, cx);
    }

    fn finish(&mut self, ending: Ending, cx: &mut Cx<'_, '_, '_>) {
        cx.push(Command::Finish(ending));
        self.phase = Phase::Done;
    }

    /// Writes the job over version `expected` (`None`: its first write).
    fn persist(&mut self, expected: Option<u64>, then: Then, cx: &mut Cx<'_, '_, '_>) {
        let job = self.job.clone();
        cx.push(match expected {
            Some(expected) => Command::Persist { job, expected },
            None => Command::Create { job },
        });
        self.phase = Phase::Persisting(Box::new(then));
    }
}

impl Choice {
    fn of(candidate: &Candidate, probe: bool) -> Self {
        Self { provider: candidate.provider, model: candidate.model.clone(), probe, wait_ms: candidate.wait_ms }
    }
}

/// An answer where a stream was not asked for: a stream cannot be judged
/// (it may have been processed), so its outcome is unknown.
fn unstreamed(answer: Answer) -> Attempted {
    match answer {
        Answer::Judged(attempted) => attempted,
        Answer::Streams { .. } => attempts::unjudgeable("the provider streamed an unrequested answer"),
    }
}

pub mod shell;

#[cfg(test)]
mod tests;
