//! SHA-256 digests, shown as lower-case hex (the one text form this crate
//! uses for them).
//!
//! The SHA-256 is our own (FIPS 180-4, the plain scalar algorithm), not
//! `sha2`'s: fingerprinting a chat body is mostly hashing it, and in the
//! browser SDK's wasm `sha2`'s portable code (which emulates the x86 SHA
//! instructions on four-lane arrays) was both the slowest part and the
//! largest (7.9 KB, unrolled at `opt-level = 3`). Here one block is sixteen
//! rounds written out (the working variables renamed instead of moved, the
//! message schedule a sixteen-word ring the compiler keeps in locals) run four
//! times: faster at `opt-level = "z"` than `sha2` at 3, in about a quarter of
//! its bytes. The tests check it against `sha2` (which HMAC still uses) on
//! every length around the block boundaries and on random input.

/// The first 32 bits of the fractional parts of the cube roots of the first
/// 64 primes (FIPS 180-4 §4.2.2).
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
];

/// The initial hash value (FIPS 180-4 §5.3.3).
const H0: [u32; 8] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/// An incremental SHA-256.
pub struct Sha256 {
    state: [u32; 8],
    /// The bytes of an unfinished block.
    block: [u8; 64],
    /// How many of `block` are filled.
    filled: usize,
    /// Bytes hashed so far.
    len: u64,
}

impl Sha256 {
    /// A hash of nothing yet.
    pub fn new() -> Self {
        Self { state: H0, block: [0; 64], filled: 0, len: 0 }
    }

    /// Hashes `data` next.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len = self.len.wrapping_add(data.len() as u64);
        if self.filled > 0 {
            let take = (64 - self.filled).min(data.len());
            let (head, rest) = data.split_at(take);
            if let Some(room) = self.block.get_mut(self.filled..self.filled + take) {
                room.copy_from_slice(head);
            }
            self.filled += take;
            data = rest;
            if self.filled < 64 {
                return;
            }
            compress(&mut self.state, &self.block);
            self.filled = 0;
        }
        let mut blocks = data.chunks_exact(64);
        for block in &mut blocks {
            if let Ok(block) = block.try_into() {
                compress(&mut self.state, block);
            }
        }
        let rest = blocks.remainder();
        if let Some(room) = self.block.get_mut(..rest.len()) {
            room.copy_from_slice(rest);
        }
        self.filled = rest.len();
    }

    /// The digest: the message padded with `1`, zeros and its length in bits.
    pub fn finalize(mut self) -> [u8; 32] {
        let bits = self.len.wrapping_mul(8);
        let mut pad = [0u8; 72];
        pad[0] = 0x80;
        // Enough zeros that the length ends a block.
        let zeros = (55usize.wrapping_sub(self.filled)) % 64;
        pad[1 + zeros..9 + zeros].copy_from_slice(&bits.to_be_bytes());
        let len = self.len;
        self.update(&pad[..9 + zeros]);
        self.len = len;
        let mut out = [0u8; 32];
        for (bytes, word) in out.chunks_exact_mut(4).zip(self.state) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        out
    }
}

impl Default for Sha256 {
    fn default() -> Self {
        Self::new()
    }
}

