//! What the gateway reads of a request's JSON body before it calls a
//! provider: the `model` that picks the route and whether it asks for a
//! stream, and the body with another `model` when a route's step names
//! one. The rest of the body is skipped, never built.

use serde_json::{Map, Value};

/// A request body's `model` and `stream`, read alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestFacts {
    /// The model asked for (a string `model`).
    pub model: Option<String>,
    /// `"stream": true`.
    pub stream: bool,
}

impl RequestFacts {
    /// A body that is not a JSON object (serde would read `["gpt-x"]` by
    /// position), or whose `model` is not a string or `stream` not a
    /// boolean, has neither.
    pub fn of(body: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct Loose {
            #[serde(default)]
            model: Option<Value>,
            #[serde(default)]
            stream: Option<Value>,
        }
        if body.trim_ascii_start().first() != Some(&b'{') {
            return Self::default();
        }
        let Ok(Loose { model, stream }) = serde_json::from_slice::<Loose>(body) else { return Self::default() };
        Self {
            model: model.and_then(|m| m.as_str().map(str::to_owned)),
            stream: stream.and_then(|s| s.as_bool()).unwrap_or(false),
        }
    }
}

/// `body` with its `model` set to `model`, when that changes it: `None`
/// when the body already asks for `model` (`asked`), or is not a JSON
/// object (it is sent as it came). A rewritten body is serialised again:
/// its members may come out in another order, which no provider's API
/// depends on.
pub fn with_model(body: &[u8], asked: Option<&str>, model: &str) -> Option<Vec<u8>> {
    if asked == Some(model) {
        return None;
    }
    let mut request = serde_json::from_slice::<Map<String, Value>>(body).ok()?;
    request.insert("model".into(), Value::from(model));
    serde_json::to_vec(&request).ok()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn model_and_stream_are_read_from_an_object_only() {
        let facts = RequestFacts::of(br#" {"model":"gpt-x","stream":true,"messages":[{"role":"user"}]}"#);
        assert_eq!(facts, RequestFacts { model: Some("gpt-x".into()), stream: true });
        assert_eq!(RequestFacts::of(br#"["gpt-x", true]"#), RequestFacts::default(), "not by position");
        assert_eq!(RequestFacts::of(b"not json"), RequestFacts::default());
        assert_eq!(RequestFacts::of(br#"{"model":"m""#), RequestFacts::default(), "cut short");
    }

    #[test]
    fn a_model_or_stream_of_another_type_is_neither() {
        let facts = RequestFacts::of(br#"{"model":7,"stream":"yes"}"#);
        assert_eq!(facts, RequestFacts::default());
        assert_eq!(RequestFacts::of(br#"{"model":"m"}"#), RequestFacts { model: Some("m".into()), stream: false });
    }

    #[test]
    fn the_body_is_rewritten_only_for_another_model() {
        let body = br#"{"model":"a","messages":[]}"#;
        assert_eq!(with_model(body, Some("a"), "a"), None, "already asks for it: sent as it came");
        let rewritten = with_model(body, Some("a"), "b").expect("rewritten");
        let value: Value = serde_json::from_slice(&rewritten).expect("json");
        assert_eq!(value, serde_json::json!({"model": "b", "messages": []}));
        let added = with_model(br#"{"messages":[]}"#, None, "b").expect("a model added");
        assert_eq!(serde_json::from_slice::<Value>(&added).expect("json")["model"], "b");
        assert_eq!(with_model(b"[1]", None, "b"), None, "not an object: sent as it came");
    }
}
