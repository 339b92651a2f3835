//! `UsageMeter`: the Durable Object that counts one tenant's (or one user's)
//! upstream tokens per day, for quotas ([`onejob_core::quota`]). One object
//! per tenant and per (tenant, user), so every isolate sees one count.

use std::cell::Cell;

use onejob_core::quota::{Meter, QuotaLimits};
use serde::{Deserialize, Serialize};
use worker::{DurableObject, Env, Request, Response, Result, State, durable_object};

use crate::api::client;
use crate::env::clock::now_ms;
use crate::env::config::binding;

const STORAGE_KEY: &str = "meter";

#[durable_object]
pub struct UsageMeter {
    state: State,
    loaded: Cell<Option<Meter>>,
}

#[derive(Serialize, Deserialize)]
struct Check {
    limit: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Add {
    tokens: u64,
}

impl DurableObject for UsageMeter {
    fn new(state: State, _env: Env) -> Self {
        Self { state, loaded: Cell::new(None) }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        // Read the body before the meter: nothing may run between its read and write.
        let body = req.bytes().await?;
        let mut meter = match self.loaded.get() {
            Some(meter) => meter,
            None => self.state.storage().get::<Meter>(STORAGE_KEY).await.ok().flatten().unwrap_or_default(),
        };
        let now = now_ms();
        let answer = match req.path().as_str() {
            "/check" => {
                let check: Check = serde_json::from_slice(&body)?;
                Response::from_json(
                    &serde_json::json!({ "allowed": meter.allows(check.limit, now), "used": meter.used_on(now) }),
                )?
            }
            "/add" => {
                let add: Add = serde_json::from_slice(&body)?;
                meter.add(add.tokens, now);
                Response::empty()?
            }
            _ => Response::error("no such route", 404)?,
        };
        self.loaded.set(Some(meter));
        if req.path() == "/add" {
            self.state.storage().put(STORAGE_KEY, &meter).await?;
        }
        Ok(answer)
    }
}

/// The meters a job of `tenant` (and `user`) draws on, with their limits.
fn meters(tenant: &str, user: Option<&str>, limits: QuotaLimits) -> Vec<(String, Option<u64>)> {
    let mut meters = vec![(format!("tenant\u{1f}{tenant}"), limits.tenant_tokens_per_day)];
    if let Some(user) = user {
        meters.push((format!("user\u{1f}{tenant}\u{1f}{user}"), limits.user_tokens_per_day));
    }
    meters
}

/// Whether a new job of `tenant` (and `user`) may start: every budget it
/// draws on has tokens left today.
pub async fn allows(env: &Env, tenant: &str, user: Option<&str>, limits: QuotaLimits) -> Result<bool> {
    for (name, limit) in meters(tenant, user, limits) {
        if limit.is_none() {
            continue;
        }
        let body = serde_json::to_string(&Check { limit })?;
        let mut response = ask(env, &name, "https://meter/check", body).await?;
        let answer: serde_json::Value = response.json().await?;
        if answer.get("allowed").and_then(serde_json::Value::as_bool) == Some(false) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Counts `tokens` against the job's tenant and user.
pub async fn add(env: &Env, tenant: &str, user: Option<&str>, tokens: u64) -> Result<()> {
    for (name, _) in meters(tenant, user, QuotaLimits::default()) {
        ask(env, &name, "https://meter/add", serde_json::to_string(&Add { tokens })?).await?;
    }
    Ok(())
}

async fn ask(env: &Env, name: &str, url: &str, body: String) -> Result<Response> {
    client::call(env, binding::USAGE_METER, name, url, &client::init(Some(body))).await
}
