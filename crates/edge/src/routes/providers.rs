//! The providers, for operators and tenants: `GET /onejob/v1/providers`
//! (each provider's breaker and every route: names and health only, no URL,
//! no key) and `POST /onejob/v1/providers/check` (a route's contract check,
//! [`crate::routes::check`]).

use onejob_core::breaker::BreakerState;
use onejob_core::protocol::ProblemType;
use worker::{Env, Method, Request, Response, Result};

use crate::api::health;
use crate::env::config::{self, Config};
use crate::http::{self, problem_of};
use crate::routes::auth::{admin_of, tenant_of};

/// `GET /onejob/v1/providers`: each provider's breaker, for any tenant or
/// admin (names and health only: no URL, no key).
pub async fn list(req: Request, env: &Env) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    // Any tenant, or an admin.
    if let Err(detail) =
        tenant_of(&req, &config.tenants).map(|_| ()).or_else(|_| admin_of(&req, &config.admins).map(|_| ()))
    {
        return problem_of(ProblemType::Unauthorized, detail);
    }
    if req.method() != Method::Get {
        return http::method_not_allowed(&req.method(), &Method::Get);
    }
    page(env, &config).await
}

/// `POST /onejob/v1/providers/check`: a route's samples at each of its
/// providers (see [`crate::routes::check`]).
pub async fn check(req: Request, env: &Env) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    // The check spends the deployment's provider keys: admins of all tenants only.
    match admin_of(&req, &config.admins) {
        Ok(admin) if admin.reaches_all() => {}
        Ok(_) => {
            return problem_of(ProblemType::Forbidden, "provider checks need an admin key for every tenant (\"*\")");
        }
        Err(detail) => return problem_of(ProblemType::Unauthorized, detail),
    }
    if req.method() != Method::Post {
        return http::method_not_allowed(&req.method(), &Method::Post);
    }
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
