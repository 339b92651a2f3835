//! Property tests: the fingerprint depends on what a request means, never on
//! how its JSON happens to be spelled.
//!
//! A random JSON value is rendered twice with independent random choices of
//! member order, white space, number spelling (`1`, `1.0`, `1e0`, `10e-1`…)
//! and string escapes (`A` vs `\u0041`, surrogate pairs): the fingerprints
//! must match. Changing one leaf value must change it.

#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use onejob_core::identity::canonical::canonicalize;
use onejob_core::identity::fingerprint::{Body, Fingerprint};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    /// Distinct names (JCS forbids duplicates).
    Object(Vec<(String, Value)>),
}

fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-1_000_000i64..1_000_000).prop_map(|n| n as f64),
        (-1_000_000i64..1_000_000, 1u32..6).prop_map(|(n, d)| n as f64 / 10f64.powi(d as i32)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Writes `value` as JSON, taking every free choice from `choices`.
fn render(value: &Value, choices: &mut impl Iterator<Item = u8>, out: &mut String) {
    let mut pick = |n: u8| choices.next().unwrap_or(0) % n;
    let ws = [" ", "", "\n", "\t ", ""];
    out.push_str(ws[pick(5) as usize]);
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&spell_number(*n, pick(6))),
        Value::String(s) => render_string(s, choices, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(item, choices, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut order: Vec<usize> = (0..members.len()).collect();
            // A random permutation (Fisher–Yates driven by the choices).
            for i in (1..order.len()).rev() {
                let j = choices.next().unwrap_or(0) as usize % (i + 1);
                order.swap(i, j);
            }
            out.push('{');
            for (n, i) in order.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                render_string(&members[i].0, choices, out);
                out.push(':');
                render(&members[i].1, choices, out);
            }
            out.push('}');
        }
    }
}

/// Different spellings of the same double.
fn spell_number(n: f64, how: u8) -> String {
    let is_small_integer = n.fract() == 0.0 && n.abs() < 1e15;
    match how {
        0 => format!("{n:e}"),
        1 => format!("{n:.17e}"),
        2 => format!("{n:E}"),
        3 if is_small_integer => format!("{n:.1}"),
        4 if is_small_integer && n != 0.0 => format!("{}0e-1", n as i64),
        _ => format!("{n:?}"),
    }
}

fn render_string(s: &str, choices: &mut impl Iterator<Item = u8>, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let must_escape = c == '"' || c == '\\' || (c as u32) < 0x20;
        if must_escape || choices.next().unwrap_or(0).is_multiple_of(4) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let hex = format!("\\u{unit:04x}");
                out.push_str(&if choices.next().unwrap_or(0).is_multiple_of(2) {
                    hex.to_uppercase().replace("\\U", "\\u")
                } else {
                    hex
                });
            }
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

fn fingerprint(json: &str) -> Fingerprint {
    Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(json.as_bytes())).unwrap()
}

