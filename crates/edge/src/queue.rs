//! Background jobs on Cloudflare Queues: a job's message is sent by its
//! Ledger ([`send_job`]); this worker consumes them ([`consume`]). Each
//! delivery is judged by the job's Ledger (`/deliver`), so a redelivered or
//! duplicate message does nothing; the Ledger answers a verdict, and what
//! each verdict does to the message (ack, retry after a delay, a dead
//! letter first) is the core's ([`delivery::on_verdict`]), as is which
//! queue a batch is from ([`Queue::of`]): this reads, asks and performs. A
//! job that died is sent to the dead-letter queue, whose consumer
//! records it for operators ([`crate::ops`]).
//!
//! May import: `env`, `api`, `ops` and the core.

use futures_util::future::join_all;
use worker::{Env, Message, MessageBatch, MessageExt, QueueRetryOptionsBuilder, Result};

use crate::env::binding;
use crate::env::config::Config;
use crate::error::EdgeError;
use onejob_core::ledger::delivery::{self, Disposition, Next, Queue, Verdict};

use crate::api::client;
use crate::api::handoff::{DeadFacts, JobMessage};
use crate::api::ledger::LedgerCall;
use crate::ops;

/// Sends a background job's message.
pub async fn send_job(env: &Env, config: &Config, message: &JobMessage) -> Result<()> {
    config.faults.queue_send()?;
    env.queue(binding::JOBS)?.send(message).await
}

/// `#[event(queue)]`: a batch of job messages or of dead letters (which,
/// [`Queue::of`] decides).
pub async fn consume(batch: MessageBatch<serde_json::Value>, env: Env) -> Result<()> {
    let queue = Queue::of(&batch.queue(), binding::DEAD_LETTERS_QUEUE);
    let messages = batch.messages()?;
    // Each message's job has its own Ledger: run them side by side.
    join_all(messages.iter().map(|message| async {
        let disposition = match queue {
            Queue::Jobs => deliver(&env, message).await,
            Queue::DeadLetters => record_dead_letter(&env, message).await,
        };
        settle(message, disposition);
    }))
    .await;
    Ok(())
}

/// Performs what the core decided for `message`.
fn settle(message: &Message<serde_json::Value>, disposition: Disposition) {
    match disposition {
        Disposition::Ack => message.ack(),
        Disposition::Retry => message.retry(),
        Disposition::RetryAfter(seconds) => {
            message.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(seconds).build());
        }
    }
}

fn job_of(message: &Message<serde_json::Value>) -> Option<JobMessage> {
    serde_json::from_value(message.body().clone()).ok()
}

/// A job message: delivered to its job's Ledger, whose verdict says what
/// becomes of the message ([`delivery::on_verdict`]).
async fn deliver(env: &Env, message: &Message<serde_json::Value>) -> Disposition {
    let Some(job) = job_of(message) else {
        worker::console_warn!("onejob: dropping a malformed job message");
        return Disposition::MALFORMED;
    };
    let verdict = ask_ledger(env, &job, &LedgerCall::Deliver)
        .await
        .and_then(|body| Ok(serde_json::from_slice::<Verdict>(&body)?))
        .inspect_err(|error| worker::console_error!("onejob: a job delivery failed: {error}"));
    match delivery::on_verdict(verdict.ok()) {
        Next::Settle(disposition) => disposition,
        Next::SendDeadLetter => delivery::after_dead_letter(
            send_dead_letter(env, &job)
                .await
                .inspect_err(|error| worker::console_error!("onejob: sending a dead letter failed: {error}"))
                .is_ok(),
        ),
    }
}

/// Sends a job to the dead-letter queue (its consumer records it).
pub async fn send_dead_letter(env: &Env, job: &JobMessage) -> Result<()> {
    env.queue(binding::DEAD_LETTERS)?.send(job).await
}

/// A dead letter: recorded for operators (see [`record`]); one whose
/// recording failed is tried again a few seconds later ([`delivery::after_record`]).
async fn record_dead_letter(env: &Env, message: &Message<serde_json::Value>) -> Disposition {
    let Some(job) = job_of(message) else { return Disposition::MALFORMED };
    let recorded = record(env, &job)
        .await
        .inspect_err(|error| worker::console_error!("onejob: recording a dead letter failed: {error}"));
    delivery::after_record(recorded.is_ok())
}

/// Records the job's dead letter and alerts if one is due, if its Ledger
/// says the job is dead (a message the consumer kept failing on may name a
/// job that is not: its Ledger's alarm owns it, and it is only logged).
async fn record(env: &Env, job: &JobMessage) -> Result<()> {
    let facts: DeadFacts = serde_json::from_slice(&ask_ledger(env, job, &LedgerCall::Facts).await?)?;
    if !facts.dead {
        worker::console_warn!("onejob: a dead-letter message for a job that is not dead; its Ledger keeps it");
        return Ok(());
    }
    let recorded_ms = ops::record_dead_letter(env, job, &facts).await?;
    // An unusable configuration (logged where it is read): no alert.
    let Ok(config) = crate::env::config::load(env) else { return Ok(()) };
    ops::alert_if_due(env, &config, &facts.error_class, recorded_ms).await
}

/// Makes `call` to the job's Ledger and returns the answer's body.
async fn ask_ledger(env: &Env, job: &JobMessage, call: &LedgerCall) -> Result<Vec<u8>> {
    let mut response = client::to_ledger(env, job, call).await?;
    if !(200..300).contains(&response.status_code()) {
        return Err(EdgeError::Refused { by: "ledger", status: response.status_code() }.into());
    }
    response.bytes().await
}
