//! RFC 8785 JSON Canonicalization Scheme (JCS).
//!
//! Two requests that mean the same thing must get the same fingerprint even
//! when one client writes `{"b":1,"a":1.0}` and another `{"a":1,"b":1e0}`.
//! JCS fixes one spelling: object members sorted by their UTF-16 code units,
//! numbers written as ECMAScript's `Number.prototype.toString` writes them,
//! strings with the minimal escapes, no insignificant white space.
//!
//! The reader is our own, strict one (RFC 8259 grammar, I-JSON's rules):
//! `serde_json::Value` silently keeps the last of two duplicate names, JCS
//! requires rejecting them and lone surrogates, and the browser SDK cannot
//! afford serde_json's parser. Nesting is limited ([`MAX_DEPTH`]), so hostile
//! input is an error rather than a stack overflow. Strings without escapes are
//! borrowed from the input and written back as they are (their canonical form),
//! and numbers are kept as their literal until they are written, through a
//! [`Numbers`] the caller chooses: [`RustNumbers`] (exact parsing and `ryu`)
//! by default, the JavaScript engine's own `Number` in the browser SDK.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// Largest body [`canonicalize`] accepts, in bytes. The edge enforces its own
/// (smaller, configurable) limit first; this one keeps the core safe on its own.
pub const MAX_INPUT_BYTES: usize = 8 * 1024 * 1024;

/// Deepest nesting of arrays and objects [`canonicalize`] accepts.
pub const MAX_DEPTH: usize = 64;

/// Why a body could not be canonicalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanonicalError {
    /// The body is larger than [`MAX_INPUT_BYTES`].
    TooLarge {
        /// The body's size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Arrays and objects nest deeper than [`MAX_DEPTH`].
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// An object names the same member twice (RFC 8785 §3.1 forbids it).
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// Not JSON, or JSON that I-JSON (RFC 7493) rejects: lone surrogates,
    /// numbers beyond the range of a double.
    Invalid {
        /// What is wrong, with line and column.
        message: String,
    },
}

impl CanonicalError {
    /// The error as one sentence, built without `core::fmt` (the browser SDK
    /// reports it and does not link the formatting machinery for it).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        match self {
            Self::TooLarge { len, max } => {
                out.push_str("body of ");
                push_u64(&mut out, *len as u64);
                out.push_str(" bytes exceeds ");
                push_u64(&mut out, *max as u64);
                out.push_str(" bytes");
            }
            Self::TooDeep { max } => {
                out.push_str("JSON nests deeper than ");
                push_u64(&mut out, *max as u64);
                out.push_str(" levels");
            }
            Self::DuplicateName { name } => {
                out.push_str("object has duplicate member name ");
                write_string(name, &mut out);
            }
            Self::Invalid { message } => {
                out.push_str("invalid JSON: ");
                out.push_str(message);
            }
        }
        out
    }
}

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl std::error::Error for CanonicalError {}

/// How JSON numbers become doubles and text. The result must be ECMAScript's
/// (RFC 8785 §3.2.2.3), so an implementation is either [`RustNumbers`] or a
/// JavaScript engine's own `Number` (which *is* that algorithm).
pub trait Numbers {
    /// The double a JSON number literal denotes (the literal already follows
    /// JSON's grammar), or `None` when it is beyond a double's range.
    fn value(&self, literal: &str) -> Option<f64>;
    /// Appends `Number.prototype.toString(10)` of the literal's double;
    /// `false` when the literal is beyond a double's range.
    fn write(&self, literal: &str, out: &mut String) -> bool;
}

/// Exact decimal parsing (Rust's `str::parse`) and the shortest round-trip
/// digits (`ryu`), laid out as ECMAScript does: what native builds use.
pub struct RustNumbers;

impl Numbers for RustNumbers {
    fn value(&self, literal: &str) -> Option<f64> {
        literal.parse::<f64>().ok().filter(|n| n.is_finite())
    }

    fn write(&self, literal: &str, out: &mut String) -> bool {
        match self.value(literal) {
            Some(n) => {
                write_number(n, out);
                true
            }
            None => false,
        }
    }
}

/// Returns the RFC 8785 canonical form of a JSON text.
///
/// ```
/// let canonical = onejob_core::identity::canonical::canonicalize(br#"{ "b": 1e0, "a": [1.50, "\u0041"] }"#).unwrap();
/// assert_eq!(canonical, r#"{"a":[1.5,"A"],"b":1}"#);
/// ```
pub fn canonicalize(json: &[u8]) -> Result<String, CanonicalError> {
    canonicalize_with(json, &RustNumbers)
}

