//! Requests that carry no `Idempotency-Key` (the `KEYLESS` setting): the key
//! the gateway derives for them, and how an ended job answers the next one.
//!
//! An official SDK at its defaults sends no key. With `KEYLESS=refuse` (the
//! default) such a request is `400 missing-idempotency-key`; with `coalesce`
//! or `window` the gateway derives a key from (tenant, user, the request's
//! fingerprint), so identical requests of one caller are one job:
//!
//! | mode | identical request while the job runs | after the job ended |
//! |---|---|---|
//! | `coalesce` | joins it | a new job under the same key (nothing is replayed) |
//! | `window` | joins it | replayed until `KEYLESS_WINDOW_SECONDS` after the job was created, then a new job |
//!
//! `Cache-Control: no-cache` (or `no-store`) on a request makes it
//! `coalesce` for that request: never answered from a stored answer, but
//! still joined to an identical one in flight (see [`for_request`]). An
//! explicit key always wins: the request is keyed, as without this mode.

use serde::{Deserialize, Serialize};

use crate::identity::digest;
use crate::identity::fingerprint::Fingerprint;
use crate::identity::key::IdempotencyKey;

/// What every derived key starts with, so a derived key is recognised as one.
pub const DERIVED_PREFIX: &str = "keyless-";

/// The `KEYLESS` setting, and how a keyless job is admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Keyless {
    /// A request without a key is `400 missing-idempotency-key` (the default).
    #[default]
    Refuse,
    /// Identical requests in flight join one job; once it has ended, the
    /// next identical request is a new job.
    Coalesce,
    /// Identical requests within `window_ms` after the job's creation (its
    /// first request) replay its answer; after that, a new job.
    Window {
        /// `KEYLESS_WINDOW_SECONDS`, in milliseconds.
        window_ms: u64,
    },
}

impl Keyless {
    /// Whether a request without a key gets a derived one.
    pub fn derives(self) -> bool {
        self != Self::Refuse
    }

    /// How long after its creation an ended keyless job is still replayed
    /// (`coalesce`: never).
    pub fn replay_ms(self) -> u64 {
        match self {
            Self::Refuse | Self::Coalesce => 0,
            Self::Window { window_ms } => window_ms,
        }
    }

    /// The name of the mode, as `KEYLESS` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Refuse => "refuse",
            Self::Coalesce => "coalesce",
            Self::Window { .. } => "window",
        }
    }
}

/// The mode a keyless request is admitted under: the deployment's, or
/// `coalesce` when its `Cache-Control` says `no-cache` or `no-store` (a
/// deliberate "regenerate": no stored answer, but an identical request in
/// flight, and the SDK's own retries of this one, still join one job).
/// `None` when the deployment refuses keyless requests.
pub fn for_request(deployment: Keyless, cache_control: Option<&str>) -> Option<Keyless> {
    if !deployment.derives() {
        return None;
    }
    Some(if cache_control.is_some_and(forbids_stored) { Keyless::Coalesce } else { deployment })
}

/// Whether a `Cache-Control` request header forbids answering from a stored
/// response (`no-cache` or `no-store`, any case, among other directives).
pub fn forbids_stored(cache_control: &str) -> bool {
    cache_control.split(',').any(|directive| {
        let name = directive.split('=').next().unwrap_or("").trim();
        name.eq_ignore_ascii_case("no-cache") || name.eq_ignore_ascii_case("no-store")
    })
}

/// The key of a keyless request: `keyless-` and 64 hex digits of SHA-256
/// over (tenant id, user, fingerprint), each length-prefixed, in a domain of
/// its own. The tenant's *id*, never its bearer key; the same request of
/// another user or tenant gets another key (and lives in another scope
/// anyway); a streamed and an unstreamed request differ in their bodies, so
/// in their fingerprints and keys.
pub fn derive_key(tenant: &str, user: Option<&str>, fingerprint: &Fingerprint) -> IdempotencyKey {
    // A tenant-only caller and a user are told apart by the framing: a
    // user's part is preceded by a marker part the tenant-only form lacks.
    let hex = match user {
        Some(user) => digest::framed_sha256_hex(&[
            b"onejob/keyless/user/v1",
            tenant.as_bytes(),
            user.as_bytes(),
            fingerprint.as_str().as_bytes(),
        ]),
        None => digest::framed_sha256_hex(&[b"onejob/keyless/v1", tenant.as_bytes(), fingerprint.as_str().as_bytes()]),
    };
    // "keyless-" and 64 hex digits: 72 visible ASCII characters, a valid key.
    IdempotencyKey::from_valid(format!("{DERIVED_PREFIX}{hex}"))
}

