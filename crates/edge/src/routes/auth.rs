//! Who is calling: `Authorization: Bearer <tenant key>` (or `x-api-key:
//! <tenant key>`, as Anthropic's SDK sends its key) → tenant id, through the
//! `TENANTS` directory (see [`onejob_core::tenant`]); or `Bearer <user
//! token>` → tenant and user (see [`onejob_core::token`]); or an admin key.

use onejob_core::admin::{Admin, AdminDirectory};
use onejob_core::tenant::{TenantDirectory, bearer_token};
use onejob_core::token::{self, TokenError, UserToken};
use worker::Request;

use crate::env::clock::now_ms;
use crate::env::config::Config;

/// Who is calling: a tenant (its own key), or one user of a tenant (a user
/// token, with the scopes it carries).
pub struct Caller {
    pub tenant: String,
    pub user: Option<String>,
    pub token: Option<UserToken>,
}

/// Why a caller is refused: 401 (who are you?) or 403 (not that).
pub enum Refusal {
    Unauthenticated(String),
    Forbidden(String),
}

/// The caller of a tenant route.
pub fn caller_of(req: &Request, config: &Config) -> Result<Caller, Refusal> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    if let Some(bearer) = authorization.as_deref().and_then(bearer_token)
        && token::looks_like_token(bearer)
    {
        return match token::verify(bearer, &config.token_secrets, now_ms() / 1000) {
            Ok(user_token) => Ok(Caller {
                tenant: user_token.tenant.clone(),
                user: Some(user_token.user.clone()),
                token: Some(user_token),
            }),
            Err(error) => Err(refusal(error)),
        };
    }
    match tenant_of(req, &config.tenants) {
        Ok(tenant) => Ok(Caller { tenant, user: None, token: None }),
        Err(detail) => Err(Refusal::Unauthenticated(detail.into())),
    }
}

/// A token error as a refusal: expired, tampered or foreign tokens are
/// 401; over-scoped ones 403.
pub fn refusal(error: TokenError) -> Refusal {
    if error.is_unauthenticated() {
        Refusal::Unauthenticated(error.to_string())
    } else {
        Refusal::Forbidden(error.to_string())
    }
}

/// The tenant of the request; `Err` says what the caller must fix (401).
pub fn tenant_of(req: &Request, tenants: &TenantDirectory) -> Result<String, &'static str> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    let api_key = req.headers().get("x-api-key").ok().flatten();
    let token = authorization
        .as_deref()
        .and_then(bearer_token)
        .or(api_key.as_deref().map(str::trim))
        .ok_or("send Authorization: Bearer <tenant key> (or x-api-key: <tenant key>)")?;
    tenants.tenant_of(token).map(str::to_owned).ok_or("the key names no tenant")
}

/// The admin of the request (`Authorization: Bearer <admin key>`); `Err`
/// says what the caller must fix (401).
pub fn admin_of<'a>(req: &Request, admins: &'a AdminDirectory) -> Result<&'a Admin, &'static str> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    let token = authorization.as_deref().and_then(bearer_token).ok_or("send Authorization: Bearer <admin key>")?;
    admins.admin_of(token).ok_or("the key names no admin (see ADMIN_KEYS)")
}
