//! RFC 8785 JSON Canonicalization Scheme (JCS).
//!
//! Two requests that mean the same thing must get the same fingerprint even
//! when one client writes `{"b":1,"a":1.0}` and another `{"a":1,"b":1e0}`.
//! JCS fixes one spelling: object members sorted by their UTF-16 code units,
//! numbers written as ECMAScript's `Number.prototype.toString` writes them,
//! strings with the minimal escapes, no insignificant white space.
//!
//! Parsing goes through `serde_json` (exact float parsing, a recursion limit
//! so hostile nesting is an error rather than a stack overflow) into our own
//! tree, because `serde_json::Value` silently keeps the last of two duplicate
//! names and JCS requires rejecting them.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

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
        /// The parser's explanation, with line and column.
        message: String,
    },
}

impl fmt::Display for CanonicalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { len, max } => write!(f, "body of {len} bytes exceeds {max} bytes"),
            Self::TooDeep { max } => write!(f, "JSON nests deeper than {max} levels"),
            Self::DuplicateName { name } => write!(f, "object has duplicate member name {name:?}"),
            Self::Invalid { message } => write!(f, "invalid JSON: {message}"),
        }
    }
}

impl std::error::Error for CanonicalError {}

/// Returns the RFC 8785 canonical form of a JSON text.
///
/// ```
/// let canonical = onejob_core::canonical::canonicalize(br#"{ "b": 1e0, "a": [1.50, "\u0041"] }"#).unwrap();
/// assert_eq!(canonical, r#"{"a":[1.5,"A"],"b":1}"#);
/// ```
pub fn canonicalize(json: &[u8]) -> Result<String, CanonicalError> {
    if json.len() > MAX_INPUT_BYTES {
        return Err(CanonicalError::TooLarge { len: json.len(), max: MAX_INPUT_BYTES });
    }
    let value = parse(json)?;
    let mut out = String::with_capacity(json.len());
    write_value(&value, &mut out);
    Ok(out)
}

/// A parsed JSON value. Numbers are doubles, as JCS (and JavaScript) see them.
/// Other modules read small documents through it (see [`crate::intent`]), so
/// the crate carries one JSON reader, not one per type.
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// Parses a JSON text with the same rules as [`canonicalize`].
pub(crate) fn parse(json: &[u8]) -> Result<Json, CanonicalError> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = Json::deserialize(&mut de).map_err(classify_serde_error)?;
    de.end().map_err(classify_serde_error)?;
    if depth(&value) > MAX_DEPTH {
        return Err(CanonicalError::TooDeep { max: MAX_DEPTH });
    }
    Ok(value)
}

/// Our visitor reports duplicates through serde's custom-error channel with a
/// recognisable prefix, so they come back as a typed error, not a message.
const DUPLICATE_PREFIX: &str = "onejob-duplicate-name:";

fn classify_serde_error(err: serde_json::Error) -> CanonicalError {
    let message = err.to_string();
    if let Some(rest) = message.strip_prefix(DUPLICATE_PREFIX) {
        // serde_json appends " at line L column C"; the name is JSON-quoted before it.
        let quoted = rest.rsplit_once(" at line ").map_or(rest, |(name, _)| name);
        let name = serde_json::from_str::<String>(quoted).unwrap_or_else(|_| quoted.to_string());
        return CanonicalError::DuplicateName { name };
    }
    if message.starts_with("recursion limit exceeded") {
        return CanonicalError::TooDeep { max: MAX_DEPTH };
    }
    CanonicalError::Invalid { message }
}

/// Depth without recursion, so a deep tree cannot overflow the stack here either.
fn depth(root: &Json) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 0usize)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Json::Array(items) => {
                deepest = deepest.max(level + 1);
                stack.extend(items.iter().map(|item| (item, level + 1)));
            }
            Json::Object(members) => {
                deepest = deepest.max(level + 1);
                stack.extend(members.iter().map(|(_, item)| (item, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    // JCS treats every number as an IEEE 754 double, integers included:
    // 2^53 + 1 and 2^53 are the same number to it, as to JavaScript.
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        if v.is_finite() { Ok(Json::Number(v)) } else { Err(E::custom("number out of range")) }
    }

    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut members: Vec<(String, Json)> = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let value = map.next_value()?;
            members.push((name, value));
        }
        // Sort by UTF-16 code units (RFC 8785 §3.2.3), then a duplicate is a neighbour.
        members.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
        if let Some(pair) = members.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            let quoted = serde_json::to_string(&pair[0].0).unwrap_or_default();
            return Err(de::Error::custom(format_args!("{DUPLICATE_PREFIX}{quoted}")));
        }
        Ok(Json::Object(members))
    }
}

fn write_value(value: &Json, out: &mut String) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => write_number(*n, out),
        Json::String(s) => write_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (i, (name, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(name, out);
                out.push(':');
                write_value(item, out);
            }
            out.push('}');
        }
    }
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

/// RFC 8785 §3.2.2.2: strings keep every character as UTF-8 except `"`, `\`
/// and the C0 controls, which get the short escapes or `\u00xx` (lower case).
pub(crate) fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
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
    out.push('"');
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

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let big = vec![b' '; MAX_INPUT_BYTES + 1];
        assert_eq!(
            canonicalize(&big),
            Err(CanonicalError::TooLarge { len: MAX_INPUT_BYTES + 1, max: MAX_INPUT_BYTES })
        );
    }
}
