//! The job: the durable record of one intent, and its attempts.
//!
//! ```text
//!             claim                   success / permanent error
//!  pending ─────────► in_flight ─────────────────────────────► completed   (terminal, replayed)
//!                       │  │ transient error, attempts left
//!                       │  └──────────► failed ── claim ──► in_flight
//!                       │ timeout, lost connection, crash (lease expires)
//!                       └──────────► unknown ── lease over & policy allows ── claim ──► in_flight
//!  failed / unknown, attempts exhausted ──► dead (terminal, dead-lettered, replayed as the last error)
//! ```
//!
//! A hedged job has two attempts in flight at once ([`Job::hedge`]): the
//! first to report a final answer completes the job and the other is marked
//! `lost_race`; its answer, if it still comes, is only audited
//! ([`Job::note_discarded`]). A transient failure of one racer leaves the
//! job in flight for the other.
//!
//! Every transition is a compare-and-swap: it checks the job's `version` (or
//! the [`AttemptTicket`] that carries it), bumps it, and either applies whole
//! or returns a [`JobError`] leaving the job untouched. A result is written
//! only by the attempt that still holds the job, so a late or reverse-order
//! attempt loses instead of overwriting the winner.
//!
//! Time is the `now_ms` argument (milliseconds since the Unix epoch); the job
//! never reads a clock.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::classify::ErrorClass;
use crate::fingerprint::Fingerprint;
use crate::reply::Usage;

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Recorded, not yet claimed by any attempt.
    Pending,
    /// An attempt holds the job until its lease ends.
    InFlight,
    /// The last attempt failed transiently; the next claim may retry.
    Failed,
    /// The last attempt's outcome is unknown (timeout or dropped connection
    /// after the request left); no claim until the lease ends.
    Unknown,
    /// Finished with a final answer (a success or a permanent error). Terminal.
    Completed,
    /// Gave up after the attempt cap; replayed as the last error. Terminal.
    Dead,
    /// A streamed answer that ended without its provider's terminal event
    /// (a dropped connection, a silent upstream, a lost runtime): the partial
    /// stream is kept and replayed with an error event appended. Never called
    /// again automatically: its tokens were being billed. Terminal.
    Interrupted,
    /// Cancelled by a caller while it streamed: the upstream call was
    /// aborted, the partial stream is kept and replayed as such. Terminal.
    Cancelled,
}

impl JobState {
    /// Whether the job has a final outcome that duplicates get replayed.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Dead | Self::Interrupted | Self::Cancelled)
    }

    /// The state's name on the wire (`in_flight`, `completed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InFlight => "in_flight",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
            Self::Completed => "completed",
            Self::Dead => "dead",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
        }
    }

    /// The state named `name` on the wire ([`JobState::as_str`]), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::from(name)).ok()
    }
}

/// What to do once an unknown attempt's lease has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownPolicy {
    /// Allow a new attempt (risking a second paid call if the first one did
    /// finish upstream after all). The default.
    #[default]
    RetryAfterLease,
    /// Never start another attempt; an operator must resolve the job.
    Block,
}

/// The limits a job runs under, fixed when it is created so a job keeps the
/// rules it started with across deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPolicy {
    max_attempts: u32,
    attempt_lease_ms: u64,
    unknown_lease_ms: u64,
    retention_ms: u64,
    unknown_policy: UnknownPolicy,
}

/// Why a [`JobPolicy`] was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// At least one attempt must be allowed.
    NoAttempts,
    /// A lease of 0 ms would let a second attempt start at once.
    ZeroLease,
    /// Retention must outlast the leases, or a job could vanish mid-attempt.
    RetentionTooShort,
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoAttempts => "max_attempts must be at least 1",
            Self::ZeroLease => "leases must be at least 1 ms",
            Self::RetentionTooShort => "retention must be longer than the attempt and unknown leases together",
        })
    }
}

impl std::error::Error for PolicyError {}

impl JobPolicy {
    /// A validated policy.
    pub fn new(
        max_attempts: u32,
        attempt_lease_ms: u64,
        unknown_lease_ms: u64,
        retention_ms: u64,
        unknown_policy: UnknownPolicy,
    ) -> Result<Self, PolicyError> {
        if max_attempts == 0 {
            return Err(PolicyError::NoAttempts);
        }
        if attempt_lease_ms == 0 || unknown_lease_ms == 0 {
            return Err(PolicyError::ZeroLease);
        }
        if retention_ms <= attempt_lease_ms.saturating_add(unknown_lease_ms) {
            return Err(PolicyError::RetentionTooShort);
        }
        Ok(Self { max_attempts, attempt_lease_ms, unknown_lease_ms, retention_ms, unknown_policy })
    }

