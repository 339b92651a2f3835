//! Who a credential belongs to.
//!
//! A deployment lists its tenants as a JSON object from the hex SHA-256 of
//! each tenant's bearer key to the tenant id, so the configuration never holds
//! a key in clear: `{"<sha256 of key>": "acme"}`.

use std::collections::HashMap;

use crate::identity::digest;

/// The tenants of a deployment, by key digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantDirectory {
    by_digest: HashMap<String, String>,
}

impl TenantDirectory {
    /// `TENANTS` as read (`None`: unset): unset is an empty directory.
    pub fn from_var(text: Option<&str>) -> Result<Self, DirectoryError> {
        text.map_or_else(|| Ok(Self::default()), Self::from_json)
    }

    /// Parses the JSON object; `Err` says what is wrong with it without
    /// quoting any of it (an operator may have pasted a raw key).
    pub fn from_json(json: &str) -> Result<Self, DirectoryError> {
        let map: HashMap<String, String> = serde_json::from_str(json).map_err(|_| DirectoryError::NotAnObject)?;
        for (digest, tenant) in &map {
            let is_digest = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
            if !is_digest {
                return Err(DirectoryError::NotADigest);
            }
            if tenant.is_empty() {
                return Err(DirectoryError::EmptyTenant);
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

/// Why a `TENANTS` value is refused. Never carries any of its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectoryError {
    /// Not a JSON object of strings.
    NotAnObject,
    /// A name is not 64 hex digits (perhaps a raw key instead of its digest).
    NotADigest,
    /// A tenant id is empty.
    EmptyTenant,
}

impl std::fmt::Display for DirectoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotAnObject => "TENANTS must be a JSON object of key digest → tenant id",
            Self::NotADigest => {
                "a TENANTS name is not a hex SHA-256 digest (64 hex digits: `echo -n KEY | sha256sum`, never the key itself)"
            }
            Self::EmptyTenant => "a TENANTS tenant id is empty",
        })
    }
}

impl std::error::Error for DirectoryError {}

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
    fn unset_tenants_is_an_empty_directory_and_a_value_is_read_as_json() {
        assert_eq!(TenantDirectory::from_var(None).ok(), Some(TenantDirectory::default()));
        assert_eq!(TenantDirectory::from_var(Some("{}")).ok(), TenantDirectory::from_json("{}").ok());
        assert!(TenantDirectory::from_var(Some("not json")).is_err());
    }

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
        // dev.vars.example (what `make dev` runs with) lists the development
        // tenant by this digest.
        let dev_vars = include_str!("../../../../dev.vars.example");
        assert!(dev_vars.contains(&format!(r#"{{"{}":"dev"}}"#, key_digest("onejob-dev-key"))));
        assert_eq!(key_digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn rejects_malformed_directories_without_quoting_them() {
        assert_eq!(TenantDirectory::from_json("[]"), Err(DirectoryError::NotAnObject));
        let raw_key = r#"{"sk-raw-bearer-key-pasted-by-mistake":"acme"}"#;
        let error = TenantDirectory::from_json(raw_key).unwrap_err();
        assert_eq!(error, DirectoryError::NotADigest);
        assert!(!error.to_string().contains("sk-raw"));
        let broken = r#"{"sk-raw-bearer-key": }"#;
        assert!(!TenantDirectory::from_json(broken).unwrap_err().to_string().contains("sk-raw"));
        assert_eq!(
            TenantDirectory::from_json(&format!(r#"{{"{}":""}}"#, key_digest("k"))),
            Err(DirectoryError::EmptyTenant)
        );
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
