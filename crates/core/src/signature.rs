//! HMAC-SHA256: the signature on the alerts the gateway sends (a receiver
//! checks they came from it) and on the user tokens it verifies.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::digest;

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
}
