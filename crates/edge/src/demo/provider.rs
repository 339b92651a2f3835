//! The built-in demo provider: an OpenAI-compatible chat completion that
//! triages support tickets, with models that misbehave on purpose so the demo
//! shows retries, coalescing and unknown outcomes without an API key.
//!
//! | model | behaviour |
//! |---|---|
//! | `demo` | answers after ~300 ms |
//! | `demo-flaky` | first attempt of a job: 503 with `Retry-After: 1`; then answers |
//! | `demo-slow` | answers after 5 s |
//! | `demo-timeout` | never answers (the gateway's timeout makes the job unknown) |
//! | `demo-prose` | like `demo`, but ignores `response_format` (breaks a JSON contract) |
//!
//! With `"response_format": {"type": "json_object"}` (or `json_schema`) the
//! answer is the same triage as a JSON object (`category`, `priority`,
//! `summary`), streamed too, except from `demo-prose`.
//!
//! | `demo-stream-drop` | streamed: half the answer, then the stream ends without `[DONE]` (interrupted) |
//! | `demo-stream-error` | streamed: half the answer, then an error event |
//!
//! With `"stream": true` every answer streams word by word (the misbehaviours stay).
//!
//! It speaks three APIs: OpenAI's chat completions (`/v1/chat/completions`),
//! OpenAI's Responses API (`/v1/responses`, what the Vercel AI SDK's
//! `openai(model)` calls by default) and Anthropic's Messages
//! (`/v1/messages`), answers and SSE events in each one's format. A demo provider configured as an outage answers
//! every call with a 503 (see `onejob_core::providers`).

use serde_json::{Value, json};

use crate::answer::{ByteChunks, Reply};
use crate::env::clock;

/// Answers one call; `attempt` is the job's attempt number (1 for the first).
pub async fn respond(target: &str, body: &[u8], attempt: u32) -> Reply {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let model = request.get("model").and_then(Value::as_str).unwrap_or("demo").to_owned();
    let path = target.split('?').next().unwrap_or(target);
    let anthropic = path == "/v1/messages";
    let responses = path == "/v1/responses";
    if !path.ends_with("/chat/completions") && !anthropic && !responses {
        let message =
            format!("the demo provider serves /v1/chat/completions, /v1/responses and /v1/messages, not {path}");
        return error(404, "not_found", &message, None);
    }
    match model.as_str() {
        "demo" | "demo-prose" | "demo-stream-drop" | "demo-stream-error" => sleep(300).await,
        "demo-slow" => sleep(5_000).await,
        "demo-timeout" => sleep(24 * 3_600_000).await,
        "demo-flaky" if attempt == 1 => {
            sleep(100).await;
            return error(
                503,
                "overloaded",
                "demo-flaky is overloaded on every first attempt; retry after 1 s",
                Some("1"),
            );
        }
        "demo-flaky" => sleep(300).await,
        other => {
            let message = format!(
                "unknown model {other:?}; the demo provider has demo, demo-flaky, demo-slow, demo-timeout, demo-prose, demo-stream-drop, demo-stream-error"
            );
            return error(400, "model_not_found", &message, None);
        }
    }
    let ticket = last_user_message(&request);
    let (category, priority) = triage(&ticket);
    let wants_json =
        matches!(request.pointer("/response_format/type").and_then(Value::as_str), Some("json_object" | "json_schema"));
    let answer = if wants_json && model != "demo-prose" {
        json!({ "category": category, "priority": priority, "summary": summary(&ticket) }).to_string()
    } else {
        format!("category: {category}\npriority: {priority}\nsummary: {}", summary(&ticket))
    };
    let prompt_tokens = tokens(&ticket) + 12;
    let completion_tokens = tokens(&answer);
    if responses {
        let response = responses_object(&model, &answer, body, prompt_tokens, completion_tokens);
        return Reply::json(200, response.to_string().into_bytes());
    }
    if anthropic {
        let message = json!({
            "id": format!("msg_demo_{:08x}", fnv1a(body)),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{ "type": "text", "text": answer }],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": { "input_tokens": prompt_tokens, "output_tokens": completion_tokens }
        });
        return Reply::json(200, message.to_string().into_bytes());
    }
    let completion = json!({
        "id": format!("chatcmpl-demo-{:08x}", fnv1a(body)),
        "object": "chat.completion",
        "created": 1_767_225_600,
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": answer },
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    });
    Reply::json(200, completion.to_string().into_bytes())
}