    /// Attempts allowed per job, across every layer.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// How long a claimed attempt holds the job before it is presumed lost.
    pub fn attempt_lease_ms(&self) -> u64 {
        self.attempt_lease_ms
    }

    /// How long an unknown attempt blocks new attempts.
    pub fn unknown_lease_ms(&self) -> u64 {
        self.unknown_lease_ms
    }

    /// How long the job is kept after creation.
    pub fn retention_ms(&self) -> u64 {
        self.retention_ms
    }

    /// What happens when an unknown lease ends.
    pub fn unknown_policy(&self) -> UnknownPolicy {
        self.unknown_policy
    }
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Still holding the job.
    Running,
    /// Won the job with a success.
    Succeeded,
    /// Won the job with a permanent error (400, `content_filter`, …).
    Rejected,
    /// Failed transiently; another attempt may follow.
    Failed,
    /// Timed out or lost its connection after the request left.
    Unknown,
    /// Its lease ran out with no report (the runtime lost it).
    Abandoned,
    /// Reported after it had lost the job; its result was not used.
    Discarded,
    /// A hedged attempt that was still running when the other one won the
    /// job: its answer, if it comes, is audited (it was paid) and never used.
    LostRace,
    /// Its stream ended without the provider's terminal event.
    Interrupted,
    /// Its stream was cancelled by a caller.
    Cancelled,
}

/// The audit record of one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// The job's version right after this attempt claimed it.
    pub claimed_version: u64,
    /// Who was called (`demo`, `openai`, a base URL's host).
    pub provider: String,
    /// The model asked for, when known.
    pub model: Option<String>,
    /// When the attempt claimed the job.
    pub started_ms: u64,
    /// When it reported (or was found abandoned).
    pub ended_ms: Option<u64>,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The upstream HTTP status, when one arrived.
    pub status: Option<u16>,
    /// `ended_ms - started_ms`.
    pub latency_ms: Option<u64>,
    /// Tokens the provider reported.
    pub usage: Option<Usage>,
    /// What kind of outcome it was.
    pub error_class: Option<ErrorClass>,
    /// Its answer started streaming: from then on the provider is never
    /// called again for this job, whatever happens to the stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub streamed: bool,
    /// When a streamed answer began (time to first byte: this minus `started_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_byte_ms: Option<u64>,
}

/// What an attempt reports when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AttemptReport {
    /// The upstream HTTP status, when one arrived.
    pub status: Option<u16>,
    /// Tokens the provider reported.
    pub usage: Option<Usage>,
    /// What kind of outcome it was ([`crate::classify::classify`] names it).
    pub error_class: Option<ErrorClass>,
}

/// What an operator did to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OperatorAction {
    /// A dead job was given a fresh allowance of attempts ([`Job::replay_dead`]).
    Replayed,
    /// An unknown job was settled as succeeded with a response the
    /// operator gave ([`Job::resolve_succeeded`]).
    ResolvedSucceeded,
    /// An unknown job was allowed one new attempt now ([`Job::allow_attempt`]).
    AllowedAttempt,
}

/// One operator action in a job's audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorEvent {
    /// What was done.
    pub action: OperatorAction,
    /// Who asked (the admin key's name).
    pub by: String,
    /// The operator request's own idempotency key: the same request twice
    /// changes the job once.
    pub request: String,
    /// When.
    pub at_ms: u64,
}

/// Proof that an attempt holds the job: needed to report its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptTicket {
    /// The attempt's number.
    pub attempt: u32,
    /// The job's version right after the claim.
    pub version: u64,
}

