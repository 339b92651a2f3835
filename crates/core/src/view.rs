//! The job view served by `GET /onejob/v1/jobs/{key}`: the top of the
//! crate, a job as its tenant may see it, with its effects beside it.

use serde::{Deserialize, Serialize};

use crate::job::{Attempt, Job, JobState, OperatorEvent};
use crate::key::IdempotencyKey;

/// `GET /onejob/v1/jobs/{key}`: a job as its tenant may see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    /// The idempotency key.
    pub key: IdempotencyKey,
    /// The job's state.
    pub state: JobState,
    /// The fingerprint of the request that created the job.
    pub fingerprint: String,
    /// The job's version (bumped by every transition).
    pub version: u64,
    /// The how-manieth job under this key (from 0): a keyless job that
    /// ended is replaced by a new one under its derived key.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// When the job will be deleted.
    pub expires_ms: u64,
    /// In flight or unknown: when the current lease ends.
    pub lease_until_ms: Option<u64>,
    /// The attempt whose result is replayed.
    pub completed_by: Option<u32>,
    /// Attempts allowed for this job (operator grants included).
    pub max_attempts: u32,
    /// Every attempt, oldest first.
    pub attempts: Vec<Attempt>,
    /// Run by the queue consumer (`Prefer: respond-async`).
    #[serde(default)]
    pub background: bool,
    /// Queue messages sent for the job (the Ledger fills it in: sends are
    /// counted outside the job record).
    #[serde(default)]
    pub enqueued: u32,
    /// What operators did to the job, oldest first.
    #[serde(default)]
    pub events: Vec<OperatorEvent>,
    /// The job is unknown and nothing retries it automatically
    /// (`UNKNOWN_POLICY=block`): only an operator can settle it, so a
    /// poller should stop waiting.
    #[serde(default)]
    pub waiting_for_operator: bool,
    /// A job type's effects (the Ledger fills them in: they are kept
    /// beside the job record).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<crate::effect::Effect>,
    /// Where the effects stand together, for a job type's job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects_state: Option<crate::effect::EffectsState>,
}

impl JobView {
    /// The view of `job`, stored under `key`.
    pub fn new(key: IdempotencyKey, job: &Job) -> Self {
        Self {
            key,
            state: job.state(),
            fingerprint: job.fingerprint().to_string(),
            version: job.version(),
            generation: job.generation(),
            created_ms: job.created_ms(),
            updated_ms: job.updated_ms(),
            expires_ms: job.expires_ms(),
            lease_until_ms: job.lease_until_ms(),
            completed_by: job.completed_by(),
            max_attempts: job.max_attempts(),
            attempts: job.attempts().to_vec(),
            background: job.is_background(),
            enqueued: 0,
            events: job.operator_events().to_vec(),
            waiting_for_operator: job.state() == JobState::Unknown
                && job.policy().unknown_policy() == crate::job::UnknownPolicy::Block,
            effects: Vec::new(),
            effects_state: None,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
