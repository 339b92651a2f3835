//! The worker's randomness, read in one place (the core takes a
//! [`RandomSource`] as an argument).

use onejob_core::identity::random::RandomSource;

/// Jitter needs no cryptographic randomness; `Math.random` spreads retries.
pub struct MathRandom;

impl RandomSource for MathRandom {
    fn next_u64(&mut self) -> u64 {
        let high = (js_sys::Math::random() * 4_294_967_296.0) as u64;
        let low = (js_sys::Math::random() * 4_294_967_296.0) as u64;
        (high << 32) | low
    }
}
