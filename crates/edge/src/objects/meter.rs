//! `UsageMeter`: the Durable Object that counts one tenant's (or one user's)
//! upstream tokens per day, for quotas ([`onejob_core::config::quota`]). One object
//! per tenant and per (tenant, user), so every isolate sees one count.

use std::cell::Cell;

use onejob_core::config::quota::{Meter, MeterCall};
use worker::{DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::env::clock::now_ms;

const STORAGE_KEY: &str = "meter";

#[durable_object]
pub struct UsageMeter {
    state: State,
    loaded: Cell<Option<Meter>>,
}

impl DurableObject for UsageMeter {
    fn new(state: State, _env: Env) -> Self {
        Self { state, loaded: Cell::new(None) }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        // Read the body before the meter: nothing may run between its read and write.
        let body = req.bytes().await?;
        let Some(call) = MeterCall::decode(&req.path(), &body)? else { return Response::error("no such route", 404) };
        let mut meter = match self.loaded.get() {
            Some(meter) => meter,
            None => self.state.storage().get::<Meter>(STORAGE_KEY).await.ok().flatten().unwrap_or_default(),
        };
        let writes = call.writes();
        let answer = meter.answer(call, now_ms());
        self.loaded.set(Some(meter));
        if writes {
            self.state.storage().put(STORAGE_KEY, &meter).await?;
        }
        Response::from_json(&answer)
    }
}
