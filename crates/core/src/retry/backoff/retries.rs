//! The retry rule of one call, shared by the browser SDK and the edge. Both
//! loops are "call; observe; match step": an [`Observation`] reads what one
//! try produced (status and the `x-should-retry`, `retry-after-ms` and
//! `Retry-After` headers, or a transport failure), and [`Retries::next`]
//! turns it into a [`Step`]: deliver, wait so long, or give up.
//!
//! - only transient outcomes are retried: `Retry` always, `RetryOnce` (a 500)
//!   once per call, `Unknown` only when the caller's resend carries the same
//!   idempotency key (the SDK) and never for an unprotected upstream (the edge);
//! - the caller's own cap (attempts left) is checked before the budget, so a
//!   refused retry costs no tokens;
//! - a retry costs budget tokens (more after a timeout);
//! - the delay is full jitter, never shorter than what the server asked for.

use crate::identity::random::RandomSource;
use crate::retry::backoff::Backoff;
use crate::retry::backoff::budget::{RetryBudget, RetryCause};
use crate::retry::backoff::retry_after::{HttpDates, RustDates, server_delay_ms_with};
use crate::retry::classify::{Classification, Decision, ErrorClass, Outcome, TransportFailure, classify};
use crate::retry::reply::{BodyHint, ReplyFacts, read_reply};
use crate::wire::{header, parse_should_retry};

/// What one try of a call produced, classified once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// How the outcome is classified ([`classify`]).
    pub classification: Classification,
    /// How long the server asked to wait, already capped.
    pub server_delay_ms: Option<u64>,
}

impl Observation {
    /// An HTTP response: its status, its headers (looked up by name) and what
    /// its body said (`BodyHint::None` when the body is not read). A server's
    /// `Retry-After` longer than `retry_after_cap_ms` is cut to it.
    pub fn from_http(
        status: u16,
        headers: &dyn Fn(&str) -> Option<String>,
        hint: BodyHint,
        now_ms: u64,
        retry_after_cap_ms: u64,
    ) -> Self {
        Self::from_http_with(status, headers, hint, now_ms, retry_after_cap_ms, &RustDates)
    }

    /// [`Observation::from_http`], with a `Retry-After` HTTP-date read by
    /// `dates` (the browser SDK's is JavaScript's `Date.parse`).
    pub fn from_http_with(
        status: u16,
        headers: &dyn Fn(&str) -> Option<String>,
        hint: BodyHint,
        now_ms: u64,
        retry_after_cap_ms: u64,
        dates: &dyn HttpDates,
    ) -> Self {
        let should_retry = headers(header::SHOULD_RETRY).as_deref().and_then(parse_should_retry);
        let server_delay_ms = server_delay_ms_with(
            headers(header::RETRY_AFTER_MS).as_deref(),
            headers(header::RETRY_AFTER).as_deref(),
            now_ms,
            retry_after_cap_ms,
            dates,
        );
        let classification = classify(Outcome::Http { status, should_retry, hint });
        Self { status: Some(status), classification, server_delay_ms }
    }

    /// An LLM provider's whole reply, judged: its body is read once (a 2xx's
    /// content filter or empty completion makes it final-but-unusable) and
    /// its facts (usage) are returned beside the observation.
    pub fn of_llm_reply(
        status: u16,
        headers: &dyn Fn(&str) -> Option<String>,
        body: &[u8],
        now_ms: u64,
        retry_after_cap_ms: u64,
    ) -> (Self, ReplyFacts) {
        let facts = read_reply(body);
        let hint = if (200..300).contains(&status) { facts.hint } else { BodyHint::None };
        (Self::from_http(status, headers, hint, now_ms, retry_after_cap_ms), facts)
    }

    /// A call that failed below HTTP.
    pub fn transport(failure: TransportFailure) -> Self {
        Self { status: None, classification: classify(Outcome::Transport(failure)), server_delay_ms: None }
    }

    /// Whether this is a final answer to keep (a success or a permanent error).
    pub fn is_final(&self) -> bool {
        matches!(self.classification.decision, Decision::Accept | Decision::Never)
    }
}

/// What to do after a try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The answer is final: hand it to the caller.
    Deliver,
    /// Transient: try again after this many milliseconds.
    Wait(u64),
    /// Transient, but the attempts, the budget or the rules say stop.
    GiveUp,
}

