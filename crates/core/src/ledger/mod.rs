//! What the `Ledger` Durable Object decides about one job, sans-IO.
//!
//! The Ledger's decisions move here one at a time, each with its unit tests,
//! and the Durable Object keeps only what performs them (storage, calls,
//! timers). Where it goes: one machine that takes the job's
//! events — a submission, a provider's answer, a stream's end, an alarm, a
//! queue delivery, an operator's action, an effect's outcome — and returns
//! the commands to perform, with time, randomness and ids as inputs.
//!
//! - [`attempts`]: what one attempt's answer means for its job (judged,
//!   applied, raced, and what the caller is told).
//! - [`coordination`]: who works on the job in the object's memory (a
//!   drive, a stream's pump, the effects runner), as one value.
//! - [`drive`]: one run of attempts as a machine — placement, claim,
//!   call, hedge, record, retry — returning the commands the Ledger performs.
//! - [`effects`]: a job type's effects as a machine — claim, perform,
//!   record, reconcile by receipt, approvals and their expiry, dead
//!   letters, the run's cadence — and what approvers and operators do to them.
//! - [`follow_up`]: what follows a job type's answer, and the cadence of
//!   its effects' run.
//! - [`operator`]: an operator's settlement, a caller's cancel, a poll's wait.
//! - [`operator_plan`]: what the Ledger performs for an operator's or an
//!   approver's request (kick, replay, resolve, approve, an effect's action),
//!   in order, and what it answers.
//! - [`subject`]: a job type's subject (`once_per`): which one a job holds,
//!   what a claim of it answers, when an expiring job frees it.
//! - [`storage`]: the Ledger's SQLite layout as data: its table groups (created
//!   when first written), which exist, each group's schema, the migration of
//!   an object written by the four-table layout, where a response is kept.
//! - [`stream_end`]: how a streamed answer's end settles its attempt.
//! - [`stream_finish`]: what the pump writes when a stream ends (the
//!   closing event, the transition, the stream's size), and the event that
//!   closes a stream whose pump is gone.
//! - [`stream_read`]: what the pump makes of a stream as it arrives (events,
//!   its end, when to write and renew the lease, its size and usage).
//! - [`submit`]: what a submission does and in which order — refused,
//!   replayed, following a stream, waiting, run (a new job, a keyless job
//!   renewed), a background one accepted or adopted — what a drive asks
//!   before its claim (quota, subject, its request kept) and what follows
//!   its result, and what an adoption writes and sends.
//! - [`tending`]: the steps that tend a background job after a delivery,
//!   its drive or the alarm (sent again, given up, deferred, dead-lettered,
//!   followed up), one performer in the shell.
//! - [`wake`]: what the alarm does when it rings, and when it rings next.
//! - [`dead_letter`]: what a dead letter says about a job or an effect that
//!   needs an operator, with secrets redacted.
//! - [`delivery`]: what a queue delivery does (settle or run), what follows
//!   its run (a deferral, a dead letter), and what the queue consumer does
//!   with the message.
//! - [`consumer`]: the queue consumer's handling of one message as a
//!   machine: the Ledger asked, a dead letter sent, recorded and alerted
//!   about, the message settled.

pub mod attempts;
pub mod consumer;
pub mod coordination;
pub mod dead_letter;
pub mod delivery;
pub mod drive;
pub mod effects;
pub mod follow_up;
pub mod operator;
pub mod operator_plan;
pub mod storage;
pub mod stream_end;
pub mod stream_finish;
pub mod stream_read;
pub mod subject;
pub mod submit;
pub mod tending;
pub mod wake;

/// What the Ledger's unit tests share: a fresh job with the usual policy.
#[cfg(test)]
pub(crate) mod test_job {
    use crate::effect::{EffectRetry, EffectSpec, EffectTarget};
    use crate::fingerprint::Fingerprint;
    use crate::job::{Job, JobPolicy, UnknownPolicy};

    /// A new job of 3 attempts (30 s leases), kept `retention_ms`, created at 0.
    pub(crate) fn kept_for(retention_ms: u64) -> Job {
        let policy = JobPolicy::new(3, 30_000, 60_000, retention_ms, UnknownPolicy::RetryAfterLease).expect("policy");
        Job::new(Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{}"), 0, policy)
    }

    /// A new job kept a day.
    pub(crate) fn new() -> Job {
        kept_for(86_400_000)
    }

    /// A job type's webhook effect `mail` (no approval, 3 tries, no receipt
    /// URL, no secret, an empty payload): for tests where its content does
    /// not matter.
    pub(crate) fn webhook_spec() -> EffectSpec {
        EffectSpec {
            name: "mail".into(),
            approve: false,
            approval_ttl_ms: 60_000,
            retry: EffectRetry { attempts: 3, base_ms: 100, cap_ms: 1_000 },
            target: EffectTarget::Webhook {
                url: "https://mail.example/send".into(),
                receipt_url: None,
                secret: None,
                payload: serde_json::json!({}),
            },
        }
    }
}
