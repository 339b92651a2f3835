//! Idempotency keys and the storage ids derived from them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::identity::digest;
use crate::identity::random::RandomSource;

/// Shortest key accepted: 16 characters leave room for ≥ 64 bits of entropy.
pub const MIN_KEY_LEN: usize = 16;
/// Longest key accepted, as Stripe and the IETF draft allow.
pub const MAX_KEY_LEN: usize = 255;

/// A validated `Idempotency-Key`: 16–255 visible ASCII characters
/// (`!` through `~`), so it is safe in headers, logs and URLs' path segments
/// once percent-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(String);

/// Why a string is not an [`IdempotencyKey`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// Fewer than [`MIN_KEY_LEN`] characters.
    TooShort {
        /// The key's length.
        len: usize,
    },
    /// More than [`MAX_KEY_LEN`] characters.
    TooLong {
        /// The key's length.
        len: usize,
    },
    /// A byte that is not visible ASCII (a space, a control character, non-ASCII).
    InvalidCharacter {
        /// Byte offset of the first offending character.
        index: usize,
    },
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { len } => {
                write!(f, "idempotency key has {len} characters; at least {MIN_KEY_LEN} are required")
            }
            Self::TooLong { len } => {
                write!(f, "idempotency key has {len} characters; at most {MAX_KEY_LEN} are allowed")
            }
            Self::InvalidCharacter { index } => write!(
                f,
                "idempotency key has a character that is not visible ASCII at position {index} (spaces and control characters are not allowed)"
            ),
        }
    }
}

impl std::error::Error for KeyError {}

impl IdempotencyKey {
    /// Validates a key as sent in the `Idempotency-Key` header.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        // Check characters first: a long key of control bytes is better
        // reported as what it is than as merely long.
        if let Some(index) = text.bytes().position(|b| !(0x21..=0x7E).contains(&b)) {
            return Err(KeyError::InvalidCharacter { index });
        }
        match text.len() {
            len if len < MIN_KEY_LEN => Err(KeyError::TooShort { len }),
            len if len > MAX_KEY_LEN => Err(KeyError::TooLong { len }),
            _ => Ok(Self(text.to_owned())),
        }
    }

    /// A fresh random UUIDv4 key (122 random bits) from a caller-supplied
    /// source, which must be cryptographically secure for real keys: keys that
    /// can be guessed let one caller replay another's result within a tenant.
    pub fn new_v4(rng: &mut dyn RandomSource) -> Self {
        let mut bytes = [0u8; 16];
        rng.fill_bytes(&mut bytes);
        Self(uuid_v4_from_bytes(bytes))
    }

    /// A key this crate made of visible ASCII characters within the bounds
    /// (a derived one: [`crate::identity::keyless::derive_key`]).
    pub(crate) fn from_valid(text: String) -> Self {
        debug_assert!(Self::parse(&text).is_ok(), "a key made here is valid");
        Self(text)
    }

    /// The key as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Formats 16 random bytes as a UUIDv4 (RFC 9562 §5.4): version nibble 4,
/// variant bits 10 (the `uuid` crate's `Builder::from_random_bytes`), in
/// lower-case hyphenated form.
pub fn uuid_v4_from_bytes(bytes: [u8; 16]) -> String {
    let uuid = uuid::Builder::from_random_bytes(bytes).into_uuid();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid.hyphenated().encode_lower(&mut text).to_owned()
}

impl TryFrom<String> for IdempotencyKey {
    type Error = KeyError;
    fn try_from(text: String) -> Result<Self, KeyError> {
        Self::parse(&text)
    }
}

impl From<IdempotencyKey> for String {
    fn from(key: IdempotencyKey) -> String {
        key.0
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a job lives: SHA-256 of (scope, key) as 64 hex digits. The edge names
/// its Durable Object and KV entries by it, so the same key string in two
/// tenants lands in two different places.
/// Read back (from a hand-off) only if it is 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct StorageId(String);

impl TryFrom<String> for StorageId {
    type Error = &'static str;
    fn try_from(text: String) -> Result<Self, &'static str> {
        let hex = text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if hex { Ok(Self(text)) } else { Err("a storage id is 64 lower-case hex digits") }
    }
}

impl From<StorageId> for String {
    fn from(id: StorageId) -> String {
        id.0
    }
}

impl StorageId {
    /// Derives the storage id of `key` within `scope` (the tenant). Each part
    /// is length-prefixed, so `("a", "bc")` and `("ab", "c")` differ.
    pub fn derive(scope: &str, key: &IdempotencyKey) -> Self {
        Self(digest::framed_sha256_hex(&[b"onejob/storage/v1", scope.as_bytes(), key.as_str().as_bytes()]))
    }

