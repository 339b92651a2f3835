//! What the Ledger's pump makes of a streaming answer as it arrives: the
//! bytes cut into events, which event ends the stream, when silence or a
//! caller's cancel ends it, when the events pending are written (and the
//! attempt's lease renewed), and what the stream reported (its size, its
//! token usage, its dialect). The pump only reads the upstream, publishes
//! the events and writes what this says.

use crate::retry::reply::Usage;
use crate::upstream::sse::{
    Dialect, EventKind, FlushPolicy, Splitter, cancelled_event, classify_event, interrupted_event, merge_usage,
    usage_of,
};

use crate::ledger::stream::end::{Closing, StreamEnd};

/// An upstream silent this long is given up on (the stream is interrupted).
pub const IDLE_TIMEOUT_MS: u64 = 120_000;

/// A running stream renews its attempt's lease at least this often, also
/// while the upstream is silent, so a slow answer is never taken for a lost one.
pub const RENEW_EVERY_MS: u64 = 5_000;

/// What the pump's wait for the upstream gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrived<'a> {
    /// Bytes of the stream.
    Bytes(&'a [u8]),
    /// The connection to the provider failed.
    Broken,
    /// The provider's stream ended (with or without its terminal event).
    Ended,
    /// Nothing within the flush policy's delay.
    Nothing,
}

impl<'a> Arrived<'a> {
    /// What the pump's wait gave: `None` when the flush policy's delay ran
    /// out first, else the stream's next item — bytes, a failed read (the
    /// connection broke: not an end of stream), or the end of the stream.
    pub fn of<E>(next: Option<Option<Result<&'a [u8], E>>>) -> Self {
        match next {
            Some(Some(Ok(bytes))) => Self::Bytes(bytes),
            Some(Some(Err(_))) => Self::Broken,
            Some(None) => Self::Ended,
            None => Self::Nothing,
        }
    }
}

/// What to do with one arrival: publish `events` (in order), then stop
/// with `end` if it is set.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Read {
    /// The events the arrival completed, to publish.
    pub events: Vec<Vec<u8>>,
    /// How the stream ended, if it did.
    pub end: Option<StreamEnd>,
}

/// One attempt's stream as the pump has read it.
#[derive(Debug)]
pub struct StreamReader {
    splitter: Splitter,
    policy: FlushPolicy,
    last_write_ms: u64,
    last_byte_ms: u64,
    usage: Option<Usage>,
    size: u64,
    dialect: Dialect,
}

impl StreamReader {
    /// A reader starting at `now_ms`, speaking `dialect` (the request's
    /// API's) until the stream's first event says otherwise.
    pub fn new(dialect: Dialect, now_ms: u64) -> Self {
        Self {
            splitter: Splitter::new(),
            policy: FlushPolicy::default(),
            last_write_ms: now_ms,
            last_byte_ms: now_ms,
            usage: None,
            size: 0,
            dialect,
        }
    }

    /// How long the pump waits for the upstream before it looks at the clock.
    pub fn tick_ms(&self) -> u64 {
        self.policy.max_delay_ms
    }

    /// Reads one arrival. The provider's terminal or error event ends the
    /// stream (events after it in the same bytes are dropped); so do a
    /// broken connection, an end without the terminal event, a silence of
    /// [`IDLE_TIMEOUT_MS`], and (when nothing else ended it) a caller's cancel.
    pub fn on(&mut self, arrived: Arrived<'_>, cancelled: bool, now_ms: u64) -> Read {
        let mut read = Read::default();
        match arrived {
            Arrived::Bytes(bytes) => {
                self.last_byte_ms = now_ms;
                for event in self.splitter.push(bytes) {
                    let kind = classify_event(&event);
                    self.note(&event);
                    read.events.push(event);
                    read.end = match kind {
                        EventKind::Data => None,
                        EventKind::Terminal => Some(StreamEnd::Complete),
                        EventKind::Error => Some(StreamEnd::Failed),
                    };
                    if read.end.is_some() {
                        break;
                    }
                }
            }
            Arrived::Broken => {
                read.end = Some(StreamEnd::Interrupted("the connection to the provider failed mid-stream"))
            }
            Arrived::Ended => {
                read.end = Some(StreamEnd::Interrupted("the provider's stream ended before its last event"))
            }
            Arrived::Nothing if now_ms.saturating_sub(self.last_byte_ms) >= IDLE_TIMEOUT_MS => {
                read.end = Some(StreamEnd::Interrupted("the provider sent nothing for 120 s"))
            }
            Arrived::Nothing => {}
        }
        if read.end.is_none() && cancelled {
            read.end = Some(StreamEnd::Cancelled);
        }
        read
    }

    /// Whether the events pending (`pending_bytes` of them) are written now,
    /// renewing the attempt's lease: by the flush policy, or because the
    /// lease is due for renewal.
    pub fn write_due(&self, pending_bytes: usize, now_ms: u64) -> bool {
        let since = now_ms.saturating_sub(self.last_write_ms);
        self.policy.should_flush(pending_bytes, since, false) || since >= RENEW_EVERY_MS
    }

    /// The pending events were written (and the lease renewed) at `now_ms`.
    pub fn wrote(&mut self, now_ms: u64) {
        self.last_write_ms = now_ms;
    }

    /// The event that closes the stream the provider did not close, in the
    /// stream's dialect (counted in its size).
    pub fn closing_event(&mut self, end: StreamEnd) -> Option<Vec<u8>> {
        let event = match end.closing()? {
            Closing::Interrupted(detail) => interrupted_event(detail, self.dialect),
            Closing::Cancelled => cancelled_event(self.dialect),
        };
        self.note(&event);
        Some(event)
    }

