//! What the Ledger's pump writes when a streamed answer ends, and the
//! event that closes a stream whose pump is gone: the end as
//! [`StreamEnd`] means it (its closing event, its transition) applied to the
//! stream as [`StreamReader`] read it (its size and usage). The pump
//! publishes and writes what this returns.

use crate::job::{AttemptTicket, Job, JobError};
use crate::upstream::sse::{Dialect, interrupted_event};

use crate::ledger::stream::end::StreamEnd;
use crate::ledger::stream::read::StreamReader;

/// What a stream's end leaves to write: the closing event (published and
/// written after the events pending, whether or not the job took the end:
/// its readers and its stored events are closed either way), the stream's
/// size in bytes (its stored response's), and whether its attempt's outcome
/// was recorded on the job (`Err`: the attempt no longer holds it; nothing
/// more is written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The gateway's event that closes a stream the provider did not close.
    pub closing: Option<Vec<u8>>,
    /// The stream's bytes, the closing event's included.
    pub size: u64,
    /// The end recorded on the job, or why it was refused.
    pub recorded: Result<(), JobError>,
}

/// Records `end` on `job` for the streaming attempt holding `ticket`, with
/// the usage `reader` saw ([`StreamEnd::record`]), and says what is left to
/// write; `None` when nothing is (the job was lost to another writer:
/// nothing is recorded, closed or written).
pub fn finish(
    reader: &mut StreamReader,
    end: StreamEnd,
    job: &mut Job,
    ticket: AttemptTicket,
    now_ms: u64,
) -> Option<Finished> {
    if end == StreamEnd::LostJob {
        return None;
    }
    let closing = reader.closing_event(end);
    // `LostJob` returned above: every other end records (or is refused).
    let recorded = end.record(job, ticket, now_ms, reader.usage()).map(|_| ());
    Some(Finished { closing, size: reader.size(), recorded })
}

/// The event that closes the stored events of a stream whose pump is gone
/// (its runtime was restarted), in the dialect of its first stored event
/// (`None`: none was stored; the default dialect).
pub fn lost_pump_event(first_event: Option<&[u8]>) -> Vec<u8> {
    let dialect = first_event.map_or(Dialect::OpenAi, Dialect::of_first_event);
    interrupted_event("the gateway lost the stream (its runtime was restarted)", dialect)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::job::JobState;
    use crate::ledger::stream::read::Arrived;

    const ANTHROPIC_START: &[u8] = b"event: message_start\ndata: {\"type\":\"message_start\"}\n\n";

    fn streaming_job() -> (Job, AttemptTicket) {
        let mut job = crate::job::test_job::new();
        let ticket = job.claim(job.version(), 1, "p", None).expect("claim");
        let ticket = job.mark_streaming(ticket, 2).expect("streaming");
        (job, ticket)
    }

    fn reader_after(bytes: &[u8]) -> StreamReader {
        let mut reader = StreamReader::new(Dialect::OpenAi, 0);
        reader.on(Arrived::Bytes(bytes), false, 1);
        reader
    }

    #[test]
    fn a_complete_stream_completes_its_job_with_its_usage_and_needs_no_closing_event() {
        let usage =
            b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\n";
        let mut reader = reader_after(usage);
        let (mut job, ticket) = streaming_job();
        let finished = finish(&mut reader, StreamEnd::Complete, &mut job, ticket, 3);
        assert_eq!(finished, Some(Finished { closing: None, size: usage.len() as u64, recorded: Ok(()) }));
        assert_eq!(job.state(), JobState::Completed);
        assert_eq!(job.attempts()[0].usage.map(|u| u.completion_tokens), Some(4));
    }

    #[test]
    fn a_broken_stream_is_closed_by_the_gateway_in_its_dialect_and_counted_in_its_size() {
        let mut reader = reader_after(ANTHROPIC_START);
        let (mut job, ticket) = streaming_job();
        let end = StreamEnd::Interrupted("silent");
        let finished = finish(&mut reader, end, &mut job, ticket, 3).expect("something to write");
        assert_eq!(finished.recorded, Ok(()));
        let closing = finished.closing.expect("closed by the gateway");
        assert!(closing.starts_with(b"event: error\n"), "Anthropic's error event");
        assert_eq!(finished.size, (ANTHROPIC_START.len() + closing.len()) as u64);
        assert_eq!(job.state(), JobState::Interrupted);
    }

    #[test]
    fn a_stream_lost_to_another_writer_records_and_writes_nothing() {
        let mut reader = reader_after(ANTHROPIC_START);
        let (mut job, ticket) = streaming_job();
        let before = job.clone();
        assert_eq!(finish(&mut reader, StreamEnd::LostJob, &mut job, ticket, 3), None);
        assert_eq!(job, before);
        assert_eq!(reader.size(), ANTHROPIC_START.len() as u64, "no closing event");
    }

    #[test]
    fn an_attempt_that_no_longer_holds_the_job_is_refused_but_its_stream_is_still_closed() {
        let (mut job, ticket) = streaming_job();
        let first = finish(&mut reader_after(b""), StreamEnd::Complete, &mut job, ticket, 3).expect("recorded");
        assert_eq!(first.recorded, Ok(()));
        let before = job.clone();
        let mut reader = reader_after(ANTHROPIC_START);
        let late =
            finish(&mut reader, StreamEnd::Interrupted("silent"), &mut job, ticket, 4).expect("something to write");
        assert!(late.recorded.is_err(), "the job has moved on");
        assert_eq!(job, before, "nothing recorded");
        // Its readers and its stored events still get the closing event.
        let closing = late.closing.expect("closed by the gateway");
        assert!(closing.starts_with(b"event: error\n"));
        assert_eq!(late.size, (ANTHROPIC_START.len() + closing.len()) as u64);
    }

    #[test]
    fn a_stream_whose_pump_is_gone_is_closed_in_the_dialect_of_its_first_event() {
        assert!(lost_pump_event(Some(ANTHROPIC_START)).starts_with(b"event: error\n"));
        let openai = lost_pump_event(None);
        assert!(openai.starts_with(b"data: "), "no event stored: OpenAI's");
        assert!(String::from_utf8_lossy(&openai).contains("the gateway lost the stream"));
    }
}