/// Whether `key` has the form of a derived key.
pub fn is_derived(key: &IdempotencyKey) -> bool {
    key.as_str()
        .strip_prefix(DERIVED_PREFIX)
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::Body;

    fn fp(body: &str) -> Fingerprint {
        Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(body.as_bytes())).unwrap()
    }

    #[test]
    fn a_derived_key_is_a_valid_recognisable_key() {
        let key = derive_key("dev", None, &fp("{}"));
        assert!(key.as_str().starts_with("keyless-"));
        assert_eq!(key.as_str().len(), 72);
        assert!(IdempotencyKey::parse(key.as_str()).is_ok());
        assert!(is_derived(&key));
        assert!(!is_derived(&IdempotencyKey::parse("7c1f3c52-3c4e-4a8e-9a51-0c6f2f8e1d10").unwrap()));
        assert!(!is_derived(&IdempotencyKey::parse("keyless-not-hex-at-all").unwrap()));
    }

    #[test]
    fn the_same_request_of_the_same_caller_gets_the_same_key() {
        // Key order and number spelling do not matter: the fingerprint is canonical.
        assert_eq!(
            derive_key("dev", None, &fp(r#"{"a":1,"b":"x"}"#)),
            derive_key("dev", None, &fp(r#"{"b":"x","a":1.0}"#))
        );
        assert_eq!(derive_key("dev", Some("alice"), &fp("{}")), derive_key("dev", Some("alice"), &fp("{}")));
    }

    #[test]
    fn another_request_user_or_tenant_gets_another_key() {
        let base = derive_key("dev", None, &fp(r#"{"model":"m"}"#));
        assert_ne!(base, derive_key("dev", None, &fp(r#"{"model":"m","stream":true}"#)), "stream or not");
        assert_ne!(base, derive_key("acme", None, &fp(r#"{"model":"m"}"#)), "tenant");
        assert_ne!(base, derive_key("dev", Some("alice"), &fp(r#"{"model":"m"}"#)), "a user vs the tenant");
        assert_ne!(
            derive_key("dev", Some("alice"), &fp(r#"{"model":"m"}"#)),
            derive_key("dev", Some("bob"), &fp(r#"{"model":"m"}"#)),
            "two users"
        );
        // Framed: moving bytes between tenant and user changes the key.
        assert_ne!(derive_key("devx", Some("alice"), &fp("{}")), derive_key("dev", Some("xalice"), &fp("{}")));
    }

    #[test]
    fn the_key_embeds_nothing_it_was_derived_from() {
        let key = derive_key("tenant-secretive", Some("user-secretive"), &fp("{}"));
        assert!(!key.as_str().contains("secretive"));
        assert!(!key.as_str().contains(fp("{}").as_str()));
    }

    #[test]
    fn no_cache_or_no_store_makes_a_request_coalesce() {
        let window = Keyless::Window { window_ms: 60_000 };
        assert_eq!(for_request(window, None), Some(window));
        assert_eq!(for_request(window, Some("max-age=0")), Some(window));
        for header in
            ["no-cache", "No-Cache", "no-store", "max-age=0, no-cache", " no-store ,private", "no-cache=\"x\""]
        {
            assert_eq!(for_request(window, Some(header)), Some(Keyless::Coalesce), "{header}");
        }
        assert_eq!(for_request(Keyless::Coalesce, Some("no-cache")), Some(Keyless::Coalesce));
        assert_eq!(for_request(Keyless::Refuse, None), None);
        assert_eq!(for_request(Keyless::Refuse, Some("no-cache")), None);
        assert!(!forbids_stored("no-transform"));
    }

    #[test]
    fn replay_windows_per_mode() {
        assert_eq!(Keyless::Coalesce.replay_ms(), 0);
        assert_eq!(Keyless::Window { window_ms: 5_000 }.replay_ms(), 5_000);
        assert!(!Keyless::Refuse.derives());
        assert!(Keyless::Coalesce.derives());
        assert_eq!(Keyless::default(), Keyless::Refuse);
        assert_eq!(Keyless::Window { window_ms: 1 }.name(), "window");
    }

    #[test]
    fn the_mode_travels_as_json() {
        let window = Keyless::Window { window_ms: 60_000 };
        let text = serde_json::to_string(&window).unwrap();
        assert_eq!(text, r#"{"mode":"window","window_ms":60000}"#);
        assert_eq!(serde_json::from_str::<Keyless>(&text).unwrap(), window);
        assert_eq!(serde_json::from_str::<Keyless>(r#"{"mode":"coalesce"}"#).unwrap(), Keyless::Coalesce);
    }
}
