//! SHA-256 digests, shown as lower-case hex (the one text form this crate
//! uses for them).

use sha2::{Digest, Sha256};

/// SHA-256 of `bytes`, as 64 hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    encode(&Sha256::digest(bytes))
}

/// SHA-256 over `parts`, each preceded by its length (u64, big-endian), so
/// no two different lists of parts hash the same byte stream:
/// `["a", "bc"]` and `["ab", "c"]` differ. Fingerprints and storage ids both
/// use it, each starting with its own domain-separation part.
pub fn framed_sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    encode(&hasher.finalize())
}

/// Encodes bytes as lower-case hex.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[(byte >> 4) as usize] as char);
        out.push(DIGITS[(byte & 0xF) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn encodes_lower_case() {
        assert_eq!(super::encode(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }

    #[test]
    fn framing_keeps_part_boundaries() {
        use super::framed_sha256_hex as h;
        assert_ne!(h(&[b"a", b"bc"]), h(&[b"ab", b"c"]));
        assert_ne!(h(&[b"", b"a"]), h(&[b"a", b""]));
        assert_eq!(h(&[b"x"]).len(), 64);
        assert_eq!(super::sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
