//! Who is calling: `Authorization: Bearer <tenant key>` → tenant id, through
//! the `TENANTS` directory (see [`onejob_core::tenant`]).

use onejob_core::tenant::{TenantDirectory, bearer_token};
use worker::{Env, Request};

/// Why a request has no tenant.
pub enum AuthError {
    /// No credential, or one that names no tenant: 401.
    Unauthorized(&'static str),
    /// The deployment's `TENANTS` is malformed: 500, the operator must fix it.
    Misconfigured(String),
}

/// The tenant of the request.
pub fn tenant_of(req: &Request, env: &Env) -> Result<String, AuthError> {
    let authorization = req.headers().get("Authorization").ok().flatten();
    let token = authorization
        .as_deref()
        .and_then(bearer_token)
        .ok_or(AuthError::Unauthorized("send Authorization: Bearer <tenant key>"))?;
    let tenants = env.var("TENANTS").map(|v| v.to_string()).unwrap_or_else(|_| "{}".into());
    let directory = TenantDirectory::from_json(&tenants).map_err(AuthError::Misconfigured)?;
    directory.tenant_of(token).map(str::to_owned).ok_or(AuthError::Unauthorized("the bearer key names no tenant"))
}
