//! Streamed answers: an attempt that streams holds the job by renewing its
//! lease, and ends interrupted or cancelled with its partial answer kept.

use super::{AttemptOutcome, AttemptReport, AttemptTicket, Job, JobError, JobState};
use crate::retry::classify::ErrorClass;

impl Job {
    /// Whether the running attempt's answer has started streaming.
    pub fn is_streaming(&self) -> bool {
        self.state == JobState::InFlight && self.attempts.last().is_some_and(|a| a.streamed)
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

    /// The holding attempt is still streaming at `now_ms`: its lease starts
    /// again, so a long answer is not taken for a lost one. Returns the
    /// renewed ticket (the old one no longer holds the job).
    pub fn extend_lease(&mut self, ticket: AttemptTicket, now_ms: u64) -> Result<AttemptTicket, JobError> {
        self.check_ticket(ticket)?;
        self.lease_until_ms = Some(now_ms.saturating_add(self.policy.attempt_lease_ms));
        self.bump(now_ms);
        Ok(AttemptTicket { attempt: ticket.attempt, version: self.version })
    }

    /// The holding attempt's stream ended without its terminal event: the
    /// job keeps the partial stream and is never run again.
    pub fn interrupt(&mut self, ticket: AttemptTicket, now_ms: u64, report: AttemptReport) -> Result<(), JobError> {
        self.check_ticket(ticket)?;
        self.end_stream(now_ms, JobState::Interrupted, report);
        Ok(())
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

    pub(super) fn settle_interrupted(&mut self, now_ms: u64) {
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
}
