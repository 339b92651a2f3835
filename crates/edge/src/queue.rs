//! Background jobs on Cloudflare Queues: a job's message is sent by its
//! Ledger ([`send_job`]); this worker consumes them ([`consume`]). Each
//! delivery is judged by the job's Ledger (`/deliver`), so a redelivered or
//! duplicate message does nothing; the Ledger answers what to do with the
//! message. A job that died is sent to the dead-letter queue, whose consumer
//! records it for operators ([`crate::ops`]).
//!
//! May import: `env`, `api`, `ops` and the core.

use futures_util::future::join_all;
use worker::{Env, Message, MessageBatch, MessageExt, QueueRetryOptionsBuilder, Result};

use crate::env::binding;
use crate::env::config::Config;
use crate::error::EdgeError;
use onejob_core::ledger::delivery::{self, Verdict};

use crate::api::client;
use crate::api::handoff::{DeadFacts, JobMessage};
use crate::api::ledger::LedgerCall;
use crate::ops;

/// Sends a background job's message.
pub async fn send_job(env: &Env, config: &Config, message: &JobMessage) -> Result<()> {
    config.faults.queue_send()?;
    env.queue(binding::JOBS)?.send(message).await
}

/// `#[event(queue)]`: a batch of job messages or of dead letters.
pub async fn consume(batch: MessageBatch<serde_json::Value>, env: Env) -> Result<()> {
    let dead_letters = batch.queue() == binding::DEAD_LETTERS_QUEUE;
    let messages = batch.messages()?;
    // Each message's job has its own Ledger: run them side by side.
    join_all(messages.iter().map(|message| async {
        if dead_letters { record_dead_letter(&env, message).await } else { deliver(&env, message).await }
    }))
    .await;
    Ok(())
}

fn job_of(message: &Message<serde_json::Value>) -> Option<JobMessage> {
    serde_json::from_value(message.body().clone()).ok()
}

async fn deliver(env: &Env, message: &Message<serde_json::Value>) {
    let Some(job) = job_of(message) else {
        worker::console_warn!("onejob: dropping a malformed job message");
        return message.ack();
    };
    match ask_ledger(env, &job, &LedgerCall::Deliver)
        .await
        .and_then(|body| Ok(serde_json::from_slice::<Verdict>(&body)?))
    {
        Ok(Verdict::Ack) => message.ack(),
        Ok(Verdict::Retry { delay_ms }) => {
            let seconds = delivery::redelivery_delay_s(delay_ms);
            message.retry_with_options(&QueueRetryOptionsBuilder::new().with_delay_seconds(seconds).build());
        }
        Ok(Verdict::Dead) => match send_dead_letter(env, &job).await {
            Ok(()) => message.ack(),
            Err(error) => {
                worker::console_error!("onejob: sending a dead letter failed: {error}");
                message.retry();
            }
        },
        Err(error) => {
            worker::console_error!("onejob: a job delivery failed: {error}");
            message.retry();
        }
    }
}

/// Sends a job to the dead-letter queue (its consumer records it).
pub async fn send_dead_letter(env: &Env, job: &JobMessage) -> Result<()> {
    env.queue(binding::DEAD_LETTERS)?.send(job).await
}

/// A dead letter: recorded for operators (see [`record`]); one whose
/// recording failed is tried again a few seconds later.
async fn record_dead_letter(env: &Env, message: &Message<serde_json::Value>) {
    let Some(job) = job_of(message) else { return message.ack() };
    match record(env, &job).await {
        Ok(()) => message.ack(),
        Err(error) => {
            worker::console_error!("onejob: recording a dead letter failed: {error}");
            let delay = QueueRetryOptionsBuilder::new().with_delay_seconds(delivery::DEAD_LETTER_RETRY_S);
            message.retry_with_options(&delay.build());
        }
    }
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
