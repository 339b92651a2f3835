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

pub mod answer;
mod attempt;
mod error;
mod operator;
mod policy;
mod race;
mod state;
mod stream;
pub mod view;

pub use attempt::{Attempt, AttemptOutcome, AttemptReport, AttemptTicket};
pub use error::JobError;
pub use operator::{OperatorAction, OperatorEvent};
pub use policy::{JobPolicy, PolicyError, UnknownPolicy};
pub use state::JobState;

use serde::{Deserialize, Serialize};

use crate::identity::fingerprint::Fingerprint;

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
    /// The how-manieth job under its key, from 0: a keyless job that ended
    /// is replaced by a new one under the same key ([`Job::renew`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    generation: u32,
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
            generation: 0,
            policy,
            attempts: Vec::new(),
        }
    }

    /// The job that replaces this one, once it has ended, under the same key
    /// (a keyless request after its replay window, see
    /// [`crate::identity::keyless`]): pending, with no attempt, under `policy`, its
    /// generation one more, and its version past this job's, so no write
    /// made for this job (a late racer's audit, a drive that read it) can
    /// pass the new job's compare-and-swap. `None` while this job has not ended.
    pub fn renew(&self, now_ms: u64, policy: JobPolicy) -> Option<Job> {
        if !self.state.is_terminal() {
            return None;
        }
        let mut next = Job::new(self.fingerprint.clone(), now_ms, policy);
        next.version = self.version.saturating_add(1);
        next.generation = self.generation.saturating_add(1);
        Some(next)
    }

    /// The how-manieth job under its key this is (0: the first).
    pub fn generation(&self) -> u32 {
        self.generation
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

    /// The numbers of the attempts still running, oldest first.
    fn running_attempts(&self) -> Vec<u32> {
        self.attempts.iter().filter(|a| a.outcome == AttemptOutcome::Running).map(|a| a.number).collect()
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

/// What the job's and the Ledger's unit tests share: a fresh job with the usual policy.
#[cfg(test)]
pub(crate) mod test_job {
    use crate::identity::fingerprint::Fingerprint;
    use crate::job::{Job, JobPolicy, UnknownPolicy};
    use crate::job_type::effect::{EffectRetry, EffectSpec, EffectTarget};

    /// A new job of 3 attempts (30 s leases), kept `retention_ms`, created at 0.
    pub(crate) fn kept_for(retention_ms: u64) -> Job {
        let policy = JobPolicy::new(3, 30_000, 60_000, retention_ms, UnknownPolicy::RetryAfterLease).expect("policy");
        Job::new(Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{}"), 0, policy)
    }

    /// A new job kept a day.
    pub(crate) fn new() -> Job {
        kept_for(86_400_000)
    }

    /// A job type's webhook effect `mail` (no approval, 3 tries, no receipt
    /// URL, no secret, an empty payload): for tests where its content does
    /// not matter.
    pub(crate) fn webhook_spec() -> EffectSpec {
        EffectSpec {
            name: "mail".into(),
            approve: false,
            approval_ttl_ms: 60_000,
            retry: EffectRetry { attempts: 3, base_ms: 100, cap_ms: 1_000 },
            target: EffectTarget::Webhook {
                url: "https://mail.example/send".into(),
                receipt_url: None,
                secret: None,
                payload: serde_json::json!({}),
            },
        }
    }
}
