//! The client of the `QueueCursor` Durable Object ([`crate::objects::cursor`]):
//! the consumer tells it each batch's start and end, a Ledger reads how far
//! the consumer has got ([`onejob_core::ledger::background::progress`]).

use onejob_core::ledger::background::progress::{CursorCall, Progress};
use worker::{Env, Result};

use crate::api::client;
use crate::env::binding;

/// The one cursor of the jobs queue.
const NAME: &str = "jobs";

/// Makes `call`; the progress as it stands after it.
pub async fn call(env: &Env, call: CursorCall) -> Result<Progress> {
    let body = serde_json::to_string(&call)?;
    let mut response =
        client::call(env, binding::QUEUE_CURSOR, NAME, "https://cursor/", &client::init(Some(body))).await?;
    response.json().await
}

/// How far the consumer has got, or `None` if the cursor cannot be read
/// (logged): the outbox then waits as it did without one.
pub async fn read(env: &Env) -> Option<Progress> {
    call(env, CursorCall::Read)
        .await
        .inspect_err(|error| worker::console_error!("onejob: reading the queue's cursor failed: {error}"))
        .ok()
}
