//! Server-sent events as a streamed job sees them: bytes cut into complete
//! events, and what each event means for the job (the provider's terminal
//! event, an in-stream error, token usage).
//!
//! End-of-stream proves nothing (a dropped connection can look like a clean
//! end): a stream is complete only after its provider's terminal event.
//!
//! | dialect | terminal event | error event |
//! |---|---|---|
//! | OpenAI chat completions | `data: [DONE]` | `data: {"error": …}` |
//! | OpenAI Responses API | `event: response.completed` / `response.incomplete` | `event: response.failed`, `event: error` |
//! | Anthropic Messages | `event: message_stop` | `event: error` |

use crate::retry::reply::Usage;

/// The media type of a streamed answer (`Content-Type: text/event-stream`).
pub const MEDIA_TYPE: &str = "text/event-stream";

/// Cuts a byte stream into complete SSE events. An event ends at a blank
/// line (`\n\n`, `\r\n\r\n` or `\r\r`); the bytes of each event are kept
/// exactly as received, its terminating blank line included, so the events
/// concatenated are the stream byte for byte.
#[derive(Debug, Default)]
pub struct Splitter {
    pending: Vec<u8>,
    /// Where to resume looking for a blank line in `pending`.
    scanned: usize,
}

impl Splitter {
    /// A splitter with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds received bytes and returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Vec<u8>> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = event_end(&self.pending, self.scanned) {
            let rest = self.pending.split_off(end);
            events.push(std::mem::replace(&mut self.pending, rest));
            self.scanned = 0;
        }
        // A blank line may straddle two pushes: look again from 3 bytes back.
        self.scanned = self.pending.len().saturating_sub(3);
        events
    }

    /// [`Splitter::push`] with the events it completes concatenated (the
    /// stream's bytes up to the end of the last of them), in one allocation
    /// instead of one per event: what the browser SDK hands its caller.
    pub fn push_joined(&mut self, bytes: &[u8]) -> Joined {
        self.pending.extend_from_slice(bytes);
        let (mut events, mut last, mut end) = (0, 0, 0);
        while let Some(next) = event_end(&self.pending, self.scanned.max(end)) {
            (events, last, end) = (events + 1, end, next);
        }
        let rest = self.pending.split_off(end);
        // As in `push`: a blank line may straddle two pushes.
        self.scanned = rest.len().saturating_sub(3);
        Joined { bytes: std::mem::replace(&mut self.pending, rest), events, last }
    }

    /// Bytes received after the last complete event (an event cut short).
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }
}

/// Complete events, concatenated ([`Splitter::push_joined`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The events' bytes, exactly as received.
    pub bytes: Vec<u8>,
    /// How many events they are.
    pub events: usize,
    /// Where the last of them begins in `bytes` (0 when there are none).
    pub last: usize,
}

/// The index just past the first blank line at or after `from`.
fn event_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'\n', b'\n') | (b'\r', b'\r') => return Some(i + 2),
            (b'\r', b'\n') if bytes.get(i + 2..i + 4) == Some(b"\r\n") => return Some(i + 4),
            _ => i += 1,
        }
    }
    None
}

/// What one event means for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Part of the answer.
    Data,
    /// The provider's last event: the stream is complete.
    Terminal,
    /// The provider reports an error inside the stream: the stream has failed.
    Error,
}

/// The `event:` name and the joined `data:` lines of an event (RFC: lines
/// starting with `:` are comments; a single space after the colon is dropped).
fn fields(event: &[u8]) -> (Option<&str>, String) {
    let text = std::str::from_utf8(event).unwrap_or("");
    let mut name = None;
    let mut data = String::new();
    for line in text.split(['\n', '\r']).filter(|l| !l.is_empty() && !l.starts_with(':')) {
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => name = Some(value),
            "data" => {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value);
            }
            _ => {}
        }
    }
    (name, data)
}

/// Classifies one complete event (see the table in the module's docs).
pub fn classify_event(event: &[u8]) -> EventKind {
    let (name, data) = fields(event);
    match name {
        Some("response.completed" | "response.incomplete" | "message_stop") => return EventKind::Terminal,
        Some("response.failed" | "error") => return EventKind::Error,
        _ => {}
    }
    if data.trim() == "[DONE]" {
        return EventKind::Terminal;
    }
    let starts_as_error = data.trim_start().starts_with("{\"error\"");
    let is_error = starts_as_error
        || serde_json::from_str::<serde_json::Value>(&data)
            .ok()
            .is_some_and(|v| v.get("error").is_some_and(|e| !e.is_null()) && v.get("choices").is_none());
    if is_error { EventKind::Error } else { EventKind::Data }
}