/// A streamed answer (`"stream": true`): the same triage, one chat
/// completion chunk per word about 40 ms apart (250 ms for `demo-slow`), a
/// usage chunk when asked (`stream_options.include_usage`), then
/// `data: [DONE]`. `None` when this call does not stream: errors, a
/// `demo-flaky` first attempt, `demo-timeout` ([`respond`] answers those).
pub fn stream(target: &str, body: &[u8], attempt: u32) -> Option<ByteChunks> {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let model = request.get("model").and_then(Value::as_str).unwrap_or("demo").to_owned();
    let path = target.split('?').next().unwrap_or(target);
    let anthropic = path == "/v1/messages";
    let responses = path == "/v1/responses";
    let pause_ms = match model.as_str() {
        _ if !path.ends_with("/chat/completions") && !anthropic && !responses => return None,
        "demo" | "demo-stream-drop" | "demo-stream-error" => 40,
        "demo-flaky" if attempt > 1 => 40,
        "demo-slow" => 250,
        _ => return None,
    };
    let ticket = last_user_message(&request);
    let (category, priority) = triage(&ticket);
    let wants_json =
        matches!(request.pointer("/response_format/type").and_then(Value::as_str), Some("json_object" | "json_schema"));
    let answer = if wants_json {
        json!({ "category": category, "priority": priority, "summary": summary(&ticket) }).to_string()
    } else {
        format!("category: {category}\npriority: {priority}\nsummary: {}", summary(&ticket))
    };
    if anthropic {
        return Some(pace(anthropic_events(&model, &ticket, &answer, body), pause_ms));
    }
    if responses {
        return Some(pace(responses_events(&model, &ticket, &answer, body), pause_ms));
    }
    let id = format!("chatcmpl-demo-{:08x}", fnv1a(body));
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": 1_767_225_600, "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }]
        });
        format!("data: {chunk}\n\n").into_bytes()
    };
    let mut events = vec![chunk(json!({ "role": "assistant", "content": "" }), Value::Null)];
    let words: Vec<&str> = answer.split_inclusive([' ', '\n']).collect();
    events.extend(words.iter().map(|w| chunk(json!({ "content": w }), Value::Null)));
    // The stream misbehaviours: half the answer, then nothing (no [DONE]) or an error event.
    match model.as_str() {
        "demo-stream-drop" => {
            events.truncate(words.len() / 2);
            return Some(pace(events, pause_ms));
        }
        "demo-stream-error" => {
            events.truncate(words.len() / 2);
            let failure = json!({ "error": { "message": "the demo model failed mid-answer", "type": "server_error", "code": "server_error" } });
            events.push(format!("data: {failure}\n\n").into_bytes());
            return Some(pace(events, pause_ms));
        }
        _ => {}
    }
    events.push(chunk(json!({}), json!("stop")));
    let include_usage = request.pointer("/stream_options/include_usage").and_then(Value::as_bool) == Some(true);
    if include_usage {
        let (prompt, completion) = (tokens(&ticket) + 12, tokens(&answer));
        let usage = json!({
            "id": id, "object": "chat.completion.chunk", "created": 1_767_225_600, "model": model, "choices": [],
            "usage": { "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion }
        });
        events.push(format!("data: {usage}\n\n").into_bytes());
    }
    events.push(b"data: [DONE]\n\n".to_vec());
    Some(pace(events, pause_ms))
}

/// The same answer as Anthropic's Messages stream: `message_start`, one
/// text block delta per word, `message_delta` with the usage, `message_stop`.
fn anthropic_events(model: &str, ticket: &str, answer: &str, body: &[u8]) -> Vec<Vec<u8>> {
    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n").into_bytes();
    let (prompt, completion) = (tokens(ticket) + 12, tokens(answer));
    let mut events = vec![event(
        "message_start",
        json!({ "type": "message_start", "message": {
            "id": format!("msg_demo_{:08x}", fnv1a(body)), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": { "input_tokens": prompt, "output_tokens": 1 }
        }}),
    )];
    events.push(event(
        "content_block_start",
        json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
    ));
    for word in answer.split_inclusive([' ', '\n']) {
        let delta =
            json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": word } });
        events.push(event("content_block_delta", delta));
    }
    events.push(event("content_block_stop", json!({ "type": "content_block_stop", "index": 0 })));
    events.push(event(
        "message_delta",
        json!({ "type": "message_delta", "delta": { "stop_reason": "end_turn", "stop_sequence": null },
                "usage": { "output_tokens": completion } }),
    ));
    events.push(event("message_stop", json!({ "type": "message_stop" })));
    events
}