    /// The token usage the stream reported (the last of each kind).
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// The stream's bytes so far, in complete events.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Counts an event's bytes and keeps the usage it reports, if any.
    fn note(&mut self, event: &[u8]) {
        if self.size == 0 {
            self.dialect = Dialect::of_first_event(event);
        }
        self.size += event.len() as u64;
        if event.windows(7).any(|w| w == b"\"usage\"")
            && let Some(usage) = usage_of(event)
        {
            self.usage = Some(merge_usage(self.usage, usage));
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const DONE: &[u8] = b"data: [DONE]\n\n";

    #[test]
    fn a_wait_gives_bytes_a_broken_read_the_stream_s_end_or_nothing() {
        let bytes: &[u8] = b"data: {}";
        assert_eq!(Arrived::of::<()>(Some(Some(Ok(bytes)))), Arrived::Bytes(bytes));
        assert_eq!(Arrived::of(Some(Some(Err("reset")))), Arrived::Broken, "a failed read is no end of stream");
        assert_eq!(Arrived::of::<()>(Some(None)), Arrived::Ended);
        assert_eq!(Arrived::of::<()>(None), Arrived::Nothing, "the delay ran out first");
    }

    #[test]
    fn events_are_published_as_they_complete_and_the_terminal_event_ends_the_stream() {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        let read = reader.on(Arrived::Bytes(b"data: {\"a\":1}\n\ndata: {\"b\""), false, 10);
        assert_eq!(read, Read { events: vec![b"data: {\"a\":1}\n\n".to_vec()], end: None });
        let read = reader.on(Arrived::Bytes(b":2}\n\ndata: [DONE]\n\ndata: late\n\n"), false, 20);
        assert_eq!(
            read.events,
            vec![b"data: {\"b\":2}\n\n".to_vec(), DONE.to_vec()],
            "nothing after the terminal event"
        );
        assert_eq!(read.end, Some(StreamEnd::Complete));
        assert_eq!(reader.size(), 15 + 15 + DONE.len() as u64);
    }

    #[test]
    fn an_error_event_ends_the_stream_as_failed() {
        let mut reader = StreamReader::new(Dialect::Anthropic, 0);
        let read = reader.on(Arrived::Bytes(b"event: error\ndata: {\"type\":\"error\"}\n\n"), false, 1);
        assert_eq!(read.end, Some(StreamEnd::Failed));
        assert_eq!(read.events.len(), 1);
    }

    #[test]
    fn a_broken_or_ended_connection_interrupts_the_stream() {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        assert!(matches!(reader.on(Arrived::Broken, false, 1).end, Some(StreamEnd::Interrupted(_))));
        assert!(matches!(reader.on(Arrived::Ended, false, 1).end, Some(StreamEnd::Interrupted(_))));
    }

    #[test]
    fn silence_interrupts_the_stream_only_after_the_idle_timeout_since_the_last_byte() {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        reader.on(Arrived::Bytes(b"data: {}\n\n"), false, 1_000);
        assert_eq!(reader.on(Arrived::Nothing, false, 1_000 + IDLE_TIMEOUT_MS - 1).end, None);
        assert_eq!(
            reader.on(Arrived::Nothing, false, 1_000 + IDLE_TIMEOUT_MS).end,
            Some(StreamEnd::Interrupted("the provider sent nothing for 120 s"))
        );
    }

    #[test]
    fn a_cancel_ends_the_stream_unless_the_arrival_already_ended_it() {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        assert_eq!(reader.on(Arrived::Nothing, true, 1).end, Some(StreamEnd::Cancelled));
        let read = reader.on(Arrived::Bytes(DONE), true, 2);
        assert_eq!(read.end, Some(StreamEnd::Complete), "the answer is complete: it is kept as complete");
    }

    #[test]
    fn pending_events_are_written_by_the_flush_policy_and_the_lease_renewed_every_five_seconds() {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        assert!(!reader.write_due(0, 99), "nothing pending, lease fresh");
        assert!(!reader.write_due(10, 99));
        assert!(reader.write_due(10, 100), "pending for the policy's delay");
        assert!(reader.write_due(8 * 1024, 1), "pending past the policy's size");
        assert!(reader.write_due(0, RENEW_EVERY_MS), "the lease is renewed while the upstream is silent");
        reader.wrote(RENEW_EVERY_MS);
        assert!(!reader.write_due(0, RENEW_EVERY_MS + 1));
    }

    #[test]
    fn the_closing_event_speaks_the_streams_dialect_and_counts_in_its_size() {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        let first = b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n";
        reader.on(Arrived::Bytes(first), false, 1);
        let closing = reader.closing_event(StreamEnd::Cancelled).expect("a cancel is closed by the gateway");
        assert!(closing.starts_with(b"event: error\n"), "the stream's first event said Anthropic");
        assert_eq!(reader.size(), (first.len() + closing.len()) as u64);
        assert_eq!(reader.closing_event(StreamEnd::Complete), None);
        assert_eq!(reader.closing_event(StreamEnd::Failed), None);
    }

    #[test]
    fn usage_is_merged_across_events() {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        reader.on(Arrived::Bytes(b"data: {\"choices\":[]}\n\n"), false, 1);
        assert_eq!(reader.usage(), None);
        let usage =
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\n";
        reader.on(Arrived::Bytes(usage), false, 2);
        assert_eq!(reader.usage().map(|u| (u.prompt_tokens, u.completion_tokens)), Some((3, 4)));
    }
}
