//! Who a credential belongs to.
//!
//! A deployment lists its tenants as a JSON object from the hex SHA-256 of
//! each tenant's bearer key to the tenant id, so the configuration never holds
//! a key in clear: `{"<sha256 of key>": "acme"}`.

use std::collections::HashMap;

use crate::digest;

/// The tenants of a deployment, by key digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantDirectory {
    by_digest: HashMap<String, String>,
}

impl TenantDirectory {
    /// Parses the JSON object; `Err` explains what is wrong with it.
    pub fn from_json(json: &str) -> Result<Self, String> {
        let map: HashMap<String, String> = serde_json::from_str(json)
            .map_err(|e| format!("TENANTS must be a JSON object of digest → tenant id: {e}"))?;
        for (digest, tenant) in &map {
            let is_digest = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
            if !is_digest || tenant.is_empty() {
                return Err(format!(
                    "TENANTS entry {digest:?} → {tenant:?}: keys must be 64 hex digits, ids non-empty"
                ));
            }
        }
        let by_digest = map.into_iter().map(|(digest, tenant)| (digest.to_ascii_lowercase(), tenant)).collect();
        Ok(Self { by_digest })
    }

    /// The tenant whose bearer key is `token`, if any.
    pub fn tenant_of(&self, token: &str) -> Option<&str> {
        self.by_digest.get(&key_digest(token)).map(String::as_str)
    }
}

/// The hex SHA-256 of a bearer key, as `TENANTS` lists it.
pub fn key_digest(token: &str) -> String {
    digest::sha256_hex(token.as_bytes())
}

/// Reads the token out of an `Authorization: Bearer <token>` header value.
pub fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn looks_up_by_digest_only() {
        let json = format!(r#"{{"{}":"acme"}}"#, key_digest("secret-a"));
        let dir = TenantDirectory::from_json(&json).unwrap();
        assert_eq!(dir.tenant_of("secret-a"), Some("acme"));
        assert_eq!(dir.tenant_of("secret-b"), None);
        assert_eq!(dir.tenant_of(&key_digest("secret-a")), None, "the digest itself is no credential");
    }

    #[test]
    fn known_digest_of_the_development_key() {
        assert_eq!(key_digest("onejob-dev-key").len(), 64);
        assert_eq!(key_digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn rejects_malformed_directories() {
        assert!(TenantDirectory::from_json("[]").is_err());
        assert!(TenantDirectory::from_json(r#"{"abc":"x"}"#).is_err());
        assert!(TenantDirectory::from_json(&format!(r#"{{"{}":""}}"#, key_digest("k"))).is_err());
        assert_eq!(TenantDirectory::from_json("{}").unwrap(), TenantDirectory::default());
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
    }
}
