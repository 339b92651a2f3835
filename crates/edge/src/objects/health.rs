//! `ProviderHealth`: the Durable Object that holds one provider's circuit
//! breaker ([`onejob_core::breaker`]), shared by every isolate, so a provider
//! that fails for one Ledger is skipped by all of them and exactly one probe
//! goes out after the cool-down.
//!
//! Every attempt on a provider with a breaker asks it first ([`permit`]) and
//! tells it how the call went ([`report`]): one round trip to the object
//! before the call, one after. The trade-off, measured in the bench: a few
//! milliseconds per attempt, against per-isolate breakers that would each
//! need N failures of their own (N × isolates calls to a dead provider) and
//! could not promise one probe.

use std::cell::RefCell;

use onejob_core::breaker::{Breaker, BreakerState, Permit, Transition};
use onejob_core::protocol::ProblemType;
use onejob_core::providers::Provider;
use serde::{Deserialize, Serialize};
use worker::{DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::api::client;
use crate::env::clock::now_ms;
use crate::env::config::{self, Config, binding};
use crate::http;

/// Where the breaker is kept in the object's storage.
const STORAGE_KEY: &str = "breaker";

#[durable_object]
pub struct ProviderHealth {
    state: State,
    env: Env,
    /// The breaker, loaded on first use.
    breaker: RefCell<Option<Breaker>>,
}

/// `POST /report`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Report {
    /// The call failed (transient or unknown): see [`onejob_core::breaker::is_failure`].
    pub failed: bool,
    /// It was let through as the half-open probe.
    pub probe: bool,
}

/// A provider's health as the providers' page shows it: no URL, no key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HealthView {
    pub state: BreakerState,
    pub consecutive_failures: u32,
    /// Outcomes reported, and how many were failures.
    pub calls: u64,
    pub failures: u64,
    /// Failures over calls (0 with no calls).
    pub error_rate: f64,
    /// Until the next probe may go (0 when closed).
    pub retry_after_ms: u64,
    pub transitions: Vec<Transition>,
}

impl DurableObject for ProviderHealth {
    fn new(state: State, env: Env) -> Self {
        Self { state, env, breaker: RefCell::new(None) }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let Ok(config) = config::load(&self.env) else { return http::misconfigured() };
        let policy = config.settings.breaker;
        // Everything that awaits comes before the breaker is read: from the
        // read to the write below nothing else may run (an await on the body
        // would let another request in, and one of two updates be lost).
        let report = match req.path().as_str() {
            "/report" => match req.json::<Report>().await {
                Ok(report) => Some(report),
                Err(_) => return http::problem_of(ProblemType::Internal, "malformed health report"),
            },
            _ => None,
        };
        let mut breaker = self.load().await?;
        let now = now_ms();
        let before = breaker.clone();
        let answer = match (req.path().as_str(), report) {
            ("/permit", _) => Response::from_json(&breaker.permit(policy, now))?,
            ("/report", Some(report)) => {
                breaker.report(policy, report.failed, report.probe, now);
                Response::empty()?
            }
            ("/view", _) => Response::from_json(&view(&breaker, now))?,
            _ => return http::problem_of(ProblemType::NotFound, "unknown health route"),
        };
        if breaker != before {
            if breaker.state() != before.state() {
                worker::console_log!("onejob: provider breaker {:?} → {:?}", before.state(), breaker.state());
            }
            // Memory first: the next request reads it even while the write
            // is in flight (the output gate holds responses until it lands).
            *self.breaker.borrow_mut() = Some(breaker.clone());
            self.state.storage().put(STORAGE_KEY, &breaker).await?;
        }
        Ok(answer)
    }
}

impl ProviderHealth {
    async fn load(&self) -> Result<Breaker> {
        if let Some(breaker) = self.breaker.borrow().clone() {
            return Ok(breaker);
        }
        let stored = self.state.storage().get::<Breaker>(STORAGE_KEY).await.ok().flatten();
        let breaker = stored.unwrap_or_default();
        *self.breaker.borrow_mut() = Some(breaker.clone());
        Ok(breaker)
    }
}

fn view(breaker: &Breaker, now: u64) -> HealthView {
    let (calls, failures) = breaker.counts();
    HealthView {
        state: breaker.state(),
        consecutive_failures: breaker.consecutive_failures(),
        calls,
        failures,
        error_rate: if calls == 0 { 0.0 } else { failures as f64 / calls as f64 },
        retry_after_ms: breaker.retry_after_ms(now),
        transitions: breaker.transitions().to_vec(),
    }
}

/// Asks `provider`'s breaker whether to call it. A provider without a
/// breaker, or a breaker that cannot be reached, is called (the breaker
/// protects the provider; it must not become an outage of its own).
pub async fn permit(env: &Env, provider: &Provider) -> Permit {
    if !provider.breaker {
        return Permit::Call;
    }
    match ask(env, &provider.name, "https://health/permit", None).await {
        Ok(mut response) => response.json::<Permit>().await.unwrap_or(Permit::Call),
        Err(error) => {
            worker::console_warn!("onejob: breaker of {} unreachable: {error}", provider.name);
            Permit::Call
        }
    }
}

/// Tells `provider`'s breaker how a call went.
pub async fn report(env: &Env, provider: &Provider, report: Report) {
    if !provider.breaker {
        return;
    }
    let body = serde_json::to_string(&report).unwrap_or_default();
    if let Err(error) = ask(env, &provider.name, "https://health/report", Some(body)).await {
        worker::console_warn!("onejob: breaker of {} unreachable: {error}", provider.name);
    }
}

/// `GET /onejob/v1/providers`: every provider's name, kind and health.
pub async fn providers_page(env: &Env, config: &Config) -> Result<Response> {
    let mut providers = Vec::new();
    for provider in config.settings.providers.list() {
        let health = if provider.breaker {
            let mut response = ask(env, &provider.name, "https://health/view", None).await?;
            Some(response.json::<HealthView>().await?)
        } else {
            None
        };
        providers.push(serde_json::json!({
            "name": provider.name,
            "kind": provider.kind.as_str(),
            "breaker": provider.breaker,
            "state": health.as_ref().map_or(BreakerState::Closed, |h| h.state),
            "consecutive_failures": health.as_ref().map_or(0, |h| h.consecutive_failures),
            "calls": health.as_ref().map_or(0, |h| h.calls),
            "failures": health.as_ref().map_or(0, |h| h.failures),
            "error_rate": health.as_ref().map_or(0.0, |h| h.error_rate),
            "retry_after_ms": health.as_ref().map_or(0, |h| h.retry_after_ms),
            "transitions": health.map(|h| h.transitions).unwrap_or_default(),
        }));
    }
    let providers_config = &config.settings.providers;
    let routes: Vec<_> = providers_config
        .routes()
        .map(|(model, route)| {
            let steps: Vec<_> = route
                .steps
                .iter()
                .map(|s| serde_json::json!({ "provider": providers_config.get(s.provider).name, "model": s.model }))
                .collect();
            serde_json::json!({
                "model": model,
                "providers": steps,
                "hedge_after_ms": route.hedge_after_ms,
                "contract": route.contract.is_some(),
            })
        })
        .collect();
    http::with_cors(Response::from_json(&serde_json::json!({ "providers": providers, "routes": routes }))?)
}

async fn ask(env: &Env, provider: &str, url: &str, body: Option<String>) -> Result<Response> {
    client::call(env, binding::PROVIDER_HEALTH, provider, url, &client::init(body)).await
}