/// Whether an outcome that may have been processed can be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownOutcomes {
    /// The resend carries the same idempotency key, so the server dedups it.
    Resend,
    /// Nothing dedups a resend: stop (the edge marks the job unknown instead).
    Stop,
}

/// The retry state of one call.
#[derive(Debug, Clone)]
pub struct Retries {
    backoff: Backoff,
    unknown: UnknownOutcomes,
    retries: u32,
    previous_delay_ms: Option<u64>,
    retried_server_error: bool,
}

impl Retries {
    /// A call that has not retried yet.
    pub fn new(backoff: Backoff, unknown: UnknownOutcomes) -> Self {
        Self { backoff, unknown, retries: 0, previous_delay_ms: None, retried_server_error: false }
    }

    /// Retries granted so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// The step after `observed`. `may_try_again` is the caller's own cap
    /// (attempts left). A success refunds the budget.
    pub fn next(
        &mut self,
        observed: &Observation,
        may_try_again: bool,
        budget: &mut RetryBudget,
        rng: &mut dyn RandomSource,
    ) -> Step {
        match observed.classification.decision {
            Decision::Accept => {
                budget.on_success();
                Step::Deliver
            }
            Decision::Never => Step::Deliver,
            _ => match self.after(observed.classification, may_try_again, observed.server_delay_ms, budget, rng) {
                Some(delay) => Step::Wait(delay),
                None => Step::GiveUp,
            },
        }
    }

    /// After a try classified as `outcome`: the delay before the next try, or
    /// `None` to give up. `may_try_again` is the caller's own cap (attempts
    /// left); `server_hint_ms` what the server asked for (already clamped).
    fn after(
        &mut self,
        outcome: Classification,
        may_try_again: bool,
        server_hint_ms: Option<u64>,
        budget: &mut RetryBudget,
        rng: &mut dyn RandomSource,
    ) -> Option<u64> {
        let retryable = match outcome.decision {
            Decision::Retry => true,
            Decision::RetryOnce => !self.retried_server_error,
            Decision::Unknown => self.unknown == UnknownOutcomes::Resend,
            Decision::Accept | Decision::Never => false,
        };
        let cause = if outcome.class == ErrorClass::Timeout { RetryCause::Timeout } else { RetryCause::Error };
        if !(retryable && may_try_again && budget.try_withdraw(cause)) {
            return None;
        }
        self.retried_server_error |= outcome.decision == Decision::RetryOnce;
        let delay = self.backoff.delay_with_hint_ms(self.retries, self.previous_delay_ms, server_hint_ms, rng);
        self.retries += 1;
        self.previous_delay_ms = Some(delay);
        Some(delay)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::random::SplitMix64;
    use crate::retry::backoff::Jitter;
    use crate::retry::backoff::budget::BudgetConfig;
    use crate::retry::classify::{Outcome, TransportFailure, classify};

    fn retries(unknown: UnknownOutcomes) -> Retries {
        Retries::new(Backoff::new(100, 1_000, Jitter::Full).unwrap(), unknown)
    }

    #[test]
    fn transient_errors_retry_within_the_backoff_window() {
        let (mut r, mut budget, mut rng) = (retries(UnknownOutcomes::Stop), RetryBudget::default(), SplitMix64::new(1));
        for n in 0..5 {
            let delay = r.after(classify(Outcome::status(503)), true, None, &mut budget, &mut rng).unwrap();
            assert!(delay <= (100u64 << n).min(1_000));
        }
        assert_eq!(r.retries(), 5);
        assert_eq!(budget.tokens(), 500 - 5 * 5);
    }

    #[test]
    fn a_500_is_retried_once_per_call() {
        let (mut r, mut budget, mut rng) = (retries(UnknownOutcomes::Stop), RetryBudget::default(), SplitMix64::new(2));
        assert!(r.after(classify(Outcome::status(500)), true, None, &mut budget, &mut rng).is_some());
        assert!(r.after(classify(Outcome::status(500)), true, None, &mut budget, &mut rng).is_none());
        assert!(r.after(classify(Outcome::status(503)), true, None, &mut budget, &mut rng).is_some());
    }

    #[test]
    fn final_answers_and_exhausted_callers_never_retry_and_cost_nothing() {
        let (mut r, mut budget, mut rng) =
            (retries(UnknownOutcomes::Resend), RetryBudget::default(), SplitMix64::new(3));
        for status in [200, 400, 422] {
            assert_eq!(r.after(classify(Outcome::status(status)), true, None, &mut budget, &mut rng), None);
        }
        assert_eq!(r.after(classify(Outcome::status(503)), false, None, &mut budget, &mut rng), None);
        assert_eq!(budget.tokens(), 500);
    }

    #[test]
    fn unknown_outcomes_follow_the_callers_protection() {
        let dropped = classify(Outcome::Transport(TransportFailure::DroppedAfterSend));
        let mut budget = RetryBudget::default();
        let mut rng = SplitMix64::new(4);
        assert!(retries(UnknownOutcomes::Resend).after(dropped, true, None, &mut budget, &mut rng).is_some());
        assert!(retries(UnknownOutcomes::Stop).after(dropped, true, None, &mut budget, &mut rng).is_none());
    }

    fn response(status: u16, headers: &[(&str, &str)]) -> Observation {
        let lookup =
            |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| (*v).to_owned());
        Observation::from_http(status, &lookup, BodyHint::None, 0, 30_000)
    }

