//! `ProviderHealth`: the Durable Object that holds one provider's circuit
//! breaker ([`onejob_core::retry::breaker`]), shared by every isolate, so a provider
//! that fails for one Ledger is skipped by all of them and exactly one probe
//! goes out after the cool-down.
//!
//! Every attempt on a provider with a breaker asks it first
//! ([`crate::api::health::permit`]) and tells it how the call went
//! ([`crate::api::health::report`]): one round trip to the object
//! before the call, one after. The trade-off, measured in the bench: a few
//! milliseconds per attempt, against per-isolate breakers that would each
//! need N failures of their own (N × isolates calls to a dead provider) and
//! could not promise one probe.

use std::cell::RefCell;

use onejob_core::retry::breaker::{Breaker, HealthCall};
use worker::{DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::env::clock::now_ms;
use crate::env::config;
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
        let call = match HealthCall::decode(&req.path(), &req.bytes().await?) {
            Ok(call) => call,
            Err(refused) => return http::problem(&refused),
        };
        let mut breaker = self.load().await?;
        let before = breaker.clone();
        let answer = match breaker.answer(call, policy, now_ms()) {
            Some(body) => Response::from_json(&body)?,
            None => Response::empty()?,
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
