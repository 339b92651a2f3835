//! A request body as every route reads it, decided over its head and its
//! bytes: a JSON media type (else `415`), at most the deployment's
//! `MAX_BODY_BYTES` — declared (`Content-Length`) or counted on the bytes
//! actually read, as a chunked body has none to trust — (else `413`), and
//! JSON through core's strict reader ([`super::parse_strict`]: `400`). A
//! keyed POST ([`keyed_post`]) is checked in one order: method (`405`),
//! `Idempotency-Key` (`400`), media type, declared length. The edge reads
//! the headers, asks [`BodyRead::of`] or [`keyed_post`], and reads the
//! bytes as the answer says.

use super::{Method, Refusal, declared_length, expect, json_content_type, key_of, missing_key, within_limit};
use crate::identity::key::IdempotencyKey;

/// A body's headers as the request sent them.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyHead<'a> {
    /// `Content-Type`.
    pub content_type: Option<&'a str>,
    /// `Content-Length`.
    pub content_length: Option<&'a str>,
}

/// How to read a body whose head passed: its content type, and whether the
/// runtime delivers it whole or it is counted chunk by chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyRead {
    /// The body's content type (`application/json` when none was named).
    pub content_type: String,
    /// The length it declared (within the limit), if any.
    declared: Option<u64>,
    /// The deployment's limit.
    limit: u64,
}

impl BodyRead {
    /// The read of a body with `head`, or its refusal: another media type
    /// (`415`), a declared length over `limit` (`413`).
    pub fn of(head: &BodyHead, limit: u64) -> Result<BodyRead, Refusal> {
        let content_type = json_content_type(head.content_type)?;
        let declared = declared_length(head.content_length, limit)?;
        Ok(BodyRead { content_type, declared, limit })
    }

    /// Whether the body is read in one go: a declared length within the
    /// limit is all the runtime delivers (it frames the body by it).
    pub fn whole(&self) -> bool {
        self.declared.is_some()
    }

    /// `Ok` while `read` bytes and the next `chunk` stay within the limit,
    /// else the `413` (reading stops there: nothing past it is buffered).
    pub fn take(&self, read: usize, chunk: usize) -> Result<(), Refusal> {
        within_limit(read, chunk, self.limit)
    }
}

/// A keyed POST's head: its method, its `Idempotency-Key` and its body's head.
#[derive(Debug, Clone, Copy)]
pub struct PostHead<'a> {
    /// The request's method.
    pub method: &'a str,
    /// `Idempotency-Key`.
    pub idempotency_key: Option<&'a str>,
    /// The body's headers.
    pub body: BodyHead<'a>,
}

/// A keyed POST that passed its checks: its key (`None` when one is to be
/// derived) and how to read its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedPost {
    /// The key sent, or `None` when the route may derive one.
    pub key: Option<IdempotencyKey>,
    /// How to read the body.
    pub body: BodyRead,
}

/// The checks every keyed POST passes before its body is read, in order:
/// `POST` (`405`), an `Idempotency-Key` (or none, when `may_derive`: the
/// route and `KEYLESS` allow a derived one; else `400`), a JSON media type
/// (`415`), a declared length within `limit` (`413`).
pub fn keyed_post(head: &PostHead, may_derive: bool, limit: u64) -> Result<KeyedPost, Refusal> {
    expect(head.method, Method::Post)?;
    let key = key_of(head.idempotency_key, may_derive)?;
    Ok(KeyedPost { key, body: BodyRead::of(&head.body, limit)? })
}

