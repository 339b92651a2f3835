//! What a seed did: a hash of every step (always kept, cheap: numbers
//! only) and, when asked for, the replayable trace as text (the events and
//! the commands, one line each), whose hash is kept too.

/// The trace of one run.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The text, when traced.
    lines: Option<Vec<String>>,
    /// Numbers of every step (the same traced or not).
    hash: u64,
    /// The text's hash (traced only).
    text_hash: u64,
}

const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

impl Trace {
    /// A trace that keeps its text (`traced`) or only its hash.
    pub fn new(traced: bool) -> Self {
        Self { lines: traced.then(Vec::new), hash: FNV_OFFSET, text_hash: FNV_OFFSET }
    }

    /// Whether the text is kept.
    pub fn traced(&self) -> bool {
        self.lines.is_some()
    }

    /// Mixes a number into the hash.
    pub fn mix(&mut self, value: u64) {
        for byte in value.to_le_bytes() {
            self.hash = (self.hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        }
    }

    /// Adds a line (built only when traced).
    pub fn line(&mut self, line: impl FnOnce() -> String) {
        if let Some(lines) = self.lines.as_mut() {
            let line = line();
            for byte in line.bytes().chain(std::iter::once(b'\n')) {
                self.text_hash = (self.text_hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
            }
            lines.push(line);
        }
    }

    /// The numbers' hash.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The text's hash (the offset basis when not traced).
    pub fn text_hash(&self) -> u64 {
        self.text_hash
    }

    /// The text (empty when not traced).
    pub fn lines(&self) -> &[String] {
        self.lines.as_deref().unwrap_or(&[])
    }
}