/// Whether an event ends its stream (a terminal or an error event, see the
/// table above), decided from its `event:` and `data:` lines alone, without
/// parsing JSON: what a client needs to know that it has the whole answer.
pub fn ends_stream(event: &[u8]) -> bool {
    let (name, data) = fields(event);
    matches!(name, Some("response.completed" | "response.incomplete" | "response.failed" | "message_stop" | "error"))
        || data.trim() == "[DONE]"
        || data.trim_start().starts_with("{\"error\"")
}

/// The event with an `id:` line naming its number (1 for the first event),
/// for readers that asked for ids: an `EventSource` (or any SSE client) then
/// resumes with `Last-Event-ID`, which onejob reads as "events received".
pub fn with_id(event: &[u8], number: u64) -> Vec<u8> {
    let mut out = format!("id: {number}\n").into_bytes();
    out.extend_from_slice(event);
    out
}

/// A live stream's events as one reader gets them: numbered with `id:`
/// lines ([`with_id`]) when it asked for ids, counting on from the `from`
/// events it already has; as they are otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Numbering {
    ids: bool,
    last: u64,
}

impl Numbering {
    /// The numbering of a reader that has the first `from` events.
    pub fn after(from: u64, ids: bool) -> Self {
        Numbering { ids, last: from }
    }

    /// The next event as the reader gets it.
    pub fn next(&mut self, event: Vec<u8>) -> Vec<u8> {
        self.last += 1;
        if self.ids { with_id(&event, self.last) } else { event }
    }
}

/// Token usage carried by an event: OpenAI's `usage` chunk
/// (`stream_options.include_usage`), the Responses API's
/// `response.completed`, or Anthropic's `message_start` / `message_delta`.
pub fn usage_of(event: &[u8]) -> Option<Usage> {
    let (_, data) = fields(event);
    let value: serde_json::Value = serde_json::from_str(&data).ok()?;
    let usage = value
        .get("usage")
        .or_else(|| value.get("response").and_then(|r| r.get("usage")))
        .or_else(|| value.get("message").and_then(|m| m.get("usage")))?;
    let number = |names: &[&str]| names.iter().find_map(|n| usage.get(*n).and_then(serde_json::Value::as_u64));
    let prompt = number(&["prompt_tokens", "input_tokens"]).unwrap_or(0);
    let completion = number(&["completion_tokens", "output_tokens"]).unwrap_or(0);
    let total = number(&["total_tokens"]).unwrap_or(prompt + completion);
    Some(Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: total })
}

/// The assistant's text of a whole stream (its events concatenated): the
/// content deltas of OpenAI's chat chunks (`choices[0].delta.content`), the
/// Responses API's `response.output_text.delta`, or Anthropic's
/// `content_block_delta` text. What a job type's effects read from a
/// streamed answer.
pub fn assistant_text(stream: &[u8]) -> String {
    let mut splitter = Splitter::new();
    let mut events = splitter.push(stream);
    if !splitter.pending().is_empty() {
        events.push(splitter.pending().to_vec());
    }
    let mut text = String::new();
    for event in events {
        let (_, data) = fields(&event);
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&data) else { continue };
        let piece = value
            .pointer("/choices/0/delta/content")
            .or_else(|| {
                (value.get("type") == Some(&"response.output_text.delta".into())).then(|| value.get("delta")).flatten()
            })
            .or_else(|| {
                value.pointer("/delta/text").filter(|_| value.get("type") == Some(&"content_block_delta".into()))
            });
        if let Some(piece) = piece.and_then(serde_json::Value::as_str) {
            text.push_str(piece);
        }
    }
    text
}

/// Whether a stored body is a stream of events (it starts with a field).
pub fn is_event_stream(body: &[u8]) -> bool {
    let start = body.trim_ascii_start();
    start.starts_with(b"data:") || start.starts_with(b"event:") || start.starts_with(b"id:") || start.starts_with(b":")
}

/// The usage of a stream so far, given a later event's usage: Anthropic
/// reports the input tokens in `message_start` and only the output tokens
/// in the closing `message_delta`, so a later report without input tokens
/// keeps the earlier ones.
pub fn merge_usage(earlier: Option<Usage>, later: Usage) -> Usage {
    match earlier {
        Some(before) if later.prompt_tokens == 0 && before.prompt_tokens > 0 => Usage {
            prompt_tokens: before.prompt_tokens,
            completion_tokens: later.completion_tokens,
            total_tokens: before.prompt_tokens + later.completion_tokens,
        },
        _ => later,
    }
}

