//! How a streamed answer's end settles its attempt: which ending is a
//! failure, which closes the stored events with the gateway's own event,
//! which aborts the upstream call, and which job transition it makes. The
//! Ledger's pump reads the stream and performs this.

use crate::job::{AttemptReport, AttemptTicket, Job, JobError};
use crate::retry::classify::ErrorClass;
use crate::retry::reply::Usage;

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The provider's terminal event.
    Complete,
    /// The provider's error event.
    Failed,
    /// No terminal event: a dropped connection, a silent upstream, a read
    /// error (the detail says which).
    Interrupted(&'static str),
    /// A caller cancelled it.
    Cancelled,
    /// Another writer took the job: stop without recording anything.
    LostJob,
}

/// The event the gateway adds to close a stream the provider did not close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closing {
    /// The stream broke off (with why).
    Interrupted(&'static str),
    /// A caller cancelled it.
    Cancelled,
}

impl StreamEnd {
    /// Whether the upstream call is aborted (the provider may still be
    /// sending; nobody reads it any more).
    pub fn aborts_upstream(self) -> bool {
        matches!(self, Self::Interrupted(_) | Self::Cancelled | Self::LostJob)
    }

    /// The event that closes the stored events, when the provider did not.
    pub fn closing(self) -> Option<Closing> {
        match self {
            Self::Interrupted(detail) => Some(Closing::Interrupted(detail)),
            Self::Cancelled => Some(Closing::Cancelled),
            Self::Complete | Self::Failed | Self::LostJob => None,
        }
    }

    /// The attempt's error class in the audit (`None` for a lost job: nothing is recorded).
    pub fn error_class(self) -> Option<ErrorClass> {
        match self {
            Self::Complete => Some(ErrorClass::None),
            Self::Failed => Some(ErrorClass::StreamError),
            Self::Interrupted(_) => Some(ErrorClass::StreamInterrupted),
            Self::Cancelled => Some(ErrorClass::Cancelled),
            Self::LostJob => None,
        }
    }

    /// Records the end on `job` for the streaming attempt holding `ticket`:
    /// an interrupted stream's outcome is interrupted (what arrived is kept,
    /// nothing is resent), a cancelled one cancelled, and a complete one or
    /// one that ended with the provider's error event completes the job (the
    /// events are the answer). `Ok(false)` when nothing is recorded (the job
    /// was lost to another writer).
    pub fn record(
        self,
        job: &mut Job,
        ticket: AttemptTicket,
        now_ms: u64,
        usage: Option<Usage>,
    ) -> Result<bool, JobError> {
        let Some(error_class) = self.error_class() else { return Ok(false) };
        let report = AttemptReport { status: Some(200), usage, error_class: Some(error_class) };
        match self {
            Self::Interrupted(_) => job.interrupt(ticket, now_ms, report)?,
            Self::Cancelled => job.cancel(ticket, now_ms, report)?,
            Self::Complete | Self::Failed | Self::LostJob => job.complete(ticket, now_ms, report)?,
        }
        Ok(true)
    }
}

/// What time and the object's memory settled on a job before a request is
/// admitted ([`settle_by_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    /// The job changed: it is written (a compare-and-swap on the version read).
    pub changed: bool,
    /// A stream interrupted with no pump here to close it: the attempt
    /// whose stored events get the gateway's closing event.
    pub close_stream: Option<u32>,
}

