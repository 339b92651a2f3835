//! Short-lived user tokens, so a browser never holds a tenant key: the app's
//! server mints `Authorization: Bearer <token>`, an HS256 JWT signed with its
//! tenant's secret (`TOKEN_SECRETS`), naming the user (`sub`), the tenant,
//! when it expires (`exp`, seconds), optionally when it starts to be valid
//! (`nbf`, seconds) and the models and paths it may use. Jobs are then scoped by tenant **and** user.
//!
//! Only `HS256` is accepted (never `none`, never another algorithm named by
//! the token), the signature is compared in constant time, and a token
//! lives at most [`MAX_LIFETIME_S`].

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::config::signature;

/// The longest a token may live (`exp - iat`, or `exp - now` without `iat`): a day.
pub const MAX_LIFETIME_S: u64 = 86_400;

/// Clock skew tolerated between the minting server and the gateway.
const LEEWAY_S: u64 = 30;

/// A verified user token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserToken {
    /// The tenant.
    pub tenant: String,
    /// The user (`sub`).
    #[serde(rename = "sub")]
    pub user: String,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Issued at, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Not valid before, seconds since the epoch (RFC 7519 §4.1.5), with
    /// the same clock-skew allowance as `exp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Models it may ask for; absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models: Option<Vec<String>>,
    /// Paths it may call (exact, or a prefix ending in `*`); absent: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    /// May approve its jobs' effects (`POST /onejob/v1/jobs/{key}/approve`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approve: bool,
}

/// Why a token is refused. 401: [`TokenError::is_unauthenticated`]; 403 otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Not three base64url segments of JSON.
    Malformed,
    /// A header naming anything but HS256.
    Algorithm,
    /// The tenant has no token secret (or no such tenant).
    UnknownTenant,
    /// The signature does not match.
    BadSignature,
    /// Past `exp`.
    Expired,
    /// Before `nbf`.
    NotYetValid,
    /// Lives longer than [`MAX_LIFETIME_S`].
    TooLong,
    /// The token does not allow this model.
    ModelNotAllowed,
    /// The token does not allow this path.
    PathNotAllowed,
}

impl TokenError {
    /// Whether the caller is not authenticated (401) rather than not
    /// allowed (403).
    pub fn is_unauthenticated(self) -> bool {
        !matches!(self, Self::ModelNotAllowed | Self::PathNotAllowed)
    }
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Malformed => "the bearer token is not a well-formed JWT",
            Self::Algorithm => "user tokens must be signed with HS256",
            Self::UnknownTenant => "the token's tenant has no token secret",
            Self::BadSignature => "the token's signature does not match",
            Self::Expired => "the token has expired",
            Self::NotYetValid => "the token is not valid yet (nbf is in the future)",
            Self::TooLong => "the token lives longer than a day",
            Self::ModelNotAllowed => "this token does not allow that model",
            Self::PathNotAllowed => "this token does not allow that path",
        })
    }
}

impl std::error::Error for TokenError {}

/// Each tenant's token secret (`TOKEN_SECRETS`: `{"acme": "<secret>"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenSecrets {
    by_tenant: HashMap<String, String>,
}

/// `TOKEN_SECRETS` is malformed (never quoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecretsError;

impl std::fmt::Display for SecretsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TOKEN_SECRETS must be a JSON object: tenant id → secret of at least 32 characters")
    }
}

impl TokenSecrets {
    /// `TOKEN_SECRETS` as read (`None`: unset): unset is no secret.
    pub fn from_var(text: Option<&str>) -> Result<Self, SecretsError> {
        text.map_or_else(|| Ok(Self::default()), Self::from_json)
    }

    /// Parses `TOKEN_SECRETS`; a secret shorter than 32 characters is refused.
    pub fn from_json(json: &str) -> Result<Self, SecretsError> {
        let by_tenant: HashMap<String, String> = serde_json::from_str(json).map_err(|_| SecretsError)?;
        if by_tenant.iter().any(|(tenant, secret)| tenant.is_empty() || secret.len() < 32) {
            return Err(SecretsError);
        }
        Ok(Self { by_tenant })
    }

