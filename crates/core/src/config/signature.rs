//! HMAC-SHA256: the signature on the alerts the gateway sends (a receiver
//! checks they came from it) and on the user tokens it verifies; the headers
//! of every webhook it sends ([`webhook_headers`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::identity::digest;

type HmacSha256 = Hmac<Sha256>;

/// The raw HMAC-SHA256 of `message` under `secret`.
pub fn sign(secret: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let mut mac = HmacSha256::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The signature as 64 hex digits (what alert receivers compare).
pub fn sign_hex(secret: &[u8], message: &[u8]) -> String {
    digest::encode(&sign(secret, message))
}

/// The `OneJob-Signature` header of a webhook onejob sends (alerts and
/// effects): `sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`, the
/// timestamp being the `OneJob-Timestamp` header (Unix seconds).
pub fn webhook_signature(secret: &[u8], timestamp_s: u64, body: &[u8]) -> String {
    let mut message = format!("{timestamp_s}.").into_bytes();
    message.extend_from_slice(body);
    format!("sha256={}", sign_hex(secret, &message))
}

/// The headers of a webhook onejob POSTs (alerts and effects), in order: a
/// JSON body, keyed by `delivery_id` (`Idempotency-Key` and
/// `OneJob-Delivery`, the same on every retry, which receivers keep), and,
/// when there is a `secret`, signed at `now_ms` (`OneJob-Timestamp` in Unix
/// seconds and [`webhook_signature`]'s `OneJob-Signature`).
pub fn webhook_headers(
    delivery_id: &str,
    secret: Option<&str>,
    now_ms: u64,
    body: &str,
) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Idempotency-Key", delivery_id.to_owned()),
        ("OneJob-Delivery", delivery_id.to_owned()),
    ];
    if let Some(secret) = secret {
        let timestamp_s = now_ms / 1000;
        headers.push(("OneJob-Timestamp", timestamp_s.to_string()));
        headers.push(("OneJob-Signature", webhook_signature(secret.as_bytes(), timestamp_s, body.as_bytes())));
    }
    headers
}

/// Whether `signature` is `message`'s under `secret`, compared in constant time.
pub fn verify(secret: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else { return false };
    mac.update(message);
    mac.verify_slice(signature).is_ok()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn rfc_4231_case_2() {
        // Key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            sign_hex(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn verifies_only_the_right_signature() {
        let signature = sign(b"secret", b"body");
        assert!(verify(b"secret", b"body", &signature));
        assert!(!verify(b"secret", b"body!", &signature));
        assert!(!verify(b"other", b"body", &signature));
        assert!(!verify(b"secret", b"body", &signature[..31]));
    }

    #[test]
    fn a_webhook_signature_covers_the_timestamp_and_the_body() {
        let signature = webhook_signature(b"secret", 1_700_000_000, b"{}");
        assert_eq!(signature, format!("sha256={}", sign_hex(b"secret", b"1700000000.{}")));
        assert_ne!(signature, webhook_signature(b"secret", 1_700_000_001, b"{}"));
    }

    #[test]
    fn a_webhook_is_keyed_by_its_delivery_id_and_signed_only_with_a_secret() {
        let unsigned = webhook_headers("d:1", None, 1_700_000_000_999, "{}");
        let names: Vec<&str> = unsigned.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["Content-Type", "Idempotency-Key", "OneJob-Delivery"]);
        assert_eq!(unsigned[1].1, "d:1");
        assert_eq!(unsigned[2].1, "d:1", "both keys: the same on every retry");
        let signed = webhook_headers("d:1", Some("s3cret"), 1_700_000_000_999, "{\"a\":1}");
        assert_eq!(signed[..3], unsigned[..]);
        assert_eq!(signed[3], ("OneJob-Timestamp", "1700000000".to_owned()), "Unix seconds");
        let expected = webhook_signature(b"s3cret", 1_700_000_000, b"{\"a\":1}");
        assert_eq!(signed[4], ("OneJob-Signature", expected));
        assert_eq!(signed.len(), 5);
    }
}
