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

/// A replayed answer, as far as the KV cache cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// The job has finished (only a finished job's answer is a replay).
    pub finished: bool,
    /// The job is a job type's run: its answer is more than the stored response.
    pub job_type: bool,
    /// The job has no caller's key: its answer is replayed only within its window.
    pub keyless: bool,
    /// The answer was streamed: it may be larger than a KV value holds.
    pub streamed: bool,
}

impl ResultCache {
    /// Whether the Ledger writes a replayed answer to KV (it does so on a
    /// job's first replay, not after every first call: most jobs are never
    /// replayed, and a KV write cost a first call 1.8 ms of the runtime's
    /// CPU when every one wrote it). Only a plain finished, keyed, unstreamed
    /// answer is cached, and only in a mode that writes.
    pub fn caches_replay(self, replayed: Replayed) -> bool {
        self.writes() && replayed.finished && !replayed.job_type && !replayed.keyless && !replayed.streamed
    }
}

/// KV keeps nothing for less than this many seconds.
pub const MIN_TTL_S: u64 = 60;

/// Whether a finished result kept for `ttl_s` (as long as its job) is
/// written to KV: a job that ends sooner than KV's shortest expiry is not,
/// or KV would replay it after the Ledger has deleted it.
pub fn keeps(ttl_s: u64) -> bool {
    ttl_s >= MIN_TTL_S
}

/// Whether a KV entry stored for `stored_fingerprint` (its job `terminal`
/// or not) answers a request of `fingerprint`: only this very request's
/// finished result (same key, other request: the Ledger answers 422).
pub fn serves(stored_fingerprint: &str, terminal: bool, fingerprint: &str) -> bool {
    stored_fingerprint == fingerprint && terminal
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn kv_keeps_results_for_a_minute_or_more_and_serves_only_the_same_finished_request() {
        assert!(!keeps(59));
        assert!(keeps(MIN_TTL_S));
        assert!(serves("fp", true, "fp"));
        assert!(!serves("fp", false, "fp"), "a job that has not finished is the Ledger's");
        assert!(!serves("fp", true, "other"), "same key, other request");
    }

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

    #[test]
    fn only_a_plain_finished_keyed_unstreamed_replay_is_cached_and_only_when_kv_is_written() {
        let plain = Replayed { finished: true, job_type: false, keyless: false, streamed: false };
        assert!(ResultCache::Retries.caches_replay(plain));
        assert!(ResultCache::Always.caches_replay(plain));
        assert!(!ResultCache::Off.caches_replay(plain), "off writes nothing");
        for not_cached in [
            Replayed { finished: false, ..plain },
            Replayed { job_type: true, ..plain },
            Replayed { keyless: true, ..plain },
            Replayed { streamed: true, ..plain },
        ] {
            assert!(!ResultCache::Retries.caches_replay(not_cached), "{not_cached:?}");
        }
    }
}
