//! The messages of the `ProviderHealth` Durable Object
//! ([`crate::objects::health`]) and its client: an attempt asks a
//! provider's breaker first ([`permit`]) and tells it how the call went
//! ([`report`]); the providers' page reads it ([`view`]).

use onejob_core::retry::breaker::Permit;
pub use onejob_core::retry::breaker::{HealthView, Report};
use onejob_core::upstream::providers::Provider;
use worker::{Env, Response, Result};

use crate::api::client;
use crate::env::binding;

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

/// `provider`'s breaker as the providers' page shows it.
pub async fn view(env: &Env, provider: &str) -> Result<HealthView> {
    let mut response = ask(env, provider, "https://health/view", None).await?;
    response.json::<HealthView>().await
}

async fn ask(env: &Env, provider: &str, url: &str, body: Option<String>) -> Result<Response> {
    client::call(env, binding::PROVIDER_HEALTH, provider, url, &client::init(body)).await
}
