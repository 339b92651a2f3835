//! What operators do to a job (replay a dead one, settle an unknown one),
//! each at most once per operator request, and its audit.

use serde::{Deserialize, Serialize};

use super::{Attempt, AttemptOutcome, Job, JobError, JobState};
use crate::retry::classify::ErrorClass;

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

impl Job {
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
}
