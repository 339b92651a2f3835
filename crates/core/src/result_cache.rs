//! The `RESULT_CACHE` setting: when the gateway looks in KV, the read-through
//! cache of finished results, before it asks the job's Ledger.
//!
//! KV only ever speeds up a replay; the Ledger alone decides. A look in KV
//! costs every request that misses it a KV read (measured under `wrangler
//! dev`: about 2 ms of wall time and 1 ms of the runtime's CPU on a first
//! call, which always misses), so by default only a request that says it
//! is a retry looks there first: the official OpenAI and Anthropic SDKs
//! number their tries in [`RETRY_COUNT`] (`0` on the first), and a retry is
//! the request most likely to find its job finished. Every other request
//! goes straight to the Ledger, which replays a finished job itself.
//!
//! | mode | KV read first | KV written after a finished first call |
//! |---|---|---|
//! | `retries` (default) | when [`RETRY_COUNT`] is 1 or more | yes |
//! | `kv` | on every request | yes |
//! | `off` | never | never |

use serde::{Deserialize, Serialize};

/// The request header in which the official SDKs number a request's tries
/// (`0` for the first; a retry sends the same `Idempotency-Key`).
pub const RETRY_COUNT: &str = "x-stainless-retry-count";

/// The `RESULT_CACHE` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultCache {
    /// KV is read first only by retries ([`RETRY_COUNT`] ≥ 1).
    #[default]
    Retries,
    /// KV is read first by every request (`kv`).
    #[serde(rename = "kv")]
    Always,
    /// KV is neither read nor written: every replay is the Ledger's.
    Off,
}

impl ResultCache {
    /// The mode a `RESULT_CACHE` value names (unset: the default), or
    /// `None` for a value that names none.
    pub fn parse(value: Option<&str>) -> Option<Self> {
        match value {
            None | Some("retries") => Some(Self::Retries),
            Some("kv") => Some(Self::Always),
            Some("off") => Some(Self::Off),
            Some(_) => None,
        }
    }

    /// Whether finished results are written to KV.
    pub fn writes(self) -> bool {
        self != Self::Off
    }

    /// Whether the gateway looks in KV before the Ledger for a request whose
    /// [`RETRY_COUNT`] header is `retry_count`: in `retries` mode only a
    /// whole number of 1 or more does (a first try, a missing or malformed
    /// count go to the Ledger, which answers them all the same).
    pub fn reads(self, retry_count: Option<&str>) -> bool {
        match self {
            Self::Always => true,
            Self::Off => false,
            Self::Retries => retry_count.and_then(|count| count.trim().parse::<u32>().ok()).is_some_and(|n| n >= 1),
        }
    }

    /// Whether a request looks in KV before its Ledger: never a keyless
    /// one (its answer is replayed only within its window, which the Ledger
    /// decides; KV's entries outlive it), else as [`ResultCache::reads`] says.
    pub fn looks_first(self, keyless: bool, retry_count: Option<&str>) -> bool {
        !keyless && self.reads(retry_count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_modes_are_read_from_their_names() {
        assert_eq!(ResultCache::parse(None), Some(ResultCache::Retries));
        assert_eq!(ResultCache::parse(Some("retries")), Some(ResultCache::Retries));
        assert_eq!(ResultCache::parse(Some("kv")), Some(ResultCache::Always));
        assert_eq!(ResultCache::parse(Some("off")), Some(ResultCache::Off));
        for bad in ["", "on", "KV", "always", "true"] {
            assert_eq!(ResultCache::parse(Some(bad)), None, "{bad}");
        }
    }

    #[test]
    fn a_keyless_request_never_looks_in_kv_first() {
        for mode in [ResultCache::Always, ResultCache::Retries, ResultCache::Off] {
            assert!(!mode.looks_first(true, Some("1")), "{mode:?}");
            assert_eq!(mode.looks_first(false, Some("1")), mode.reads(Some("1")), "{mode:?}");
        }
        assert!(ResultCache::Always.looks_first(false, None));
        assert!(!ResultCache::Retries.looks_first(false, None));
    }

    #[test]
    fn by_default_only_a_retry_reads_kv_first() {
        let mode = ResultCache::Retries;
        for retry in ["1", "2", " 3 ", "4294967295"] {
            assert!(mode.reads(Some(retry)), "{retry}");
        }
        // A first try, no count, or one that is not a whole number: the Ledger.
        for first in [None, Some("0"), Some(""), Some("-1"), Some("1.5"), Some("one"), Some("4294967296")] {
            assert!(!mode.reads(first), "{first:?}");
        }
        assert!(mode.writes());
    }

    #[test]
    fn kv_reads_on_every_request_and_off_never_reads_nor_writes() {
        for count in [None, Some("0"), Some("1")] {
            assert!(ResultCache::Always.reads(count));
            assert!(!ResultCache::Off.reads(count));
        }
        assert!(ResultCache::Always.writes());
        assert!(!ResultCache::Off.writes());
    }
}