/// Which provider's event format a stream speaks, so that the events the
/// gateway adds are ones its SDK raises as errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// `data:` lines only (chat completions), or the Responses API.
    #[default]
    OpenAi,
    /// Anthropic's Messages: named events (`message_start`, …).
    Anthropic,
}

impl From<crate::upstream::providers::Api> for Dialect {
    /// The dialect a request's API streams in.
    fn from(api: crate::upstream::providers::Api) -> Self {
        match api {
            crate::upstream::providers::Api::Anthropic => Self::Anthropic,
            crate::upstream::providers::Api::OpenAi => Self::OpenAi,
        }
    }
}

impl Dialect {
    /// The dialect of a stream, from its first event.
    pub fn of_first_event(event: &[u8]) -> Self {
        match fields(event).0 {
            Some(name) if name.starts_with("message_") || name.starts_with("content_block") || name == "ping" => {
                Self::Anthropic
            }
            _ => Self::OpenAi,
        }
    }

    /// An error event: OpenAI's `data: {"error": …}` or Anthropic's
    /// `event: error` (which Anthropic's SDK raises; it ignores unnamed ones).
    fn error_event(self, message: &str, code: &str) -> Vec<u8> {
        match self {
            Self::OpenAi => {
                let error = serde_json::json!({ "error": { "message": message, "type": format!("onejob_{code}"), "code": code } });
                format!("data: {error}\n\n").into_bytes()
            }
            Self::Anthropic => {
                let error = serde_json::json!({ "type": "error", "error": { "type": format!("onejob_{code}"), "message": message } });
                format!("event: error\ndata: {error}\n\n").into_bytes()
            }
        }
    }
}

/// The event the gateway appends to a stream that ended without its terminal
/// event, so SDKs raise an error instead of silently showing a truncated
/// answer.
pub fn interrupted_event(detail: &str, dialect: Dialect) -> Vec<u8> {
    dialect.error_event(detail, "stream_interrupted")
}

/// The event the gateway appends to a stream a caller cancelled.
pub fn cancelled_event(dialect: Dialect) -> Vec<u8> {
    dialect.error_event("the answer was cancelled", "stream_cancelled")
}

/// When a pump writes its pending events to storage: at 8 KB pending, 100 ms
/// after the last write, or at the terminal event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushPolicy {
    /// Bytes pending that force a write.
    pub max_pending_bytes: usize,
    /// Milliseconds since the last write that force one.
    pub max_delay_ms: u64,
}

impl Default for FlushPolicy {
    fn default() -> Self {
        Self { max_pending_bytes: 8 * 1024, max_delay_ms: 100 }
    }
}

