//! The messages of the `UsageMeter` Durable Object
//! ([`crate::objects::meter`]) and its client: whether a new job may start
//! ([`allows`]) and what a job used ([`add`]), per tenant and per user.

use onejob_core::quota::QuotaLimits;
use serde::{Deserialize, Serialize};
use worker::{Env, Response, Result};

use crate::api::client;
use crate::env::binding;

/// `POST /check`: may a job start under this limit?
#[derive(Serialize, Deserialize)]
pub struct Check {
    pub limit: Option<u64>,
}

/// `POST /add`: tokens a job used.
#[derive(Serialize, Deserialize)]
pub struct Add {
    pub tokens: u64,
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