/// Why a transition was refused. The job is unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobError {
    /// Someone else changed the job since it was read.
    VersionConflict {
        /// The version the caller read.
        expected: u64,
        /// The version the job has.
        actual: u64,
    },
    /// Another attempt holds the job.
    InFlight {
        /// The holding attempt.
        attempt: u32,
        /// Time left on its lease.
        lease_remaining_ms: u64,
    },
    /// The last attempt's outcome is unknown; wait for its lease.
    UnknownLease {
        /// Time left on the unknown lease.
        retry_after_ms: u64,
    },
    /// The last attempt's outcome is unknown and the policy is `block`.
    Blocked,
    /// The job is completed or dead; replay it instead.
    Finished {
        /// `Completed` or `Dead`.
        state: JobState,
    },
    /// The ticket's attempt no longer holds the job (a late or reverse-order
    /// report): its result must be discarded.
    StaleAttempt {
        /// The ticket's attempt.
        attempt: u32,
    },
    /// Only a job with one running, non-streaming attempt can be hedged.
    NotHedgeable,
    /// Only a dead job can be replayed.
    NotReplayable {
        /// Its state.
        state: JobState,
    },
    /// Only an unknown job (or one that died unknown) can be resolved.
    NotResolvable {
        /// Its state.
        state: JobState,
    },
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::VersionConflict { expected, actual } => {
                write!(f, "job changed concurrently (expected version {expected}, found {actual})")
            }
            Self::InFlight { attempt, lease_remaining_ms } => {
                write!(f, "attempt {attempt} holds the job for up to {lease_remaining_ms} ms more")
            }
            Self::UnknownLease { retry_after_ms } => {
                write!(f, "the last attempt's outcome is unknown; no new attempt for {retry_after_ms} ms")
            }
            Self::Blocked => f.write_str("the last attempt's outcome is unknown and the policy blocks retries"),
            Self::Finished { state } => write!(f, "job is {} and is replayed, not run again", state.as_str()),
            Self::StaleAttempt { attempt } => {
                write!(f, "attempt {attempt} no longer holds the job")
            }
            Self::NotHedgeable => f.write_str("only a job with one running, non-streaming attempt can be hedged"),
            Self::NotReplayable { state } => {
                write!(f, "only a dead job can be replayed; this one is {}", state.as_str())
            }
            Self::NotResolvable { state } => {
                write!(f, "only an unknown job can be resolved; this one is {}", state.as_str())
            }
        }
    }
}

impl std::error::Error for JobError {}

/// The durable record of one intent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    fingerprint: Fingerprint,
    state: JobState,
    version: u64,
    created_ms: u64,
    updated_ms: u64,
    /// In flight: the holding attempt's lease. Unknown: no claim before this.
    lease_until_ms: Option<u64>,
    /// The attempt whose result is the job's result.
    completed_by: Option<u32>,
    /// Two attempts are (or were, until the job settles) in flight at once:
    /// tickets are then checked by their attempt still running, not by the
    /// job's version (the other racer's writes bump it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    racing: bool,
    /// In a race, a racer ended unknown: if the other one does not win,
    /// the job is unknown until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unknown_until_ms: Option<u64>,
    /// Run by the queue consumer, not by a waiting caller.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    background: bool,
    /// Attempts operators granted on top of the policy's cap.
    #[serde(default, skip_serializing_if = "is_zero")]
    extra_attempts: u32,
    /// What operators did to the job, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    events: Vec<OperatorEvent>,
    /// A background job's next attempt waits until then (its backoff).
    /// Its queue messages are counted outside the job (a send must never
    /// invalidate the holding attempt's compare-and-swap).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    not_before_ms: u64,
    policy: JobPolicy,
    attempts: Vec<Attempt>,
}

impl Job {
    /// A new pending job at version 0.
    pub fn new(fingerprint: Fingerprint, now_ms: u64, policy: JobPolicy) -> Self {
        Self {
            fingerprint,
            state: JobState::Pending,
            version: 0,
            created_ms: now_ms,
            updated_ms: now_ms,
            lease_until_ms: None,
            completed_by: None,
            racing: false,
            unknown_until_ms: None,
            background: false,
            extra_attempts: 0,
            events: Vec::new(),
            not_before_ms: 0,
            policy,
            attempts: Vec::new(),
        }
    }

    /// The request fingerprint the job was created for.
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// The current state (as last written; see [`Job::expire`] for time).
    pub fn state(&self) -> JobState {
        self.state
    }

    /// Bumped by every transition.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// When the job was created.
    pub fn created_ms(&self) -> u64 {
        self.created_ms
    }

    /// When the job last changed.
    pub fn updated_ms(&self) -> u64 {
        self.updated_ms
    }

    /// When the job may be deleted.
    pub fn expires_ms(&self) -> u64 {
        self.created_ms.saturating_add(self.policy.retention_ms)
    }

    /// The current lease's end, if in flight or unknown.
    pub fn lease_until_ms(&self) -> Option<u64> {
        self.lease_until_ms
    }

    /// The attempt whose result is the job's result, once completed.
    pub fn completed_by(&self) -> Option<u32> {
        self.completed_by
    }

