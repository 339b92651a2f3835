//! The fingerprint of a request: what "the same request" means.
//!
//! A key reused with another payload must be refused (422), never silently
//! replayed; a key reused with the *same* payload, spelled differently, must be
//! recognised. So the fingerprint hashes the method, the path and the body's
//! RFC 8785 canonical form (see [`crate::identity::canonical`]); a body that is not JSON
//! is hashed as its bytes.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::identity::canonical::{CanonicalError, Numbers, RustNumbers, canonical_form, canonicalize_with};
use crate::identity::digest;

/// How the body of a request is to be read for fingerprinting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// A JSON body: fingerprinted by its canonical form, so key order, number
    /// spelling and escapes do not matter.
    Json(&'a [u8]),
    /// Any other body: fingerprinted byte for byte.
    Bytes(&'a [u8]),
}

/// SHA-256 over a request's method, path and canonical body, shown as 64
/// lower-case hex digits.
/// Read back (from a hand-off or storage) only if it is 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Fingerprint(String);

impl TryFrom<String> for Fingerprint {
    type Error = &'static str;
    fn try_from(text: String) -> Result<Self, &'static str> {
        Self::parse(&text).ok_or("a fingerprint is 64 lower-case hex digits")
    }
}

impl From<Fingerprint> for String {
    fn from(fingerprint: Fingerprint) -> String {
        fingerprint.0
    }
}

/// Domain separation: these bytes start every fingerprinted message, so a
/// fingerprint can never collide with another hash this crate computes.
const DOMAIN: &[u8] = b"onejob/fingerprint/v1";

impl Fingerprint {
    /// Fingerprints a request. Fails only when a JSON body is not valid JSON
    /// (or is one RFC 8785 refuses: duplicate names, lone surrogates, too deep).
    pub fn of_request(method: &str, path: &str, body: Body<'_>) -> Result<Self, CanonicalError> {
        Self::of_request_with(method, path, body, &RustNumbers)
    }

    /// [`Fingerprint::of_request`], with the body's numbers read and written
    /// by `numbers` (the browser SDK passes the JavaScript engine's own).
    pub fn of_request_with(
        method: &str,
        path: &str,
        body: Body<'_>,
        numbers: &dyn Numbers,
    ) -> Result<Self, CanonicalError> {
        match body {
            Body::Json(bytes) => Ok(Self::of_canonical(method, path, &canonicalize_with(bytes, numbers)?)),
            Body::Bytes(bytes) => Ok(Self::of_bytes(method, path, bytes)),
        }
    }

    /// A request with a JSON body when its body is JSON, else with its bytes:
    /// [`Fingerprint::of_request_with`] of [`Body::Json`], or when that fails
    /// [`Fingerprint::of_bytes`]. What the browser SDK computes for any body
    /// (the gateway refuses one that is not JSON anyway); it has no use for
    /// why a body is not JSON, so no reason is built, nor its text linked.
    pub fn of_json_or_bytes(method: &str, path: &str, body: &[u8], numbers: &dyn Numbers) -> Self {
        match canonical_form::<()>(body, numbers) {
            Ok(canonical) => Self::of_canonical(method, path, &canonical),
            Err(()) => Self::of_bytes(method, path, body),
        }
    }

    fn of_canonical(method: &str, path: &str, canonical: &str) -> Self {
        Self::from_parts(&[
            DOMAIN,
            method.to_ascii_uppercase().as_bytes(),
            path.as_bytes(),
            b"json",
            canonical.as_bytes(),
        ])
    }

    /// Fingerprints a request whose body is taken byte for byte (never fails).
    pub fn of_bytes(method: &str, path: &str, body: &[u8]) -> Self {
        Self::from_parts(&[DOMAIN, method.to_ascii_uppercase().as_bytes(), path.as_bytes(), b"bytes", body])
    }

    /// Fingerprints a request given by its URL (absolute, or a path with an
    /// optional query): the one definition of a request's identity that the
    /// SDK and the edge share. The path **and** the query count (two
    /// `?api-version=` values are two requests); a fragment never does.
    pub fn of_url(method: &str, url: &str, body: Body<'_>) -> Result<Self, CanonicalError> {
        Self::of_request(method, &request_target(url), body)
    }

    /// [`Fingerprint::of_url`], with the body's numbers handled by `numbers`.
    pub fn of_url_with(method: &str, url: &str, body: Body<'_>, numbers: &dyn Numbers) -> Result<Self, CanonicalError> {
        Self::of_request_with(method, &request_target(url), body, numbers)
    }

    fn from_parts(parts: &[&[u8]]) -> Self {
        Self(digest::framed_sha256_hex(parts))
    }

    /// Accepts a fingerprint that was stored or sent as text; `None` unless it
    /// is 64 lower-case hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        (text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .then(|| Self(text.to_owned()))
    }

    /// The fingerprint as 64 lower-case hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The part of a URL that identifies a request: the path and the query,
