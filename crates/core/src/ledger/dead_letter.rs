//! What a dead letter records as the reason a job (or one of its effects)
//! needs an operator: a short, human sentence, never a secret.
//!
//! A provider's error may quote the credential it refused (OpenAI's 401
//! says "Incorrect API key provided: sk-proj-…"), and dead letters are shown
//! in the console and sent in alerts: every credential-looking word is
//! replaced before the detail leaves the Ledger.

use serde_json::Value;

use crate::effect::{Effect, EffectState};

/// The longest detail a dead letter keeps, in characters.
pub const MAX_DETAIL_CHARS: usize = 300;

/// What replaces a credential in a detail.
pub const REDACTED: &str = "[redacted]";

/// The reason in an error body: a problem's `detail` (onejob's own), a
/// provider's `error.message` (OpenAI's and Anthropic's shape), or else the
/// start of the body; redacted, at most [`MAX_DETAIL_CHARS`].
pub fn detail_of_body(body: &[u8]) -> String {
    let value: Option<Value> = serde_json::from_slice(body).ok();
    let message = value.as_ref().and_then(|v| {
        v.get("detail").or_else(|| v.pointer("/error/message")).and_then(Value::as_str).map(str::to_owned)
    });
    let text = message.unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    bounded(&redact(&text))
}

/// Why an effect needs an operator, as its dead letter says it:
/// `effect <name> (<state>): <why>`.
pub fn detail_of_effect(effect: &Effect) -> String {
    let why = match effect.state {
        EffectState::Conflict => "the destination holds a different payload under its delivery id".to_owned(),
        EffectState::Unknown => "it may or may not have arrived, and the receiver has no receipt URL".to_owned(),
        _ => effect.attempts.last().and_then(|a| a.detail.clone()).unwrap_or_else(|| "it failed".into()),
    };
    bounded(&redact(&format!("effect {} ({}): {why}", effect.name, effect.state.as_str())))
}

/// `text` with every credential-looking word replaced by [`REDACTED`]: a
/// word that starts with an API key's prefix (`sk-`, `sk_`, as OpenAI's and
/// Anthropic's keys do, also inside quotes or after `key=`), and the word
/// after `Bearer`.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut after_bearer = false;
    while !rest.is_empty() {
        let run = rest.find(|c: char| !is_key_char(c)).unwrap_or(rest.len());
        // A sentence's full stop after a key is not part of it.
        let word_len = rest[..run].trim_end_matches('.').len();
        if word_len == 0 {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let word = &rest[..word_len];
        if after_bearer || looks_like_key(word) {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        after_bearer = word.eq_ignore_ascii_case("bearer");
        rest = &rest[word_len..];
    }
    out
}

/// Characters of a key-like word (keys are base64url-ish; `*` is how
/// providers mask the middle of one).
fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*' | '.')
}

fn looks_like_key(word: &str) -> bool {
    // `key=sk-…` or `x.sk-…` is one word here: look for the prefix anywhere
    // a word boundary of the key itself could be.
    word.match_indices("sk").any(|(at, _)| {
        let starts_word = at == 0 || !word.as_bytes()[at - 1].is_ascii_alphanumeric();
        let prefixed = matches!(word.as_bytes().get(at + 2), Some(b'-' | b'_'));
        starts_word && prefixed
    })
}

fn bounded(text: &str) -> String {
    text.chars().take(MAX_DETAIL_CHARS).collect()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn a_body_s_reason_is_its_problem_detail_or_provider_message_or_its_start() {
        assert_eq!(detail_of_body(br#"{"type":"/onejob/problems/x","detail":"gave up"}"#), "gave up");
        assert_eq!(
            detail_of_body(br#"{"error":{"message":"try again later","type":"server_error"}}"#),
            "try again later"
        );
        assert_eq!(
            detail_of_body(br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#),
            "Overloaded"
        );
        assert_eq!(detail_of_body(b"upstream said no"), "upstream said no");
        assert_eq!(detail_of_body(&[b'x'; 1000]).chars().count(), MAX_DETAIL_CHARS);
        assert_eq!(detail_of_body("é".repeat(400).as_bytes()).chars().count(), MAX_DETAIL_CHARS);
    }

    #[test]
    fn credentials_never_reach_a_dead_letter() {
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-proj-abc123****wxyz. You can find your API key at https://example.invalid/keys."}}"#;
        let detail = detail_of_body(body);
        assert!(!detail.contains("sk-proj"), "{detail}");
        assert!(detail.starts_with("Incorrect API key provided: [redacted]. You can find"), "{detail}");
        for (text, leaked) in [
            ("invalid x-api-key 'sk-ant-api03-secret'", "sk-ant"),
            ("key=sk_live_0123456789 refused", "sk_live"),
            ("(sk-abcdef) was revoked", "sk-abc"),
            ("\"sk-quoted-key\"", "sk-quoted"),
            ("Authorization: Bearer eyJhbGciOi.payload.sig failed", "eyJhbGciOi"),
        ] {
            let redacted = redact(text);
            assert!(!redacted.contains(leaked), "{text} → {redacted}");
            assert!(redacted.contains(REDACTED), "{text} → {redacted}");
        }
        // Words that merely contain "sk" stay.
        assert_eq!(redact("ask the desk-clerk: task_queue"), "ask the desk-clerk: task_queue");
    }
}