    /// Whether any tenant has a secret (user tokens are accepted at all).
    pub fn is_empty(&self) -> bool {
        self.by_tenant.is_empty()
    }

    /// A tenant's secret (to mint tokens, as the demo's issuer does).
    pub fn secret_of(&self, tenant: &str) -> Option<&str> {
        self.by_tenant.get(tenant).map(String::as_str)
    }
}

/// Whether a bearer token is shaped like a JWT (three dot-separated parts),
/// as opposed to a tenant key.
pub fn looks_like_token(bearer: &str) -> bool {
    bearer.starts_with("eyJ") && bearer.split('.').count() == 3
}

#[derive(Deserialize)]
struct Header {
    alg: String,
}

/// Verifies `token` at `now_s` (seconds since the epoch).
pub fn verify(token: &str, secrets: &TokenSecrets, now_s: u64) -> Result<UserToken, TokenError> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::Malformed);
    };
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|_| TokenError::Malformed);
    let header: Header = serde_json::from_slice(&decode(header)?).map_err(|_| TokenError::Malformed)?;
    if header.alg != "HS256" {
        return Err(TokenError::Algorithm);
    }
    let claims: UserToken = serde_json::from_slice(&decode(payload)?).map_err(|_| TokenError::Malformed)?;
    // The unverified tenant only picks the secret; nothing is trusted
    // before the signature is.
    let secret = secrets.by_tenant.get(&claims.tenant).ok_or(TokenError::UnknownTenant)?;
    let signed = &token[..token.len() - signature.len() - 1];
    if !signature::verify(secret.as_bytes(), signed.as_bytes(), &decode(signature)?) {
        return Err(TokenError::BadSignature);
    }
    if claims.user.is_empty() || claims.user.len() > 256 {
        return Err(TokenError::Malformed);
    }
    if claims.exp.saturating_add(LEEWAY_S) <= now_s {
        return Err(TokenError::Expired);
    }
    if claims.nbf.is_some_and(|nbf| nbf > now_s.saturating_add(LEEWAY_S)) {
        return Err(TokenError::NotYetValid);
    }
    let issued = claims.iat.unwrap_or(now_s).min(now_s);
    if claims.exp.saturating_sub(issued) > MAX_LIFETIME_S + LEEWAY_S {
        return Err(TokenError::TooLong);
    }
    Ok(claims)
}

impl UserToken {
    /// Whether this token may call `path` asking for `model`.
    pub fn allows(&self, path: &str, model: Option<&str>) -> Result<(), TokenError> {
        if let Some(models) = &self.models
            && !model.is_some_and(|m| models.iter().any(|allowed| allowed == m))
        {
            return Err(TokenError::ModelNotAllowed);
        }
        if let Some(paths) = &self.paths {
            let path = path.split('?').next().unwrap_or(path);
            let matches = |allowed: &String| match allowed.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == allowed,
            };
            if !paths.iter().any(matches) {
                return Err(TokenError::PathNotAllowed);
            }
        }
        Ok(())
    }
}