/// One 64-byte block into the state (FIPS 180-4 §6.2.2).
#[inline(never)]
fn compress(state: &mut [u32; 8], block: &[u8; 64]) {
    // Constant indices throughout (no loop over `w`), so `w` lives in locals.
    let word = |i: usize| u32::from_be_bytes([block[4 * i], block[4 * i + 1], block[4 * i + 2], block[4 * i + 3]]);
    #[rustfmt::skip]
    let mut w = [
        word(0), word(1), word(2), word(3), word(4), word(5), word(6), word(7),
        word(8), word(9), word(10), word(11), word(12), word(13), word(14), word(15),
    ];
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;

    // One round; the caller renames the variables (a→b→…→h) instead of moving them.
    macro_rules! round {
        ($a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident, $k:expr, $w:expr) => {
            // Ch and Maj in their three- and four-operation forms.
            let t1 = $h
                .wrapping_add($e.rotate_right(6) ^ $e.rotate_right(11) ^ $e.rotate_right(25))
                .wrapping_add($g ^ ($e & ($f ^ $g)))
                .wrapping_add($k)
                .wrapping_add($w);
            let t2 = ($a.rotate_right(2) ^ $a.rotate_right(13) ^ $a.rotate_right(22))
                .wrapping_add(($a & $b) | ($c & ($a | $b)));
            $d = $d.wrapping_add(t1);
            $h = t1.wrapping_add(t2);
        };
    }
    // The next schedule word in ring slot `$i`: W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16].
    macro_rules! next {
        ($i:expr) => {{
            let w15 = w[($i + 1) & 15];
            let w2 = w[($i + 14) & 15];
            let s0 = w15.rotate_right(7) ^ w15.rotate_right(18) ^ (w15 >> 3);
            let s1 = w2.rotate_right(17) ^ w2.rotate_right(19) ^ (w2 >> 10);
            w[$i] = w[$i].wrapping_add(s0).wrapping_add(w[($i + 9) & 15]).wrapping_add(s1);
        }};
    }
    // Sixteen rounds from round `16·$r`, the schedule advanced first unless $r is 0.
    macro_rules! sixteen {
        ($k:expr, $schedule:expr) => {
            let k: &[u32; 16] = $k;
            if $schedule {
                next!(0);
                next!(1);
                next!(2);
                next!(3);
                next!(4);
                next!(5);
                next!(6);
                next!(7);
                next!(8);
                next!(9);
                next!(10);
                next!(11);
                next!(12);
                next!(13);
                next!(14);
                next!(15);
            }
            round!(a, b, c, d, e, f, g, h, k[0], w[0]);
            round!(h, a, b, c, d, e, f, g, k[1], w[1]);
            round!(g, h, a, b, c, d, e, f, k[2], w[2]);
            round!(f, g, h, a, b, c, d, e, k[3], w[3]);
            round!(e, f, g, h, a, b, c, d, k[4], w[4]);
            round!(d, e, f, g, h, a, b, c, k[5], w[5]);
            round!(c, d, e, f, g, h, a, b, k[6], w[6]);
            round!(b, c, d, e, f, g, h, a, k[7], w[7]);
            round!(a, b, c, d, e, f, g, h, k[8], w[8]);
            round!(h, a, b, c, d, e, f, g, k[9], w[9]);
            round!(g, h, a, b, c, d, e, f, k[10], w[10]);
            round!(f, g, h, a, b, c, d, e, k[11], w[11]);
            round!(e, f, g, h, a, b, c, d, k[12], w[12]);
            round!(d, e, f, g, h, a, b, c, k[13], w[13]);
            round!(c, d, e, f, g, h, a, b, k[14], w[14]);
            round!(b, c, d, e, f, g, h, a, k[15], w[15]);
        };
    }
    for (r, k) in K.chunks_exact(16).enumerate() {
        let Ok(k) = k.try_into() else { continue };
        sixteen!(k, r > 0);
    }
    let [s0, s1, s2, s3, s4, s5, s6, s7] = state;
    *state = [
        s0.wrapping_add(a),
        s1.wrapping_add(b),
        s2.wrapping_add(c),
        s3.wrapping_add(d),
        s4.wrapping_add(e),
        s5.wrapping_add(f),
        s6.wrapping_add(g),
        s7.wrapping_add(h),
    ];
}

/// SHA-256 of `bytes`, as 64 hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(bytes);
    encode(&hasher.finalize())
}

/// SHA-256 over `parts`, each preceded by its length (u64, big-endian), so
/// no two different lists of parts hash the same byte stream:
/// `["a", "bc"]` and `["ab", "c"]` differ. Fingerprints and storage ids both
/// use it, each starting with its own domain-separation part.
pub fn framed_sha256_hex(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(&(part.len() as u64).to_be_bytes());
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

    use sha2::Digest;

    fn ours(parts: &[&[u8]]) -> [u8; 32] {
        let mut hasher = super::Sha256::new();
        for part in parts {
            hasher.update(part);
        }
        hasher.finalize()
    }

    fn theirs(bytes: &[u8]) -> [u8; 32] {
        sha2::Sha256::digest(bytes).into()
    }

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
    }

    /// FIPS 180-4's examples (one block, two blocks) and the empty message.
    #[test]
    fn known_answers() {
        use super::sha256_hex as h;
        assert_eq!(h(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(h(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            h(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(h(&[b'a'; 1_000_000]), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    }

    /// Every length across the padding's edge cases (55, 56, 63, 64 bytes…).
    #[test]
    fn agrees_with_sha2_at_every_length_up_to_three_blocks() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 131 + 7) as u8).collect();
        for len in 0..=data.len() {
            assert_eq!(ours(&[&data[..len]]), theirs(&data[..len]), "length {len}");
        }
    }

    proptest::proptest! {
        /// Any input, fed in any split, hashes as `sha2` hashes it whole.
        #[test]
        fn agrees_with_sha2_however_the_input_is_split(data: Vec<u8>, cuts: Vec<usize>) {
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
            cuts.sort_unstable();
            let mut parts = Vec::new();
            let mut at = 0;
            for cut in cuts {
                parts.push(&data[at..cut]);
                at = cut;
            }
            parts.push(&data[at..]);
            proptest::prop_assert_eq!(ours(&parts), theirs(&data));
        }
    }
}