/// [`canonicalize`], with numbers read and written by `numbers`.
pub fn canonicalize_with(json: &[u8], numbers: &dyn Numbers) -> Result<String, CanonicalError> {
    canonical_form(json, numbers)
}

/// [`canonicalize_with`], with a fault reported as `F` says: a
/// [`CanonicalError`], or nothing (`()`, for a caller with no use for why
/// a text is not JSON: then none of the reasons' texts is linked).
pub(crate) fn canonical_form<F: Fault>(json: &[u8], numbers: &dyn Numbers) -> Result<String, F> {
    if json.len() > MAX_INPUT_BYTES {
        return Err(F::too_large(json.len()));
    }
    let value = read(json, false)?;
    let mut out = String::with_capacity(json.len());
    write_value(&value, &mut out, numbers)?;
    Ok(out)
}

/// What a reader makes of a fault in its input: a [`CanonicalError`] saying
/// what and where, or nothing (`()`).
pub(crate) trait Fault: Sized {
    /// Not JSON, or JSON that I-JSON refuses: `what`, at byte `pos` of `bytes`.
    fn invalid(bytes: &[u8], pos: usize, what: &'static str) -> Self;
    /// Not UTF-8 past its first `valid_up_to` bytes.
    fn not_utf8(valid_up_to: usize) -> Self;
    /// A number beyond a double's range.
    fn out_of_range() -> Self;
    /// Nested deeper than [`MAX_DEPTH`].
    fn too_deep() -> Self;
    /// An object names `name` twice.
    fn duplicate(name: &str) -> Self;
    /// `len` bytes, more than [`MAX_INPUT_BYTES`].
    fn too_large(len: usize) -> Self;
}

impl Fault for CanonicalError {
    /// Says where by line and column, from 1.
    fn invalid(bytes: &[u8], pos: usize, what: &'static str) -> Self {
        let before = &bytes[..pos.min(bytes.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = pos - before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) + 1;
        let mut message = String::from(what);
        message.push_str(" at line ");
        push_u64(&mut message, line as u64);
        message.push_str(" column ");
        push_u64(&mut message, column as u64);
        Self::Invalid { message }
    }

    fn not_utf8(valid_up_to: usize) -> Self {
        let mut message = String::from("invalid UTF-8 at byte ");
        push_u64(&mut message, valid_up_to as u64);
        Self::Invalid { message }
    }

    fn out_of_range() -> Self {
        Self::Invalid { message: String::from("number out of range") }
    }

    fn too_deep() -> Self {
        Self::TooDeep { max: MAX_DEPTH }
    }

    fn duplicate(name: &str) -> Self {
        Self::DuplicateName { name: name.to_owned() }
    }

    fn too_large(len: usize) -> Self {
        Self::TooLarge { len, max: MAX_INPUT_BYTES }
    }
}

impl Fault for () {
    fn invalid(_: &[u8], _: usize, _: &'static str) -> Self {}
    fn not_utf8(_: usize) -> Self {}
    fn out_of_range() -> Self {}
    fn too_deep() -> Self {}
    fn duplicate(_: &str) -> Self {}
    fn too_large(_: usize) -> Self {}
}

/// A parsed JSON value. Numbers are kept as their literal (JCS and JavaScript
/// see them as doubles: see [`Numbers`]); strings without escapes borrow the
/// input. Other modules read small documents through it (see
/// [`crate::identity::intent`]), so the crate carries one JSON reader, not one per type.
pub(crate) enum Json<'a> {
    Null,
    Bool(bool),
    Number(&'a str),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    /// Members sorted by their names' UTF-16 code units, without duplicates.
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

/// Parses a JSON text with the same rules as [`canonicalize`]; every string
/// is decoded (a borrowed one had no escapes).
pub(crate) fn parse<F: Fault>(json: &[u8]) -> Result<Json<'_>, F> {
    read(json, true)
}

/// [`parse`]; with `decode_values` false, string *values* with escapes are
/// checked but kept as their source text (borrowed, escapes and all), which
/// [`write_value`] turns into their canonical form directly: what
/// [`canonicalize`] does, so an escape-heavy chat body is never decoded into
/// owned strings only to be escaped again. Member names are always decoded
/// (they are sorted and compared).
fn read<F: Fault>(json: &[u8], decode_values: bool) -> Result<Json<'_>, F> {
    let text = std::str::from_utf8(json).map_err(|e| F::not_utf8(e.valid_up_to()))?;
    let mut reader = Reader { text, bytes: json, pos: 0, decode_values, fault: PhantomData };
    reader.skip_space();
    let value = reader.value(0)?;
    reader.skip_space();
    if reader.pos < json.len() {
        return Err(reader.invalid("trailing characters"));
    }
    Ok(value)
}

/// The source text of the member `name` of the JSON object `json` (its
/// first so named), from the first byte of its value to the last; `None`
/// when `json` does not begin as an object or has no such member before an
/// error. For a reader that keeps part of a document exactly as it was
/// written (see [`crate::identity::intent::IntentRecord::read_stored`]).
pub(crate) fn member_source<'a>(json: &'a str, name: &str) -> Option<&'a str> {
    let mut reader =
        Reader::<()> { text: json, bytes: json.as_bytes(), pos: 0, decode_values: false, fault: PhantomData };
    reader.skip_space();
    if reader.peek() != Some(b'{') {
        return None;
    }
    loop {
        reader.pos += 1; // `{`, then each `,`
        reader.skip_space();
        if reader.peek() != Some(b'"') {
            return None;
        }
        let member = reader.string(true).ok()?;
        reader.skip_space();
        if reader.peek() != Some(b':') {
            return None;
        }
        reader.pos += 1;
        reader.skip_space();
        let start = reader.pos;
        reader.value(1).ok()?;
        if member == name {
            return Some(reader.slice(start));
        }
        reader.skip_space();
        if reader.peek() != Some(b',') {
            return None;
        }
    }
}

