//! The messages of the `UsageMeter` Durable Object
//! ([`crate::objects::meter`]) and its client: whether a new job may start
//! ([`allows`]) and what a job used ([`add`]), per tenant and per user.

use onejob_core::config::alert::BudgetAlert;
pub use onejob_core::config::quota::{Add, Check};
use onejob_core::config::quota::{MeterAnswer, QuotaLimits, meters};
use worker::{Env, Response, Result};

use crate::api::client;
use crate::env::binding;

/// Whether a new job of `tenant` (and `user`) may start: every budget it
/// draws on has tokens left today.
pub async fn allows(env: &Env, tenant: &str, user: Option<&str>, limits: QuotaLimits) -> Result<bool> {
    for meter in meters(tenant, user, limits).into_iter().filter(|m| m.limit.is_some()) {
        let body = serde_json::to_string(&Check { limit: meter.limit })?;
        let mut response = ask(env, &meter.name, "https://meter/check", body).await?;
        let answer: MeterAnswer = response.json().await?;
        if answer.refuses() {
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
    let now = crate::env::clock::now_ms();
    for meter in meters(tenant, user, limits) {
        let add = Add { tokens, limit: meter.limit, share_permille };
        let mut response = ask(env, &meter.name, "https://meter/add", serde_json::to_string(&add)?).await?;
        let answer: MeterAnswer = response.json().await.unwrap_or_default();
        due.extend(BudgetAlert::due(&answer, &meter, tenant, share_permille, now));
    }
    Ok(due)
}

async fn ask(env: &Env, name: &str, url: &str, body: String) -> Result<Response> {
    client::call(env, binding::USAGE_METER, name, url, &client::init(Some(body))).await
}
