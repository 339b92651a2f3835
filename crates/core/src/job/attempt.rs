//! Attempts: their audit record, the ticket that proves one holds the job,
//! and the transitions of one attempt (claim, then complete, fail, give up
//! or unknown).

use serde::{Deserialize, Serialize};

use super::{Job, JobError, JobState, UnknownPolicy};
use crate::retry::classify::ErrorClass;
use crate::retry::reply::Usage;

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
    /// What kind of outcome it was ([`crate::retry::classify::classify`] names it).
    pub error_class: Option<ErrorClass>,
}

/// Proof that an attempt holds the job: needed to report its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptTicket {
    /// The attempt's number.
    pub attempt: u32,
    /// The job's version right after the claim.
    pub version: u64,
}

impl Job {
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

    pub(super) fn begin_attempt(&mut self, now_ms: u64, provider: &str, model: Option<&str>) -> AttemptTicket {
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
}
