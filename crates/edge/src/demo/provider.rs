//! The built-in demo provider: an OpenAI-compatible chat completion that
//! triages support tickets, with models that misbehave on purpose so the demo
//! shows retries, coalescing and unknown outcomes without an API key. Its
//! behaviours (each model's latency and misbehaviour, the triage, the
//! answers and events in each API's format) are the core's
//! ([`onejob_core::demo`]); this module sleeps, paces and hands the reply on.

use onejob_core::demo::{DemoReply, Paced, Plan};

use crate::answer::{ByteChunks, Reply};
use crate::env::clock;

/// Answers one call as its plan says ([`demo::call`]): after its delay.
pub async fn answer(plan: Plan) -> Reply {
    // A refused call answers at once (no timer).
    if plan.delay_ms > 0 {
        sleep(plan.delay_ms).await;
    }
    reply(plan.reply)
}

fn reply(answer: DemoReply) -> Reply {
    let mut reply = Reply::json(answer.status, answer.body);
    reply.hints.extend(answer.retry_after.map(|seconds| ("retry-after", seconds.to_owned())));
    reply
}

/// A streamed answer's events, one every `pause_ms`.
pub fn pace(Paced { events, pause_ms }: Paced) -> ByteChunks {
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
