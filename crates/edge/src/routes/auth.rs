//! Who is calling: the request's credentials (`Authorization`, `x-api-key`),
//! read here; the core decides whose they are ([`Credentials`]: a tenant
//! key, a user token, an admin key).

use onejob_core::front::Credentials;
use worker::Request;

/// The credentials a request presents, as read from its headers.
pub struct Presented {
    authorization: Option<String>,
    api_key: Option<String>,
}

impl Presented {
    /// Reads `Authorization` and `x-api-key`.
    pub fn of(req: &Request) -> Self {
        let get = |name: &str| req.headers().get(name).ok().flatten();
        Self { authorization: get("Authorization"), api_key: get("x-api-key") }
    }

    /// What the core reads them as.
    pub fn credentials(&self) -> Credentials<'_> {
        Credentials { authorization: self.authorization.as_deref(), api_key: self.api_key.as_deref() }
    }
}
