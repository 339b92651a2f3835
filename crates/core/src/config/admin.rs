//! Who may operate: admin keys, listed like tenants by their digest
//! (`ADMIN_KEYS`), each with a name for the audit trail and a scope: every
//! tenant (`"*"`) or one tenant.
//!
//! `{"<sha256 of key>": {"name": "ops", "tenant": "*"}}`

use std::collections::HashMap;

use serde::Deserialize;

use crate::config::tenant::key_digest;

/// What an admin key may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every tenant, and the deployment's providers.
    All,
    /// One tenant's jobs.
    Tenant(String),
}

/// One admin: its name (recorded in audits) and scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admin {
    /// Who, as the job audit shows it.
    pub name: String,
    /// What it may reach.
    pub scope: Scope,
}

impl Admin {
    /// Whether this admin may act on `tenant`'s jobs.
    pub fn reaches(&self, tenant: &str) -> bool {
        match &self.scope {
            Scope::All => true,
            Scope::Tenant(own) => own == tenant,
        }
    }

    /// Whether this admin may act on the whole deployment (providers).
    pub fn reaches_all(&self) -> bool {
        self.scope == Scope::All
    }
}

/// The admins of a deployment, by key digest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminDirectory {
    by_digest: HashMap<String, Admin>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    tenant: String,
}

/// Why `ADMIN_KEYS` is refused (never quoting it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdminKeysError;

impl std::fmt::Display for AdminKeysError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "ADMIN_KEYS must be a JSON object of key digest (64 hex digits) → {\"name\": …, \"tenant\": \"*\" or a tenant id}",
        )
    }
}

impl std::error::Error for AdminKeysError {}

impl AdminDirectory {
    /// `ADMIN_KEYS` as read (`None`: unset): unset is no admin.
    pub fn from_var(text: Option<&str>) -> Result<Self, AdminKeysError> {
        text.map_or_else(|| Ok(Self::default()), Self::from_json)
    }

    /// Parses `ADMIN_KEYS`.
    pub fn from_json(json: &str) -> Result<Self, AdminKeysError> {
        let map: HashMap<String, Entry> = serde_json::from_str(json).map_err(|_| AdminKeysError)?;
        let mut by_digest = HashMap::new();
        for (digest, entry) in map {
            let is_digest = digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit());
            let valid_name = (1..=64).contains(&entry.name.len()) && !entry.name.chars().any(char::is_control);
            if !is_digest || !valid_name || entry.tenant.is_empty() {
                return Err(AdminKeysError);
            }
            let scope = if entry.tenant == "*" { Scope::All } else { Scope::Tenant(entry.tenant) };
            by_digest.insert(digest.to_ascii_lowercase(), Admin { name: entry.name, scope });
        }
        Ok(Self { by_digest })
    }

    /// The admin whose key is `token`, if any.
    pub fn admin_of(&self, token: &str) -> Option<&Admin> {
        self.by_digest.get(&key_digest(token))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn unset_admin_keys_is_no_admin_and_a_value_is_read_as_json() {
        assert_eq!(AdminDirectory::from_var(None).ok(), Some(AdminDirectory::default()));
        assert_eq!(AdminDirectory::from_var(Some("{}")).ok(), AdminDirectory::from_json("{}").ok());
        assert!(AdminDirectory::from_var(Some("not json")).is_err());
    }

    #[test]
    fn admins_by_digest_with_scopes() {
        let json = format!(
            r#"{{"{}": {{"name": "ops", "tenant": "*"}}, "{}": {{"name": "acme-support", "tenant": "acme"}}}}"#,
            key_digest("root-key"),
            key_digest("acme-key")
        );
        let dir = AdminDirectory::from_json(&json).unwrap();
        let root = dir.admin_of("root-key").unwrap();
        assert!(root.reaches("acme") && root.reaches("other") && root.reaches_all());
        let acme = dir.admin_of("acme-key").unwrap();
        assert_eq!(acme.name, "acme-support");
        assert!(acme.reaches("acme") && !acme.reaches("other") && !acme.reaches_all());
        assert!(dir.admin_of("tenant-key").is_none());
    }

    #[test]
    fn malformed_keys_are_refused_without_quoting() {
        let raw = r#"{"sk-admin-raw": {"name": "ops", "tenant": "*"}}"#;
        assert_eq!(AdminDirectory::from_json(raw), Err(AdminKeysError));
        assert!(!AdminKeysError.to_string().contains("sk-admin"));
        let digest = key_digest("k");
        for bad in [
            format!(r#"{{"{digest}": {{"name": "", "tenant": "*"}}}}"#),
            format!(r#"{{"{digest}": {{"name": "ops", "tenant": ""}}}}"#),
            format!(r#"{{"{digest}": {{"name": "ops", "tenant": "*", "role": "x"}}}}"#),
            format!(r#"{{"{digest}": "ops"}}"#),
        ] {
            assert_eq!(AdminDirectory::from_json(&bad), Err(AdminKeysError), "{bad}");
        }
    }
}
