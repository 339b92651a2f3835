//! The one call the Worker makes to a job's `Ledger`: a typed enum, so a
//! route is named once, its payload travels with it, and the Ledger's entry
//! decodes one value instead of matching URL strings.
//!
//! On the wire it is a `POST https://ledger/<name>` whose body is the
//! payload: a submission's length-prefixed header and request bytes
//! ([`handoff::encode`]), a query's or an operator request's JSON, or
//! nothing.

use crate::api::handoff::{self, JobQuery, OperatorRequest, Submission};

/// One call to a job's Ledger.
#[derive(Debug, Clone)]
pub enum LedgerCall {
    /// A keyed request: run, replay, wait or refuse.
    Submit {
        /// Who asks what, validated by the gateway.
        submission: Submission,
        /// The request's bytes as they arrived.
        body: Vec<u8>,
    },
    /// The job view (read-only).
    View(JobQuery),
    /// A streamed answer from an event offset (read-only).
    Stream(JobQuery),
    /// Cancel a streaming answer.
    Cancel(JobQuery),
    /// A queue delivery: run one attempt if the job should run.
    Deliver,
    /// Run what follows a job type's answer (after its stream ended).
    FollowUp,
    /// What a dead letter records about the job (read-only).
    Facts,
    /// The job for an operator: view, owner and stored result (read-only).
    AdminView,
    /// An operator sends the job's message again.
    Enqueue(OperatorRequest),
    /// An operator gives a dead job fresh attempts (or its effects another run).
    Replay(OperatorRequest),
    /// An operator settles an unknown job.
    Resolve(OperatorRequest),
    /// The effects waiting for an approval may run.
    Approve(OperatorRequest),
    /// An operator resends an effect or marks it done.
    Effect(OperatorRequest),
}

/// A call the Ledger could not read (a caller of another version, or a bug):
/// never a user's input, which the gateway validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl LedgerCall {
    /// The call's name: the last segment of its URL.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Submit { .. } => "submit",
            Self::View(_) => "view",
            Self::Stream(_) => "stream",
            Self::Cancel(_) => "cancel",
            Self::Deliver => "deliver",
            Self::FollowUp => "effects",
            Self::Facts => "facts",
            Self::AdminView => "admin-view",
            Self::Enqueue(_) => "enqueue",
            Self::Replay(_) => "replay",
            Self::Resolve(_) => "resolve",
            Self::Approve(_) => "approve",
            Self::Effect(_) => "effect",
        }
    }

    /// Whether the call may change the job (the operators' index then
    /// hears of it after the answer). Cancelling only asks the pump to stop
    /// (the pump's own end is indexed); a resend touches only the outbox.
    pub fn mutates(&self) -> bool {
        !matches!(
            self,
            Self::View(_) | Self::Stream(_) | Self::Cancel(_) | Self::Facts | Self::AdminView | Self::Enqueue(_)
        )
    }

    /// The URL the call is sent to.
    pub fn url(&self) -> String {
        format!("https://ledger/{}", self.name())
    }

    /// The call's body.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Self::Submit { submission, body } => handoff::encode(submission, body),
            Self::View(query) | Self::Stream(query) | Self::Cancel(query) => json(query),
            Self::Enqueue(request)
            | Self::Replay(request)
            | Self::Resolve(request)
            | Self::Approve(request)
            | Self::Effect(request) => json(request),
            Self::Deliver | Self::FollowUp | Self::Facts | Self::AdminView => Vec::new(),
        }
    }

    /// Reads a call from its URL path (`/submit`, …) and body.
    pub fn decode(path: &str, body: Vec<u8>) -> Result<Self, Malformed> {
        let query =
            |body: &[u8]| serde_json::from_slice::<JobQuery>(body).map_err(|_| Malformed("malformed job query"));
        let operator = |body: &[u8]| {
            serde_json::from_slice::<OperatorRequest>(body).map_err(|_| Malformed("malformed operator request"))
        };
        Ok(match path.trim_start_matches('/') {
            "submit" => match handoff::decode(body) {
                Some((submission, body)) => Self::Submit { submission, body },
                None => return Err(Malformed("malformed submission")),
            },
            "view" => Self::View(query(&body)?),
            "stream" => Self::Stream(query(&body)?),
            "cancel" => Self::Cancel(query(&body)?),
            "deliver" => Self::Deliver,
            "effects" => Self::FollowUp,
            "facts" => Self::Facts,
            "admin-view" => Self::AdminView,
            "enqueue" => Self::Enqueue(operator(&body)?),
            "replay" => Self::Replay(operator(&body)?),
            "resolve" => Self::Resolve(operator(&body)?),
            "approve" => Self::Approve(operator(&body)?),
            "effect" => Self::Effect(operator(&body)?),
            _ => return Err(Malformed("unknown ledger call")),
        })
    }
}

