//! The limits a job runs under: its attempt cap, leases, retention, and
//! what an unknown outcome allows.

use std::fmt;

use serde::{Deserialize, Serialize};

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
    pub(super) max_attempts: u32,
    pub(super) attempt_lease_ms: u64,
    pub(super) unknown_lease_ms: u64,
    pub(super) retention_ms: u64,
    pub(super) unknown_policy: UnknownPolicy,
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
