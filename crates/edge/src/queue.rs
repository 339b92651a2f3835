//! Background jobs on Cloudflare Queues: a job's message is sent by its
//! Ledger ([`send_job`]); this worker consumes them ([`consume`]). Each
//! delivery is judged by the job's Ledger (`/deliver`), so a redelivered or
//! duplicate message does nothing. What the consumer does with a message is
//! the core's [`Consumer`] (which queue a batch is from, [`Queue::of`]; the
//! Ledger's verdict; what each outcome does to the message: ack, retry
//! after a delay, a dead letter first): this reads the message and performs
//! its commands. A job that died is sent to the dead-letter queue, whose
//! consumer records it for operators ([`crate::ops`]) and alerts. A batch
//! of job messages is told to the queue's cursor as it starts and ends
//! ([`crate::api::cursor`]), so the Ledgers know how far the consumer has got.
//!
//! May import: `env`, `api`, `ops` and the core.

use futures_util::future::join_all;
use worker::{Env, Message, MessageBatch, MessageExt, QueueRetryOptionsBuilder, Result};

use crate::env::binding;
use crate::env::config::Config;
use crate::env::random::MathRandom;
use crate::error::EdgeError;
use onejob_core::identity::random::RandomSource;
use onejob_core::ledger::background::consumer::{Command, Consumer, Event};
use onejob_core::ledger::background::delivery::{Disposition, Queue};
use onejob_core::ledger::background::progress::CursorCall;

use crate::api::handoff::JobMessage;
use crate::api::ledger::LedgerCall;
use crate::api::{client, cursor};
use crate::ops;

/// Sends a background job's message.
pub async fn send_job(env: &Env, config: &Config, message: &JobMessage) -> Result<()> {
    config.faults.queue_send()?;
    config.faults.queue_send_delay().await;
    env.queue(binding::JOBS)?.send(message).await
}

/// `#[event(queue)]`: a batch of job messages or of dead letters (which,
/// [`Queue::of`] decides).
pub async fn consume(batch: MessageBatch<serde_json::Value>, env: Env) -> Result<()> {
    let queue = Queue::of(&batch.queue(), binding::DEAD_LETTERS_QUEUE);
    let messages = batch.messages()?;
    // Each body read once: for the cursor and for its Ledger.
    let jobs: Vec<Option<JobMessage>> =
        messages.iter().map(|m| serde_json::from_value(m.body().clone()).ok()).collect();
    let started = match queue.tells_progress() {
        true => started(&env, &jobs).await,
        false => None,
    };
    // Each message's job has its own Ledger: run them side by side.
    let handled = messages.iter().zip(&jobs);
    join_all(handled.map(|(message, job)| async { settle(message, handle(&env, queue, job.as_ref()).await) })).await;
    if let Some(batch) = started {
        tell_cursor(&env, CursorCall::Ended { batch }).await;
    }
    Ok(())
}

/// Tells the queue's cursor that a batch of job messages started: its
/// name (random), and the newest send among its messages. `None` if the
/// cursor could not be told (logged): the batch is handled all the same.
async fn started(env: &Env, jobs: &[Option<JobMessage>]) -> Option<u64> {
    let batch = MathRandom.next_u64();
    let call = CursorCall::started(batch, jobs.iter().flatten().map(|job| job.sent_ms));
    tell_cursor(env, call).await.then_some(batch)
}

/// Makes `call` to the queue's cursor; whether it went through (a failure
/// is logged: the Ledgers then fall back to their long wait).
async fn tell_cursor(env: &Env, call: CursorCall) -> bool {
    logged(cursor::call(env, call).await, "telling the queue's cursor").is_some()
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

/// Performs the core's [`Consumer`] for one message of `queue` until it
/// settles: a job message is delivered to its job's Ledger, whose verdict
/// says what becomes of the message; a dead letter is recorded for
/// operators (see [`Command::Record`]).
async fn handle(env: &Env, queue: Queue, job: Option<&JobMessage>) -> Disposition {
    let Some(job) = job else {
        worker::console_warn!("onejob: dropping a malformed queue message");
        return Disposition::MALFORMED;
    };
    let (mut consumer, mut command) = Consumer::start(queue);
    loop {
        let event = match command {
            Command::Ask(ask) => {
                Event::Answered(logged(ask_ledger(env, job, &LedgerCall::from(ask)).await, ask.purpose()))
            }
            Command::SendDeadLetter => {
                Event::Sent(logged(send_dead_letter(env, job).await, "sending a dead letter").is_some())
            }
            Command::Record(facts) => {
                Event::Recorded(logged(ops::record_dead_letter(env, job, &facts).await, "recording a dead letter"))
            }
            Command::Alert { error_class, recorded_ms } => Event::Alerted(
                logged(alert(env, &error_class, recorded_ms).await, "alerting about a dead letter").is_some(),
            ),
            Command::Settle(disposition) => return disposition,
            Command::Ignore(why) => {
                worker::console_warn!("onejob: {why}");
                return Disposition::Ack;
            }
        };
        command = consumer.on(event);
    }
}

/// A step's result, its failure logged (`what` failed).
fn logged<T>(result: Result<T>, what: &str) -> Option<T> {
    result.inspect_err(|error| worker::console_error!("onejob: {what} failed: {error}")).ok()
}

/// Sends a job to the dead-letter queue (its consumer records it).
pub async fn send_dead_letter(env: &Env, job: &JobMessage) -> Result<()> {
    env.queue(binding::DEAD_LETTERS)?.send(job).await
}

/// Alerts the operators about a dead letter if one is due. An unusable
/// configuration (logged where it is read) sends none.
async fn alert(env: &Env, error_class: &str, recorded_ms: u64) -> Result<()> {
    let Ok(config) = crate::env::config::load(env) else { return Ok(()) };
    ops::alert_if_due(env, &config, error_class, recorded_ms).await
}

/// Makes `call` to the job's Ledger and returns the answer's body.
async fn ask_ledger(env: &Env, job: &JobMessage, call: &LedgerCall) -> Result<Vec<u8>> {
    let mut response = client::to_ledger(env, job, call).await?;
    if !(200..300).contains(&response.status_code()) {
        return Err(EdgeError::Refused { by: "ledger", status: response.status_code() }.into());
    }
    response.bytes().await
}
