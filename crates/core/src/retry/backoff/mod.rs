//! How long to wait before the next try, and whether to try at all.
//!
//! - [`Backoff`]: the delay before retry *n*, with a choice of jitter. Full
//!   jitter is the default: Brooker's 2015 experiment (reproduced by
//!   `cargo run -p onejob-core --example contention`) shows it does the least
//!   work under contention.
//! - [`retry_after`]: what the server asked for (`retry-after-ms`,
//!   `Retry-After` as seconds or an HTTP-date), clamped to a cap.
//! - [`budget`]: a token bucket that stops retry storms when most calls fail.
//! - [`retries`]: the rule combining them: retry (after how long) or give up.
//!
//! Nothing here sleeps or reads a clock: delays are returned, `now_ms` is passed in.

pub mod budget;
pub mod retries;
pub mod retry_after;

use std::fmt;

use crate::identity::random::RandomSource;

/// How randomness spreads the delays of clients that failed together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Jitter {
    /// `min(cap, base·2^n)`: every client waits the same; they collide again.
    None,
    /// `random(0, min(cap, base·2^n))`: the default; least total work.
    #[default]
    Full,
    /// `e/2 + random(0, e/2)` with `e = min(cap, base·2^n)`: never very short.
    Equal,
    /// `min(cap, random(base, previous·3))`: grows from the previous delay.
    Decorrelated,
}

/// Why a [`Backoff`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackoffError {
    /// The base delay must be at least 1 ms.
    ZeroBase,
    /// The cap must be at least the base.
    CapBelowBase {
        /// The base asked for.
        base_ms: u64,
        /// The cap asked for.
        cap_ms: u64,
    },
}

impl fmt::Display for BackoffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroBase => f.write_str("backoff base must be at least 1 ms"),
            Self::CapBelowBase { base_ms, cap_ms } => {
                write!(f, "backoff cap ({cap_ms} ms) must be at least the base ({base_ms} ms)")
            }
        }
    }
}

impl std::error::Error for BackoffError {}

/// An exponential backoff schedule: base delay, cap, and jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base_ms: u64,
    cap_ms: u64,
    jitter: Jitter,
}

impl Default for Backoff {
    /// 500 ms base, 20 s cap, full jitter (the AWS SDKs' cap; OpenAI's base).
    fn default() -> Self {
        Self { base_ms: 500, cap_ms: 20_000, jitter: Jitter::Full }
    }
}

impl Backoff {
    /// A schedule starting at `base_ms`, never above `cap_ms`.
    pub fn new(base_ms: u64, cap_ms: u64, jitter: Jitter) -> Result<Self, BackoffError> {
        if base_ms == 0 {
            return Err(BackoffError::ZeroBase);
        }
        if cap_ms < base_ms {
            return Err(BackoffError::CapBelowBase { base_ms, cap_ms });
        }
        Ok(Self { base_ms, cap_ms, jitter })
    }

    /// The base delay in milliseconds.
    pub fn base_ms(&self) -> u64 {
        self.base_ms
    }

    /// The largest delay in milliseconds.
    pub fn cap_ms(&self) -> u64 {
        self.cap_ms
    }

    /// The jitter scheme.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// `min(cap, base·2^retry)` without overflow for any `retry`.
    pub fn ceiling_ms(&self, retry: u32) -> u64 {
        let factor = 1u64.checked_shl(retry).unwrap_or(u64::MAX);
        self.base_ms.saturating_mul(factor).min(self.cap_ms)
    }

    /// The delay before retry number `retry` (0 for the first retry).
    /// `previous_ms` is the delay used before the last retry; only
    /// [`Jitter::Decorrelated`] reads it (pass `None` on the first retry).
    pub fn delay_ms(&self, retry: u32, previous_ms: Option<u64>, rng: &mut dyn RandomSource) -> u64 {
        let ceiling = self.ceiling_ms(retry);
        match self.jitter {
            Jitter::None => ceiling,
            Jitter::Full => rng.uniform_inclusive(ceiling),
            Jitter::Equal => ceiling / 2 + rng.uniform_inclusive(ceiling - ceiling / 2),
            Jitter::Decorrelated => {
                let previous = previous_ms.unwrap_or(self.base_ms).max(self.base_ms);
                let upper = previous.saturating_mul(3).min(self.cap_ms);
                self.base_ms + rng.uniform_inclusive(upper.saturating_sub(self.base_ms))
            }
        }
    }

