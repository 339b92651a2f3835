//! Why a transition was refused.

use std::fmt;

use super::JobState;

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
