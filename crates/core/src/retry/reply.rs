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

/// What an LLM response body says, read in one pass: the hint [`crate::retry::classify::classify`]
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
    let usage = value.get("usage").and_then(|u| Usage::deserialize(u).ok().or_else(|| anthropic_usage(u)));
    let hint = if value.get("type").and_then(|t| t.as_str()) == Some("message") {
        anthropic_hint(&value)
    } else {
        hint_of(&value)
    };
    ReplyFacts { hint, usage }
}

/// Anthropic's `usage`: `input_tokens` and `output_tokens` (no total).
fn anthropic_usage(usage: &serde_json::Value) -> Option<Usage> {
    let prompt = usage.get("input_tokens")?.as_u64()?;
    let completion = usage.get("output_tokens")?.as_u64()?;
    Some(Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion })
}

/// The hint of an Anthropic message: `stop_reason == "refusal"` is a
/// content filter; no text and no tool use is an empty completion.
fn anthropic_hint(value: &serde_json::Value) -> BodyHint {
    if value.get("stop_reason").and_then(|r| r.as_str()) == Some("refusal") {
        return BodyHint::ContentFilter;
    }
    let blocks = value.get("content").and_then(|c| c.as_array()).map_or(&[][..], |c| c.as_slice());
    let says_something = blocks.iter().any(|block| match block.get("type").and_then(|t| t.as_str()) {
        Some("text") => block.get("text").and_then(|t| t.as_str()).is_some_and(|t| !t.trim().is_empty()),
        _ => true,
    });
    if says_something { BodyHint::None } else { BodyHint::EmptyCompletion }
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

    #[test]
    fn anthropic_messages() {
        let fine = br#"{"type":"message","content":[{"type":"text","text":"billing"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":3}}"#;
        let facts = read_reply(fine);
        assert_eq!(facts.hint, BodyHint::None);
        assert_eq!(facts.usage, Some(Usage { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 }));
        assert_eq!(hint(br#"{"type":"message","content":[],"stop_reason":"refusal"}"#), BodyHint::ContentFilter);
        assert_eq!(hint(br#"{"type":"message","content":[{"type":"text","text":" "}]}"#), BodyHint::EmptyCompletion);
        assert_eq!(hint(br#"{"type":"message","content":[{"type":"tool_use","id":"t"}]}"#), BodyHint::None);
    }
}