    /// The delay to wait when the server also said when to come back: the
    /// server's word wins when it asks for longer than our own schedule (we
    /// never come back earlier than asked), and it is already clamped by
    /// [`retry_after::server_delay_ms`].
    pub fn delay_with_hint_ms(
        &self,
        retry: u32,
        previous_ms: Option<u64>,
        server_hint_ms: Option<u64>,
        rng: &mut dyn RandomSource,
    ) -> u64 {
        let own = self.delay_ms(retry, previous_ms, rng);
        server_hint_ms.map_or(own, |hint| hint.max(own))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::random::SplitMix64;
    use proptest::prelude::*;

    #[test]
    fn constructor_validates() {
        assert_eq!(Backoff::new(0, 10, Jitter::Full), Err(BackoffError::ZeroBase));
        assert_eq!(Backoff::new(10, 5, Jitter::Full), Err(BackoffError::CapBelowBase { base_ms: 10, cap_ms: 5 }));
        assert!(Backoff::new(5, 5, Jitter::None).is_ok());
    }

    #[test]
    fn ceiling_doubles_then_caps_and_never_overflows() {
        let b = Backoff::new(100, 2_000, Jitter::None).unwrap();
        let ceilings: Vec<u64> = (0..7).map(|n| b.ceiling_ms(n)).collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(b.ceiling_ms(64), 2000);
        assert_eq!(b.ceiling_ms(u32::MAX), 2000);
        let huge = Backoff::new(u64::MAX / 2, u64::MAX, Jitter::None).unwrap();
        assert_eq!(huge.ceiling_ms(5), u64::MAX);
    }

    #[test]
    fn server_hint_is_never_undercut() {
        let b = Backoff::new(100, 1_000, Jitter::Full).unwrap();
        let mut rng = SplitMix64::new(3);
        for retry in 0..10 {
            assert!(b.delay_with_hint_ms(retry, None, Some(2_000), &mut rng) >= 2_000);
        }
        assert!(b.delay_with_hint_ms(0, None, None, &mut rng) <= 100);
    }

    proptest! {
        #[test]
        fn every_scheme_stays_within_its_bounds(
            base in 1u64..10_000, extra in 0u64..100_000, retry in 0u32..200, seed: u64, previous: Option<u64>,
        ) {
            let cap = base + extra;
            let mut rng = SplitMix64::new(seed);
            let ceiling = Backoff::new(base, cap, Jitter::None).unwrap().ceiling_ms(retry);
            prop_assert!(ceiling >= base.min(cap) && ceiling <= cap);
            let full = Backoff::new(base, cap, Jitter::Full).unwrap().delay_ms(retry, previous, &mut rng);
            prop_assert!(full <= ceiling);
            let equal = Backoff::new(base, cap, Jitter::Equal).unwrap().delay_ms(retry, previous, &mut rng);
            prop_assert!(equal >= ceiling / 2 && equal <= ceiling);
            let decorrelated = Backoff::new(base, cap, Jitter::Decorrelated).unwrap().delay_ms(retry, previous, &mut rng);
            prop_assert!(decorrelated >= base && decorrelated <= cap);
        }

        #[test]
        fn full_jitter_is_deterministic_for_a_seed(seed: u64, retry in 0u32..20) {
            let b = Backoff::default();
            let a = b.delay_ms(retry, None, &mut SplitMix64::new(seed));
            let c = b.delay_ms(retry, None, &mut SplitMix64::new(seed));
            prop_assert_eq!(a, c);
        }
    }

    #[test]
    fn full_jitter_spreads_over_the_whole_window() {
        let b = Backoff::new(1_000, 1_000, Jitter::Full).unwrap();
        let mut rng = SplitMix64::new(11);
        let draws: Vec<u64> = (0..1_000).map(|_| b.delay_ms(0, None, &mut rng)).collect();
        let mean = draws.iter().sum::<u64>() / draws.len() as u64;
        assert!((400..600).contains(&mean), "mean {mean}");
        assert!(draws.iter().any(|d| *d < 100) && draws.iter().any(|d| *d > 900));
    }
}
