//! What a provider's answer is when its head arrives, before the retry
//! rule judges it: a stream handed on (a 2xx `text/event-stream` answer to
//! a streamed request), an answer too large to keep (refused unread when
//! its declared length says so, or once more than the limit arrived), or
//! one read whole; and which of its headers the retry rule reads.

use crate::wire::{Problem, ProblemType, header};

/// Largest upstream body kept; a larger one is refused rather than stored.
pub const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// The headers of a provider's answer that the retry rule reads, kept with it.
pub const HINT_HEADERS: [&str; 3] = [header::RETRY_AFTER, header::RETRY_AFTER_MS, header::SHOULD_RETRY];

/// What to do with a provider's answer once its head has arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receive {
    /// Hand its body on as a stream (a 2xx `text/event-stream` answer to a
    /// streamed request): the Ledger's pump reads it event by event.
    Stream,
    /// Refuse it unread: its declared length is over [`MAX_RESPONSE_BYTES`].
    TooLarge(usize),
    /// Read it whole (and refuse it then if more than the limit arrived).
    Whole,
}

impl Receive {
    /// The answer's fate from its status, `Content-Type` and `Content-Length`,
    /// for a request that asked for a stream or not.
    pub fn of(wants_stream: bool, status: u16, content_type: &str, content_length: Option<&str>) -> Self {
        if wants_stream && (200..300).contains(&status) && content_type.starts_with(crate::upstream::sse::MEDIA_TYPE) {
            return Receive::Stream;
        }
        match content_length.and_then(|len| len.trim().parse::<usize>().ok()) {
            Some(len) if len > MAX_RESPONSE_BYTES => Receive::TooLarge(len),
            _ => Receive::Whole,
        }
    }
}

/// A provider's answer of `len` bytes, over [`MAX_RESPONSE_BYTES`]: kept as
/// a final `502 upstream-failed` with `x-should-retry: false` (asking again
/// would pay for the same answer). Its problem and the retry hints it carries.
pub fn too_large(len: usize) -> (Problem, Vec<(&'static str, String)>) {
    let detail = format!("the provider's response of {len} bytes exceeds the {MAX_RESPONSE_BYTES}-byte limit");
    (Problem::new(ProblemType::UpstreamFailed, detail), vec![(header::SHOULD_RETRY, "false".to_owned())])
}

/// One provider's answer, its body read whole: what the retry rule judges
/// and the Ledger keeps (the demo provider's answers are ones too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Its status.
    pub status: u16,
    /// Its `Content-Type`.
    pub content_type: String,
    /// Its body.
    pub body: Vec<u8>,
    /// The headers the retry rule reads ([`HINT_HEADERS`]), by lower-case name.
    pub hints: Vec<(&'static str, String)>,
}

impl Reply {
    /// A JSON answer with no retry hints.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        Self { status, content_type: "application/json".into(), body, hints: Vec::new() }
    }

    /// An answer read whole, with `status` and the headers `header` finds:
    /// its `Content-Type` (JSON when it names none) and retry hints; one of
    /// more than [`MAX_RESPONSE_BYTES`] (a length it did not declare) is
    /// refused once read ([`Reply::too_large`]).
    pub fn read_whole(status: u16, header: &dyn Fn(&str) -> Option<String>, body: Vec<u8>) -> Self {
        if body.len() > MAX_RESPONSE_BYTES {
            return Self::too_large(body.len());
        }
        Reply {
            status,
            content_type: header("Content-Type").unwrap_or_else(|| "application/json".into()),
            body,
            hints: HINT_HEADERS.iter().filter_map(|name| Some((*name, header(name)?))).collect(),
        }
    }

    /// An answer of `len` bytes, over the limit, as it is kept: [`too_large`]'s
    /// problem, with its retry hints.
    pub fn too_large(len: usize) -> Self {
        let (problem, hints) = too_large(len);
        Reply {
            status: problem.status(),
            content_type: crate::wire::PROBLEM_CONTENT_TYPE.into(),
            body: problem.to_json().into_bytes(),
            hints,
        }
    }

    /// The value of a hint header, by name (any case).
    pub fn header(&self, name: &str) -> Option<String> {
        header_of(&self.hints, name)
    }
}

