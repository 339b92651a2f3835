//! One structured JSON log line per job transition and per finished
//! attempt, for Workers Logs, Logpush and Tail Workers: the lines' shape
//! is here (stable field names, documented in the README), the edge prints
//! them. [`JobLog`] remembers what it already logged about a job, so each
//! write of the job logs only what changed.
//!
//! ```text
//! {"onejob":"transition","tenant":"acme","key_digest":"…","from":"pending","to":"in_flight","version":1,"attempts":1,"at_ms":…}
//! {"onejob":"attempt","tenant":"acme","key_digest":"…","attempt":1,"provider":"primary","model":"gpt-4o","status":503,"outcome":"failed","error_class":"unavailable","latency_ms":212,…}
//! ```

use serde::Serialize;

use super::build::outcome_name;
use crate::job::{AttemptOutcome, Job, JobState};

/// What has been logged about one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLog {
    tenant: String,
    key_digest: String,
    state: Option<JobState>,
    /// Each attempt's last logged (outcome, ended).
    attempts: Vec<(AttemptOutcome, bool)>,
}

#[derive(Serialize)]
struct Transition<'a> {
    onejob: &'static str,
    tenant: &'a str,
    key_digest: &'a str,
    from: &'static str,
    to: &'static str,
    version: u64,
    attempts: usize,
    at_ms: u64,
}

#[derive(Serialize)]
struct AttemptLine<'a> {
    onejob: &'static str,
    tenant: &'a str,
    key_digest: &'a str,
    attempt: u32,
    provider: &'a str,
    model: Option<&'a str>,
    status: Option<u16>,
    outcome: &'static str,
    error_class: Option<String>,
    latency_ms: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    streamed: bool,
    started_ms: u64,
    ended_ms: Option<u64>,
}

impl JobLog {
    /// The log of a job of `tenant` whose key's digest is `key_digest`,
    /// as it stood before (`None`: a job not written yet).
    pub fn new(tenant: &str, key_digest: &str, job: Option<&Job>) -> Self {
        let mut log =
            Self { tenant: tenant.to_owned(), key_digest: key_digest.to_owned(), state: None, attempts: Vec::new() };
        if let Some(job) = job {
            log.state = Some(job.state());
            log.attempts = job.attempts().iter().map(|a| (a.outcome, a.ended_ms.is_some())).collect();
        }
        log
    }

    /// The lines for what changed in `job` since the last call (as just
    /// written): a `transition` when its state changed (`from` is `new`
    /// for its first write), an `attempt` for each attempt that ended (or
    /// whose ending changed: a hedge's loser audited late).
    pub fn lines(&mut self, job: &Job) -> Vec<String> {
        let mut lines = Vec::new();
        if self.state != Some(job.state()) {
            let line = Transition {
                onejob: "transition",
                tenant: &self.tenant,
                key_digest: &self.key_digest,
                from: self.state.map_or("new", JobState::as_str),
                to: job.state().as_str(),
                version: job.version(),
                attempts: job.attempts().len(),
                at_ms: job.updated_ms(),
            };
            lines.extend(serde_json::to_string(&line).ok());
            self.state = Some(job.state());
        }
        for (index, attempt) in job.attempts().iter().enumerate() {
            let now = (attempt.outcome, attempt.ended_ms.is_some());
            let before = self.attempts.get(index).copied();
            if before == Some(now) {
                continue;
            }
            // An attempt is logged once it has ended (or stopped running).
            if now.1 || attempt.outcome != AttemptOutcome::Running {
                let line = AttemptLine {
                    onejob: "attempt",
                    tenant: &self.tenant,
                    key_digest: &self.key_digest,
                    attempt: attempt.number,
                    provider: &attempt.provider,
                    model: attempt.model.as_deref(),
                    status: attempt.status,
                    outcome: outcome_name(attempt.outcome),
                    error_class: attempt.error_class.map(|class| class.name()),
                    latency_ms: attempt.latency_ms,
                    input_tokens: attempt.usage.map(|u| u.prompt_tokens),
                    output_tokens: attempt.usage.map(|u| u.completion_tokens),
                    streamed: attempt.streamed,
                    started_ms: attempt.started_ms,
                    ended_ms: attempt.ended_ms,
                };
                lines.extend(serde_json::to_string(&line).ok());
            }
            match self.attempts.get_mut(index) {
                Some(seen) => *seen = now,
                None => self.attempts.push(now),
            }
        }
        lines
    }
}
