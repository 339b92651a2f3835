//! A circuit breaker per provider: the outer layer around the retries.
//!
//! ```text
//!          N consecutive failures              cool-down over: one probe
//!  closed ───────────────────────► open ───────────────────────────► half_open
//!    ▲                               ▲                                  │
//!    └──────── probe succeeded ──────┼──────────────────────────────────┤
//!                                    └──────── probe failed ────────────┘
//! ```
//!
//! While open, routes skip the provider without calling it (fast failover);
//! after the cool-down exactly one caller is let through as a probe, and
//! everyone else keeps skipping until it reports. A probe that never reports
//! (its runtime died) frees the slot after another cool-down.
//!
//! A failure is what the retry layer would retry or cannot judge (a 5xx, a
//! 429, a 529, a timeout, a lost connection); a success is any final answer,
//! even a 400: the provider is up and answering.

use serde::{Deserialize, Serialize};

use crate::retry::classify::Decision;
use crate::wire::{Problem, ProblemType};

/// When a breaker opens and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerPolicy {
    /// Consecutive failures that open the breaker; 0 never opens it.
    pub failures: u32,
    /// How long it stays open before one probe is let through.
    pub cooldown_ms: u64,
}

/// The breaker's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go through.
    Closed,
    /// Calls are skipped until the cool-down ends.
    Open,
    /// One probe call is out; everyone else skips.
    HalfOpen,
}

/// One change of state, for the providers' page and the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// The state before.
    pub from: BreakerState,
    /// The state after.
    pub to: BreakerState,
    /// When.
    pub at_ms: u64,
}

/// What a caller may do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "permit")]
pub enum Permit {
    /// Call the provider.
    Call,
    /// Call it as the half-open probe: report the outcome, whatever it is.
    Probe,
    /// Do not call it; it may be probed again in `retry_after_ms`.
    Skip {
        /// Until the next probe may go.
        retry_after_ms: u64,
    },
}

/// Whether an outcome counts against the provider's health.
pub fn is_failure(decision: Decision) -> bool {
    matches!(decision, Decision::Retry | Decision::RetryOnce | Decision::Unknown)
}

/// How many transitions a breaker remembers.
pub const TRANSITIONS_KEPT: usize = 20;

/// One provider's breaker, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    state: BreakerState,
    consecutive_failures: u32,
    /// Open: when the probe may go. Half-open: when a silent probe is
    /// presumed lost and another may go.
    until_ms: u64,
    /// Outcomes reported, for error rates.
    calls: u64,
    failures: u64,
    transitions: Vec<Transition>,
}

impl Default for Breaker {
    fn default() -> Self {
        Self::new()
    }
}

impl Breaker {
    /// A closed breaker with no history.
    pub fn new() -> Self {
        Self {
            state: BreakerState::Closed,
            consecutive_failures: 0,
            until_ms: 0,
            calls: 0,
            failures: 0,
            transitions: Vec::new(),
        }
    }

    /// Where it stands (as last changed; a cool-down that is over shows as
    /// open until someone asks for a [`Breaker::permit`]).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Failures since the last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Outcomes reported and how many were failures.
    pub fn counts(&self) -> (u64, u64) {
        (self.calls, self.failures)
    }

    /// The last changes of state, oldest first.
    pub fn transitions(&self) -> &[Transition] {
        &self.transitions
    }

    /// Milliseconds until the next probe may go (0 when closed).
    pub fn retry_after_ms(&self, now_ms: u64) -> u64 {
        match self.state {
            BreakerState::Closed => 0,
            _ => self.until_ms.saturating_sub(now_ms),
        }
    }

    /// Asks to call the provider at `now_ms`.
    pub fn permit(&mut self, policy: BreakerPolicy, now_ms: u64) -> Permit {
        match self.state {
            BreakerState::Closed => Permit::Call,
            BreakerState::Open | BreakerState::HalfOpen if now_ms >= self.until_ms => {
                // The cool-down is over (or the last probe went silent): one probe.
                self.go(BreakerState::HalfOpen, now_ms);
                self.until_ms = now_ms.saturating_add(policy.cooldown_ms);
                Permit::Probe
            }
            BreakerState::Open | BreakerState::HalfOpen => Permit::Skip { retry_after_ms: self.until_ms - now_ms },
        }
    }

    /// Reports how a call went. `probe` says whether it was let through as
    /// the probe.
    pub fn report(&mut self, policy: BreakerPolicy, failed: bool, probe: bool, now_ms: u64) {
        self.calls += 1;
        if !failed {
            self.consecutive_failures = 0;
            // Any success proves the provider answers again.
            if self.state != BreakerState::Closed {
                self.go(BreakerState::Closed, now_ms);
            }
            return;
        }
        self.failures += 1;
        self.consecutive_failures = self.consecutive_failures.saturating_add(1);
        let trips = match self.state {
            BreakerState::Closed => policy.failures > 0 && self.consecutive_failures >= policy.failures,
            // A failed probe reopens it; a late failure of a call let through
            // before the breaker opened changes nothing.
            BreakerState::HalfOpen => probe,
            BreakerState::Open => false,
        };
        if trips {
            self.go(BreakerState::Open, now_ms);
            self.until_ms = now_ms.saturating_add(policy.cooldown_ms);
        }
    }

