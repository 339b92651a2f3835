//! Who is calling: `Authorization: Bearer <tenant key>` → tenant id, through
//! the `TENANTS` directory (see [`onejob_core::tenant`]).

use std::cell::RefCell;
use std::rc::Rc;

use onejob_core::tenant::{TenantDirectory, bearer_token};
use worker::{Env, Request};

thread_local! {
    /// The parsed `TENANTS` of this isolate, with the text it came from (a
    /// new deployment's text is parsed again).
    static DIRECTORY: RefCell<Option<(String, Rc<TenantDirectory>)>> = const { RefCell::new(None) };
}

fn directory(text: String) -> Result<Rc<TenantDirectory>, String> {
    if let Some(cached) =
        DIRECTORY.with(|d| d.borrow().as_ref().filter(|(t, _)| *t == text).map(|(_, dir)| Rc::clone(dir)))
    {
        return Ok(cached);
    }
    let parsed = Rc::new(TenantDirectory::from_json(&text)?);
    DIRECTORY.with(|d| *d.borrow_mut() = Some((text, Rc::clone(&parsed))));
    Ok(parsed)
}

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
    let directory = directory(tenants).map_err(AuthError::Misconfigured)?;
    directory.tenant_of(token).map(str::to_owned).ok_or(AuthError::Unauthorized("the bearer key names no tenant"))
}
