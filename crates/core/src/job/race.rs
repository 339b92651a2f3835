//! Hedged jobs: a second attempt raced against a slow first one, and the
//! audit of a loser that answers after all.

use super::{AttemptOutcome, AttemptReport, AttemptTicket, Job, JobError, JobState};

impl Job {
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
}
