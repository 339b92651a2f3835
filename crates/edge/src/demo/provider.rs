//! The built-in demo provider: an OpenAI-compatible chat completion that
//! triages support tickets, with models that misbehave on purpose so the demo
//! shows retries, coalescing and unknown outcomes without an API key. Its
//! behaviours (each model's latency and misbehaviour, the triage, the
//! answers and events in each API's format) are the core's
//! ([`onejob_core::demo`]); this module sleeps, paces and hands the reply on.

use onejob_core::demo::{self, DemoReply, Paced};

use crate::answer::{ByteChunks, Reply};
use crate::env::clock;

/// Answers one call; `attempt` is the job's attempt number (1 for the first).
pub async fn respond(target: &str, body: &[u8], attempt: u32) -> Reply {
    let plan = demo::respond(target, body, attempt);
    // A refused call answers at once (no timer).
    if plan.delay_ms > 0 {
        sleep(plan.delay_ms).await;
    }
    reply(plan.reply)
}

/// A streamed answer (`"stream": true`), paced; `None` when this call does
/// not stream ([`respond`] answers it).
pub fn stream(target: &str, body: &[u8], attempt: u32) -> Option<ByteChunks> {
    demo::stream(target, body, attempt).map(pace)
}

/// What the demo provider in an outage answers: a 503 in the API's format.
pub fn outage(target: &str) -> Reply {
    reply(demo::outage(target))
}

fn reply(answer: DemoReply) -> Reply {
    let mut reply = Reply::json(answer.status, answer.body);
    reply.hints.extend(answer.retry_after.map(|seconds| ("retry-after", seconds.to_owned())));
    reply
}

/// The events, one every `pause_ms`.
fn pace(Paced { events, pause_ms }: Paced) -> ByteChunks {
    Box::pin(futures_util::stream::unfold(events.into_iter(), move |mut events| async move {
        let event = events.next()?;
        sleep(pause_ms).await;
        Some((Ok(event), events))
    }))
}

/// The simulated latency. A hedge's losing call is awaited by another task
/// than the one that started it: [`clock::sleep`] wakes that one.
async fn sleep(ms: u64) {
    clock::sleep(ms).await;
}
