//! Where a job stands: its states and their names on the wire.

use serde::{Deserialize, Serialize};

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