    fn go(&mut self, to: BreakerState, now_ms: u64) {
        self.transitions.push(Transition { from: self.state, to, at_ms: now_ms });
        if self.transitions.len() > TRANSITIONS_KEPT {
            self.transitions.remove(0);
        }
        self.state = to;
    }
}

/// A provider's health as the providers' page shows it (the
/// `ProviderHealth` object's `/view`): no URL, no key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HealthView {
    /// The breaker's state.
    pub state: BreakerState,
    /// Failures in a row.
    pub consecutive_failures: u32,
    /// Outcomes reported.
    pub calls: u64,
    /// How many of them were failures.
    pub failures: u64,
    /// Failures over calls (0 with no calls).
    pub error_rate: f64,
    /// Until the next probe may go (0 when closed).
    pub retry_after_ms: u64,
    /// The breaker's recent transitions.
    pub transitions: Vec<Transition>,
}

impl Breaker {
    /// The breaker as the providers' page shows it at `now_ms`.
    pub fn view(&self, now_ms: u64) -> HealthView {
        let (calls, failures) = self.counts();
        HealthView {
            state: self.state(),
            consecutive_failures: self.consecutive_failures(),
            calls,
            failures,
            error_rate: if calls == 0 { 0.0 } else { failures as f64 / calls as f64 },
            retry_after_ms: self.retry_after_ms(now_ms),
            transitions: self.transitions().to_vec(),
        }
    }
}

/// A call to a provider's breaker object (`ProviderHealth`), by its path:
/// `/permit` (may an attempt call the provider?), `/report` (how a call
/// went) and `/view` (the providers' page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthCall {
    /// `/permit`: answered with a [`Permit`].
    Permit,
    /// `/report`: answered with nothing.
    Report(Report),
    /// `/view`: answered with a [`HealthView`].
    View,
}

/// The body of `/report`: how one call went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The call failed (transient or unknown): see [`is_failure`].
    pub failed: bool,
    /// It was let through as the half-open probe.
    pub probe: bool,
}

impl HealthCall {
    /// Reads a call from its path and body (only a report's is read): a
    /// `404` for another path, a `500` for a report that cannot be read (a
    /// caller of another version, or a bug; never a user's input).
    pub fn decode(path: &str, body: &[u8]) -> Result<Self, Box<Problem>> {
        let refused = |kind, detail| Box::new(Problem::new(kind, detail));
        match path {
            "/permit" => Ok(HealthCall::Permit),
            "/view" => Ok(HealthCall::View),
            "/report" => serde_json::from_slice(body)
                .map(HealthCall::Report)
                .map_err(|_| refused(ProblemType::Internal, "malformed health report")),
            _ => Err(refused(ProblemType::NotFound, "unknown health route")),
        }
    }
}

impl Breaker {
    /// Performs `call` at `now_ms`: the answer's JSON (`None` for a report,
    /// answered empty). The caller stores the breaker if it changed.
    pub fn answer(&mut self, call: HealthCall, policy: BreakerPolicy, now_ms: u64) -> Option<serde_json::Value> {
        // A permit and a view always serialise.
        match call {
            HealthCall::Permit => serde_json::to_value(self.permit(policy, now_ms)).ok(),
            HealthCall::Report(report) => {
                self.report(policy, report.failed, report.probe, now_ms);
                None
            }
            HealthCall::View => serde_json::to_value(self.view(now_ms)).ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const POLICY: BreakerPolicy = BreakerPolicy { failures: 3, cooldown_ms: 1_000 };

    #[test]
    fn the_view_shows_counts_the_error_rate_and_the_wait() {
        let mut breaker = Breaker::default();
        let fresh = breaker.view(0);
        assert_eq!(
            (fresh.state, fresh.calls, fresh.error_rate, fresh.retry_after_ms),
            (BreakerState::Closed, 0, 0.0, 0)
        );
        for now in 0..3 {
            breaker.report(POLICY, true, false, now);
        }
        breaker.report(POLICY, false, false, 3);
        let open = breaker.view(500);
        assert_eq!(open.state, breaker.state());
        assert_eq!((open.calls, open.failures), breaker.counts());
        assert!((open.error_rate - open.failures as f64 / open.calls as f64).abs() < 1e-9);
        assert_eq!(open.retry_after_ms, breaker.retry_after_ms(500));
        assert_eq!(open.transitions.len(), breaker.transitions().len());
    }

    #[test]
    fn opens_after_n_consecutive_failures_and_skips_until_the_cool_down() {
        let mut b = Breaker::new();
        for t in 0..2 {
            assert_eq!(b.permit(POLICY, t), Permit::Call);
            b.report(POLICY, true, false, t);
        }
        // A success in between starts the count again.
        b.report(POLICY, false, false, 3);
        for t in 4..7 {
            assert_eq!(b.permit(POLICY, t), Permit::Call);
            b.report(POLICY, true, false, t);
        }
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.permit(POLICY, 500), Permit::Skip { retry_after_ms: 506 });
        assert_eq!(b.retry_after_ms(500), 506);
    }

    #[test]
    fn exactly_one_probe_after_the_cool_down_and_recovery_closes() {
        let mut b = Breaker::new();
        for t in 0..3 {
            b.report(POLICY, true, false, t);
        }
        assert_eq!(b.permit(POLICY, 1_002), Permit::Probe);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        for t in 1_003..1_010 {
            assert!(matches!(b.permit(POLICY, t), Permit::Skip { .. }), "only one probe");
        }
        b.report(POLICY, false, true, 1_050);
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.permit(POLICY, 1_051), Permit::Call);
        let states: Vec<_> = b.transitions().iter().map(|t| t.to).collect();
        assert_eq!(states, [BreakerState::Open, BreakerState::HalfOpen, BreakerState::Closed]);
        assert_eq!(b.counts(), (4, 3));
    }

