//! What a dead letter records as the reason a job (or one of its effects)
//! needs an operator: a short, human sentence, never a secret.
//!
//! A provider's error may quote the credential it refused (OpenAI's 401
//! says "Incorrect API key provided: sk-proj-…"), and dead letters are shown
//! in the console and sent in alerts: every credential-looking word is
//! replaced before the detail leaves the Ledger.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::job::Job;
use crate::job_type::effect::{Effect, EffectState};
use crate::ledger::background::outbox::{self, Outbox};
use crate::retry::classify::ErrorClass;

/// The class of a dead letter about one of a job type's effects.
pub const EFFECT_CLASS: &str = "effect";

/// The longest detail a dead letter keeps, in characters.
pub const MAX_DETAIL_CHARS: usize = 300;

/// What replaces a credential in a detail.
pub const REDACTED: &str = "[redacted]";

/// What a dead letter records about a job: whether it needs an operator
/// now, the class of its cause, the last status, why, and its attempts.
/// The Ledger answers it to the queue's consumer (`Facts`), which records
/// the dead letter in the operators' index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadFacts {
    /// The job needs an operator ([`outbox::needs_operator`]).
    pub dead: bool,
    /// The cause's class: an error class's name, [`outbox::UNDELIVERED`],
    /// `contract`, an effect's, or `unknown`.
    pub error_class: String,
    /// The last attempt's status.
    pub last_status: Option<u16>,
    /// The last error's message (the provider's, or onejob's problem detail), redacted.
    pub detail: String,
    /// Its attempts so far.
    pub attempts: u32,
}

impl DeadFacts {
    /// What a dead letter of `job` records at `now_ms`: a job no queue
    /// delivery took is [`outbox::UNDELIVERED`]; any other names its
    /// last attempt's class and the reason in that attempt's stored body,
    /// which `last_body` reads (only then, by its attempt's number).
    pub fn of_job(job: &Job, outbox: &Outbox, now_ms: u64, last_body: impl FnOnce(u32) -> Option<Vec<u8>>) -> Self {
        let last = job.attempts().last();
        let (error_class, detail) = if outbox::undelivered(job, outbox) {
            let detail = format!("no queue delivery took any of its {} messages", outbox.sends());
            (outbox::UNDELIVERED.to_owned(), detail)
        } else {
            let detail = last.and_then(|a| last_body(a.number)).map(|body| detail_of_body(&body)).unwrap_or_default();
            (last.and_then(|a| a.error_class).map_or_else(|| "unknown".into(), ErrorClass::name), detail)
        };
        Self {
            dead: outbox::needs_operator(job, outbox, now_ms),
            error_class,
            last_status: last.and_then(|a| a.status),
            detail,
            attempts: job.attempts().len() as u32,
        }
    }

    /// A job type's answer that broke its output contract: the answer is
    /// in (attempt `attempt`, status `status`), its effects will not run.
    pub fn of_broken_contract(status: u16, detail: String, attempt: u32) -> Self {
        Self { dead: true, error_class: "contract".into(), last_status: Some(status), detail, attempts: attempt }
    }
}

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

    mod facts {
        #[cfg(target_arch = "wasm32")]
        use wasm_bindgen_test::wasm_bindgen_test as test;

        use super::super::*;
        use crate::job::AttemptReport;
        use crate::job::test_job;

        /// A background job whose provider refused the key (`status`): dead at once.
        fn dead(status: u16) -> Job {
            let mut job = test_job::kept_for(1_000_000);
            job.run_in_background(0);
            let ticket = job.claim(job.version(), 10, "p", None).unwrap();
            let report =
                AttemptReport { status: Some(status), error_class: Some(ErrorClass::Auth), ..Default::default() };
            job.give_up(ticket, 20, report).unwrap();
            job
        }

        #[test]
        fn a_dead_job_s_letter_names_its_last_attempt_s_class_status_and_redacted_reason() {
            let job = dead(401);
            let mut asked = None;
            let facts = DeadFacts::of_job(&job, &Outbox::default(), 30, |attempt| {
                asked = Some(attempt);
                Some(br#"{"error":{"message":"bad key sk-secret-1"}}"#.to_vec())
            });
            assert_eq!(asked, Some(1), "the last attempt's body, by its number");
            assert_eq!(facts.error_class, "auth");
            assert_eq!((facts.last_status, facts.attempts), (Some(401), 1));
            assert_eq!(facts.detail, "bad key [redacted]");
            assert!(facts.dead, "a dead background job needs an operator");
        }

        #[test]
        fn a_job_without_attempts_is_unknown_and_reads_no_body() {
            let job = test_job::kept_for(1_000_000);
            let facts = DeadFacts::of_job(&job, &Outbox::default(), 30, |_| panic!("no attempt, no body"));
            assert_eq!((facts.error_class.as_str(), facts.detail.as_str(), facts.attempts), ("unknown", "", 0));
            assert!(!facts.dead);
        }

        #[test]
        fn a_broken_contract_is_dead_with_its_answer_s_status() {
            let facts = DeadFacts::of_broken_contract(200, "not JSON".into(), 2);
            assert_eq!(
                facts,
                DeadFacts {
                    dead: true,
                    error_class: "contract".into(),
                    last_status: Some(200),
                    detail: "not JSON".into(),
                    attempts: 2
                }
            );
        }
    }
}
