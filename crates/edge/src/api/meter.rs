//! The messages of the `UsageMeter` Durable Object
//! ([`crate::objects::meter`]) and its client: whether a new job may start
//! ([`allows`]) and what a job used ([`add`]), per tenant and per user.

use onejob_core::alert::BudgetAlert;
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

/// `POST /add`: tokens a job used; with the meter's limit and the share
/// of it that calls for a budget alert (answered `{"alert": true, "used": n}`
/// once per day, when a count reaches it).
#[derive(Serialize, Deserialize)]
pub struct Add {
    pub tokens: u64,
    #[serde(default)]
    pub limit: Option<u64>,
    #[serde(default)]
    pub share_permille: u32,
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

/// Counts `tokens` against the job's tenant and user; the budget alerts
/// this count made due (a quota's use reached `share_permille` of it today).
pub async fn add(
    env: &Env,
    tenant: &str,
    user: Option<&str>,
    tokens: u64,
    limits: QuotaLimits,
    share_permille: u32,
) -> Result<Vec<BudgetAlert>> {
    let mut due = Vec::new();
    for (index, (name, limit)) in meters(tenant, user, limits).into_iter().enumerate() {
        let add = Add { tokens, limit, share_permille };
        let mut response = ask(env, &name, "https://meter/add", serde_json::to_string(&add)?).await?;
        let answer: serde_json::Value = response.json().await.unwrap_or_default();
        if answer.get("alert").and_then(serde_json::Value::as_bool) == Some(true)
            && let Some(limit) = limit
        {
            due.push(BudgetAlert {
                tenant: tenant.to_owned(),
                // The second meter is the user's.
                user: if index == 0 { None } else { user.map(str::to_owned) },
                limit,
                used: answer.get("used").and_then(serde_json::Value::as_u64).unwrap_or_default(),
                share_permille,
                day: onejob_core::quota::day_of(crate::env::clock::now_ms()),
            });
        }
    }
    Ok(due)
}

async fn ask(env: &Env, name: &str, url: &str, body: String) -> Result<Response> {
    client::call(env, binding::USAGE_METER, name, url, &client::init(Some(body))).await
}
