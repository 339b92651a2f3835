//! A deterministic simulation of the Ledger (FoundationDB's simulation
//! testing, TigerBeetle's VOPR): the real [`onejob_core::ledger::request::drive`]
//! machine, admission, background deliveries and the job itself, run
//! against a simulated world — providers that fail in every way the
//! classifier knows, breakers, storage with a real compare-and-swap, an
//! at-least-once queue, callers that retry, and crashes that drop an
//! object's memory at any step — with the invariants checked after every
//! step. One seed is one world; the same seed gives the same run.
//!
//! The invariants, by the name a violation gives (see `simulation/world.rs`):
//! `result-stable` (once finished, a job's result — the attempt it names and
//! its bytes — never changes, nor is it written again), `answers-agree` (every
//! final answer, live or replayed, is the job's first, byte for byte),
//! `result-is-the-winner` (a completed job replays its winner's answer as the
//! provider gave it), `no-call-in-live-lease` (no call while another
//! attempt's lease is live, but a hedge's second racer on a hedged route;
//! two running attempts at most), `claim-before-call`, `one-call-per-attempt`,
//! `attempt-cap`, `cas` (a write that succeeds expected the stored version,
//! and versions only grow), `response-before-job` (a stored job never names
//! an answered attempt whose response or stream is missing), `save-once`,
//! `stream-never-recalled`, `persist-ends-batch`, `quiet-after-finish` (after
//! its answer a drive only audits), `stored-is-finished`, `no-broken-ending`,
//! `replay-of-finished`, `key-reuse` (another payload under the key is a 422,
//! and only then), `budget` (never above its capacity; every retry paid for,
//! nothing paid without one), and after the drain `no-job-lost` (each job
//! finished, or visibly waiting for an operator: blocked, dead-lettered),
//! `no-stuck-drive`, `quiescence`, `retention-cleans`.
//!
//! Each seed also runs a job type's effects on the real effects machine
//! ([`onejob_core::ledger::effects::run`], `simulation/effects.rs`), with its own
//! invariants: `effect-once`, `claim-before-perform`, `effect-cas`,
//! `approval-before-perform`, `done-means-delivered`, `dead-letter-once`,
//! `batch`, and after its drain `effect-settles`, `no-stuck-run` and
//! `dead-letter-recorded` (also when recording a letter fails for a while).
//!
//! - `SEEDS=N` runs seeds 0..N (default 10,000), `SIM_FIRST=K` starts at K;
//! - `SIM_SEED=N` runs seed N alone and prints its trace to stderr;
//! - `SIM_STATS=1` prints how often each interesting thing happened;
//! - a failing seed prints its trace to stderr and names itself.
//!
//! It prints one line: `simulation: N seeds, M steps, V violations; most
//! steps: seed S (n), slowest: seed T (t ms)`.
//! `make simulate SEEDS=N` runs it in release. On wasm32 (no threads, no
//! environment) it runs the first 300 seeds, the same worlds as natively.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[path = "simulation/effects.rs"]
mod effects;
#[path = "simulation/rng.rs"]
mod rng;
#[path = "simulation/scenario.rs"]
mod scenario;
#[path = "simulation/trace.rs"]
mod trace;
#[path = "simulation/world.rs"]
mod world;

use std::collections::BTreeMap;

use world::{Outcome, Violation};

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(value.trim().parse().unwrap_or_else(|_| panic!("{name} must be a number, not {value:?}")))
}

/// Prints a seed's trace to stderr (the replayable story of its run).
fn print_trace(outcome: &Outcome) {
    for line in &outcome.lines {
        eprintln!("{line}");
    }
}

fn describe(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| format!("  seed {} step {}: {}: {} (rerun: SIM_SEED={})", v.seed, v.step, v.check, v.message, v.seed))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What one simulation thread found: its steps, violations, statistics and slowest seeds.
type WorkerResult = (u64, Vec<Violation>, BTreeMap<&'static str, u64>, Slowest);

/// Adds a seed's count to the totals; a statistic named "… (max)" keeps
/// the largest instead.
fn add_stat(stats: &mut BTreeMap<&'static str, u64>, what: &'static str, n: u64) {
    let total = stats.entry(what).or_insert(0);
    *total = if what.ends_with("(max)") { (*total).max(n) } else { *total + n };
}

/// The seed with the most steps, and (natively) the one that took longest.
#[derive(Debug, Clone, Copy, Default)]
struct Slowest {
    most_steps: (u64, u64),
    longest_us: (u64, u64),
}

impl Slowest {
    fn note(&mut self, seed: u64, steps: u64, us: u64) {
        if steps > self.most_steps.1 {
            self.most_steps = (seed, steps);
        }
        if us > self.longest_us.1 {
            self.longest_us = (seed, us);
        }
    }

    fn merge(self, other: Slowest) -> Slowest {
        let mut merged = self;
        merged.note(other.most_steps.0, other.most_steps.1, 0);
        merged.note(other.longest_us.0, 0, other.longest_us.1);
        merged
    }
}

impl std::fmt::Display for Slowest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ((steps_seed, steps), (slow_seed, us)) = (self.most_steps, self.longest_us);
        write!(f, "most steps: seed {steps_seed} ({steps})")?;
        if us > 0 {
            write!(f, ", slowest: seed {slow_seed} ({:.1} ms)", us as f64 / 1000.0)?;
        }
        Ok(())
    }
}