impl FlushPolicy {
    /// Whether to write now.
    pub fn should_flush(&self, pending_bytes: usize, since_last_flush_ms: u64, finished: bool) -> bool {
        pending_bytes > 0
            && (finished || pending_bytes >= self.max_pending_bytes || since_last_flush_ms >= self.max_delay_ms)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn a_reader_that_asked_for_ids_gets_them_counting_on_from_what_it_has() {
        let mut numbered = Numbering::after(2, true);
        assert_eq!(numbered.next(b"data: a\n\n".to_vec()), b"id: 3\ndata: a\n\n".to_vec());
        assert_eq!(numbered.next(b"data: b\n\n".to_vec()), b"id: 4\ndata: b\n\n".to_vec());
        let mut plain = Numbering::after(2, false);
        assert_eq!(plain.next(b"data: a\n\n".to_vec()), b"data: a\n\n".to_vec());
    }

    #[test]
    fn events_are_cut_at_blank_lines_byte_for_byte_whatever_the_chunking() {
        let stream = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: x\r\n\r\nevent: message_stop\ndata: {}\n\ndata: [DO";
        for chunk in 1..stream.len() {
            let mut splitter = Splitter::new();
            let mut events = Vec::new();
            for piece in stream.chunks(chunk) {
                events.extend(splitter.push(piece));
            }
            assert_eq!(events.len(), 4, "chunk size {chunk}");
            let mut joined = events.concat();
            joined.extend_from_slice(splitter.pending());
            assert_eq!(joined, stream.to_vec(), "chunk size {chunk}");
            assert_eq!(splitter.pending(), b"data: [DO");
        }
    }

    #[test]
    fn joined_events_are_the_events_concatenated_whatever_the_chunking() {
        let stream = b"data: {\"a\":1}\n\n: keep-alive\n\ndata: x\r\n\r\nevent: message_stop\r\rdata: {}\n\ndata: [DO";
        for chunk in 1..stream.len() {
            let (mut one_by_one, mut joined) = (Splitter::new(), Splitter::new());
            for piece in stream.chunks(chunk) {
                let events = one_by_one.push(piece);
                let got = joined.push_joined(piece);
                assert_eq!(got.bytes, events.concat(), "chunk size {chunk}");
                assert_eq!(got.events, events.len(), "chunk size {chunk}");
                let last_len = events.last().map_or(0, Vec::len);
                assert_eq!(got.last, got.bytes.len() - last_len, "chunk size {chunk}");
                assert_eq!(joined.pending(), one_by_one.pending(), "chunk size {chunk}");
            }
        }
    }

    #[test]
    fn terminal_and_error_events_by_dialect() {
        assert_eq!(classify_event(b"data: [DONE]\n\n"), EventKind::Terminal);
        assert_eq!(classify_event(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"), EventKind::Data);
        assert_eq!(classify_event(b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n"), EventKind::Error);
        assert_eq!(classify_event(b"event: response.completed\ndata: {}\n\n"), EventKind::Terminal);
        assert_eq!(classify_event(b"event: response.failed\ndata: {}\n\n"), EventKind::Error);
        assert_eq!(classify_event(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), EventKind::Terminal);
        assert_eq!(classify_event(b"event: error\ndata: {\"type\":\"error\"}\n\n"), EventKind::Error);
        assert_eq!(classify_event(b": ping\n\n"), EventKind::Data);
        assert_eq!(classify_event(&interrupted_event("cut", Dialect::OpenAi)), EventKind::Error);
        let anthropic = interrupted_event("cut", Dialect::Anthropic);
        assert_eq!(classify_event(&anthropic), EventKind::Error);
        assert!(ends_stream(&anthropic));
        assert!(anthropic.starts_with(b"event: error\n"));
        assert_eq!(Dialect::of_first_event(b"event: message_start\ndata: {}\n\n"), Dialect::Anthropic);
        assert_eq!(Dialect::of_first_event(b"data: {\"choices\":[]}\n\n"), Dialect::OpenAi);
        assert_eq!(Dialect::of_first_event(b"event: response.created\ndata: {}\n\n"), Dialect::OpenAi);
        let start = usage_of(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n");
        let delta =
            usage_of(b"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":8}}\n\n")
                .unwrap();
        assert_eq!(merge_usage(start, delta), Usage { prompt_tokens: 11, completion_tokens: 8, total_tokens: 19 });
        let openai = Usage { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 };
        assert_eq!(merge_usage(None, openai), openai);
        for end in
            [&b"data: [DONE]\n\n"[..], b"event: message_stop\ndata: {}\n\n", b"event: response.completed\ndata: {}\n\n"]
        {
            assert!(ends_stream(end));
        }
        assert!(ends_stream(&interrupted_event("cut", Dialect::OpenAi)));
        assert!(!ends_stream(b"data: {\"choices\":[]}\n\n"));
    }

    #[test]
    fn ids_are_event_numbers_on_their_own_line() {
        assert_eq!(with_id(b"data: x\n\n", 7), b"id: 7\ndata: x\n\n".to_vec());
        let mut splitter = Splitter::new();
        assert_eq!(splitter.push(&with_id(b"data: [DONE]\n\n", 3)).len(), 1, "still one event");
    }

    #[test]
    fn usage_from_each_dialect() {
        let openai =
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\n";
        assert_eq!(usage_of(openai), Some(Usage { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 }));
        let anthropic =
            b"event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n";
        assert_eq!(usage_of(anthropic), Some(Usage { prompt_tokens: 0, completion_tokens: 15, total_tokens: 15 }));
        assert_eq!(usage_of(b"data: [DONE]\n\n"), None);
    }

    #[test]
    fn flushes_at_size_time_or_the_end() {
        let policy = FlushPolicy::default();
        assert!(!policy.should_flush(100, 10, false));
        assert!(policy.should_flush(8 * 1024, 0, false));
        assert!(policy.should_flush(1, 100, false));
        assert!(policy.should_flush(1, 0, true));
        assert!(!policy.should_flush(0, 1_000, true));
    }

    #[test]
    fn the_assistant_text_of_a_whole_stream_in_each_dialect() {
        let openai = b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"{\\\"a\\\":\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"1}\"}}]}\n\ndata: [DONE]\n\n";
        assert_eq!(assistant_text(openai), "{\"a\":1}");
        assert!(is_event_stream(openai));
        let anthropic = b"event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi \"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n";
        assert_eq!(assistant_text(anthropic), "hi there");
        let responses =
            b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n";
        assert_eq!(assistant_text(responses), "ok");
        assert!(!is_event_stream(b"{\"choices\":[]}"));
    }
}