    /// The limits this job runs under.
    pub fn policy(&self) -> &JobPolicy {
        &self.policy
    }

    /// Every attempt, oldest first.
    pub fn attempts(&self) -> &[Attempt] {
        &self.attempts
    }

    /// The attempt whose response duplicates are given: the winner of a
    /// completed job, the last attempt of a dead one.
    pub fn replayed_attempt(&self) -> Option<&Attempt> {
        match self.state {
            JobState::Completed => self.completed_by.and_then(|n| self.attempts.iter().find(|a| a.number == n)),
            JobState::Dead | JobState::Interrupted | JobState::Cancelled => self.attempts.last(),
            _ => None,
        }
    }

    /// Whether retention has passed.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_ms()
    }

    /// Applies the transitions that time alone causes, and says whether any
    /// did: an in-flight attempt whose lease ran out is presumed lost and the
    /// job becomes unknown; an unknown job whose lease ended with no attempts
    /// left is dead.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let lease_over = self.lease_until_ms.is_some_and(|until| now_ms >= until);
        match self.state {
            // A stream nobody renewed: its pump is gone, and the provider
            // was already paid for its first tokens. Never run it again.
            JobState::InFlight if lease_over && self.is_streaming() => {
                self.settle_interrupted(now_ms);
                true
            }
            JobState::InFlight if lease_over => {
                for number in self.running_attempts() {
                    self.end_attempt(number, now_ms, AttemptOutcome::Abandoned, AttemptReport::default());
                }
                self.racing = false;
                self.unknown_until_ms = None;
                self.state = JobState::Unknown;
                self.lease_until_ms = Some(now_ms.saturating_add(self.policy.unknown_lease_ms));
                self.bump(now_ms);
                true
            }
            JobState::Unknown
                if lease_over
                    && self.attempts_left() == 0
                    && self.policy.unknown_policy == UnknownPolicy::RetryAfterLease =>
            {
                self.state = JobState::Dead;
                self.lease_until_ms = None;
                self.bump(now_ms);
                true
            }
            _ => false,
        }
    }

    /// Attempts the job may still start.
    pub fn attempts_left(&self) -> u32 {
        self.max_attempts().saturating_sub(self.attempts.len() as u32)
    }

    /// Attempts allowed in all: the policy's cap and what operators granted.
    pub fn max_attempts(&self) -> u32 {
        self.policy.max_attempts.saturating_add(self.extra_attempts)
    }

    /// Whether the queue consumer runs this job (`Prefer: respond-async`).
    pub fn is_background(&self) -> bool {
        self.background
    }

    /// Marks the job as run in the background. Returns whether that changed
    /// anything (a write, bumping the version).
    pub fn run_in_background(&mut self, now_ms: u64) -> bool {
        if self.background || self.state.is_terminal() {
            return false;
        }
        self.background = true;
        self.bump(now_ms);
        true
    }

    /// No attempt before this (a background job's backoff); 0 when none.
    pub fn not_before_ms(&self) -> u64 {
        self.not_before_ms
    }

    /// Records that the next attempt must not run before `not_before_ms` (a
    /// background job's backoff; a write).
    pub fn defer_until(&mut self, not_before_ms: u64, now_ms: u64) {
        self.not_before_ms = not_before_ms;
        self.bump(now_ms);
    }

    /// What operators did to the job, oldest first.
    pub fn operator_events(&self) -> &[OperatorEvent] {
        &self.events
    }

    /// An operator action's common check: the caller's copy is current, and
    /// `false` when this operator request was already applied (the same
    /// request twice changes the job once).
    fn fresh_operator_request(&self, expected_version: u64, request: &str) -> Result<bool, JobError> {
        self.check_version(expected_version)?;
        Ok(!self.events.iter().any(|e| e.request == request))
    }

    fn note_operator(&mut self, action: OperatorAction, by: &str, request: &str, now_ms: u64) {
        self.events.push(OperatorEvent { action, by: by.to_owned(), request: request.to_owned(), at_ms: now_ms });
        self.bump(now_ms);
    }

    /// Gives a dead job `grant` fresh attempts under the same job and key:
    /// it becomes `failed`, claimable again. The same operator `request`
    /// twice changes the job once (`Ok(false)` the second time).
    pub fn replay_dead(
        &mut self,
        expected_version: u64,
        grant: u32,
        by: &str,
        request: &str,
        now_ms: u64,
    ) -> Result<bool, JobError> {
        if !self.fresh_operator_request(expected_version, request)? {
            return Ok(false);
        }
        if self.state != JobState::Dead || grant == 0 {
            return Err(JobError::NotReplayable { state: self.state });
        }
        self.extra_attempts = self.extra_attempts.saturating_add(grant);
        self.state = JobState::Failed;
        self.lease_until_ms = None;
        self.completed_by = None;
        self.note_operator(OperatorAction::Replayed, by, request, now_ms);
        Ok(true)
    }

    /// Settles an unknown job (or one that died unknown) as succeeded with a
    /// response the operator found (say in the provider's dashboard): an
    /// operator attempt is recorded and completes the job. Returns that
    /// attempt's number, whose response the caller stores before writing the
    /// job; `None` when `request` was already applied.
    pub fn resolve_succeeded(
        &mut self,
        expected_version: u64,
        status: u16,
        by: &str,
        request: &str,
        now_ms: u64,
    ) -> Result<Option<u32>, JobError> {
        if !self.fresh_operator_request(expected_version, request)? {
            return Ok(None);
        }
        self.check_resolvable()?;
        let number = self.attempts.len() as u32 + 1;
        self.attempts.push(Attempt {
            number,
            claimed_version: self.version + 1,
            provider: "operator".into(),
            model: None,
            started_ms: now_ms,
            ended_ms: Some(now_ms),
            outcome: AttemptOutcome::Succeeded,
            status: Some(status),
            latency_ms: Some(0),
            usage: None,
            error_class: Some(ErrorClass::None),
            streamed: false,
            first_byte_ms: None,
        });
        self.state = JobState::Completed;
        self.completed_by = Some(number);
        self.lease_until_ms = None;
        self.note_operator(OperatorAction::ResolvedSucceeded, by, request, now_ms);
        Ok(Some(number))
    }

    /// Lets an unknown job (or one that died unknown) make one new attempt
    /// now, whatever its lease or policy says: the job becomes `failed`
    /// (claimable), with one more attempt granted if none is left.
    pub fn allow_attempt(
        &mut self,
        expected_version: u64,
        by: &str,
        request: &str,
        now_ms: u64,
    ) -> Result<bool, JobError> {
        if !self.fresh_operator_request(expected_version, request)? {
            return Ok(false);
        }
        self.check_resolvable()?;
        if self.attempts_left() == 0 {
            self.extra_attempts = self.extra_attempts.saturating_add(1);
        }
        self.state = JobState::Failed;
        self.lease_until_ms = None;
        self.note_operator(OperatorAction::AllowedAttempt, by, request, now_ms);
        Ok(true)
    }

    /// Unknown, or dead with an unknown last attempt: what only an operator
    /// can settle.
    fn check_resolvable(&self) -> Result<(), JobError> {
        let last_unknown = self
            .attempts
            .last()
            .is_some_and(|a| matches!(a.outcome, AttemptOutcome::Unknown | AttemptOutcome::Abandoned));
        match self.state {
            JobState::Unknown => Ok(()),
            JobState::Dead if last_unknown => Ok(()),
            state => Err(JobError::NotResolvable { state }),
        }
    }

    /// Claims the job for a new attempt if it is claimable at `now_ms` and
    /// still at `expected_version`. Time-driven transitions ([`Job::expire`])
    /// are applied first, as part of the same swap.
    pub fn claim(
        &mut self,
        expected_version: u64,
        now_ms: u64,
        provider: &str,
        model: Option<&str>,
    ) -> Result<AttemptTicket, JobError> {
        self.check_version(expected_version)?;
        // Work on a copy so a refused claim leaves the job exactly as it was.
        let mut next = self.clone();
        next.expire(now_ms);
        next.claimable(now_ms)?;
        let ticket = next.begin_attempt(now_ms, provider, model);
        *self = next;
        Ok(ticket)
    }

    /// Whether a [`Job::claim`] at `now_ms` would succeed (version aside),
    /// and if not, why: lets a caller answer a duplicate without claiming.
    pub fn check_claim(&self, now_ms: u64) -> Result<(), JobError> {
        let mut next = self.clone();
        next.expire(now_ms);
        next.claimable(now_ms)
    }

    fn claimable(&self, now_ms: u64) -> Result<(), JobError> {
        match self.state {
            JobState::Pending | JobState::Failed => {}
            JobState::InFlight => {
                return Err(JobError::InFlight {
                    attempt: self.attempts.len() as u32,
                    lease_remaining_ms: self.lease_remaining_ms(now_ms),
                });
            }
            JobState::Unknown => match self.policy.unknown_policy {
                UnknownPolicy::Block => return Err(JobError::Blocked),
                UnknownPolicy::RetryAfterLease if self.lease_remaining_ms(now_ms) > 0 => {
                    return Err(JobError::UnknownLease { retry_after_ms: self.lease_remaining_ms(now_ms) });
                }
                // Lease over with attempts left (expire() makes it dead otherwise).
                UnknownPolicy::RetryAfterLease => {}
            },
            state @ (JobState::Completed | JobState::Dead | JobState::Interrupted | JobState::Cancelled) => {
                return Err(JobError::Finished { state });
            }
        }
        // fail() and expire() make a job with no attempts left dead; this is
        // the invariant's last line of defence.
        if self.attempts_left() == 0 {
            return Err(JobError::Finished { state: JobState::Dead });
        }
        Ok(())
    }

    fn begin_attempt(&mut self, now_ms: u64, provider: &str, model: Option<&str>) -> AttemptTicket {
        self.state = JobState::InFlight;
        self.lease_until_ms = Some(now_ms.saturating_add(self.policy.attempt_lease_ms));
        self.bump(now_ms);
        let ticket = AttemptTicket { attempt: self.attempts.len() as u32 + 1, version: self.version };
        self.attempts.push(Attempt {
            number: ticket.attempt,
            claimed_version: ticket.version,
            provider: provider.to_owned(),
            model: model.map(str::to_owned),
            started_ms: now_ms,
            ended_ms: None,
            outcome: AttemptOutcome::Running,
            status: None,
            latency_ms: None,
            usage: None,
            error_class: None,
            streamed: false,
            first_byte_ms: None,
        });
        ticket
    }

    /// The holding attempt's final answer: a success, or a permanent error
    /// that is replayed as it is. The job is completed by this attempt.
    pub fn complete(&mut self, ticket: AttemptTicket, now_ms: u64, report: AttemptReport) -> Result<(), JobError> {
        self.check_ticket(ticket)?;
        let succeeded = report.status.is_some_and(|s| (200..300).contains(&s))
            && matches!(report.error_class, None | Some(ErrorClass::None));
        let outcome = if succeeded { AttemptOutcome::Succeeded } else { AttemptOutcome::Rejected };
        self.end_attempt(ticket.attempt, now_ms, outcome, report);
        // The other racer, if any, lost: it is audited when (if) it answers.
        for number in self.running_attempts() {
            if let Some(loser) = self.attempts.iter_mut().find(|a| a.number == number) {
                loser.outcome = AttemptOutcome::LostRace;
            }
        }
        self.racing = false;
        self.unknown_until_ms = None;
        self.state = JobState::Completed;
        self.completed_by = Some(ticket.attempt);
        self.lease_until_ms = None;
        self.bump(now_ms);
        Ok(())
    }

    /// The holding attempt failed transiently. Returns the new state:
    /// `Failed` (another claim may retry) or `Dead` (no attempts left).
    pub fn fail(&mut self, ticket: AttemptTicket, now_ms: u64, report: AttemptReport) -> Result<JobState, JobError> {
        self.check_ticket(ticket)?;
        self.end_attempt(ticket.attempt, now_ms, AttemptOutcome::Failed, report);
        if !self.running_attempts().is_empty() {
            // The other racer still holds the job.
            self.bump(now_ms);
            return Ok(self.state);
        }
        self.racing = false;
        if let Some(until) = self.unknown_until_ms.take() {
            // The other racer's outcome is unknown: it may still finish.
            self.state = JobState::Unknown;
            self.lease_until_ms = Some(until);
        } else {
            self.state = if self.attempts_left() == 0 { JobState::Dead } else { JobState::Failed };
            self.lease_until_ms = None;
        }
        self.bump(now_ms);
        Ok(self.state)
    }

    /// The holding attempt failed in a way no retry fixes and no caller will
    /// see (a background job whose provider refused the deployment's key):
    /// the job is dead at once, a dead letter for an operator, whatever
    /// attempts are left. Replaying it (after the fix) gives it new ones.
    pub fn give_up(&mut self, ticket: AttemptTicket, now_ms: u64, report: AttemptReport) -> Result<(), JobError> {
        self.check_ticket(ticket)?;
        self.end_attempt(ticket.attempt, now_ms, AttemptOutcome::Failed, report);
        if !self.running_attempts().is_empty() {
            self.bump(now_ms);
            return Ok(());
        }
        self.racing = false;
        self.unknown_until_ms = None;
        self.state = JobState::Dead;
        self.lease_until_ms = None;
        self.bump(now_ms);
        Ok(())
    }

    /// The holding attempt timed out or lost its connection after the request
    /// left: the provider may still finish. No claim until the unknown lease ends.
    pub fn mark_unknown(&mut self, ticket: AttemptTicket, now_ms: u64, report: AttemptReport) -> Result<(), JobError> {
        self.check_ticket(ticket)?;
        self.end_attempt(ticket.attempt, now_ms, AttemptOutcome::Unknown, report);
        let until = now_ms.saturating_add(self.policy.unknown_lease_ms);
        if !self.running_attempts().is_empty() {
            // The other racer still holds the job; unknown if it fails too.
            self.unknown_until_ms = Some(self.unknown_until_ms.map_or(until, |u| u.max(until)));
            self.bump(now_ms);
            return Ok(());
        }
        self.racing = false;
        self.unknown_until_ms = None;
        self.state = JobState::Unknown;
        self.lease_until_ms = Some(until);
        self.bump(now_ms);
        Ok(())
    }

    /// The holding attempt's stream ended without its terminal event: the
    /// job keeps the partial stream and is never run again.
    pub fn interrupt(&mut self, ticket: AttemptTicket, now_ms: u64, report: AttemptReport) -> Result<(), JobError> {
        self.check_ticket(ticket)?;
        self.end_stream(now_ms, JobState::Interrupted, report);
        Ok(())
    }

    /// Whether the running attempt's answer has started streaming.
    pub fn is_streaming(&self) -> bool {
        self.state == JobState::InFlight && self.attempts.last().is_some_and(|a| a.streamed)
    }

    /// Starts a second attempt while the first is still in flight (a hedge:
    /// the first slow answer is raced against another provider). Only a job
    /// with exactly one running, non-streaming attempt and attempts left may
    /// be hedged. Both tickets hold the job until one of them wins it.
    pub fn hedge(
        &mut self,
        expected_version: u64,
        now_ms: u64,
        provider: &str,
        model: Option<&str>,
    ) -> Result<AttemptTicket, JobError> {
        self.check_version(expected_version)?;
        let running = self.running_attempts();
        let lease_over = self.lease_remaining_ms(now_ms) == 0;
        if self.state != JobState::InFlight || running.len() != 1 || self.is_streaming() || lease_over {
            return Err(JobError::NotHedgeable);
        }
        if self.attempts_left() == 0 {
            return Err(JobError::Finished { state: JobState::Dead });
        }
        let lease_until = self.lease_until_ms;
        let ticket = self.begin_attempt(now_ms, provider, model);
        // The first racer keeps its lease; the job is held as long as either.
        self.lease_until_ms = lease_until.max(self.lease_until_ms);
        self.racing = true;
        Ok(ticket)
    }

    /// The numbers of the attempts still running, oldest first.
    fn running_attempts(&self) -> Vec<u32> {
        self.attempts.iter().filter(|a| a.outcome == AttemptOutcome::Running).map(|a| a.number).collect()
    }

    /// The holding attempt's answer starts streaming. Returns the renewed
    /// ticket.
    pub fn mark_streaming(&mut self, ticket: AttemptTicket, now_ms: u64) -> Result<AttemptTicket, JobError> {
        self.check_ticket(ticket)?;
        if let Some(attempt) = self.attempts.last_mut() {
            attempt.streamed = true;
            attempt.first_byte_ms = Some(now_ms);
        }
        self.bump(now_ms);
        Ok(AttemptTicket { attempt: ticket.attempt, version: self.version })
    }

    /// A caller cancelled the holding attempt's stream: the job keeps the
    /// partial stream and is never run again.
    pub fn cancel(&mut self, ticket: AttemptTicket, now_ms: u64, report: AttemptReport) -> Result<(), JobError> {
        self.check_ticket(ticket)?;
        self.end_stream(now_ms, JobState::Cancelled, report);
        Ok(())
    }

    /// The stream's pump is known to be gone (the runtime that ran it was
    /// restarted): the job is interrupted now, without waiting for the lease.
    /// Returns whether it was a streaming job.
    pub fn settle_orphaned_stream(&mut self, now_ms: u64) -> bool {
        if !self.is_streaming() {
            return false;
        }
        self.settle_interrupted(now_ms);
        true
    }

    fn settle_interrupted(&mut self, now_ms: u64) {
        let report = AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::StreamInterrupted) };
        self.end_stream(now_ms, JobState::Interrupted, report);
    }

    /// The current attempt's stream ends for good (`Interrupted` or
    /// `Cancelled`): its partial answer is the job's result.
    fn end_stream(&mut self, now_ms: u64, state: JobState, report: AttemptReport) {
        let outcome =
            if state == JobState::Cancelled { AttemptOutcome::Cancelled } else { AttemptOutcome::Interrupted };
        self.end_current_attempt(now_ms, outcome, report);
        self.state = state;
        self.completed_by = self.attempts.last().map(|a| a.number);
        self.lease_until_ms = None;
        self.bump(now_ms);
    }

    /// The holding attempt is still streaming at `now_ms`: its lease starts
    /// again, so a long answer is not taken for a lost one. Returns the
    /// renewed ticket (the old one no longer holds the job).
    pub fn extend_lease(&mut self, ticket: AttemptTicket, now_ms: u64) -> Result<AttemptTicket, JobError> {
        self.check_ticket(ticket)?;
        self.lease_until_ms = Some(now_ms.saturating_add(self.policy.attempt_lease_ms));
        self.bump(now_ms);
        Ok(AttemptTicket { attempt: ticket.attempt, version: self.version })
    }

    /// Records, for the audit only, that a losing attempt reported after all.
    /// Neither the state nor the result changes; the version does (it is a
    /// write, and another writer holding the old version must not overwrite
    /// it). Returns whether the attempt exists and was not already ended by a
    /// report.
    pub fn note_discarded(&mut self, attempt: u32, now_ms: u64, report: AttemptReport) -> bool {
        let Some(record) = self.attempts.iter_mut().find(|a| a.number == attempt) else {
            return false;
        };
        let lost_race = record.outcome == AttemptOutcome::LostRace && record.ended_ms.is_none();
        if !(lost_race || matches!(record.outcome, AttemptOutcome::Running | AttemptOutcome::Abandoned)) {
            return false;
        }
        if !lost_race {
            record.outcome = AttemptOutcome::Discarded;
        }
        record.ended_ms = Some(now_ms);
        record.latency_ms = Some(now_ms.saturating_sub(record.started_ms));
        record.status = report.status;
        record.usage = report.usage;
        record.error_class = report.error_class;
        self.bump(now_ms);
        true
    }

    /// Milliseconds until the current lease ends (0 when none or over).
    pub fn lease_remaining_ms(&self, now_ms: u64) -> u64 {
        self.lease_until_ms.map_or(0, |until| until.saturating_sub(now_ms))
    }

    fn check_version(&self, expected: u64) -> Result<(), JobError> {
        if expected == self.version {
            Ok(())
        } else {
            Err(JobError::VersionConflict { expected, actual: self.version })
        }
    }

    fn check_ticket(&self, ticket: AttemptTicket) -> Result<(), JobError> {
        let in_play = self.state == JobState::InFlight && self.completed_by.is_none();
        let holds = if self.racing {
            // The other racer's writes bump the version: a racer holds the
            // job while its attempt runs.
            in_play && self.attempts.iter().any(|a| a.number == ticket.attempt && a.outcome == AttemptOutcome::Running)
        } else {
            in_play && self.version == ticket.version && self.attempts.len() as u32 == ticket.attempt
        };
        if holds { Ok(()) } else { Err(JobError::StaleAttempt { attempt: ticket.attempt }) }
    }

    fn end_current_attempt(&mut self, now_ms: u64, outcome: AttemptOutcome, report: AttemptReport) {
        if let Some(number) = self.attempts.last().map(|a| a.number) {
            self.end_attempt(number, now_ms, outcome, report);
        }
    }

    fn end_attempt(&mut self, number: u32, now_ms: u64, outcome: AttemptOutcome, report: AttemptReport) {
        if let Some(attempt) = self.attempts.iter_mut().find(|a| a.number == number) {
            attempt.outcome = outcome;
            attempt.ended_ms = Some(now_ms);
            attempt.latency_ms = Some(now_ms.saturating_sub(attempt.started_ms));
            attempt.status = report.status;
            attempt.usage = report.usage;
            attempt.error_class = report.error_class;
        }
    }

    fn bump(&mut self, now_ms: u64) {
        self.version += 1;
        self.updated_ms = self.updated_ms.max(now_ms);
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests;