/// [`keyed_post`] for a route whose requests are always keyed (a job
/// type's run: its effects happen once per intent): the key it sent.
pub fn always_keyed(head: &PostHead, limit: u64) -> Result<(IdempotencyKey, BodyRead), Refusal> {
    let KeyedPost { key, body } = keyed_post(head, false, limit)?;
    // `key_of` refuses a missing key when none may be derived: this only
    // spells that out in the type.
    let key = key.ok_or_else(|| Refusal::from(missing_key()))?;
    Ok((key, body))
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::wire::ProblemType;

    const KEY: &str = "0123456789abcdef-key";

    fn kind(refusal: Refusal) -> ProblemType {
        refusal.problem().kind
    }

    fn head<'a>(
        method: &'a str,
        key: Option<&'a str>,
        content_type: Option<&'a str>,
        length: Option<&'a str>,
    ) -> PostHead<'a> {
        PostHead { method, idempotency_key: key, body: BodyHead { content_type, content_length: length } }
    }

    #[test]
    fn a_body_without_a_content_type_is_json_and_another_media_type_is_a_415() {
        let read = BodyRead::of(&BodyHead::default(), 10).unwrap();
        assert_eq!(read.content_type, "application/json");
        assert!(!read.whole(), "no declared length: counted as it arrives");
        let vendor =
            BodyRead::of(&BodyHead { content_type: Some("application/vnd.x+json"), ..BodyHead::default() }, 10);
        assert_eq!(vendor.unwrap().content_type, "application/vnd.x+json");
        let text = BodyRead::of(&BodyHead { content_type: Some("text/plain"), ..BodyHead::default() }, 10);
        assert_eq!(kind(text.unwrap_err()), ProblemType::UnsupportedMediaType);
    }

    #[test]
    fn a_declared_length_within_the_limit_is_read_whole_and_one_over_it_is_a_413() {
        let at = BodyRead::of(&BodyHead { content_length: Some("10"), ..BodyHead::default() }, 10).unwrap();
        assert!(at.whole());
        let over = BodyRead::of(&BodyHead { content_length: Some("11"), ..BodyHead::default() }, 10).unwrap_err();
        assert_eq!(kind(over.clone()), ProblemType::PayloadTooLarge);
        assert_eq!(over.problem().max_bytes, Some(10));
        // Not a number: nothing declared, so the bytes are counted.
        let odd = BodyRead::of(&BodyHead { content_length: Some("ten"), ..BodyHead::default() }, 10).unwrap();
        assert!(!odd.whole());
    }

    #[test]
    fn a_counted_body_is_refused_at_the_chunk_that_passes_the_limit() {
        let read = BodyRead::of(&BodyHead::default(), 10).unwrap();
        assert_eq!(read.take(0, 10), Ok(()));
        assert_eq!(read.take(4, 6), Ok(()));
        assert_eq!(kind(read.take(4, 7).unwrap_err()), ProblemType::PayloadTooLarge);
    }

    #[test]
    fn a_keyed_post_is_checked_method_then_key_then_media_type_then_length() {
        let all_wrong = head("GET", Some("short"), Some("text/plain"), Some("99"));
        assert!(matches!(keyed_post(&all_wrong, true, 10), Err(Refusal::Method { .. })));
        let key_wrong = head("POST", Some("short"), Some("text/plain"), Some("99"));
        assert_eq!(kind(keyed_post(&key_wrong, true, 10).unwrap_err()), ProblemType::InvalidIdempotencyKey);
        let media_wrong = head("POST", Some(KEY), Some("text/plain"), Some("99"));
        assert_eq!(kind(keyed_post(&media_wrong, true, 10).unwrap_err()), ProblemType::UnsupportedMediaType);
        let too_long = head("POST", Some(KEY), None, Some("99"));
        assert_eq!(kind(keyed_post(&too_long, true, 10).unwrap_err()), ProblemType::PayloadTooLarge);
        let fine = keyed_post(&head("POST", Some(KEY), None, Some("9")), true, 10).unwrap();
        assert_eq!(fine.key.unwrap().as_str(), KEY);
        assert!(fine.body.whole());
    }

    #[test]
    fn a_missing_key_is_derived_only_where_the_route_may_and_an_always_keyed_route_refuses_it() {
        let keyless = head("POST", None, None, None);
        assert_eq!(keyed_post(&keyless, true, 10).unwrap().key, None);
        assert_eq!(kind(keyed_post(&keyless, false, 10).unwrap_err()), ProblemType::MissingIdempotencyKey);
        assert_eq!(kind(always_keyed(&keyless, 10).unwrap_err()), ProblemType::MissingIdempotencyKey);
        let (key, body) = always_keyed(&head("POST", Some(KEY), None, None), 10).unwrap();
        assert_eq!(key.as_str(), KEY);
        assert_eq!(body.content_type, "application/json");
    }
}
