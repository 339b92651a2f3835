//! A route's output contract: what an answer's JSON content must look like
//! before it may become the job's result. A provider that answers outside
//! the contract is not a valid fallback; its answer is a failed attempt of
//! class `contract`, and the route goes on to its next provider.
//!
//! The content checked is the assistant's text (OpenAI: the first choice's
//! `message.content`; Anthropic: the first `text` block), parsed as JSON; a
//! Markdown code fence around it is accepted, as models often add one.
//!
//! Schemas are a strict subset of JSON Schema, checked when the
//! configuration is read so that no keyword is silently ignored: `type`,
//! `properties`, `required`, `additionalProperties` (`false` or a schema),
//! `items`, `enum`, `const`, `minLength`, `maxLength`, `minimum`, `maximum`,
//! `minItems`, `maxItems`, plus the annotations `title`, `description`,
//! `$schema` and `$id`.

use serde_json::Value;

/// What an answer must contain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Contract {
    /// The content is a JSON object with these top-level keys.
    RequiredKeys(Vec<String>),
    /// The content validates against this schema (the subset above).
    Schema(Value),
}

/// Why an answer is outside its contract, for the audit and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

const KEYWORDS: [&str; 17] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "title",
    "description",
    "$schema",
    "$id",
];

const TYPES: [&str; 7] = ["object", "array", "string", "number", "integer", "boolean", "null"];

impl Contract {
    /// Reads a route's `contract`: `{"required_keys": [...]}` or
    /// `{"schema": {...}}`. `Err` names what is wrong.
    pub fn parse(value: &Value) -> Result<Self, &'static str> {
        let object = value.as_object().ok_or("a contract is an object")?;
        match (object.get("required_keys"), object.get("schema")) {
            (Some(keys), None) => {
                let keys = keys.as_array().ok_or("required_keys is a list of strings")?;
                let keys: Option<Vec<String>> = keys.iter().map(|k| k.as_str().map(str::to_owned)).collect();
                keys.filter(|k| !k.is_empty()).map(Self::RequiredKeys).ok_or("required_keys is a list of strings")
            }
            (None, Some(schema)) => {
                check_schema(schema)?;
                Ok(Self::Schema(schema.clone()))
            }
            _ => Err("a contract has either required_keys or schema"),
        }
    }

    /// Checks a 2xx response body.
    pub fn check(&self, body: &[u8]) -> Result<(), Violation> {
        let content = assistant_json(body).ok_or_else(|| Violation("the answer's content is not JSON".into()))?;
        self.check_content(&content)
    }

    /// Checks an answer's content, already read as JSON.
    pub fn check_content(&self, content: &Value) -> Result<(), Violation> {
        match self {
            Self::RequiredKeys(keys) => {
                let object = content.as_object().ok_or_else(|| Violation("the content is not a JSON object".into()))?;
                match keys.iter().find(|k| !object.contains_key(k.as_str())) {
                    Some(missing) => Err(Violation(format!("the content lacks the key \"{missing}\""))),
                    None => Ok(()),
                }
            }
            Self::Schema(schema) => violations(schema, content).into_iter().next().map_or(Ok(()), Err),
        }
    }
}

/// The assistant's text as JSON: OpenAI's first choice or Anthropic's first
/// text block, with an optional Markdown code fence.
pub fn assistant_json(body: &[u8]) -> Option<Value> {
    let reply: Value = serde_json::from_slice(body).ok()?;
    let openai = reply.pointer("/choices/0/message/content").and_then(Value::as_str);
    let anthropic = || {
        reply
            .get("content")?
            .as_array()?
            .iter()
            .find(|b| b.get("type") == Some(&Value::from("text")))?
            .get("text")?
            .as_str()
    };
    content_json(openai.or_else(anthropic)?)
}

/// An assistant's text as JSON, with an optional Markdown code fence.
pub fn content_json(text: &str) -> Option<Value> {
    let text = text.trim();
    let text = match text.strip_prefix("```") {
        Some(fenced) => {
            let body = fenced.trim_start_matches(|c: char| c.is_ascii_alphanumeric());
            body.strip_suffix("```")?.trim()
        }
        None => text,
    };
    serde_json::from_str(text).ok()
}

