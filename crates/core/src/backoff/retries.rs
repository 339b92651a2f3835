//! The retry rule of one call, shared by the browser SDK and the edge: given
//! how the last try was classified, retry (after how long) or give up.
//!
//! - only transient outcomes are retried: `Retry` always, `RetryOnce` (a 500)
//!   once per call, `Unknown` only when the caller's resend carries the same
//!   idempotency key (the SDK) and never for an unprotected upstream (the edge);
//! - the caller's own cap (attempts left) is checked before the budget, so a
//!   refused retry costs no tokens;
//! - a retry costs budget tokens (more after a timeout);
//! - the delay is full jitter, never shorter than what the server asked for.

use crate::backoff::Backoff;
use crate::backoff::budget::{RetryBudget, RetryCause};
use crate::classify::{Classification, Decision, ErrorClass};
use crate::random::RandomSource;

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

    /// After a try classified as `outcome`: the delay before the next try, or
    /// `None` to give up. `may_try_again` is the caller's own cap (attempts
    /// left); `server_hint_ms` what the server asked for (already clamped).
    pub fn after(
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
    use crate::backoff::Jitter;
    use crate::backoff::budget::BudgetConfig;
    use crate::classify::{Outcome, TransportFailure, classify};
    use crate::random::SplitMix64;

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