/// A recursive-descent reader over valid UTF-8 (checked first), so every
/// slice it takes at an ASCII boundary is a `&str`.
struct Reader<'a, F> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    /// Whether string values are decoded (see [`read`]).
    decode_values: bool,
    /// How a fault is reported (see [`Fault`]).
    fault: PhantomData<F>,
}

impl<'a, F: Fault> Reader<'a, F> {
    /// The text from `start` to here. Both are ASCII boundaries (the reader
    /// stops only at ASCII bytes), so `get` always succeeds; it is used rather
    /// than indexing so no panic path (and its formatting) is linked.
    fn slice(&self, start: usize) -> &'a str {
        self.text.get(start..self.pos).unwrap_or_default()
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// A fault: `what`, here.
    fn invalid(&self, what: &'static str) -> F {
        F::invalid(self.bytes, self.pos, what)
    }

    fn literal(&mut self, word: &str, value: Json<'a>) -> Result<Json<'a>, F> {
        if self.bytes[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.invalid("expected a value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json<'a>, F> {
        match self.peek() {
            None => Err(self.invalid("unexpected end of input")),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'"') => Ok(Json::String(self.string(self.decode_values)?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'[') => {
                if depth >= MAX_DEPTH {
                    return Err(F::too_deep());
                }
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_space();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                loop {
                    self.skip_space();
                    items.push(self.value(depth + 1)?);
                    self.skip_space();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {
                            self.pos += 1;
                            return Ok(Json::Array(items));
                        }
                        _ => return Err(self.invalid("expected `,` or `]`")),
                    }
                }
            }
            Some(b'{') => {
                if depth >= MAX_DEPTH {
                    return Err(F::too_deep());
                }
                self.pos += 1;
                let mut members: Vec<(Cow<'a, str>, Json<'a>)> = Vec::new();
                self.skip_space();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                    return Ok(Json::Object(members));
                }
                loop {
                    self.skip_space();
                    if self.peek() != Some(b'"') {
                        return Err(self.invalid("expected a member name"));
                    }
                    let name = self.string(true)?;
                    self.skip_space();
                    if self.peek() != Some(b':') {
                        return Err(self.invalid("expected `:`"));
                    }
                    self.pos += 1;
                    self.skip_space();
                    let value = self.value(depth + 1)?;
                    members.push((name, value));
                    self.skip_space();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {
                            self.pos += 1;
                            break;
                        }
                        _ => return Err(self.invalid("expected `,` or `}`")),
                    }
                }
                // Sorted by UTF-16 code units (RFC 8785 §3.2.3); then a duplicate is a neighbour.
                sort_by_name(&mut members);
                if let Some(pair) = members.windows(2).find(|pair| pair[0].0 == pair[1].0) {
                    return Err(F::duplicate(&pair[0].0));
                }
                Ok(Json::Object(members))
            }
            Some(_) => Err(self.invalid("expected a value")),
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, kept as its literal.
    fn number(&mut self) -> Result<Json<'a>, F> {
        let start = self.pos;
        let digits = |r: &mut Self| {
            let from = r.pos;
            while let Some(b'0'..=b'9') = r.peek() {
                r.pos += 1;
            }
            r.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.invalid("invalid number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.invalid("invalid number"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.invalid("invalid number"));
            }
        }
        Ok(Json::Number(self.slice(start)))
    }

    /// A string token. Borrowed when it has no escapes (then its text is
    /// already its canonical form) or when `decode` is false (then it is its
    /// source text, escapes checked); owned and decoded otherwise.
    fn string(&mut self, decode: bool) -> Result<Cow<'a, str>, F> {
        self.pos += 1; // the opening quote
        let start = self.pos;
        // Decoded so far, once a first escape was met (and `decode`).
        let mut owned: Option<String> = None;
        loop {
            // Up to the next quote, backslash or control byte, at once.
            let from = self.pos;
            self.pos += plain_run(self.bytes.get(from..).unwrap_or_default());
            if let Some(owned) = &mut owned {
                owned.push_str(self.slice(from));
            }
            match self.peek() {
                None => return Err(self.invalid("unterminated string")),
                Some(b'"') => {
                    let raw = self.slice(start);
                    self.pos += 1;
                    return Ok(owned.map_or(Cow::Borrowed(raw), Cow::Owned));
                }
                Some(b'\\') => {
                    if decode && owned.is_none() {
                        let mut text = String::with_capacity(self.pos - start + 16);
                        text.push_str(self.slice(start));
                        owned = Some(text);
                    }
                    self.pos += 1;
                    let c = self.escape()?;
                    if let Some(owned) = &mut owned {
                        owned.push(c);
                    }
                }
                Some(_) => return Err(self.invalid("control character in a string")),
            }
        }
    }