/// A wall clock for the slowest seed (none on wasm32: it prints no time).
struct Clock(#[cfg(not(target_arch = "wasm32"))] std::time::Instant);

impl Clock {
    fn start() -> Self {
        Clock(
            #[cfg(not(target_arch = "wasm32"))]
            std::time::Instant::now(),
        )
    }

    fn elapsed_us(&self) -> u64 {
        #[cfg(not(target_arch = "wasm32"))]
        return self.0.elapsed().as_micros() as u64;
        #[cfg(target_arch = "wasm32")]
        0
    }
}

#[test]
fn simulation_seeds_keep_the_invariants() {
    if let Some(seed) = env_u64("SIM_SEED") {
        let outcome = world::run(seed, true);
        print_trace(&outcome);
        println!("simulation: 1 seeds, {} steps, {} violations", outcome.steps, outcome.violations.len());
        if env_u64("SIM_STATS").is_some() {
            eprintln!("{:?}", outcome.stats);
        }
        assert!(outcome.violations.is_empty(), "seed {seed}:\n{}", describe(&outcome.violations));
        return;
    }
    let default_seeds = if cfg!(target_arch = "wasm32") { 300 } else { 10_000 };
    let seeds = env_u64("SEEDS").unwrap_or(default_seeds);
    let first = env_u64("SIM_FIRST").unwrap_or(0);
    // Seeds first+t, first+t+threads, … on each of (at most) two threads.
    let worker = move |t: u64, threads: u64| {
        let (mut steps, mut violations, mut stats) = (0, Vec::new(), BTreeMap::new());
        let mut slowest = Slowest::default();
        let mut seed = first + t;
        while seed < first + seeds {
            let started = Clock::start();
            let outcome = world::run(seed, false);
            slowest.note(seed, outcome.steps, started.elapsed_us());
            steps += outcome.steps;
            violations.extend(outcome.violations);
            for (what, n) in outcome.stats {
                add_stat(&mut stats, what, n);
            }
            seed += threads;
        }
        (steps, violations, stats, slowest)
    };
    let threads = if cfg!(target_arch = "wasm32") {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get()).min(2) as u64
    };
    let results: Vec<WorkerResult> = if threads == 1 {
        vec![worker(0, 1)]
    } else {
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads).map(|t| scope.spawn(move || worker(t, threads))).collect();
            workers.into_iter().map(|w| w.join().expect("a simulation worker panicked")).collect()
        })
    };
    let steps: u64 = results.iter().map(|r| r.0).sum();
    let mut violations: Vec<Violation> = results.iter().flat_map(|r| r.1.clone()).collect();
    violations.sort_by_key(|v| (v.seed, v.step));
    let failing: std::collections::BTreeSet<u64> = violations.iter().map(|v| v.seed).collect();
    let slowest = results.iter().map(|r| r.3).fold(Slowest::default(), Slowest::merge);
    println!("simulation: {seeds} seeds, {steps} steps, {} violations; {slowest}", violations.len());
    if env_u64("SIM_STATS").is_some() {
        let mut stats: BTreeMap<&'static str, u64> = BTreeMap::new();
        for (what, n) in results.iter().flat_map(|r| r.2.iter()) {
            add_stat(&mut stats, what, *n);
        }
        for (what, n) in stats {
            eprintln!("  {what}: {n}");
        }
    }
    if let Some(first_failing) = violations.first() {
        eprintln!("--- trace of seed {} (the first failing one) ---", first_failing.seed);
        print_trace(&world::run(first_failing.seed, true));
        eprintln!("--- end of the trace of seed {} ---", first_failing.seed);
        let shown: Vec<Violation> = violations.iter().take(20).cloned().collect();
        panic!("{} violations in {} seeds:\n{}", violations.len(), failing.len(), describe(&shown));
    }
}

#[test]
fn simulation_same_seed_same_trace() {
    for seed in [0, 1, 2, 7, 42, 1_234, 99_999] {
        let traced = world::run(seed, true);
        let again = world::run(seed, true);
        let untraced = world::run(seed, false);
        assert_eq!(traced.lines, again.lines, "seed {seed} ran two ways");
        assert_eq!(traced.text_hash, again.text_hash, "seed {seed}");
        assert_eq!(traced.hash, untraced.hash, "seed {seed}: tracing changed the run");
        assert_eq!(traced.steps, untraced.steps, "seed {seed}");
        assert!(traced.lines.len() > 3, "seed {seed} traced nothing");
    }
    assert_ne!(world::run(3, false).hash, world::run(4, false).hash, "two seeds, one run");
}
