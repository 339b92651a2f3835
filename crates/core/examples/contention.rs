//! Brooker's 2015 backoff experiment ("Exponential Backoff And Jitter"),
//! reproduced with onejob's own [`Backoff`].
//!
//! N clients each want one successful write to a single resource guarded by
//! optimistic concurrency. A call issued at `t` reads the version when it
//! reaches the server (`t + d`) and writes back with compare-and-swap one
//! round trip later (`t + 3d`); the write fails if anyone committed in
//! between. A failed client learns it at `t + 4d`, backs off, and tries again.
//! Every client starts at 0. Network delay `d` = 10 ms, base 5 ms, cap 2 s.
//!
//! ```sh
//! cargo run --release -p onejob-core --example contention
//! ```
//!
//! Prints, per scheme and N, the mean over 20 seeded runs of the total calls
//! and of the time until the last client has written. Deterministic: the same
//! build prints the same table.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use onejob_core::identity::random::SplitMix64;
use onejob_core::retry::backoff::{Backoff, Jitter};

const NETWORK_DELAY_MS: u64 = 10;
const BASE_MS: u64 = 5;
const CAP_MS: u64 = 2_000;
const RUNS: u64 = 20;

/// Totals of one simulated run.
#[derive(Debug, Clone, Copy, Default)]
struct RunResult {
    calls: u64,
    completion_ms: u64,
}

/// Runs one contention round with `clients` clients; deterministic for `seed`.
fn simulate(clients: usize, jitter: Jitter, seed: u64) -> RunResult {
    let backoff = Backoff::new(BASE_MS, CAP_MS, jitter).expect("constants are valid");
    let mut rng = SplitMix64::new(seed);
    // (issue time, client id, retries so far, previous delay): earliest first.
    let mut pending: BinaryHeap<Reverse<(u64, usize, u32, u64)>> =
        (0..clients).map(|id| Reverse((0, id, 0, 0))).collect();
    let mut last_commit_ms: Option<u64> = None;
    let mut result = RunResult::default();
    while let Some(Reverse((issued, id, retries, previous))) = pending.pop() {
        result.calls += 1;
        let read_at = issued + NETWORK_DELAY_MS;
        let write_at = issued + 3 * NETWORK_DELAY_MS;
        // Calls are popped in issue order, so writes are applied in time order.
        let conflicted = last_commit_ms.is_some_and(|commit| commit > read_at);
        if conflicted {
            let previous = (retries > 0).then_some(previous);
            let delay = backoff.delay_ms(retries, previous, &mut rng);
            let retry_at = issued + 4 * NETWORK_DELAY_MS + delay;
            pending.push(Reverse((retry_at, id, retries + 1, delay)));
        } else {
            last_commit_ms = Some(write_at);
            result.completion_ms = result.completion_ms.max(write_at + NETWORK_DELAY_MS);
        }
    }
    result
}

/// Mean calls and completion time over [`RUNS`] seeds.
fn mean(clients: usize, jitter: Jitter) -> RunResult {
    let total = (0..RUNS).map(|seed| simulate(clients, jitter, seed)).fold(RunResult::default(), |acc, r| RunResult {
        calls: acc.calls + r.calls,
        completion_ms: acc.completion_ms + r.completion_ms,
    });
    RunResult { calls: total.calls / RUNS, completion_ms: total.completion_ms / RUNS }
}

const SCHEMES: [(&str, Jitter); 4] =
    [("none", Jitter::None), ("full", Jitter::Full), ("equal", Jitter::Equal), ("decorrelated", Jitter::Decorrelated)];

fn main() {
    println!(
        "contention: d = {NETWORK_DELAY_MS} ms, base = {BASE_MS} ms, cap = {CAP_MS} ms, mean of {RUNS} seeded runs"
    );
    println!("{:<13} {:>5} {:>12} {:>16}", "jitter", "N", "total calls", "completion (ms)");
    for (name, jitter) in SCHEMES {
        for clients in [10, 50, 100] {
            let r = mean(clients, jitter);
            println!("{name:<13} {clients:>5} {:>12} {:>16}", r.calls, r.completion_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn every_client_eventually_writes_once() {
        for (_, jitter) in SCHEMES {
            let r = simulate(10, jitter, 1);
            assert!(r.calls >= 10);
        }
    }

    #[test]
    fn no_jitter_costs_n_squared_over_two() {
        // Without jitter every round lets exactly one client through.
        assert_eq!(simulate(10, Jitter::None, 0).calls, 55);
    }

    #[test]
    fn full_jitter_does_clearly_less_work_than_none_at_100_clients() {
        let none = mean(100, Jitter::None).calls;
        let full = mean(100, Jitter::Full).calls;
        assert!(full * 2 < none, "full jitter {full} calls vs none {none}");
    }
}
