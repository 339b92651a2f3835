//! The simulation's one source of randomness: xorshift64* seeded through a
//! splitmix step (so seeds 0, 1, 2… give unrelated streams). Every choice
//! the world makes — timings, provider replies, breakers, crashes, the
//! drive's jitter — is drawn from it, in the order the run asks, so a seed
//! replays exactly.

use onejob_core::identity::random::RandomSource;

/// A seeded generator.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// The generator of `seed`.
    pub fn new(seed: u64) -> Self {
        // One splitmix64 step: spreads close seeds apart and never yields 0
        // for xorshift (which would stay 0 for ever).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self { state: if z == 0 { 0x2545_F491_4F6C_DD1D } else { z } }
    }

    /// 64 random bits (xorshift64*).
    pub fn next(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo { lo } else { lo + self.below(hi - lo + 1) }
    }

    /// True with probability `per_mille`/1000.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        per_mille > 0 && self.below(1000) < u64::from(per_mille)
    }

    /// An index drawn with these weights (not all zero).
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
        let mut draw = self.below(total);
        for (i, w) in weights.iter().enumerate() {
            let w = u64::from(*w);
            if draw < w {
                return i;
            }
            draw -= w;
        }
        weights.len() - 1
    }
}

impl RandomSource for Rng {
    fn next_u64(&mut self) -> u64 {
        self.next()
    }
}
