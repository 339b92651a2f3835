//! Who is calling: `Authorization: Bearer <tenant key>` (or `x-api-key:
//! <tenant key>`, as Anthropic's SDK sends its key) → tenant id, through the
//! `TENANTS` directory (see [`onejob_core::tenant`]).

use onejob_core::admin::{Admin, AdminDirectory};
use onejob_core::tenant::{TenantDirectory, bearer_token};
use worker::Request;

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