/// The answer as a Responses API object.
fn responses_object(model: &str, answer: &str, body: &[u8], prompt: u64, completion: u64) -> Value {
    json!({
        "id": format!("resp_demo_{:08x}", fnv1a(body)),
        "object": "response",
        "created_at": 1_767_225_600,
        "status": "completed",
        "model": model,
        "output": [{
            "type": "message", "id": format!("msg_demo_{:08x}", fnv1a(body)), "status": "completed", "role": "assistant",
            "content": [{ "type": "output_text", "text": answer, "annotations": [] }]
        }],
        "usage": { "input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion }
    })
}

/// The same answer as the Responses API's stream: `response.created`, the
/// message item and its text part, one `response.output_text.delta` per
/// word, then the closing events and `response.completed` with the usage.
fn responses_events(model: &str, ticket: &str, answer: &str, body: &[u8]) -> Vec<Vec<u8>> {
    let (prompt, completion) = (tokens(ticket) + 12, tokens(answer));
    let item_id = format!("msg_demo_{:08x}", fnv1a(body));
    let mut sequence = 0u64;
    let mut event = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        format!("event: {name}\ndata: {data}\n\n").into_bytes()
    };
    let done = responses_object(model, answer, body, prompt, completion);
    let mut started = done.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    started["usage"] = Value::Null;
    let item = json!({ "type": "message", "id": item_id, "status": "in_progress", "role": "assistant", "content": [] });
    let mut events = vec![
        event("response.created", json!({ "response": started })),
        event("response.output_item.added", json!({ "output_index": 0, "item": item })),
        event(
            "response.content_part.added",
            json!({ "item_id": item_id, "output_index": 0, "content_index": 0,
                    "part": { "type": "output_text", "text": "", "annotations": [] } }),
        ),
    ];
    for word in answer.split_inclusive([' ', '\n']) {
        let delta = json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "delta": word, "logprobs": [] });
        events.push(event("response.output_text.delta", delta));
    }
    events.push(event(
        "response.output_text.done",
        json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "text": answer, "logprobs": [] }),
    ));
    events.push(event("response.output_item.done", json!({ "output_index": 0, "item": done["output"][0].clone() })));
    events.push(event("response.completed", json!({ "response": done })));
    events
}

/// What the demo provider in an outage answers: a 503 in the API's format.
pub fn outage(target: &str) -> Reply {
    if target.split('?').next() == Some("/v1/messages") {
        let body = json!({ "type": "error", "error": { "type": "overloaded_error", "message": "this demo provider is down" } });
        return Reply::json(503, body.to_string().into_bytes());
    }
    error(503, "unavailable", "this demo provider is down", None)
}

/// The events, one every `pause_ms`.
fn pace(events: Vec<Vec<u8>>, pause_ms: u64) -> ByteChunks {
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

fn error(status: u16, code: &str, message: &str, retry_after: Option<&str>) -> Reply {
    let body = json!({ "error": { "message": message, "type": code, "code": code } });
    let mut reply = Reply::json(status, body.to_string().into_bytes());
    if let Some(seconds) = retry_after {
        reply.hints.push(("retry-after", seconds.to_owned()));
    }
    reply
}

fn last_user_message(request: &Value) -> String {
    // The Responses API: `input` is a string, or a list of messages.
    if let Some(input) = request.get("input").and_then(Value::as_str) {
        return input.to_owned();
    }
    request
        .get("messages")
        .or_else(|| request.get("input"))
        .and_then(Value::as_array)
        .and_then(|messages| messages.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user")))
        .and_then(|m| m.get("content"))
        .map(|content| match content {
            // Anthropic's (and OpenAI's) content as a list of blocks.
            Value::Array(blocks) => {
                blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join(" ")
            }
            other => other.as_str().unwrap_or("").to_owned(),
        })
        .unwrap_or_default()
}

/// A deterministic keyword triage: the same ticket always gets the same answer.
fn triage(ticket: &str) -> (&'static str, &'static str) {
    let text = ticket.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    let category = if has(&["refund", "charge", "invoice", "billing", "payment", "card"]) {
        "billing"
    } else if has(&["password", "login", "log in", "account", "sign in", "2fa"]) {
        "account"
    } else if has(&["crash", "error", "bug", "broken", "fails", "500"]) {
        "bug"
    } else if has(&["feature", "would be nice", "request", "suggest"]) {
        "feature_request"
    } else {
        "general"
    };
    let priority = if has(&["urgent", "asap", "down", "outage", "twice", "immediately"]) { "high" } else { "normal" };
    (category, priority)
}

fn summary(ticket: &str) -> String {
    let words: Vec<&str> = ticket.split_whitespace().take(12).collect();
    if words.is_empty() { "(empty ticket)".into() } else { words.join(" ") }
}

fn tokens(text: &str) -> u64 {
    (text.split_whitespace().count() as u64 * 4).div_ceil(3)
}

/// A small stable hash for the demo completion id.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, b| (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}