/// Checks that `schema` uses only the supported subset (see the module).
pub fn check_schema(schema: &Value) -> Result<(), &'static str> {
    let object = schema.as_object().ok_or("a schema is an object")?;
    if object.keys().any(|k| !KEYWORDS.contains(&k.as_str())) {
        return Err("the schema uses a keyword outside the supported subset");
    }
    if let Some(kind) = object.get("type") {
        let names: Vec<&Value> = match kind {
            Value::Array(list) => list.iter().collect(),
            one => vec![one],
        };
        if !names.iter().all(|n| n.as_str().is_some_and(|n| TYPES.contains(&n))) {
            return Err("a schema's type is one of the JSON types");
        }
    }
    if let Some(properties) = object.get("properties") {
        for sub in properties.as_object().ok_or("properties is an object of schemas")?.values() {
            check_schema(sub)?;
        }
    }
    if let Some(required) = object.get("required")
        && !required.as_array().is_some_and(|r| r.iter().all(Value::is_string))
    {
        return Err("required is a list of strings");
    }
    match object.get("additionalProperties") {
        None | Some(Value::Bool(_)) => {}
        Some(sub) => check_schema(sub)?,
    }
    if let Some(items) = object.get("items") {
        check_schema(items)?;
    }
    if object.get("enum").is_some_and(|e| !e.is_array()) {
        return Err("enum is a list");
    }
    for bound in ["minLength", "maxLength", "minItems", "maxItems"] {
        if object.get(bound).is_some_and(|b| b.as_u64().is_none()) {
            return Err("length and item bounds are non-negative integers");
        }
    }
    for bound in ["minimum", "maximum"] {
        if object.get(bound).is_some_and(|b| !b.is_number()) {
            return Err("minimum and maximum are numbers");
        }
    }
    Ok(())
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => {
            value.as_i64().is_some() || value.as_u64().is_some() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

/// Every place where `value` breaks `schema` (already checked by
/// [`Contract::parse`] or [`check_schema`]), as `$.path: what` messages, in
/// document order. Empty when it conforms.
pub fn violations(schema: &Value, value: &Value) -> Vec<Violation> {
    let mut found = Vec::new();
    validate(schema, value, "$", &mut found);
    found
}

/// Collects the violations of `value` at `path` (a JSONPath-like location
/// for the message). A value of the wrong type is not looked into further.
fn validate(schema: &Value, value: &Value, path: &str, found: &mut Vec<Violation>) {
    let mut fail = |what: String| found.push(Violation(format!("{path}: {what}")));
    let Some(schema) = schema.as_object() else { return };
    if let Some(kind) = schema.get("type") {
        let names: Vec<&str> = match kind {
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            one => one.as_str().into_iter().collect(),
        };
        if !names.iter().any(|n| type_matches(n, value)) {
            return fail(format!("expected {}", names.join(" or ")));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        fail("not one of the allowed values".into());
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        fail("not the required value".into());
    }
    if let Some(text) = value.as_str() {
        let chars = text.chars().count() as u64;
        if schema.get("minLength").and_then(Value::as_u64).is_some_and(|min| chars < min) {
            fail("too short".into());
        }
        if schema.get("maxLength").and_then(Value::as_u64).is_some_and(|max| chars > max) {
            fail("too long".into());
        }
    }
    if let Some(number) = value.as_f64() {
        if schema.get("minimum").and_then(Value::as_f64).is_some_and(|min| number < min) {
            fail("below the minimum".into());
        }
        if schema.get("maximum").and_then(Value::as_f64).is_some_and(|max| number > max) {
            fail("above the maximum".into());
        }
    }
    if let Some(items) = value.as_array() {
        let count = items.len() as u64;
        if schema.get("minItems").and_then(Value::as_u64).is_some_and(|min| count < min) {
            fail("too few items".into());
        }
        if schema.get("maxItems").and_then(Value::as_u64).is_some_and(|max| count > max) {
            fail("too many items".into());
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                validate(item_schema, item, &format!("{path}[{i}]"), found);
            }
        }
    }
    if let Some(object) = value.as_object() {
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    found.push(Violation(format!("{path}: lacks \"{name}\"")));
                }
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, member) in object {
            let at = format!("{path}.{name}");
            match (properties.and_then(|p| p.get(name)), schema.get("additionalProperties")) {
                (Some(sub), _) => validate(sub, member, &at, found),
                (None, Some(Value::Bool(false))) => found.push(Violation(format!("{path}: has no \"{name}\" allowed"))),
                (None, Some(sub @ Value::Object(_))) => validate(sub, member, &at, found),
                (None, _) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn openai(content: &str) -> Vec<u8> {
        json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})
            .to_string()
            .into_bytes()
    }

    fn anthropic(text: &str) -> Vec<u8> {
        json!({"type": "message", "content": [{"type": "text", "text": text}]}).to_string().into_bytes()
    }

    #[test]
    fn required_keys_in_either_dialect_and_in_a_fence() {
        let c = Contract::parse(&json!({"required_keys": ["category", "priority"]})).unwrap();
        assert_eq!(c.check(&openai(r#"{"category":"billing","priority":2}"#)), Ok(()));
        assert_eq!(c.check(&anthropic("```json\n{\"category\":\"x\",\"priority\":1}\n```")), Ok(()));
        assert_eq!(
            c.check(&openai(r#"{"category":"billing"}"#)),
            Err(Violation("the content lacks the key \"priority\"".into()))
        );
        assert!(c.check(&openai("Sure! billing")).is_err());
        assert!(c.check(&openai("[1,2]")).is_err());
        assert!(c.check(b"not json").is_err());
    }

    #[test]
    fn schema_subset() {
        let schema = json!({
            "type": "object",
            "required": ["category", "tags"],
            "additionalProperties": false,
            "properties": {
                "category": {"enum": ["billing", "bug"]},
                "score": {"type": "number", "minimum": 0, "maximum": 1},
                "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 3}
            }
        });
        let c = Contract::parse(&json!({"schema": schema})).unwrap();
        assert_eq!(c.check(&openai(r#"{"category":"bug","tags":["a"],"score":0.5}"#)), Ok(()));
        let bad = |content: &str| c.check(&openai(content)).unwrap_err().0;
        assert_eq!(bad(r#"{"category":"other","tags":[]}"#), "$.category: not one of the allowed values");
        assert_eq!(bad(r#"{"category":"bug"}"#), "$: lacks \"tags\"");
        assert_eq!(bad(r#"{"category":"bug","tags":[""]}"#), "$.tags[0]: too short");
        assert_eq!(bad(r#"{"category":"bug","tags":[],"score":2}"#), "$.score: above the maximum");
        assert_eq!(bad(r#"{"category":"bug","tags":[],"extra":1}"#), "$: has no \"extra\" allowed");
        assert_eq!(bad(r#"{"category":"bug","tags":["a","b","c","d"]}"#), "$.tags: too many items");
        // Every violation, in document order (what a job type's input error lists).
        let all = violations(&schema, &json!({"category": "other", "tags": [""], "extra": 1}));
        let all: Vec<&str> = all.iter().map(|v| v.0.as_str()).collect();
        assert_eq!(
            all,
            ["$.category: not one of the allowed values", "$: has no \"extra\" allowed", "$.tags[0]: too short"]
        );
    }

    #[test]
    fn unsupported_keywords_and_shapes_are_refused_when_read() {
        assert!(Contract::parse(&json!({"schema": {"type": "object", "pattern": "x"}})).is_err());
        assert!(Contract::parse(&json!({"schema": {"properties": {"a": {"oneOf": []}}}})).is_err());
        assert!(Contract::parse(&json!({"schema": {"type": "thing"}})).is_err());
        assert!(Contract::parse(&json!({"required_keys": []})).is_err());
        assert!(Contract::parse(&json!({"required_keys": ["a"], "schema": {}})).is_err());
        assert!(Contract::parse(&json!("a")).is_err());
    }
}
