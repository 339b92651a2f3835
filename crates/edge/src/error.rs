//! The edge's own failures, by kind. What went wrong is named once, and
//! whether trying again may help follows from the kind; at the boundary an
//! `EdgeError` becomes a `worker::Error` (the Ledger and the front answer
//! it as a `500`, logging the text, never sending it).

use std::fmt;

/// A failure of the edge's own making (storage, the platform and the
/// network fail as `worker::Error`s of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeError {
    /// Stored state that cannot be read (a record of another version, a bug).
    Unreadable(String),
    /// A record that cannot be written as JSON.
    Unwritable(String),
    /// Another part of the deployment (a Ledger, D1, an alert receiver)
    /// answered with this status.
    Refused {
        /// Who answered.
        by: &'static str,
        /// Its status.
        status: u16,
    },
    /// A value from inside the deployment that does not parse (a queue
    /// message's key, a receipt URL).
    Malformed(String),
    /// A rule the code relies on did not hold (a bug, or storage changed
    /// under the object).
    Broken(String),
    /// A fault a test build injected on purpose.
    Injected(&'static str),
}

impl EdgeError {
    /// Whether the same request may succeed later: a peer that refused, or
    /// an injected fault, may pass next time; a broken rule or an
    /// unreadable record will not.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Refused { .. } | Self::Injected(_))
    }

    /// A broken rule, described.
    pub fn broken(what: impl Into<String>) -> Self {
        Self::Broken(what.into())
    }
}

impl fmt::Display for EdgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreadable(what) => write!(f, "the stored {what} is unreadable"),
            Self::Unwritable(error) => write!(f, "a record could not be written: {error}"),
            Self::Refused { by, status } => write!(f, "the {by} answered {status}"),
            Self::Malformed(what) => write!(f, "malformed: {what}"),
            Self::Broken(what) => f.write_str(what),
            Self::Injected(what) => write!(f, "{what} (an injected fault)"),
        }
    }
}

impl std::error::Error for EdgeError {}

impl From<EdgeError> for worker::Error {
    fn from(error: EdgeError) -> Self {
        worker::Error::RustError(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::EdgeError;

    #[test]
    fn only_a_peer_that_refused_or_an_injected_fault_may_pass_next_time() {
        assert!(EdgeError::Refused { by: "ledger", status: 503 }.is_transient());
        assert!(EdgeError::Injected("queue send failed").is_transient());
        assert!(!EdgeError::broken("the job vanished").is_transient());
        assert!(!EdgeError::Unreadable("job".into()).is_transient());
    }

    #[test]
    fn the_text_names_what_failed() {
        assert_eq!(EdgeError::Refused { by: "ledger", status: 500 }.to_string(), "the ledger answered 500");
        assert_eq!(EdgeError::Unreadable("outbox".into()).to_string(), "the stored outbox is unreadable");
        let error: worker::Error = EdgeError::broken("replay without a job").into();
        assert_eq!(error.to_string(), "replay without a job");
    }
}
