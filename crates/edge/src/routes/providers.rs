//! The providers, for operators and tenants: `GET /onejob/v1/providers`
//! (each provider's breaker and every route: names and health only, no URL,
//! no key) and `POST /onejob/v1/providers/check` (a route's contract check,
//! [`crate::routes::check`]).

use onejob_core::front::{self, Method};
use onejob_core::operators::provider_check;
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

/// Every provider's name, kind and health, and every route: the page is the
/// core's ([`provider_check::providers_page`]); this asks the breakers it names.
async fn page(env: &Env, config: &Config) -> Result<Response> {
    let providers = &config.settings.providers;
    let mut views = Vec::new();
    for (index, name) in provider_check::with_breaker(providers) {
        views.push((index, health::view(env, name).await?));
    }
    http::json(&provider_check::providers_page(providers, &views))
}
