//! The retry rules of one client, as the JavaScript shell asks for them:
//! after each try, [`Engine::next`] says deliver, wait so long, or give up
//! (core's [`Retries`] with the client's shared [`RetryBudget`]), and why.

use onejob_core::identity::canonical::push_u64;
use onejob_core::identity::fingerprint::Fingerprint;
use onejob_core::identity::intent::{self, SavedRequest};
use onejob_core::retry::backoff::budget::{BudgetConfig, BudgetError, RetryBudget};
use onejob_core::retry::backoff::retries::{Observation, Retries, Step, UnknownOutcomes};
use onejob_core::retry::backoff::retry_after::server_delay_ms_with;
use onejob_core::retry::backoff::{Backoff, BackoffError, Jitter};
use onejob_core::retry::classify::{ErrorClass, TransportFailure};
use onejob_core::retry::reply::BodyHint;
use onejob_core::wire::header;
use wasm_bindgen::prelude::*;

use crate::intent::Intent;
use crate::js::{self, CryptoRandom, JsDates};

/// What [`Engine::next`] returns besides a delay: hand the answer over.
const DELIVER: f64 = -1.0;
/// What [`Engine::next`] returns besides a delay: stop retrying.
const GIVE_UP: f64 = -2.0;

/// The validated retry policy of one client and its retry budget (shared by
/// every intent of the client).
#[wasm_bindgen]
pub struct Engine {
    backoff: Backoff,
    budget: RetryBudget,
    retry_after_cap_ms: u64,
    retention_ms: u64,
}

/// The retry state of one send (or of one stream's reopening): core's
/// [`Retries`], plus why the last step was taken, for events and errors.
#[wasm_bindgen]
pub struct Attempts {
    retries: Retries,
    reason: String,
    server_asked: bool,
}

#[wasm_bindgen]
impl Engine {
    /// The policy from options the shell has already type-checked; `None`
    /// (`undefined`) on a combination core refuses, whose reason
    /// ([`crate::last_error`]) the shell throws as a `OneJobConfigError`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        base_ms: f64,
        cap_ms: f64,
        capacity: u32,
        retry_cost: u32,
        timeout_retry_cost: u32,
        success_refund: u32,
        retry_after_cap_ms: f64,
        retention_ms: f64,
    ) -> Option<Engine> {
        let backoff = match Backoff::new(base_ms as u64, cap_ms as u64, Jitter::Full) {
            Ok(backoff) => backoff,
            Err(BackoffError::ZeroBase) => return js::refuse("onejob: retry: baseMs must be at least 1 ms"),
            Err(BackoffError::CapBelowBase { .. }) => {
                return js::refuse("onejob: retry: capMs must be at least baseMs");
            }
        };
        let budget = match BudgetConfig::new(capacity, retry_cost, timeout_retry_cost, success_refund) {
            Ok(budget) => budget,
            Err(BudgetError::FreeRetries) => {
                return js::refuse("onejob: retry.budget: a retry must cost at least one token");
            }
            Err(BudgetError::CostAboveCapacity { .. }) => {
                return js::refuse("onejob: retry.budget: a retry costs more tokens than the budget holds");
            }
        };
        Some(Engine {
            backoff,
            budget: RetryBudget::new(budget),
            retry_after_cap_ms: retry_after_cap_ms as u64,
            retention_ms: retention_ms as u64,
        })
    }

    /// The intent a submission belongs to: `stored` while it is unresolved
    /// and live (same key), else a new one with a fresh key. `request_json`
    /// is the request as the shell saved it (url, method, headers, body).
    /// `None` (see [`crate::last_error`]) for a malformed fingerprint.
    pub fn submit(
        &self,
        stored: Option<Intent>,
        intent: &str,
        fingerprint: &str,
        request_json: Option<String>,
        now_ms: f64,
    ) -> Option<Intent> {
        let Some(fingerprint) = Fingerprint::parse(fingerprint) else {
            return js::refuse(crate::MALFORMED_FINGERPRINT);
        };
        let (stored, stored_request) = match stored {
            Some(stored) => (Some(stored.record), stored.request_json),
            None => (None, None),
        };
        let no_request: Option<SavedRequest> = None;
        let (record, is_new) = intent::submit(
            stored,
            intent,
            fingerprint,
            no_request,
            now_ms as u64,
            self.retention_ms,
            &mut CryptoRandom,
        );
        // A record kept from before keeps its request (what a reload re-sends);
        // one without any takes this submission's.
        let request_json = if is_new { request_json } else { stored_request.or(request_json) };
        Some(Intent::new(record, request_json))
    }

    /// A new send's retry state.
    pub fn attempts(&self) -> Attempts {
        Attempts {
            retries: Retries::new(self.backoff, UnknownOutcomes::Resend),
            reason: String::new(),
            server_asked: false,
        }
    }

    /// The step after one try: the milliseconds to wait before the next, or
    /// -1 (deliver this answer) or -2 (give up). `status` 0 means no response
    /// came (the request failed on the way, before or after reaching the
    /// gateway: with the same key a resend is safe either way). `headers` is
    /// the response's `x-should-retry`, `retry-after-ms` and `Retry-After`,
    /// joined by line feeds (which no header value holds), each empty when
    /// absent (an empty value means nothing either): one string crosses the
    /// boundary, not three. `may_try_again` is the caller's attempt cap.
    #[wasm_bindgen(js_name = next)]
    pub fn next_joined(
        &mut self,
        attempts: &mut Attempts,
        status: u16,
        headers: &str,
        now_ms: f64,
        may_try_again: bool,
    ) -> f64 {
        self.step(attempts, status, split_headers(headers), now_ms, may_try_again)
    }

    /// How long the server asked to wait (`retry-after-ms`, else
    /// `Retry-After`), capped by `retryAfterCapMs`; -1 when it did not ask.
    /// `headers` as for [`Engine::next_joined`].
    #[wasm_bindgen(js_name = serverDelay)]
    pub fn server_delay_joined(&self, headers: &str, now_ms: f64) -> f64 {
        let [_, ms, date] = split_headers(headers);
        self.delay(ms, date, now_ms)
    }

    /// A full-jitter delay for the `n`-th wait (1 = the first) of a poll.
    pub fn jitter(&self, n: u32) -> f64 {
        self.backoff.delay_ms(n.min(16), None, &mut CryptoRandom) as f64
    }
}