/// The Ledger's answer to [`LedgerCall::Replay`] (a `200`; a refusal is a
/// problem): whether the job (or a job type's effects) goes again, and if
/// not, why. The operator API reads it as this type, not as loose JSON.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayReply {
    pub replayed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A job type's effects sent again, by name (only when they are what was replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Vec<String>>,
}

impl ReplayReply {
    pub fn replayed() -> Self {
        Self { replayed: true, reason: None, effects: None }
    }

    pub fn not_replayed(reason: &str) -> Self {
        Self { replayed: false, reason: Some(reason.to_owned()), effects: None }
    }
}

/// A payload's JSON (structs of strings, numbers and JSON values always serialise).
fn json(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::{LedgerCall, Malformed, ReplayReply};
    use crate::api::handoff::tests::submission;
    use crate::api::handoff::{JobQuery, OperatorRequest};

    fn operator() -> OperatorRequest {
        OperatorRequest {
            key: "test-0123456789abcdef".into(),
            by: "admin:ops".into(),
            request: "r-1".into(),
            action: Some("retry".into()),
            status: None,
            body: None,
            effect: None,
        }
    }

    /// Every call, one of each.
    fn every_call() -> Vec<LedgerCall> {
        let query = JobQuery { key: "test-0123456789abcdef".into(), from: Some(3), ids: true };
        vec![
            LedgerCall::Submit { submission: submission(), body: b"{\"model\":\"m\"}".to_vec() },
            LedgerCall::View(query.clone()),
            LedgerCall::Stream(query.clone()),
            LedgerCall::Cancel(query),
            LedgerCall::Deliver,
            LedgerCall::FollowUp,
            LedgerCall::Facts,
            LedgerCall::AdminView,
            LedgerCall::Enqueue(operator()),
            LedgerCall::Replay(operator()),
            LedgerCall::Resolve(operator()),
            LedgerCall::Approve(operator()),
            LedgerCall::Effect(operator()),
        ]
    }

    #[test]
    fn every_call_reads_back_as_itself() {
        for call in every_call() {
            let url = call.url();
            let path = url.strip_prefix("https://ledger").unwrap();
            let read = LedgerCall::decode(path, call.encode()).unwrap();
            assert_eq!(read.name(), call.name());
            assert_eq!(read.encode(), call.encode(), "{} changed on the way", call.name());
        }
    }

    #[test]
    fn only_calls_that_may_change_the_job_are_indexed_after() {
        let mutating: Vec<&str> = every_call().iter().filter(|c| c.mutates()).map(LedgerCall::name).collect();
        assert_eq!(mutating, ["submit", "deliver", "effects", "replay", "resolve", "approve", "effect"]);
    }

    #[test]
    fn an_unknown_or_malformed_call_is_refused() {
        assert_eq!(LedgerCall::decode("/nope", Vec::new()).unwrap_err(), Malformed("unknown ledger call"));
        assert_eq!(LedgerCall::decode("/view", b"[]".to_vec()).unwrap_err(), Malformed("malformed job query"));
        assert_eq!(LedgerCall::decode("/submit", b"\0\0".to_vec()).unwrap_err(), Malformed("malformed submission"));
        assert_eq!(
            LedgerCall::decode("/resolve", b"{}".to_vec()).unwrap_err(),
            Malformed("malformed operator request")
        );
    }

    #[test]
    fn a_replay_reply_reads_back_as_written_and_as_the_effects_runner_writes_it() {
        for reply in [ReplayReply::replayed(), ReplayReply::not_replayed("already replayed by this request")] {
            let text = serde_json::to_string(&reply).unwrap();
            assert_eq!(serde_json::from_str::<ReplayReply>(&text).unwrap(), reply);
        }
        assert_eq!(serde_json::to_string(&ReplayReply::replayed()).unwrap(), r#"{"replayed":true}"#);
        let effects: ReplayReply = serde_json::from_str(r#"{"replayed":true,"effects":["notify"]}"#).unwrap();
        assert_eq!(effects.effects.as_deref(), Some(&["notify".to_owned()][..]));
    }
}