    /// Derives the storage id of `key` for one user of a tenant (a user
    /// token's `sub`): keys are scoped by tenant and user, so two users of a
    /// tenant never share a job, and neither shares one with the tenant's
    /// own key. A domain of its own, so no (tenant, user) pair collides with
    /// a tenant-only scope.
    pub fn derive_for_user(tenant: &str, user: &str, key: &IdempotencyKey) -> Self {
        Self(digest::framed_sha256_hex(&[
            b"onejob/storage/user/v1",
            tenant.as_bytes(),
            user.as_bytes(),
            key.as_str().as_bytes(),
        ]))
    }

    /// The storage id for a tenant, or one of its users.
    pub fn of(tenant: &str, user: Option<&str>, key: &IdempotencyKey) -> Self {
        match user {
            Some(user) => Self::derive_for_user(tenant, user, key),
            None => Self::derive(tenant, key),
        }
    }

    /// The id as 64 lower-case hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `Idempotency-Key` sent to the provider for this job: derived from
    /// the storage id (so from tenant + key), never the client's raw key.
    /// Every tenant shares the provider's API key, so a provider that honours
    /// idempotency keys must never see two tenants' jobs under one key.
    pub fn upstream_key(&self) -> String {
        format!("onejob-{}", digest::framed_sha256_hex(&[b"onejob/upstream-key/v1", self.0.as_bytes()]))
    }

    /// The provider's `Idempotency-Key` for the `generation`th job under
    /// this storage id: the first (0) is [`StorageId::upstream_key`]; a
    /// keyless job that replaced an ended one (see [`crate::job::Job::renew`])
    /// gets another, so a provider that honours keys never replays the
    /// ended job's answer to the new one.
    pub fn upstream_key_of(&self, generation: u32) -> String {
        if generation == 0 {
            return self.upstream_key();
        }
        let generation = generation.to_string();
        let parts: [&[u8]; 3] = [b"onejob/upstream-key/v1", self.0.as_bytes(), generation.as_bytes()];
        format!("onejob-{}", digest::framed_sha256_hex(&parts))
    }
}

impl fmt::Display for StorageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::random::SplitMix64;

    #[test]
    fn accepts_the_full_visible_ascii_range_and_bounds() {
        assert!(IdempotencyKey::parse(&"a".repeat(16)).is_ok());
        assert!(IdempotencyKey::parse(&"~".repeat(255)).is_ok());
        assert!(IdempotencyKey::parse("!#$%&'()*+,-./:;<=>?@[]^_`{|}").is_ok());
    }

    #[test]
    fn rejects_short_long_and_invisible() {
        assert_eq!(IdempotencyKey::parse(&"a".repeat(15)), Err(KeyError::TooShort { len: 15 }));
        assert_eq!(IdempotencyKey::parse(""), Err(KeyError::TooShort { len: 0 }));
        assert_eq!(IdempotencyKey::parse(&"a".repeat(256)), Err(KeyError::TooLong { len: 256 }));
        assert_eq!(IdempotencyKey::parse("abcdefgh ijklmnop"), Err(KeyError::InvalidCharacter { index: 8 }));
        assert_eq!(IdempotencyKey::parse("abcdefghijklmnop\n"), Err(KeyError::InvalidCharacter { index: 16 }));
        assert_eq!(IdempotencyKey::parse("abcdefghijklmnopé"), Err(KeyError::InvalidCharacter { index: 16 }));
        assert_eq!(IdempotencyKey::parse("\u{7f}bcdefghijklmnop"), Err(KeyError::InvalidCharacter { index: 0 }));
    }

    #[test]
    fn v4_keys_have_version_and_variant_bits_and_validate() {
        let mut rng = SplitMix64::new(42);
        let a = IdempotencyKey::new_v4(&mut rng);
        let b = IdempotencyKey::new_v4(&mut rng);
        assert_ne!(a, b);
        let text = a.as_str();
        assert_eq!(text.len(), 36);
        assert_eq!(&text[14..15], "4");
        assert!(matches!(&text[19..20], "8" | "9" | "a" | "b"));
        assert!(IdempotencyKey::parse(text).is_ok());
        assert_eq!(uuid_v4_from_bytes([0xFF; 16]), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid_v4_from_bytes([0; 16]), "00000000-0000-4000-8000-000000000000");
    }

    proptest::proptest! {
        /// The `uuid` crate writes what the hand-written formatter it
        /// replaced wrote: version and variant bits set, lower-case hex,
        /// hyphens at 8-4-4-4-12.
        #[test]
        fn uuid_keys_are_what_the_hand_formatter_wrote(mut bytes: [u8; 16]) {
            let ours = uuid_v4_from_bytes(bytes);
            bytes[6] = (bytes[6] & 0x0F) | 0x40;
            bytes[8] = (bytes[8] & 0x3F) | 0x80;
            let parts = [&bytes[0..4], &bytes[4..6], &bytes[6..8], &bytes[8..10], &bytes[10..16]];
            let by_hand = parts.map(crate::identity::digest::encode).join("-");
            proptest::prop_assert_eq!(ours, by_hand);
        }
    }