/// without scheme, host or fragment (`/v1/x?y=1` of
/// `https://h.example/v1/x?y=1#z`); `/` when there is no path.
pub fn request_target(url: &str) -> String {
    // (Byte searches and `get`, not `str` patterns and indexing: the browser
    // SDK then links neither a substring searcher nor a panic path.)
    let scheme_end = url.as_bytes().windows(3).position(|w| w == b"://");
    let target = match scheme_end.and_then(|i| url.get(i + 3..)) {
        Some(rest) => {
            rest.bytes().position(|b| matches!(b, b'/' | b'?' | b'#')).and_then(|i| rest.get(i..)).unwrap_or("")
        }
        None => url,
    };
    let target = target.split('#').next().unwrap_or(target);
    if target.starts_with('/') { target.to_owned() } else { ["/", target].concat() }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn json(body: &str) -> Fingerprint {
        Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(body.as_bytes())).unwrap()
    }

    #[test]
    fn json_or_bytes_is_the_json_identity_or_else_the_bytes_one() {
        let deep = "[".repeat(crate::identity::canonical::MAX_DEPTH + 1);
        let bodies: [&[u8]; 10] = [
            br#"{"b":1,"a":[1.0,"\u00e9"]}"#,
            b"[]",
            b"",
            b"not json",
            br#"{"a":1,"a":2}"#,
            br#""\ud800""#,
            b"[1e999]",
            b"\xff\xfe",
            b"{} {}",
            deep.as_bytes(),
        ];
        for body in bodies {
            let expected = Fingerprint::of_request_with("post", "/v1/x?q=1", Body::Json(body), &RustNumbers)
                .unwrap_or_else(|_| Fingerprint::of_bytes("post", "/v1/x?q=1", body));
            assert_eq!(Fingerprint::of_json_or_bytes("post", "/v1/x?q=1", body, &RustNumbers), expected, "{body:?}");
        }
    }

    #[test]
    fn spelling_does_not_matter_meaning_does() {
        assert_eq!(json(r#"{"a":1,"b":[true,"x"]}"#), json(r#" { "b" : [ true , "\u0078" ] , "a" : 1.0 } "#));
        assert_eq!(json(r#"{"t":100}"#), json(r#"{"t":1e2}"#));
        assert_ne!(json(r#"{"a":1}"#), json(r#"{"a":2}"#));
        assert_ne!(json(r#"{"a":1}"#), json(r#"{"a":"1"}"#));
    }

    #[test]
    fn method_path_and_body_kind_are_part_of_the_identity() {
        let body = br#"{"a":1}"#;
        let base = Fingerprint::of_request("POST", "/v1/x", Body::Json(body)).unwrap();
        assert_ne!(base, Fingerprint::of_request("PUT", "/v1/x", Body::Json(body)).unwrap());
        assert_ne!(base, Fingerprint::of_request("POST", "/v1/y", Body::Json(body)).unwrap());
        assert_ne!(base, Fingerprint::of_request("POST", "/v1/x", Body::Bytes(body)).unwrap());
        assert_eq!(base, Fingerprint::of_request("post", "/v1/x", Body::Json(body)).unwrap());
    }

    #[test]
    fn framing_is_unambiguous() {
        let a = Fingerprint::of_request("POST", "/v1/ab", Body::Bytes(b"c")).unwrap();
        let b = Fingerprint::of_request("POST", "/v1/a", Body::Bytes(b"bc")).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn bytes_bodies_are_hashed_verbatim() {
        let a = Fingerprint::of_request("POST", "/v1/x", Body::Bytes(b"{\"a\":1}")).unwrap();
        let b = Fingerprint::of_request("POST", "/v1/x", Body::Bytes(b"{ \"a\":1}")).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn invalid_json_is_a_typed_error() {
        let err = Fingerprint::of_request("POST", "/", Body::Json(b"{\"a\":1,\"a\":2}")).unwrap_err();
        assert_eq!(err, CanonicalError::DuplicateName { name: "a".into() });
    }

    #[test]
    fn the_query_is_part_of_the_identity_the_host_and_fragment_are_not() {
        assert_eq!(request_target("https://a.example/v1/chat/completions"), "/v1/chat/completions");
        assert_eq!(request_target("http://127.0.0.1:8787/v1/x?y=1#z"), "/v1/x?y=1");
        assert_eq!(request_target("https://a.example"), "/");
        assert_eq!(request_target("https://a.example?q=1"), "/?q=1");
        assert_eq!(request_target("/v1/x?api-version=2024-10-21"), "/v1/x?api-version=2024-10-21");
        let body = Body::Json(b"{}");
        let fp = |url| Fingerprint::of_url("POST", url, body).unwrap();
        assert_eq!(fp("https://gw.example/v1/x?v=1"), fp("/v1/x?v=1"));
        assert_eq!(fp("https://gw.example/v1/x?v=1#frag"), fp("http://other:8787/v1/x?v=1"));
        assert_ne!(fp("/v1/x?v=1"), fp("/v1/x?v=2"));
        assert_ne!(fp("/v1/x?v=1"), fp("/v1/x"));
    }

    #[test]
    fn parse_round_trips_and_rejects_junk() {
        let fp = json("{}");
        assert_eq!(Fingerprint::parse(fp.as_str()), Some(fp.clone()));
        assert_eq!(fp.as_str().len(), 64);
        assert_eq!(Fingerprint::parse("ABC"), None);
        assert_eq!(Fingerprint::parse(&fp.as_str().to_uppercase()), None);
    }
}
