//! Reading an LLM provider's reply: the hint that makes a 2xx final but
//! unusable (a content filter, an empty completion) and the token usage the
//! audit trail records. Read once per reply.

use serde::{Deserialize, Serialize};

/// Token usage reported by an LLM provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens in the completion.
    pub completion_tokens: u64,
    /// Their sum, as the provider reported it.
    pub total_tokens: u64,
}

/// What the body of a 2xx LLM answer said, as far as retrying cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyHint {
    /// Nothing notable.
    #[default]
    None,
    /// `finish_reason == "content_filter"`: retrying sends the same prompt
    /// into the same filter, and pays again.
    ContentFilter,
    /// A completion with no content: a paid answer, not a transient error.
    EmptyCompletion,
}

/// What an LLM response body says, read in one pass: the hint [`crate::classify::classify`]
/// cares about and the token usage the audit trail records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyFacts {
    /// What the body says for retrying (see [`BodyHint`]).
    pub hint: BodyHint,
    /// The OpenAI-style `usage` object, when present and well-formed.
    pub usage: Option<Usage>,
}

/// Reads an LLM response body once for its [`ReplyFacts`].
pub fn read_reply(body: &[u8]) -> ReplyFacts {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return ReplyFacts::default();
    };
    let usage = value.get("usage").and_then(|u| Usage::deserialize(u).ok());
    ReplyFacts { hint: hint_of(&value), usage }
}

/// The hint of an OpenAI-style body: `choices[].finish_reason ==
/// "content_filter"`, or every choice with empty content and no tool calls.
/// Bodies that are not chat or completion objects (embeddings, say) give
/// [`BodyHint::None`].
fn hint_of(value: &serde_json::Value) -> BodyHint {
    let Some(choices) = value.get("choices").and_then(|c| c.as_array()) else {
        return BodyHint::None;
    };
    if choices.iter().any(|c| c.get("finish_reason").and_then(|f| f.as_str()) == Some("content_filter")) {
        return BodyHint::ContentFilter;
    }
    let is_empty = |choice: &serde_json::Value| {
        let message = choice.get("message");
        let text = message
            .and_then(|m| m.get("content"))
            .or_else(|| choice.get("text"))
            .and_then(|t| t.as_str())
            .unwrap_or("");
        let has_tool_calls =
            message.and_then(|m| m.get("tool_calls")).and_then(|t| t.as_array()).is_some_and(|calls| !calls.is_empty());
        text.trim().is_empty() && !has_tool_calls
    };
    if choices.is_empty() || choices.iter().all(is_empty) { BodyHint::EmptyCompletion } else { BodyHint::None }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn hint(body: &[u8]) -> BodyHint {
        read_reply(body).hint
    }

    #[test]
    fn hints_and_usage() {
        let filtered = br#"{"choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":""}}]}"#;
        assert_eq!(hint(filtered), BodyHint::ContentFilter);
        let empty = br#"{"choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"  "}}]}"#;
        assert_eq!(hint(empty), BodyHint::EmptyCompletion);
        let tool =
            br#"{"choices":[{"finish_reason":"tool_calls","message":{"content":null,"tool_calls":[{"id":"1"}]}}]}"#;
        assert_eq!(hint(tool), BodyHint::None);
        let fine = br#"{"choices":[{"finish_reason":"stop","message":{"content":"billing"}}]}"#;
        assert_eq!(hint(fine), BodyHint::None);
        assert_eq!(hint(br#"{"data":[{"embedding":[0.1]}]}"#), BodyHint::None);
        assert_eq!(hint(b"not json"), BodyHint::None);
        let with_usage = br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#;
        let facts = read_reply(with_usage);
        assert_eq!(facts.hint, BodyHint::None);
        assert_eq!(facts.usage, Some(Usage { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }));
        assert_eq!(read_reply(br#"{"usage":{"prompt_tokens":"many"}}"#).usage, None);
    }
}