    /// The character an escape denotes, read from just after its backslash:
    /// the short ones, or `\uXXXX` (a surrogate pair as two, never alone).
    fn escape(&mut self) -> Result<char, F> {
        let escaped = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{08}',
            Some(b'f') => '\u{0C}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                let unit = self.hex4()?;
                let code = match unit {
                    0xD800..=0xDBFF => {
                        if !self.bytes.get(self.pos..).unwrap_or_default().starts_with(b"\\u") {
                            return Err(self.invalid("lone leading surrogate"));
                        }
                        self.pos += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(self.invalid("lone leading surrogate"));
                        }
                        0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    }
                    0xDC00..=0xDFFF => return Err(self.invalid("lone trailing surrogate")),
                    _ => unit,
                };
                return char::from_u32(code).ok_or_else(|| self.invalid("invalid escape"));
            }
            _ => return Err(self.invalid("invalid escape")),
        };
        self.pos += 1;
        Ok(escaped)
    }

    fn hex4(&mut self) -> Result<u32, F> {
        let mut unit = 0;
        for _ in 0..4 {
            match self.peek() {
                Some(b) if b.is_ascii_hexdigit() => unit = unit * 16 + hex_digit(b),
                _ => return Err(self.invalid("invalid \\u escape")),
            }
            self.pos += 1;
        }
        Ok(unit)
    }
}

/// The value of a hex digit (checked by the caller).
fn hex_digit(b: u8) -> u32 {
    u32::from(match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => (b | 0x20).wrapping_sub(b'a' - 10),
    })
}