/// The engine's steps with the headers apart, for Rust callers (the tests);
/// the shell calls [`Engine::next_joined`] and [`Engine::server_delay_joined`].
impl Engine {
    /// [`Engine::next_joined`], with the three header values apart (`None`: absent).
    #[allow(clippy::too_many_arguments)]
    pub fn next(
        &mut self,
        attempts: &mut Attempts,
        status: u16,
        should_retry: Option<String>,
        retry_after_ms: Option<String>,
        retry_after: Option<String>,
        now_ms: f64,
        may_try_again: bool,
    ) -> f64 {
        let headers = [should_retry.as_deref(), retry_after_ms.as_deref(), retry_after.as_deref()];
        self.step(attempts, status, headers, now_ms, may_try_again)
    }

    /// [`Engine::server_delay_joined`], with the two header values apart.
    pub fn server_delay(&self, retry_after_ms: Option<String>, retry_after: Option<String>, now_ms: f64) -> f64 {
        self.delay(retry_after_ms.as_deref(), retry_after.as_deref(), now_ms)
    }

    fn step(
        &mut self,
        attempts: &mut Attempts,
        status: u16,
        [should_retry, retry_after_ms, retry_after]: [Option<&str>; 3],
        now_ms: f64,
        may_try_again: bool,
    ) -> f64 {
        let observed = if status == 0 {
            Observation::transport(TransportFailure::DroppedAfterSend)
        } else {
            let headers = |name: &str| {
                match name {
                    header::SHOULD_RETRY => should_retry,
                    header::RETRY_AFTER_MS => retry_after_ms,
                    header::RETRY_AFTER => retry_after,
                    _ => None,
                }
                .map(str::to_owned)
            };
            Observation::from_http_with(
                status,
                &headers,
                BodyHint::None,
                now_ms as u64,
                self.retry_after_cap_ms,
                &JsDates,
            )
        };
        attempts.reason = reason(observed.classification.class, status, observed.server_delay_ms);
        attempts.server_asked = observed.server_delay_ms.is_some();
        match attempts.retries.next(&observed, may_try_again, &mut self.budget, &mut CryptoRandom) {
            Step::Deliver => DELIVER,
            Step::Wait(delay) => delay as f64,
            Step::GiveUp => GIVE_UP,
        }
    }

    fn delay(&self, retry_after_ms: Option<&str>, retry_after: Option<&str>, now_ms: f64) -> f64 {
        server_delay_ms_with(retry_after_ms, retry_after, now_ms as u64, self.retry_after_cap_ms, &JsDates)
            .map_or(-1.0, |ms| ms as f64)
    }
}

/// The three values [`Engine::next_joined`] is given, joined by line feeds.
/// An empty one is passed on as it is: core reads an empty value as it reads
/// an absent one (neither asks for anything).
fn split_headers(joined: &str) -> [Option<&str>; 3] {
    let (first, rest) = joined.split_once('\n').unwrap_or((joined, ""));
    let (second, third) = rest.split_once('\n').unwrap_or((rest, ""));
    [first, second, third].map(Some)
}

#[wasm_bindgen]
impl Attempts {
    /// Why the last step was taken, for UIs ("rate limited (429)").
    #[wasm_bindgen(getter)]
    pub fn reason(&self) -> String {
        self.reason.clone()
    }

    /// Whether the last answer named its own wait (`Retry-After`).
    #[wasm_bindgen(getter, js_name = serverAsked)]
    pub fn server_asked(&self) -> bool {
        self.server_asked
    }
}

/// What a backoff or give-up was about, for UIs.
fn reason(class: ErrorClass, status: u16, hint_ms: Option<u64>) -> String {
    let mut out = String::new();
    // The text before the status and after it; the status is left out
    // when the text already names it.
    let (before, after) = match class {
        ErrorClass::RateLimited => ("rate limited (429)", None),
        ErrorClass::Conflict => ("still in progress (", Some(")")),
        ErrorClass::Unavailable => ("unavailable (", Some(")")),
        ErrorClass::ServerError => ("server error (500)", None),
        ErrorClass::Timeout if status == 408 => ("request timeout (408)", None),
        ErrorClass::DroppedAfterSend | ErrorClass::Connect | ErrorClass::Timeout | ErrorClass::TimeoutAfterSend => {
            ("network error", None)
        }
        _ => ("status ", Some("")),
    };
    out.push_str(before);
    if let Some(after) = after {
        push_u64(&mut out, u64::from(status));
        out.push_str(after);
    }
    if let Some(ms) = hint_ms {
        out.push_str("; server asked to wait ");
        push_u64(&mut out, ms);
        out.push_str(" ms");
    }
    out
}