/// Replaces the `target`-th leaf (depth first) with a different value.
fn mutate(value: &mut Value, target: &mut usize) -> bool {
    match value {
        Value::Array(items) => items.iter_mut().any(|item| mutate(item, target)),
        Value::Object(members) => members.iter_mut().any(|(_, item)| mutate(item, target)),
        leaf => {
            if *target > 0 {
                *target -= 1;
                return false;
            }
            *leaf = match leaf {
                Value::Null => Value::Bool(false),
                Value::Bool(b) => Value::Bool(!*b),
                Value::Number(n) if *n == 0.0 => Value::Number(1.0),
                Value::Number(n) if n.abs() > 1e300 => Value::Number(*n / 2.0),
                Value::Number(n) => Value::Number(*n * 2.0),
                Value::String(s) => Value::String(format!("{s}x")),
                _ => unreachable!("containers are handled above"),
            };
            true
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn spelling_never_changes_the_fingerprint(v in value(), a in prop::collection::vec(any::<u8>(), 512), b in prop::collection::vec(any::<u8>(), 512)) {
        let (mut first, mut second) = (String::new(), String::new());
        render(&v, &mut a.into_iter().cycle(), &mut first);
        render(&v, &mut b.into_iter().cycle(), &mut second);
        prop_assert_eq!(canonicalize(first.as_bytes()).unwrap(), canonicalize(second.as_bytes()).unwrap());
        prop_assert_eq!(fingerprint(&first), fingerprint(&second));
    }

    #[test]
    fn changing_any_value_changes_the_fingerprint(v in value(), leaf in any::<prop::sample::Index>(), seed in prop::collection::vec(any::<u8>(), 256)) {
        let mut original = String::new();
        render(&v, &mut seed.clone().into_iter().cycle(), &mut original);
        let mut changed_value = v.clone();
        let leaves = count_leaves(&v);
        prop_assume!(leaves > 0);
        let mut target = leaf.index(leaves);
        prop_assume!(mutate(&mut changed_value, &mut target));
        let mut changed = String::new();
        render(&changed_value, &mut seed.into_iter().cycle(), &mut changed);
        prop_assert_ne!(fingerprint(&original), fingerprint(&changed));
    }

    #[test]
    fn canonical_form_is_a_fixed_point(v in value(), seed in prop::collection::vec(any::<u8>(), 256)) {
        let mut text = String::new();
        render(&v, &mut seed.into_iter().cycle(), &mut text);
        let once = canonicalize(text.as_bytes()).unwrap();
        prop_assert_eq!(canonicalize(once.as_bytes()).unwrap(), once);
    }
}

fn count_leaves(value: &Value) -> usize {
    match value {
        Value::Array(items) => items.iter().map(count_leaves).sum(),
        Value::Object(members) => members.iter().map(|(_, v)| count_leaves(v)).sum(),
        _ => 1,
    }
}

#[test]
fn the_issue_examples() {
    assert_eq!(fingerprint(r#"{"n":1.0}"#), fingerprint(r#"{"n":1e0}"#));
    assert_eq!(fingerprint(r#"{"n":1}"#), fingerprint(r#"{"n":1e0}"#));
    assert_eq!(fingerprint(r#"{"a":"A","b":2}"#), fingerprint(r#"{"b":2,"a":"\u0041"}"#));
}

/// Characters escape-heavy text is made of: what JCS escapes (`"`, `\`,
/// every C0 control), `/` (which JSON may escape), DEL, accented letters,
/// symbols (✓, €), CJK, characters above U+FFFF (surrogate pairs in `\u`
/// form) and the ones around U+E000–U+FFFF that sort differently in UTF-16.
fn escape_heavy_char() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(vec!['"', '\\', '/', '\n', '\r', '\t', '\u{08}', '\u{0C}', '\u{7F}', ' ', 'a', 'Z']),
        (0u32..0x20).prop_map(|c| char::from_u32(c).unwrap()),
        prop::sample::select(vec![
            'é', 'ï', 'ß', 'ç', '✓', '€', '“', '”', '日', '本', 'Я', '\u{E000}', '\u{FFFD}', '🙂', '𝄞'
        ]),
        any::<char>(),
    ]
}

/// `c` as JSON may spell it inside a string, chosen by `how`: as it is
/// (unless it must be escaped), a short escape where one exists, `\u` in
/// lower or upper case hex (a surrogate pair above U+FFFF).
fn spell_char(c: char, how: u8, out: &mut String) {
    let short = match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '/' => Some("\\/"),
        '\u{08}' => Some("\\b"),
        '\u{0C}' => Some("\\f"),
        '\n' => Some("\\n"),
        '\r' => Some("\\r"),
        '\t' => Some("\\t"),
        _ => None,
    };
    let must_escape = c == '"' || c == '\\' || (c as u32) < 0x20;
    match (how % 4, short) {
        (0, _) if !must_escape => out.push(c),
        (1, Some(short)) => out.push_str(short),
        (how, _) => {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&if how == 2 { format!("\\u{unit:04X}") } else { format!("\\u{unit:04x}") });
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// An escape-heavy string, spelled any way JSON allows, as a value and
    /// as a member name: its canonical form is serde_json's escaping of the
    /// decoded text (the same minimal escapes RFC 8785 prescribes), and the
    /// fingerprint does not depend on the spelling.
    #[test]
    fn escape_heavy_strings_are_written_canonically(
        chars in prop::collection::vec(escape_heavy_char(), 0..40),
        a in prop::collection::vec(any::<u8>(), 40),
        b in prop::collection::vec(any::<u8>(), 40),
    ) {
        let text: String = chars.iter().collect();
        let spell = |how: &[u8]| {
            let mut out = String::from("\"");
            for (c, how) in chars.iter().zip(how) {
                spell_char(*c, *how, &mut out);
            }
            out.push('"');
            out
        };
        let (first, second) = (spell(&a), spell(&b));
        let expected = serde_json::to_string(&text).unwrap();
        prop_assert_eq!(canonicalize(first.as_bytes()).unwrap(), expected.clone());
        prop_assert_eq!(canonicalize(second.as_bytes()).unwrap(), expected.clone());
        // In a chat body: as a message's content and as a member name.
        let body = |s: &str| format!(r#"{{"messages":[{{"role":"user","content":{s}}}],{s}:[{s},1]}}"#);
        let canonical = format!(r#"{{{expected}:[{expected},1],"messages":[{{"content":{expected},"role":"user"}}]}}"#);
        let sorted_first = !matches!(text.encode_utf16().cmp("messages".encode_utf16()), std::cmp::Ordering::Greater);
        let canonical = if sorted_first {
            canonical
        } else {
            format!(r#"{{"messages":[{{"content":{expected},"role":"user"}}],{expected}:[{expected},1]}}"#)
        };
        prop_assume!(text != "messages");
        prop_assert_eq!(canonicalize(body(&first).as_bytes()).unwrap(), canonical);
        prop_assert_eq!(fingerprint(&body(&first)), fingerprint(&body(&second)));
    }
}