/// How many bytes of `bytes` a string takes as they are: up to the first
/// quote, backslash or control byte. The hot loop of reading a chat body, so
/// it looks at eight bytes at a time (SWAR) before it looks at one.
fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let mut i = 0;
    // (A plain loop and an array, not an iterator or `copy_from_slice`: at
    // opt-level "z" those stay calls, per eight bytes.)
    while let Some(Ok(word)) = bytes.get(i..i + 8).map(<[u8; 8]>::try_from) {
        let x = u64::from_le_bytes(word);
        // A byte below 0x20, or equal to `"` or `\`, ends the run. The lowest
        // flagged byte is exact (a borrow only ever flags bytes above a true
        // match), so it is the run's end.
        let special =
            (x.wrapping_sub(ONES * 0x20) & !x & HIGHS) | has_zero(x ^ (ONES * 0x22)) | has_zero(x ^ (ONES * 0x5C));
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

/// Sorts members by name in RFC 8785's order: a heapsort, in place and
/// O(n log n) whatever the input, and a fraction of the code of the standard
/// library's sorts (which the browser SDK would ship for this call alone).
/// Names are unique once checked, so stability does not matter.
fn sort_by_name<T>(members: &mut [(Cow<'_, str>, T)]) {
    fn sift<T>(v: &mut [(Cow<'_, str>, T)], mut root: usize, end: usize) {
        loop {
            let mut child = 2 * root + 1;
            if child >= end {
                return;
            }
            if child + 1 < end && utf16_order(&v[child].0, &v[child + 1].0).is_lt() {
                child += 1;
            }
            if !utf16_order(&v[root].0, &v[child].0).is_lt() {
                return;
            }
            v.swap(root, child);
            root = child;
        }
    }
    let n = members.len();
    for start in (0..n / 2).rev() {
        sift(members, start, n);
    }
    for end in (1..n).rev() {
        members.swap(0, end);
        sift(members, 0, end);
    }
}

/// RFC 8785 §3.2.3's order: by UTF-16 code units. UTF-8's byte order is code
/// point order, which differs from it only when a character above U+FFFF
/// meets one in U+E000–U+FFFF; ASCII names (nearly all) compare bytewise.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() { a.cmp(b) } else { a.encode_utf16().cmp(b.encode_utf16()) }
}

/// Appends the decimal digits of `n` (no `core::fmt`; the browser SDK writes
/// its numbers with it too).
pub fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(d as char);
    }
}

/// An integer literal of at most 15 digits is exact as a double and written
/// back by ECMAScript digit for digit, so it needs no [`Numbers`] at all
/// (`-0` aside, which is `0`). Most numbers in LLM requests are such.
fn is_plain_integer(literal: &str) -> bool {
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    digits.len() <= 15 && digits.bytes().all(|b| b.is_ascii_digit())
}

fn write_value<F: Fault>(value: &Json<'_>, out: &mut String, numbers: &dyn Numbers) -> Result<(), F> {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number("-0") => out.push('0'),
        Json::Number(literal) if is_plain_integer(literal) => out.push_str(literal),
        Json::Number(literal) => {
            if !numbers.write(literal, out) {
                return Err(F::out_of_range());
            }
        }
        Json::String(s) => write_json_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out, numbers)?;
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (name, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(name, out);
                out.push(':');
                write_value(item, out, numbers)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// A parsed string. A borrowed one is JSON source text: without escapes it is
/// its own canonical form (JSON forbids raw `"`, `\\` and controls, the only
/// characters JCS escapes), with them (see [`read`]) it is rewritten escape by
/// escape; an owned one is decoded text, escaped.
// The Cow's variant matters: a borrowed string is source text.
#[allow(clippy::ptr_arg)]
fn write_json_string(s: &Cow<'_, str>, out: &mut String) {
    match s {
        Cow::Borrowed(raw) => write_source_string(raw, out),
        Cow::Owned(s) => write_string(s, out),
    }
}

/// The canonical form of a string given as its JSON source text (between the
/// quotes; escapes already checked by the reader): runs without a backslash
/// are copied as they are; `\"`, `\\\\`, `\b`, `\f`, `\n`, `\r` and `\t` are
/// already canonical; `\/` is `/`; a `\u` escape is its character, written as
/// [`write_string`] writes it.
fn write_source_string(raw: &str, out: &mut String) {
    out.push('"');
    let bytes = raw.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        // The source has no raw quote or control (the reader checked): the
        // run ends at a backslash.
        let run = plain_run(bytes.get(at..).unwrap_or_default());
        out.push_str(raw.get(at..at + run).unwrap_or_default());
        at += run;
        match bytes.get(at + 1) {
            None => break,
            Some(b'u') => {
                let unit = |i: usize| {
                    bytes.get(i..i + 4).unwrap_or_default().iter().fold(0, |unit, &b| unit * 16 + hex_digit(b))
                };
                let high = unit(at + 2);
                at += 6;
                let code = if (0xD800..=0xDBFF).contains(&high) {
                    let low = unit(at + 2);
                    at += 6;
                    0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF)
                } else {
                    high
                };
                push_escaped(char::from_u32(code).unwrap_or('\u{FFFD}'), out);
            }
            Some(b'/') => {
                out.push('/');
                at += 2;
            }
            Some(_) => {
                out.push_str(raw.get(at..at + 2).unwrap_or_default());
                at += 2;
            }
        }
    }
    out.push('"');
}

/// The shortest decimal digits that round-trip to `x` (positive, finite) and
/// the decimal exponent of the first digit: `(d1d2…dk, e)` for d1.d2…dk × 10^e.
///
/// Ryū finds them, and breaks a tie between two equally close shortest
/// candidates toward the even one, exactly as ECMA-262 requires (Rust's own
/// `{:e}` rounds such ties up: RFC 8785's `1424953923781206.2` row).
fn shortest_digits(x: f64) -> (String, i32) {
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(x);
    let (mantissa, exponent) = text.split_once(['e', 'E']).unwrap_or((text, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all: String = [int_part, frac_part].concat();
    let first = all.bytes().position(|b| b != b'0').unwrap_or(0);
    let digits = all[first..].trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (digits.to_owned(), int_part.len() as i32 - 1 - first as i32 + exponent)
}

/// RFC 8785 §3.2.2.2: strings keep every character as UTF-8 except `"`, `\\`
/// and the C0 controls, which get the short escapes or `\u00xx` (lower case).
/// Runs that need no escape are copied at once.
pub(crate) fn write_string(s: &str, out: &mut String) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let run = plain_run(bytes.get(at..).unwrap_or_default());
        out.push_str(s.get(at..at + run).unwrap_or_default());
        at += run;
        // The byte that ended the run is ASCII: `"`, `\\` or a control.
        if let Some(&b) = bytes.get(at) {
            push_escaped(char::from(b), out);
            at += 1;
        }
    }
    out.push('"');
}

/// One character of a string's canonical form.
fn push_escaped(c: char, out: &mut String) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\u{08}' => out.push_str("\\b"),
        '\u{09}' => out.push_str("\\t"),
        '\u{0A}' => out.push_str("\\n"),
        '\u{0C}' => out.push_str("\\f"),
        '\u{0D}' => out.push_str("\\r"),
        c if (c as u32) < 0x20 => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(c as usize) >> 4] as char);
            out.push(HEX[(c as usize) & 0xF] as char);
        }
        c => out.push(c),
    }
}