    #[test]
    fn observe_then_step() {
        let (mut r, mut budget, mut rng) = (retries(UnknownOutcomes::Stop), RetryBudget::default(), SplitMix64::new(6));
        let mut next = |o: &Observation, budget: &mut RetryBudget| r.next(o, true, budget, &mut rng);
        assert_eq!(next(&response(200, &[]), &mut budget), Step::Deliver);
        assert_eq!(next(&response(400, &[]), &mut budget), Step::Deliver);
        // A terminal job's replay says x-should-retry: false: delivered, not retried.
        assert_eq!(next(&response(503, &[("x-should-retry", "false")]), &mut budget), Step::Deliver);
        let Step::Wait(ms) = next(&response(429, &[("Retry-After", "2")]), &mut budget) else { panic!() };
        assert!(ms >= 2_000);
        let capped = response(503, &[("retry-after-ms", "999999")]);
        assert_eq!(capped.server_delay_ms, Some(30_000));
        assert_eq!(capped.status, Some(503));
        let dropped = Observation::transport(TransportFailure::DroppedAfterSend);
        assert_eq!(next(&dropped, &mut budget), Step::GiveUp, "the edge never resends an unknown outcome");
        assert!(!dropped.is_final() && response(422, &[]).is_final());
    }

    #[test]
    fn a_success_refunds_the_budget_and_an_exhausted_caller_gives_up() {
        let (mut r, mut rng) = (retries(UnknownOutcomes::Resend), SplitMix64::new(7));
        let mut budget = RetryBudget::new(BudgetConfig::new(10, 5, 10, 1).unwrap());
        assert!(matches!(r.next(&response(503, &[]), true, &mut budget, &mut rng), Step::Wait(_)));
        assert_eq!(budget.tokens(), 5);
        assert_eq!(r.next(&response(200, &[]), true, &mut budget, &mut rng), Step::Deliver);
        assert_eq!(budget.tokens(), 6);
        assert_eq!(r.next(&response(503, &[]), false, &mut budget, &mut rng), Step::GiveUp);
        assert_eq!(budget.tokens(), 6, "a refused retry costs nothing");
    }

    #[test]
    fn the_server_hint_is_a_floor_and_timeouts_cost_more() {
        let (mut r, mut rng) = (retries(UnknownOutcomes::Stop), SplitMix64::new(5));
        let mut budget = RetryBudget::new(BudgetConfig::new(20, 5, 10, 1).unwrap());
        assert!(r.after(classify(Outcome::status(429)), true, Some(2_000), &mut budget, &mut rng).unwrap() >= 2_000);
        assert!(r.after(classify(Outcome::status(408)), true, None, &mut budget, &mut rng).is_some());
        assert_eq!(budget.tokens(), 5);
        assert_eq!(r.after(classify(Outcome::status(408)), true, None, &mut budget, &mut rng), None, "budget spent");
    }
}
