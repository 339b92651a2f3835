//! The providers, for operators and tenants: `GET /onejob/v1/providers`
//! (each provider's breaker and every route: names and health only, no URL,
//! no key) and `POST /onejob/v1/providers/check` (a route's contract check,
//! [`crate::routes::check`]).

use onejob_core::breaker::BreakerState;
use onejob_core::front::{self, Method};
use worker::{Env, Request, Response, Result};

use crate::api::health;
use crate::env::config::{self, Config};
use crate::http::{self, Step, Stop};
use crate::routes::auth::Presented;

/// `GET /onejob/v1/providers`: each provider's breaker, for any tenant or
/// admin (names and health only: no URL, no key).
pub async fn list(req: Request, env: &Env) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    // Any tenant, or an admin.
    let presented = Presented::of(&req);
    let allowed = presented.credentials().tenant_or_admin(&config.tenants, &config.admins);
    match allowed.and_then(|()| front::expect(req.method().as_ref(), Method::Get)) {
        Ok(()) => page(env, &config).await,
        Err(refused) => http::refuse(&refused),
    }
}

/// `POST /onejob/v1/providers/check`: a route's samples at each of its
/// providers (see [`crate::routes::check`]).
pub async fn check(req: Request, env: &Env) -> Result<Response> {
    checked(req, env).await.or_else(Stop::respond)
}

async fn checked(req: Request, env: &Env) -> Step<Response> {
    let config = config::loaded(env)?;
    // The check spends the deployment's provider keys: admins of all tenants only.
    Presented::of(&req).credentials().deployment_admin(&config.admins)?;
    front::expect(req.method().as_ref(), Method::Post)?;
    crate::routes::check::run(req, &config).await
}

/// Every provider's name, kind and health, and every route.
async fn page(env: &Env, config: &Config) -> Result<Response> {
    let mut providers = Vec::new();
    for provider in config.settings.providers.list() {
        let health = if provider.breaker { Some(health::view(env, &provider.name).await?) } else { None };
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