/// Settles what time and the object's memory decide: leases that ran out
/// ([`Job::expire`]), and a stream whose pump is not running here
/// (`pump_here` false: the runtime that ran it is gone), interrupted at
/// once; an interrupted stream's stored events are then closed by the
/// gateway's event (no pump will).
pub fn settle_by_time(job: &mut Job, now_ms: u64, pump_here: bool) -> Settled {
    let mut changed = job.expire(now_ms);
    changed |= !pump_here && job.settle_orphaned_stream(now_ms);
    let interrupted = changed && !pump_here && job.state() == crate::job::JobState::Interrupted;
    let close_stream = job.replayed_attempt().map(|attempt| attempt.number).filter(|_| interrupted);
    Settled { changed, close_stream }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::job::JobState;

    fn streaming_job() -> (Job, AttemptTicket) {
        let mut job = crate::job::test_job::new();
        let ticket = job.claim(job.version(), 1, "p", None).expect("claim");
        let ticket = job.mark_streaming(ticket, 2).expect("streaming");
        (job, ticket)
    }

    #[test]
    fn a_complete_stream_completes_the_job_and_needs_no_closing_event() {
        let (mut job, ticket) = streaming_job();
        assert!(StreamEnd::Complete.record(&mut job, ticket, 3, None).expect("recorded"));
        assert_eq!(job.state(), JobState::Completed);
        assert_eq!(StreamEnd::Complete.closing(), None);
        assert!(!StreamEnd::Complete.aborts_upstream());
    }

    #[test]
    fn a_providers_error_event_is_the_answer_and_audited_as_a_stream_error() {
        let (mut job, ticket) = streaming_job();
        assert!(StreamEnd::Failed.record(&mut job, ticket, 3, None).expect("recorded"));
        assert_eq!(job.state(), JobState::Completed);
        assert_eq!(job.attempts()[0].error_class, Some(ErrorClass::StreamError));
        assert!(!StreamEnd::Failed.aborts_upstream());
    }

    #[test]
    fn a_broken_stream_is_interrupted_closed_by_the_gateway_and_its_call_aborted() {
        let (mut job, ticket) = streaming_job();
        let end = StreamEnd::Interrupted("silent");
        assert!(end.record(&mut job, ticket, 3, None).expect("recorded"));
        assert_eq!(job.state(), JobState::Interrupted);
        assert_eq!(end.closing(), Some(Closing::Interrupted("silent")));
        assert!(end.aborts_upstream());
    }

    #[test]
    fn a_cancelled_stream_is_cancelled_and_a_lost_job_records_nothing() {
        let (mut job, ticket) = streaming_job();
        assert!(StreamEnd::Cancelled.record(&mut job, ticket, 3, None).expect("recorded"));
        assert_eq!(StreamEnd::Cancelled.closing(), Some(Closing::Cancelled));
        let (mut other, ticket) = streaming_job();
        let before = other.clone();
        assert!(!StreamEnd::LostJob.record(&mut other, ticket, 3, None).expect("nothing"));
        assert_eq!(other, before);
        assert!(StreamEnd::LostJob.aborts_upstream());
    }

    #[test]
    fn a_stream_without_its_pump_is_interrupted_and_closed_by_the_gateway() {
        let (mut job, _) = streaming_job();
        let mut kept = job.clone();
        assert_eq!(settle_by_time(&mut kept, 4, true), Settled { changed: false, close_stream: None }, "its pump runs");
        assert_eq!(settle_by_time(&mut job, 4, false), Settled { changed: true, close_stream: Some(1) });
        assert_eq!(job.state(), JobState::Interrupted);
        assert_eq!(settle_by_time(&mut job, 5, false), Settled { changed: false, close_stream: None }, "once");
    }

    #[test]
    fn a_lease_run_out_is_settled_and_closed_only_when_no_pump_is_here() {
        let (job, _) = streaming_job();
        let late = job.lease_until_ms().expect("a lease") + 1;
        let mut here = job.clone();
        let settled = settle_by_time(&mut here, late, true);
        assert!(settled.changed, "the lease ran out");
        assert_eq!(settled.close_stream, None, "the pump here closes its own stream");
        let mut gone = job;
        assert!(settle_by_time(&mut gone, late, false).close_stream.is_some());
        let mut fresh = crate::job::test_job::new();
        assert_eq!(settle_by_time(&mut fresh, 10, false), Settled { changed: false, close_stream: None });
    }
}