    #[test]
    fn a_failed_probe_reopens_and_a_silent_probe_frees_the_slot() {
        let mut b = Breaker::new();
        for t in 0..3 {
            b.report(POLICY, true, false, t);
        }
        assert_eq!(b.permit(POLICY, 1_002), Permit::Probe);
        // A call that left before the breaker opened fails late: no change.
        b.report(POLICY, true, false, 1_003);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.report(POLICY, true, true, 1_004);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.permit(POLICY, 2_004), Permit::Probe);
        // That probe never reports: another may go after a cool-down.
        assert!(matches!(b.permit(POLICY, 2_500), Permit::Skip { .. }));
        assert_eq!(b.permit(POLICY, 3_004), Permit::Probe);
    }

    #[test]
    fn zero_failures_never_opens() {
        let off = BreakerPolicy { failures: 0, cooldown_ms: 1_000 };
        let mut b = Breaker::new();
        for t in 0..100 {
            b.report(off, true, false, t);
        }
        assert_eq!(b.permit(off, 100), Permit::Call);
    }

    #[test]
    fn only_transient_and_unknown_outcomes_are_failures() {
        assert!(is_failure(Decision::Retry) && is_failure(Decision::RetryOnce) && is_failure(Decision::Unknown));
        assert!(!is_failure(Decision::Accept) && !is_failure(Decision::Never));
    }

    #[test]
    fn transitions_are_bounded() {
        let mut b = Breaker::new();
        let mut t = 0;
        for _ in 0..30 {
            for _ in 0..3 {
                b.report(POLICY, true, false, t);
                t += 1;
            }
            t += 1_000;
            assert_eq!(b.permit(POLICY, t), Permit::Probe);
            b.report(POLICY, false, true, t);
        }
        assert_eq!(b.transitions().len(), TRANSITIONS_KEPT);
    }

    #[test]
    fn a_health_call_is_read_from_its_path_and_a_reports_body() {
        assert_eq!(HealthCall::decode("/permit", b""), Ok(HealthCall::Permit));
        assert_eq!(HealthCall::decode("/view", b"ignored"), Ok(HealthCall::View));
        let report = HealthCall::decode("/report", br#"{"failed":true,"probe":false}"#);
        assert_eq!(report, Ok(HealthCall::Report(Report { failed: true, probe: false })));
        let malformed = HealthCall::decode("/report", b"").unwrap_err();
        assert_eq!((malformed.status(), malformed.detail.as_str()), (500, "malformed health report"));
        let unknown = HealthCall::decode("/nope", b"").unwrap_err();
        assert_eq!((unknown.status(), unknown.detail.as_str()), (404, "unknown health route"));
        // What the client sends reads back.
        let sent = serde_json::to_vec(&Report { failed: false, probe: true }).unwrap();
        assert_eq!(HealthCall::decode("/report", &sent), Ok(HealthCall::Report(Report { failed: false, probe: true })));
    }

    #[test]
    fn a_health_call_answers_a_permit_or_a_view_and_a_report_changes_the_breaker() {
        let policy = BreakerPolicy { failures: 1, cooldown_ms: 1_000 };
        let mut breaker = Breaker::new();
        let permit = breaker.answer(HealthCall::Permit, policy, 0).unwrap();
        assert_eq!(serde_json::from_value::<Permit>(permit).unwrap(), Permit::Call);
        assert_eq!(breaker.answer(HealthCall::Report(Report { failed: true, probe: false }), policy, 10), None);
        assert_eq!(breaker.state(), BreakerState::Open);
        let permit = breaker.answer(HealthCall::Permit, policy, 20).unwrap();
        assert_eq!(serde_json::from_value::<Permit>(permit).unwrap(), Permit::Skip { retry_after_ms: 990 });
        let view = breaker.answer(HealthCall::View, policy, 20).unwrap();
        assert_eq!(view, serde_json::to_value(breaker.view(20)).unwrap());
        let view: HealthView = serde_json::from_value(view).unwrap();
        assert_eq!((view.state, view.calls, view.failures, view.retry_after_ms), (BreakerState::Open, 1, 1, 990));
    }
}
