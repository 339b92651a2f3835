//! What one attempt's answer means for its job: how a provider's reply or
//! failed call is judged, which transition it makes, who wins a hedge race,
//! and what the caller is told when the driver stops. Pure functions; the
//! [`crate::ledger::request::drive`] machine applies them, the Ledger performs the writes.

use crate::job::{AttemptReport, AttemptTicket, Job, JobError};
use crate::retry::backoff::retries::Observation;
use crate::retry::breaker::is_failure;
use crate::retry::classify::{Classification, Decision, ErrorClass, TransportFailure};
use crate::upstream::contract::Contract;
use crate::wire::{PROBLEM_CONTENT_TYPE, Problem, ProblemType};

/// A response as the Ledger keeps it for an attempt, and replays it byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// Its `Content-Type`.
    pub content_type: String,
    /// The body as it came (or the problem that stands for it).
    pub body: Vec<u8>,
}

impl StoredResponse {
    /// A problem, kept as the response it is sent as.
    pub fn problem(problem: &Problem) -> Self {
        Self {
            status: problem.status(),
            content_type: PROBLEM_CONTENT_TYPE.into(),
            body: problem.to_json().into_bytes(),
        }
    }
}

/// One attempt's answer, judged: what it means, what is kept, what the audit says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempted {
    /// How the outcome is classified, and the wait the server asked for.
    pub observed: Observation,
    /// What is kept as the attempt's response.
    pub response: StoredResponse,
    /// The audit trail's entry (status, tokens, error class).
    pub report: AttemptReport,
}

impl Attempted {
    /// The attempt's decision (accept, retry, never, unknown…).
    pub fn decision(&self) -> Decision {
        self.observed.classification.decision
    }
}

/// A provider's whole reply, judged. A 2xx outside `contract` is kept as a
/// `502 output-contract` and classified `Retry` (the next provider may do
/// better). Returns the judgement and whether the reply counts against the
/// provider's breaker (a broken contract does not: the provider answered).
pub fn judge_reply(
    status: u16,
    headers: &dyn Fn(&str) -> Option<String>,
    content_type: String,
    body: Vec<u8>,
    contract: Option<&Contract>,
    now_ms: u64,
    retry_after_cap_ms: u64,
) -> (Attempted, bool) {
    let (mut observed, facts) = Observation::of_llm_reply(status, headers, &body, now_ms, retry_after_cap_ms);
    let failed = is_failure(observed.classification.decision);
    let mut response = StoredResponse { status, content_type, body };
    if observed.classification.decision == Decision::Accept
        && let Some(Err(violation)) = contract.map(|c| c.check(&response.body))
    {
        response = StoredResponse::problem(&Problem::new(ProblemType::OutputContract, violation.0));
        observed.classification = Classification { decision: Decision::Retry, class: ErrorClass::Contract };
    }
    let report =
        AttemptReport { status: observed.status, usage: facts.usage, error_class: Some(observed.classification.class) };
    (Attempted { observed, response, report }, failed)
}

/// A call that failed below HTTP, kept as a `502 upstream-failed` problem.
/// Always counts against the provider's breaker.
pub fn judge_transport(failure: TransportFailure, detail: &str) -> Attempted {
    let observed = Observation::transport(failure);
    let response = StoredResponse::problem(&Problem::new(ProblemType::UpstreamFailed, detail));
    let report = AttemptReport { status: None, usage: None, error_class: Some(observed.classification.class) };
    Attempted { observed, response, report }
}

/// An answer that cannot be judged (a stream nobody asked for): it may have
/// been processed, so its outcome is unknown.
pub fn unjudgeable(detail: &str) -> Attempted {
    judge_transport(TransportFailure::DroppedAfterSend, detail)
}

/// The output contract an answer to `target` must meet: the job type's
/// own (its answer feeds its effects) before the route's, and only for the
/// endpoints whose answer is an assistant message.
pub fn contract_for<'c>(
    target: &str,
    job_type: Option<&'c Contract>,
    route: Option<&'c Contract>,
) -> Option<&'c Contract> {
    let path = target.split('?').next().unwrap_or("");
    let has_message = matches!(path, "/v1/chat/completions" | "/v1/messages");
    job_type.or(route).filter(|_| has_message)
}

/// The job transition an attempt's decision makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// A final answer, good or permanent: the job is completed with it.
    Complete,
    /// Dead at once: a background job whose provider refused the
    /// deployment's key (no caller sees the 401; an operator must act).
    GiveUp,
    /// It may have been processed: the job waits out the unknown lease.
    Unknown,
    /// Transient: the attempt failed, another may follow.
    Fail,
}

impl Transition {
    /// The transition `classification` makes for a job (`background`: no caller waits for it).
    pub fn of(classification: Classification, background: bool) -> Self {
        match classification.decision {
            Decision::Never if classification.class == ErrorClass::Auth && background => Self::GiveUp,
            Decision::Accept | Decision::Never => Self::Complete,
            Decision::Unknown => Self::Unknown,
            Decision::Retry | Decision::RetryOnce => Self::Fail,
        }
    }

    /// Whether the attempt's response is kept: an unknown outcome keeps
    /// none (a later attempt may win).
    pub fn keeps_response(self) -> bool {
        self != Self::Unknown
    }

    /// Applies the transition to `job` for the attempt holding `ticket`.
    pub fn apply(
        self,
        job: &mut Job,
        ticket: AttemptTicket,
        now_ms: u64,
        report: AttemptReport,
    ) -> Result<(), JobError> {
        match self {
            Self::Complete => job.complete(ticket, now_ms, report),
            Self::GiveUp => job.give_up(ticket, now_ms, report),
            Self::Unknown => job.mark_unknown(ticket, now_ms, report),
            Self::Fail => job.fail(ticket, now_ms, report).map(|_| ()),
        }
    }
}

/// Which of two hedged racers' answers settles the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceCall {
    /// The first to answer settles it now (the other is late, or goes on if it failed).
    First,
    /// The first answered with a permanent error: wait for the other
    /// before deciding ([`other_wins`]).
    WaitForOther,
}

/// The race rule for the first answer of two: a fast permanent error (a
/// fallback's revoked key, a model it lacks) must not beat a good answer
/// still coming.
pub fn first_answer(first: Decision) -> RaceCall {
    if first == Decision::Never { RaceCall::WaitForOther } else { RaceCall::First }
}

/// After [`RaceCall::WaitForOther`]: whether the other racer's answer
/// (`other`) wins over the held permanent error. Only a good answer does.
pub fn other_wins(other: Decision) -> bool {
    other == Decision::Accept
}

/// When a job may be asked about again after every provider of its route
/// was skipped: the earliest breaker probe, or in a second when none said.
pub fn earliest_probe_ms(skipped: Option<u64>) -> u64 {
    skipped.map_or(1_000, |ms| ms.max(1))
}

/// The `503 no-healthy-provider` a caller gets when every breaker of the route is open.
pub fn no_healthy_provider(retry_after_ms: u64) -> Problem {
    Problem::new(
        ProblemType::NoHealthyProvider,
        "every provider of this route is failing; the request may be retried with the same key",
    )
    .with_retry_after_ms(retry_after_ms)
}

/// When a caller that got a transient failure may ask again: after the
/// server's delay, or in a second; never when the job is out of attempts
/// (`may_try_again` false: it is dead, and its answer final).
pub fn ask_again_after_ms(may_try_again: bool, server_delay_ms: Option<u64>) -> Option<u64> {
    may_try_again.then(|| server_delay_ms.unwrap_or(1_000))
}

#[cfg(test)]
mod tests;