/// Mints a token (what the app's server does; here for tests and tools).
pub fn mint(claims: &UserToken, secret: &str) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap_or_default());
    let signed = format!("{header}.{payload}");
    let signature = URL_SAFE_NO_PAD.encode(signature::sign(secret.as_bytes(), signed.as_bytes()));
    format!("{signed}.{signature}")
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn unset_token_secrets_is_no_secret_and_a_value_is_read_as_json() {
        assert_eq!(TokenSecrets::from_var(None).ok(), Some(TokenSecrets::default()));
        assert_eq!(TokenSecrets::from_var(Some("{}")).ok(), TokenSecrets::from_json("{}").ok());
        assert!(TokenSecrets::from_var(Some("not json")).is_err());
    }

    const SECRET: &str = "acme-token-secret-0123456789abcdef";
    const NOW: u64 = 1_800_000_000;

    fn secrets() -> TokenSecrets {
        TokenSecrets::from_json(&format!(r#"{{"acme": "{SECRET}"}}"#)).unwrap()
    }

    fn claims() -> UserToken {
        UserToken {
            tenant: "acme".into(),
            user: "alice".into(),
            exp: NOW + 600,
            iat: Some(NOW),
            nbf: None,
            models: None,
            paths: None,
            approve: false,
        }
    }

    #[test]
    fn a_minted_token_verifies_and_names_its_user() {
        let token = mint(&claims(), SECRET);
        assert!(looks_like_token(&token));
        assert!(!looks_like_token("onejob-dev-key"));
        assert_eq!(verify(&token, &secrets(), NOW).unwrap(), claims());
    }

    #[test]
    fn expired_tampered_and_foreign_tokens_are_refused() {
        let token = mint(&claims(), SECRET);
        assert_eq!(verify(&token, &secrets(), NOW + 700), Err(TokenError::Expired));
        // Tampered payload: another user, same signature.
        let mut other = claims();
        other.user = "mallory".into();
        let forged = mint(&other, SECRET);
        let parts: Vec<&str> = token.split('.').collect();
        let forged_parts: Vec<&str> = forged.split('.').collect();
        let tampered = format!("{}.{}.{}", parts[0], forged_parts[1], parts[2]);
        assert_eq!(verify(&tampered, &secrets(), NOW), Err(TokenError::BadSignature));
        // Signed with another secret.
        let wrong = mint(&claims(), "another-secret-0123456789abcdefgh");
        assert_eq!(verify(&wrong, &secrets(), NOW), Err(TokenError::BadSignature));
        // Another tenant, with no secret here.
        let mut foreign = claims();
        foreign.tenant = "globex".into();
        assert_eq!(verify(&mint(&foreign, SECRET), &secrets(), NOW), Err(TokenError::UnknownTenant));
        // alg none, and garbage.
        let none = format!("{}.{}.", URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#), parts[1]);
        assert_eq!(verify(&none, &secrets(), NOW), Err(TokenError::Algorithm));
        assert_eq!(verify("a.b", &secrets(), NOW), Err(TokenError::Malformed));
        // A token for a week.
        let mut long = claims();
        long.exp = NOW + 7 * 86_400;
        assert_eq!(verify(&mint(&long, SECRET), &secrets(), NOW), Err(TokenError::TooLong));
    }

    #[test]
    fn a_token_is_refused_before_nbf_with_the_same_leeway_as_exp() {
        let mut later = claims();
        later.nbf = Some(NOW + 3_600);
        later.exp = NOW + 7_200;
        let token = mint(&later, SECRET);
        assert_eq!(verify(&token, &secrets(), NOW), Err(TokenError::NotYetValid));
        assert!(TokenError::NotYetValid.is_unauthenticated());
        // Within the leeway of nbf, and after it: valid.
        assert!(verify(&token, &secrets(), NOW + 3_600 - LEEWAY_S).is_ok());
        assert_eq!(verify(&token, &secrets(), NOW + 3_600 - LEEWAY_S - 1), Err(TokenError::NotYetValid));
        assert!(verify(&token, &secrets(), NOW + 3_601).is_ok());
    }

    #[test]
    fn scopes_limit_models_and_paths() {
        let mut scoped = claims();
        scoped.models = Some(vec!["gpt-4o-mini".into()]);
        scoped.paths = Some(vec!["/v1/chat/completions".into(), "/v1/messages*".into()]);
        assert_eq!(scoped.allows("/v1/chat/completions", Some("gpt-4o-mini")), Ok(()));
        assert_eq!(scoped.allows("/v1/chat/completions", Some("gpt-5")), Err(TokenError::ModelNotAllowed));
        assert_eq!(scoped.allows("/v1/chat/completions", None), Err(TokenError::ModelNotAllowed));
        assert_eq!(scoped.allows("/v1/embeddings", Some("gpt-4o-mini")), Err(TokenError::PathNotAllowed));
        assert_eq!(scoped.allows("/v1/messages?beta=true", Some("gpt-4o-mini")), Ok(()));
        assert!(TokenError::Expired.is_unauthenticated() && !TokenError::ModelNotAllowed.is_unauthenticated());
    }

    #[test]
    fn short_secrets_are_refused() {
        assert_eq!(TokenSecrets::from_json(r#"{"acme": "short"}"#), Err(SecretsError));
        assert!(!SecretsError.to_string().contains("short"));
    }
}