    #[test]
    fn storage_ids_are_scoped_and_unambiguous() {
        let key = |s: &str| IdempotencyKey::parse(s).unwrap();
        let k = key("0123456789abcdef");
        assert_ne!(StorageId::derive("tenant-a", &k), StorageId::derive("tenant-b", &k));
        // ("a", "bc…") vs ("ab", "c…"): same concatenation, different ids.
        assert_ne!(
            StorageId::derive("a", &key("bcdefghijklmnopqr")),
            StorageId::derive("ab", &key("cdefghijklmnopqr"))
        );
        assert_eq!(StorageId::derive("t", &k), StorageId::derive("t", &k));
        assert_eq!(StorageId::derive("t", &k).as_str().len(), 64);
    }

    #[test]
    fn upstream_keys_are_tenant_scoped_and_never_the_raw_key() {
        let k = IdempotencyKey::parse("0123456789abcdef").unwrap();
        let a = StorageId::derive("tenant-a", &k).upstream_key();
        let b = StorageId::derive("tenant-b", &k).upstream_key();
        assert_ne!(a, b);
        assert!(!a.contains(k.as_str()));
        assert!(IdempotencyKey::parse(&a).is_ok(), "a valid key for providers that check");
        assert_ne!(a.trim_start_matches("onejob-"), StorageId::derive("tenant-a", &k).as_str());
        // Pinned: the JavaScript test harness derives the same value.
        assert_eq!(
            StorageId::derive("dev", &IdempotencyKey::parse("0123456789abcdef").unwrap()).upstream_key(),
            UPSTREAM_KEY_OF_DEV_0123456789ABCDEF
        );
    }

    #[test]
    fn every_generation_under_a_key_has_its_own_upstream_key() {
        let id = StorageId::derive("dev", &IdempotencyKey::parse("0123456789abcdef").unwrap());
        assert_eq!(id.upstream_key_of(0), UPSTREAM_KEY_OF_DEV_0123456789ABCDEF);
        let (one, two) = (id.upstream_key_of(1), id.upstream_key_of(2));
        assert!(one != two && one != id.upstream_key() && two != id.upstream_key());
        assert!(IdempotencyKey::parse(&one).is_ok() && one.starts_with("onejob-"));
    }

    const UPSTREAM_KEY_OF_DEV_0123456789ABCDEF: &str =
        "onejob-e1e1903b57891b94240cb266bcf6d9f4782d72810690395ea2187fecc99c5c93";

    #[test]
    fn serde_validates() {
        assert!(serde_json::from_str::<IdempotencyKey>("\"short\"").is_err());
        let k: IdempotencyKey = serde_json::from_str("\"0123456789abcdef\"").unwrap();
        assert_eq!(serde_json::to_string(&k).unwrap(), "\"0123456789abcdef\"");
    }

    #[test]
    fn users_of_a_tenant_never_share_a_job() {
        let key = IdempotencyKey::parse("7c1f3c52-3c4e-4a8e-9a51-0c6f2f8e1d10").unwrap();
        let tenant = StorageId::of("acme", None, &key);
        assert_eq!(tenant, StorageId::derive("acme", &key));
        let alice = StorageId::of("acme", Some("alice"), &key);
        let bob = StorageId::of("acme", Some("bob"), &key);
        assert_ne!(alice, bob);
        assert_ne!(alice, tenant);
        // Framed: moving bytes between tenant and user changes the id.
        assert_ne!(
            StorageId::derive_for_user("acme", "xalice", &key),
            StorageId::derive_for_user("acmex", "alice", &key)
        );
    }

    #[test]
    fn keys_storage_ids_and_fingerprints_are_validated_when_read_back() {
        use crate::identity::fingerprint::{Body, Fingerprint};
        let k = IdempotencyKey::parse("0123456789abcdef").unwrap();
        let id = StorageId::derive("acme", &k);
        let fingerprint = Fingerprint::of_request("POST", "/v1/x", Body::Json(b"{}")).unwrap();
        let json = serde_json::to_string(&(&k, &id, &fingerprint)).unwrap();
        let back: (IdempotencyKey, StorageId, Fingerprint) = serde_json::from_str(&json).unwrap();
        assert_eq!(back, (k, id, fingerprint));
        assert!(serde_json::from_str::<IdempotencyKey>("\"short\"").is_err());
        assert!(serde_json::from_str::<IdempotencyKey>("\"\"").is_err());
        for bad in ["\"\"", "\"abc\"", &format!("\"{}\"", "G".repeat(64)), &format!("\"{}\"", "A".repeat(64))] {
            assert!(serde_json::from_str::<StorageId>(bad).is_err(), "{bad}");
            assert!(serde_json::from_str::<Fingerprint>(bad).is_err(), "{bad}");
        }
    }
}