/// ECMAScript `Number.prototype.toString(10)` for a finite double (ECMA-262
/// §6.1.6.1.20), which is what RFC 8785 §3.2.2.3 prescribes.
pub fn write_number(n: f64, out: &mut String) {
    if n == 0.0 {
        out.push('0'); // both +0 and -0
        return;
    }
    if n < 0.0 {
        out.push('-');
    }
    let (digits, exponent) = shortest_digits(n.abs());
    // n = 0.d1d2…dk × 10^point, in ECMA-262's terms.
    let k = digits.len() as i32;
    let point = exponent + 1;
    if k <= point && point <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (point - k) as usize));
    } else if 0 < point && point <= 21 {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    } else if -6 < point && point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if point - 1 < 0 { '-' } else { '+' });
        out.push_str(&(point - 1).abs().to_string());
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn number(bits: u64) -> String {
        let mut out = String::new();
        write_number(f64::from_bits(bits), &mut out);
        out
    }

    /// RFC 8785 Appendix B: the number serialisation table.
    #[test]
    fn rfc8785_appendix_b_numbers() {
        let table: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for (bits, expected) in table {
            assert_eq!(number(*bits), *expected, "bits {bits:#018x}");
        }
    }

    /// RFC 8785 §3.2.3 / Appendix example: the sample object.
    #[test]
    fn rfc8785_sample_object() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50,
                      2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let expected = r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#;
        assert_eq!(canonicalize(input.as_bytes()).unwrap(), expected);
    }

    /// RFC 8785 §3.2.3: sorting by UTF-16 code units, not by code points.
    #[test]
    fn rfc8785_sorting_example() {
        let input = r#"{
          "\u20ac": "Euro Sign",
          "\r": "Carriage Return",
          "\ufb33": "Hebrew Letter Dalet With Dagesh",
          "1": "One",
          "\ud83d\ude00": "Emoji: Grinning Face",
          "\u0080": "Control",
          "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let canonical = canonicalize(input.as_bytes()).unwrap();
        let values: Vec<&str> = canonical.split("\":\"").skip(1).map(|rest| rest.split('"').next().unwrap()).collect();
        assert_eq!(
            values,
            [
                "Carriage Return",
                "One",
                "Control",
                "Latin Small Letter O With Diaeresis",
                "Euro Sign",
                "Emoji: Grinning Face",
                "Hebrew Letter Dalet With Dagesh"
            ]
        );
    }

    proptest::proptest! {
        /// Every finite double is written in the fewest digits that read back
        /// as the same double.
        #[test]
        fn numbers_round_trip_in_the_fewest_digits(bits: u64) {
            let x = f64::from_bits(bits);
            proptest::prop_assume!(x.is_finite());
            let mut out = String::new();
            write_number(x, &mut out);
            let back: f64 = out.parse().unwrap();
            proptest::prop_assert!(back == x, "{out} reads back as {back}, not {x}");
            let shortest = format!("{:e}", x.abs());
            let rust_digits = shortest.split('e').next().unwrap().replace('.', "").trim_start_matches('0').len().max(1);
            let our_digits = shortest_digits(x.abs()).0.len();
            proptest::prop_assert!(x == 0.0 || our_digits == rust_digits, "{out}: {our_digits} digits, Rust {shortest}");
        }
    }

    #[test]
    fn rejects_duplicate_names_with_the_name() {
        assert_eq!(
            canonicalize(br#"{"a":1,"b":{"x\"y":1,"x\"y":2}}"#),
            Err(CanonicalError::DuplicateName { name: "x\"y".into() })
        );
    }

    #[test]
    fn rejects_lone_surrogates_and_overflowing_numbers() {
        assert!(matches!(canonicalize(br#""\ud800""#), Err(CanonicalError::Invalid { .. })));
        assert!(matches!(canonicalize(br#""\udc00x""#), Err(CanonicalError::Invalid { .. })));
        assert!(matches!(canonicalize(b"1e400"), Err(CanonicalError::Invalid { .. })));
        assert!(matches!(canonicalize(b"NaN"), Err(CanonicalError::Invalid { .. })));
    }

    #[test]
    fn rejects_trailing_garbage_and_non_json() {
        assert!(matches!(canonicalize(b"{} {}"), Err(CanonicalError::Invalid { .. })));
        assert!(matches!(canonicalize(b""), Err(CanonicalError::Invalid { .. })));
        assert!(matches!(canonicalize(b"\xff"), Err(CanonicalError::Invalid { .. })));
    }

    #[test]
    fn hostile_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        assert_eq!(canonicalize(deep.as_bytes()), Err(CanonicalError::TooDeep { max: MAX_DEPTH }));
        let just_over = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(canonicalize(just_over.as_bytes()), Err(CanonicalError::TooDeep { max: MAX_DEPTH }));
        let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(canonicalize(at_limit.as_bytes()).unwrap(), at_limit);
    }

    /// The reader accepts exactly what serde_json accepts (the reader it
    /// replaced), and both agree on every value.
    #[test]
    fn accepts_what_serde_json_accepts() {
        let cases: &[&str] = &[
            "0",
            "-0",
            "1",
            "-1.5e-3",
            "1E+2",
            "01",
            "1.",
            ".5",
            "-",
            "1e",
            "+1",
            "0x10",
            "1.5e308",
            "123456789012345678901234",
            r#""\u00e9\n\/""#,
            r#""\x""#,
            "\"\t\"",
            "\"a\u{1}\"",
            r#""\u12""#,
            r#""\uD83D\uDE00""#,
            "[]",
            "[1,]",
            "[,1]",
            "[1 2]",
            "{}",
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            r#"{a:1}"#,
            r#"{"a":[{"b":null}]}"#,
            "true",
            "tru",
            "nul",
            "falsey",
            " \t\n\r[ true , false ] ",
            "\u{a0}1",
            "[1]x",
            r#"{"a":1}}"#,
        ];
        for case in cases {
            let ours = canonicalize(case.as_bytes());
            let theirs = serde_json::from_str::<serde_json::Value>(case);
            assert_eq!(ours.is_ok(), theirs.is_ok(), "{case:?}: ours {ours:?}");
            if let (Ok(ours), Ok(theirs)) = (ours, theirs) {
                // serde's own spelling of the value, canonicalized: the same text.
                let respelled = canonicalize(serde_json::to_string(&theirs).unwrap().as_bytes()).unwrap();
                assert_eq!(ours, respelled, "{case:?}");
            }
        }
    }

    /// Integers of up to 15 digits skip `Numbers`; the result is the same.
    #[test]
    fn plain_integers_are_written_as_ecmascript_writes_them() {
        for literal in ["0", "-0", "7", "-42", "100000000000000", "999999999999999", "-999999999999999"] {
            let mut slow = String::new();
            assert!(RustNumbers.write(literal, &mut slow));
            assert_eq!(canonicalize(literal.as_bytes()).unwrap(), slow, "{literal}");
        }
    }

    /// Other numbers go through the `Numbers` given, e.g. a JavaScript engine's.
    #[test]
    fn numbers_are_injected() {
        struct Marked;
        impl Numbers for Marked {
            fn value(&self, _: &str) -> Option<f64> {
                None
            }
            fn write(&self, literal: &str, out: &mut String) -> bool {
                out.push('<');
                out.push_str(literal);
                out.push('>');
                literal != "1e999"
            }
        }
        assert_eq!(canonicalize_with(br#"[1,1.5,2e0]"#, &Marked).unwrap(), "[1,<1.5>,<2e0>]");
        assert!(matches!(canonicalize_with(b"[1e999]", &Marked), Err(CanonicalError::Invalid { .. })));
    }

    proptest::proptest! {
        /// The eight-at-a-time scan stops where a byte-by-byte one does.
        #[test]
        fn plain_run_stops_at_the_first_special_byte(bytes: Vec<u8>) {
            let naive = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).unwrap_or(bytes.len());
            proptest::prop_assert_eq!(plain_run(&bytes), naive);
        }
    }

    proptest::proptest! {
        /// The heapsort orders names as a standard sort does.
        #[test]
        fn members_are_sorted_like_a_standard_sort(names: Vec<String>) {
            let mut ours: Vec<(Cow<'_, str>, ())> = names.iter().map(|n| (Cow::Borrowed(n.as_str()), ())).collect();
            sort_by_name(&mut ours);
            let mut theirs = names.clone();
            theirs.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            let ours: Vec<&str> = ours.iter().map(|(n, ())| n.as_ref()).collect();
            proptest::prop_assert_eq!(ours, theirs.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }

    /// A reader that reports nothing refuses exactly what the one that
    /// says why refuses, and reads the same values.
    #[test]
    fn a_silent_reader_refuses_what_the_detailed_one_refuses() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        let texts: [&[u8]; 16] = [
            br#"{"b":[1,2.5e3,-0,"x\ny\u00e9\ud83d\ude00"],"a":{"c":null,"d":true}}"#,
            b" [ ] ",
            b"",
            b"{",
            b"[1,]",
            b"{\"a\" 1}",
            br#"{"a":1,"a":2}"#,
            br#""\ud800""#,
            br#""\udc00x""#,
            br#""\x""#,
            b"\"a\x01\"",
            b"1e999",
            b"01",
            b"\xff",
            b"{} {}",
            deep.as_bytes(),
        ];
        for text in texts {
            let detailed = canonicalize_with(text, &RustNumbers);
            let silent = canonical_form::<()>(text, &RustNumbers);
            assert_eq!(silent.as_ref().ok(), detailed.as_ref().ok(), "{text:?}");
            assert_eq!(silent.is_err(), detailed.is_err(), "{text:?}");
            assert_eq!(parse::<()>(text).is_ok(), parse::<CanonicalError>(text).is_ok(), "{text:?}");
        }
    }

    #[test]
    fn a_members_source_is_its_text_as_written() {
        let json = r#" { "a" : [1, {"b":"\u0041"}] , "b":"x\ny", "c" : null } "#;
        assert_eq!(member_source(json, "a"), Some(r#"[1, {"b":"\u0041"}]"#));
        assert_eq!(member_source(json, "b"), Some(r#""x\ny""#));
        assert_eq!(member_source(json, "c"), Some("null"));
        assert_eq!(member_source(json, "d"), None);
        assert_eq!(member_source(r#"{"a":1,"a":2}"#, "a"), Some("1"), "the first");
        for not_an_object in ["", "[]", "1", r#"{"a" 1}"#, r#"{"a":}"#, r#"{"b":1 "a":2}"#] {
            assert_eq!(member_source(not_an_object, "a"), None, "{not_an_object}");
        }
    }

    #[test]
    fn errors_say_where() {
        let error = canonicalize(b"{\n  \"a\": tru }").unwrap_err();
        assert_eq!(error.describe(), "invalid JSON: expected a value at line 2 column 8");
        assert_eq!(error.to_string(), error.describe());
    }

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let big = vec![b' '; MAX_INPUT_BYTES + 1];
        assert_eq!(
            canonicalize(&big),
            Err(CanonicalError::TooLarge { len: MAX_INPUT_BYTES + 1, max: MAX_INPUT_BYTES })
        );
    }
}