/// The retry hint `name` among `hints` (a reply's, taken apart).
pub fn header_of(hints: &[(&'static str, String)], name: &str) -> Option<String> {
    hints.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::{MAX_RESPONSE_BYTES, Receive, Reply, header_of, too_large};

    #[test]
    fn only_a_streamed_requests_2xx_event_stream_is_handed_on_as_a_stream() {
        let sse = "text/event-stream; charset=utf-8";
        assert_eq!(Receive::of(true, 200, sse, None), Receive::Stream);
        // Even a huge declared stream: its events are bounded one by one.
        assert_eq!(Receive::of(true, 200, sse, Some("99999999999")), Receive::Stream);
        assert_eq!(Receive::of(false, 200, sse, None), Receive::Whole);
        assert_eq!(Receive::of(true, 429, sse, None), Receive::Whole);
        assert_eq!(Receive::of(true, 200, "application/json", None), Receive::Whole);
    }

    #[test]
    fn a_declared_length_over_the_limit_is_refused_unread() {
        let over = (MAX_RESPONSE_BYTES + 1).to_string();
        assert_eq!(Receive::of(false, 200, "application/json", Some(&over)), Receive::TooLarge(MAX_RESPONSE_BYTES + 1));
        let at = MAX_RESPONSE_BYTES.to_string();
        assert_eq!(Receive::of(false, 200, "application/json", Some(&at)), Receive::Whole);
        // A length that cannot be read is no reason to refuse: the bytes that arrive are counted.
        assert_eq!(Receive::of(false, 200, "application/json", Some("lots")), Receive::Whole);
    }

    #[test]
    fn an_answer_too_large_is_a_final_502() {
        let (problem, hints) = too_large(9_000_000);
        assert_eq!(problem.status(), 502);
        assert!(problem.detail.contains("9000000 bytes"), "{}", problem.detail);
        assert_eq!(hints, vec![("x-should-retry", "false".to_owned())]);
    }

    #[test]
    fn an_answer_read_whole_keeps_its_type_and_retry_hints_only() {
        let sent = |name: &str| match name {
            "Content-Type" => Some("text/plain".to_owned()),
            "retry-after-ms" => Some("250".to_owned()),
            "x-request-id" => Some("r1".to_owned()),
            _ => None,
        };
        let reply = Reply::read_whole(429, &sent, b"slow down".to_vec());
        assert_eq!((reply.status, reply.content_type.as_str()), (429, "text/plain"));
        assert_eq!(reply.hints, vec![("retry-after-ms", "250".to_owned())]);
        assert_eq!(reply.header("Retry-After-Ms").as_deref(), Some("250"));
        assert_eq!(header_of(&reply.hints, "x-should-retry"), None);
        // No Content-Type: JSON, as providers answer.
        assert_eq!(Reply::read_whole(200, &|_| None, b"{}".to_vec()), Reply::json(200, b"{}".to_vec()));
    }

    #[test]
    fn an_answer_that_arrived_over_the_limit_is_the_too_large_problem() {
        let at = Reply::read_whole(200, &|_| None, vec![b' '; MAX_RESPONSE_BYTES]);
        assert_eq!((at.status, at.body.len()), (200, MAX_RESPONSE_BYTES));
        let over = Reply::read_whole(200, &|_| None, vec![b' '; MAX_RESPONSE_BYTES + 1]);
        assert_eq!(over, Reply::too_large(MAX_RESPONSE_BYTES + 1));
        assert_eq!((over.status, over.content_type.as_str()), (502, "application/problem+json"));
        assert_eq!(over.header("x-should-retry").as_deref(), Some("false"));
    }
}
