//! Templates: strings with `{{input.NAME}}` and `{{output.NAME}}`
//! placeholders, as a job type's prompt and its effects' payloads use them.
//! A string that is exactly one placeholder takes the value itself (a number
//! stays a number); in a longer text a string is put in as it is, anything
//! else as its JSON, and a missing value as nothing. Every placeholder is
//! checked against the input and output schemas when a type is read.
//!
//! Imports nothing else of the crate.

use serde_json::Value;
/// The values templates may name.
struct Scope<'a> {
    input: &'a Value,
    output: &'a Value,
}

impl Scope<'_> {
    fn lookup(&self, place: &str) -> Option<&Value> {
        let (root, field) = place.split_once('.')?;
        match root {
            "input" => self.input.get(field),
            "output" => self.output.get(field),
            _ => None,
        }
    }
}

/// Fills a payload template (any JSON) with `input` and `output`.
pub fn render(template: &Value, input: &Value, output: &Value) -> Value {
    let scope = Scope { input, output };
    render_value(template, &scope)
}

fn render_value(template: &Value, scope: &Scope<'_>) -> Value {
    match template {
        Value::String(text) => match single_placeholder(text) {
            Some(place) => scope.lookup(place).cloned().unwrap_or(Value::Null),
            None => Value::String(fill_text(text, scope)),
        },
        Value::Array(items) => Value::Array(items.iter().map(|v| render_value(v, scope)).collect()),
        Value::Object(members) => {
            Value::Object(members.iter().map(|(k, v)| (k.clone(), render_value(v, scope))).collect())
        }
        other => other.clone(),
    }
}

/// `{{input.x}}` alone, with nothing around it.
fn single_placeholder(text: &str) -> Option<&str> {
    let inner = text.strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then(|| inner.trim())
}

/// Fills a text template (a prompt) with `input` and `output`.
pub fn render_text(text: &str, input: &Value, output: &Value) -> String {
    fill_text(text, &Scope { input, output })
}

fn fill_text(text: &str, scope: &Scope<'_>) -> String {
    let mut out = String::with_capacity(text.len());
    for piece in pieces(text) {
        match piece {
            // (A checked template has every `{{` closed.)
            Piece::Literal(text) | Piece::Unclosed(text) => out.push_str(text),
            Piece::Place(place) => match scope.lookup(place) {
                Some(Value::String(text)) => out.push_str(text),
                Some(Value::Null) | None => {}
                Some(other) => out.push_str(&other.to_string()),
            },
        }
    }
    out
}

/// A part of a template's text.
enum Piece<'a> {
    /// Text as it is.
    Literal(&'a str),
    /// What a `{{ … }}` names, trimmed.
    Place(&'a str),
    /// The rest of the text from a `{{` that is never closed.
    Unclosed(&'a str),
}

/// A template's text in pieces, in order: what rendering and checking both read.
fn pieces(text: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = text;
    let mut place = None;
    std::iter::from_fn(move || {
        if let Some(inner) = place.take() {
            return Some(Piece::Place(inner));
        }
        if rest.is_empty() {
            return None;
        }
        let Some(start) = rest.find("{{") else {
            return Some(Piece::Literal(std::mem::take(&mut rest)));
        };
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Some(Piece::Unclosed(std::mem::take(&mut rest)));
        };
        let literal = &rest[..start];
        place = Some(after[..end].trim());
        rest = &after[end + 2..];
        Some(Piece::Literal(literal))
    })
}

/// The schemas placeholders are checked against.
pub(crate) struct Known<'a> {
    pub(crate) input: &'a Value,
    pub(crate) output: &'a Value,
}

impl Known<'_> {
    pub(crate) fn has(&self, root: &str, field: &str) -> bool {
        let schema = if root == "input" { self.input } else { self.output };
        schema.pointer(&format!("/properties/{}", field.replace('~', "~0").replace('/', "~1"))).is_some()
    }

    /// Every placeholder of `text` names a declared property (`output` only
    /// where the answer is known, i.e. not in the prompt).
    pub(crate) fn check_template(&self, text: &str, output_allowed: bool) -> Result<(), String> {
        for piece in pieces(text) {
            let place = match piece {
                Piece::Literal(_) => continue,
                Piece::Unclosed(_) => return Err("a {{ is not closed".into()),
                Piece::Place(place) => place,
            };
            let (root, field) = place.split_once('.').ok_or_else(|| format!("{{{{{place}}}}} names no field"))?;
            let allowed = root == "input" || (root == "output" && output_allowed);
            if !allowed || !self.has(root, field) {
                return Err(format!("{{{{{place}}}}} names no declared property"));
            }
        }
        Ok(())
    }

    pub(crate) fn check_payload(&self, template: &Value) -> Result<(), String> {
        match template {
            Value::String(text) => self.check_template(text, true),
            Value::Array(items) => items.iter().try_for_each(|v| self.check_payload(v)),
            Value::Object(members) => members.values().try_for_each(|v| self.check_payload(v)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use serde_json::json;

    use super::*;

    #[test]
    fn payloads_keep_the_type_of_a_lone_placeholder() {
        let input = json!({"n": 3, "name": "x"});
        let output = json!({"ok": true});
        let template = json!({"count": "{{input.n}}", "text": "{{input.name}}-{{input.n}}", "ok": "{{output.ok}}", "missing": "{{output.nope}}", "fixed": 1});
        assert_eq!(
            render(&template, &input, &output),
            json!({"count": 3, "text": "x-3", "ok": true, "missing": null, "fixed": 1})
        );
    }
}
