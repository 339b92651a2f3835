//! The built-in demo provider's behaviours, decided here (the edge only
//! sleeps the delay, paces the events and hands the reply on): an
//! OpenAI-compatible chat completion that triages support tickets, with
//! models that misbehave on purpose so the demo shows retries, coalescing
//! and unknown outcomes without an API key.
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
//! (`/v1/messages`), answers and SSE events in each one's format. A demo
//! provider configured as an outage answers every call with a 503 (see
//! [`crate::upstream::providers`]).

use serde_json::{Value, json};

use crate::config::token::UserToken;

/// What the demo answers a call: after `delay_ms`, `reply`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The simulated latency before the answer (none for a refused call).
    pub delay_ms: u64,
    /// The answer.
    pub reply: DemoReply,
}

/// A demo answer: a JSON body with its status and, for `demo-flaky`'s
/// first attempt, a `Retry-After` in seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoReply {
    /// The HTTP status.
    pub status: u16,
    /// The JSON body.
    pub body: Vec<u8>,
    /// `Retry-After`, in seconds.
    pub retry_after: Option<&'static str>,
}

/// A streamed demo answer: its SSE events, one every `pause_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paced {
    /// The events, each a whole SSE event.
    pub events: Vec<Vec<u8>>,
    /// The pause before each event.
    pub pause_ms: u64,
}

impl DemoReply {
    fn json(status: u16, body: Vec<u8>) -> Self {
        Self { status, body, retry_after: None }
    }
}

/// How long `demo-timeout` takes: longer than any attempt's timeout.
const NEVER_MS: u64 = 24 * 3_600_000;

/// What the demo answers one call; `attempt` is the job's attempt number
/// (1 for the first).
pub fn respond(target: &str, body: &[u8], attempt: u32) -> Plan {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let model = request.get("model").and_then(Value::as_str).unwrap_or("demo").to_owned();
    let path = target.split('?').next().unwrap_or(target);
    let anthropic = path == "/v1/messages";
    let responses = path == "/v1/responses";
    let refused = |reply| Plan { delay_ms: 0, reply };
    if !path.ends_with("/chat/completions") && !anthropic && !responses {
        let message =
            format!("the demo provider serves /v1/chat/completions, /v1/responses and /v1/messages, not {path}");
        return refused(error(404, "not_found", &message, None));
    }
    let delay_ms = match model.as_str() {
        "demo" | "demo-prose" | "demo-stream-drop" | "demo-stream-error" => 300,
        "demo-slow" => 5_000,
        "demo-timeout" => NEVER_MS,
        "demo-flaky" if attempt == 1 => {
            let reply =
                error(503, "overloaded", "demo-flaky is overloaded on every first attempt; retry after 1 s", Some("1"));
            return Plan { delay_ms: 100, reply };
        }
        "demo-flaky" => 300,
        other => {
            let message = format!(
                "unknown model {other:?}; the demo provider has demo, demo-flaky, demo-slow, demo-timeout, demo-prose, demo-stream-drop, demo-stream-error"
            );
            return refused(error(400, "model_not_found", &message, None));
        }
    };
    Plan { delay_ms, reply: answer(&model, &request, body, responses, anthropic) }
}

/// The demo's answer to a call it serves.
fn answer(model: &str, request: &Value, body: &[u8], responses: bool, anthropic: bool) -> DemoReply {
    let ticket = last_user_message(request);
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
        let response = responses_object(model, &answer, body, prompt_tokens, completion_tokens);
        return DemoReply::json(200, response.to_string().into_bytes());
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
        return DemoReply::json(200, message.to_string().into_bytes());
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
    DemoReply::json(200, completion.to_string().into_bytes())
}

/// A streamed answer (`"stream": true`): the same triage, one chat
/// completion chunk per word about 40 ms apart (250 ms for `demo-slow`), a
/// usage chunk when asked (`stream_options.include_usage`), then
/// `data: [DONE]`. `None` when this call does not stream: errors, a
/// `demo-flaky` first attempt, `demo-timeout` ([`respond`] answers those).
pub fn stream(target: &str, body: &[u8], attempt: u32) -> Option<Paced> {
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
        return Some(Paced { events: anthropic_events(&model, &ticket, &answer, body), pause_ms });
    }
    if responses {
        return Some(Paced { events: responses_events(&model, &ticket, &answer, body), pause_ms });
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
            return Some(Paced { events, pause_ms });
        }
        "demo-stream-error" => {
            events.truncate(words.len() / 2);
            let failure = json!({ "error": { "message": "the demo model failed mid-answer", "type": "server_error", "code": "server_error" } });
            events.push(format!("data: {failure}\n\n").into_bytes());
            return Some(Paced { events, pause_ms });
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
    Some(Paced { events, pause_ms })
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
pub fn outage(target: &str) -> DemoReply {
    if target.split('?').next() == Some("/v1/messages") {
        let body = json!({ "type": "error", "error": { "type": "overloaded_error", "message": "this demo provider is down" } });
        return DemoReply::json(503, body.to_string().into_bytes());
    }
    error(503, "unavailable", "this demo provider is down", None)
}

fn error(status: u16, code: &str, message: &str, retry_after: Option<&'static str>) -> DemoReply {
    let body = json!({ "error": { "message": message, "type": code, "code": code } });
    DemoReply { status, body: body.to_string().into_bytes(), retry_after }
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

/// The tenant whose user tokens `GET /demo/token` mints.
pub const TOKEN_TENANT: &str = "dev";
/// How long a demo user token lasts, in seconds.
pub const TOKEN_TTL_S: u64 = 3_600;

/// The `user` of `GET /demo/token?user=<id>`: 1 to 64 of `A-Z a-z 0-9 - _`
/// (`None`: refused).
pub fn token_user(user: Option<&str>) -> Option<&str> {
    user.filter(|u| {
        (1..=64).contains(&u.len()) && u.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

/// The claims of a demo user token for `user`, minted at `now_s`: the
/// [`TOKEN_TENANT`]'s, for [`TOKEN_TTL_S`], with no restriction and no
/// approval right.
pub fn token_claims(user: &str, now_s: u64) -> UserToken {
    UserToken {
        tenant: TOKEN_TENANT.into(),
        user: user.to_owned(),
        exp: now_s + TOKEN_TTL_S,
        iat: Some(now_s),
        nbf: None,
        models: None,
        paths: None,
        approve: false,
    }
}

/// A row of the demo's inbox as the demo page reads it: its `payload`
/// (stored as text) as JSON (`null` if it is not).
pub fn inbox_row(mut row: Value) -> Value {
    if let Some(text) = row.get("payload").and_then(Value::as_str) {
        row["payload"] = serde_json::from_str(text).unwrap_or(Value::Null);
    }
    row
}

/// What one call to the demo provider does: stream paced events, or
/// answer after a delay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DemoCall {
    /// A streamed answer ([`stream`]).
    Stream(Paced),
    /// An answer read whole ([`respond`], or an outage's at once).
    Answer(Plan),
}

/// The fate of one call to the demo provider (`outage`: configured as
/// down): an outage answers its 503 at once ([`outage`]); a request that
/// asked for a stream (`wants_stream`) gets events when its model streams
/// ([`stream`]); every other call is answered after its delay ([`respond`]).
pub fn call(outage_on: bool, wants_stream: bool, target: &str, body: &[u8], attempt: u32) -> DemoCall {
    if outage_on {
        return DemoCall::Answer(Plan { delay_ms: 0, reply: outage(target) });
    }
    match wants_stream.then(|| stream(target, body, attempt)).flatten() {
        Some(paced) => DemoCall::Stream(paced),
        None => DemoCall::Answer(respond(target, body, attempt)),
    }
}

/// What `GET /demo/tickets` and `GET /demo/inbox` read out for the demo
/// page: the triage job type's rows, or the mails its effect sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOut {
    /// `/demo/tickets`: the `ticket_triage` table the job type's `d1` effect writes.
    Tickets,
    /// `/demo/inbox`: the `demo_inbox` table the `demo:inbox` webhook fills.
    Inbox,
}

impl ReadOut {
    /// The read-out a route's last segment names (`tickets`; anything
    /// else [`crate::front::Route`] sends here is the inbox).
    pub fn of(what: &str) -> ReadOut {
        if what == "tickets" { ReadOut::Tickets } else { ReadOut::Inbox }
    }

    /// Whether the inbox's table must exist before the read (the demo
    /// makes it on first use; the tickets' table is the job type's).
    pub fn makes_its_table(self) -> bool {
        self == ReadOut::Inbox
    }

    /// The SQL that reads its newest 200 rows.
    pub fn query(self) -> &'static str {
        match self {
            ReadOut::Tickets => "SELECT * FROM ticket_triage ORDER BY written_ms DESC LIMIT 200",
            ReadOut::Inbox => {
                "SELECT delivery_id, payload, received_ms FROM demo_inbox ORDER BY received_ms DESC LIMIT 200"
            }
        }
    }

    /// The page's answer, `{"rows": [...]}`, from what the read gave: the
    /// tickets' read fails until a ticket was triaged (the table does not
    /// exist yet), which lists none; the inbox's table was made before its
    /// read, so its failure is one. An inbox row's payload is read as JSON
    /// ([`inbox_row`]).
    pub fn answer<E>(self, read: Result<Vec<Value>, E>) -> Result<Value, E> {
        let rows = match (self, read) {
            (ReadOut::Tickets, read) => read.unwrap_or_default(),
            (ReadOut::Inbox, read) => read?.into_iter().map(inbox_row).collect(),
        };
        Ok(serde_json::json!({ "rows": rows }))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn a_demo_token_is_the_dev_tenants_for_a_plain_user_id_for_an_hour() {
        assert_eq!(token_user(Some("alice-1_B")), Some("alice-1_B"));
        assert_eq!(token_user(Some(&"u".repeat(64))).map(str::len), Some(64));
        for refused in [None, Some(""), Some("a b"), Some("é"), Some("a/b")] {
            assert_eq!(token_user(refused), None, "{refused:?}");
        }
        assert_eq!(token_user(Some(&"u".repeat(65))), None);
        let claims = token_claims("alice", 1_000);
        assert_eq!((claims.tenant.as_str(), claims.user.as_str()), ("dev", "alice"));
        assert_eq!((claims.iat, claims.exp, claims.nbf), (Some(1_000), 4_600, None));
        assert!(!claims.approve && claims.models.is_none() && claims.paths.is_none());
    }

    #[test]
    fn an_inbox_rows_payload_is_read_as_json() {
        let row = json!({ "delivery_id": "d", "payload": "{\"to\":\"a@b\"}", "received_ms": 1 });
        assert_eq!(inbox_row(row)["payload"], json!({ "to": "a@b" }));
        assert_eq!(inbox_row(json!({ "payload": "not json" }))["payload"], Value::Null);
        assert_eq!(inbox_row(json!({ "payload": 5 })), json!({ "payload": 5 }));
    }

    #[test]
    fn a_demo_call_is_an_outage_at_once_a_stream_when_asked_and_streamable_else_an_answer() {
        let chat = serde_json::to_vec(&json!({ "model": "demo", "messages": [] })).unwrap();
        let down = call(true, true, CHAT, &chat, 1);
        assert_eq!(down, DemoCall::Answer(Plan { delay_ms: 0, reply: outage(CHAT) }));
        assert_eq!(call(false, true, CHAT, &chat, 1), DemoCall::Stream(stream(CHAT, &chat, 1).unwrap()));
        assert_eq!(call(false, false, CHAT, &chat, 1), DemoCall::Answer(respond(CHAT, &chat, 1)));
        // A model that does not stream is answered whole, even when asked to stream.
        let timeout = serde_json::to_vec(&json!({ "model": "demo-timeout", "messages": [] })).unwrap();
        assert_eq!(stream(CHAT, &timeout, 1), None);
        assert_eq!(call(false, true, CHAT, &timeout, 1), DemoCall::Answer(respond(CHAT, &timeout, 1)));
    }

    #[test]
    fn a_read_out_is_the_tickets_or_the_inbox() {
        assert_eq!(ReadOut::of("tickets"), ReadOut::Tickets);
        assert_eq!(ReadOut::of("inbox"), ReadOut::Inbox);
        assert!(ReadOut::Inbox.makes_its_table() && !ReadOut::Tickets.makes_its_table());
        assert!(ReadOut::Tickets.query().contains("FROM ticket_triage"));
        assert!(ReadOut::Inbox.query().contains("FROM demo_inbox"));
    }

    #[test]
    fn no_tickets_table_yet_lists_none_but_a_failed_inbox_read_is_an_error() {
        assert_eq!(ReadOut::Tickets.answer(Err::<Vec<Value>, _>("no such table")), Ok(json!({ "rows": [] })));
        assert_eq!(ReadOut::Inbox.answer(Err::<Vec<Value>, _>("down")), Err("down"));
        let ticket = json!({ "category": "billing", "payload": "{}" });
        assert_eq!(ReadOut::Tickets.answer::<()>(Ok(vec![ticket.clone()])), Ok(json!({ "rows": [ticket] })));
        let mail = json!({ "delivery_id": "d", "payload": "{\"to\":\"a@b\"}" });
        let read = ReadOut::Inbox.answer::<()>(Ok(vec![mail])).unwrap();
        assert_eq!(read["rows"][0]["payload"], json!({ "to": "a@b" }));
    }

    const CHAT: &str = "/v1/chat/completions";

    fn body(model: &str, extra: Value) -> Vec<u8> {
        let mut request = json!({ "model": model, "messages": [
            { "role": "system", "content": "triage" },
            { "role": "user", "content": "I was charged twice, refund ASAP" }
        ]});
        if let (Some(request), Some(extra)) = (request.as_object_mut(), extra.as_object()) {
            request.extend(extra.clone());
        }
        request.to_string().into_bytes()
    }

    fn json_of(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    fn content(plan: &Plan) -> String {
        json_of(&plan.reply.body)["choices"][0]["message"]["content"].as_str().unwrap().to_owned()
    }

    #[test]
    fn each_model_has_its_latency_and_a_wrong_path_or_model_is_refused_at_once() {
        let delay = |model: &str| respond(CHAT, &body(model, json!({})), 1).delay_ms;
        assert_eq!(delay("demo"), 300);
        assert_eq!(delay("demo-prose"), 300);
        assert_eq!(delay("demo-slow"), 5_000);
        assert_eq!(delay("demo-timeout"), NEVER_MS);
        let wrong_path = respond("/v1/embeddings?x=1", &body("demo", json!({})), 1);
        assert_eq!((wrong_path.delay_ms, wrong_path.reply.status), (0, 404));
        assert!(String::from_utf8_lossy(&wrong_path.reply.body).contains("not /v1/embeddings"));
        let unknown = respond(CHAT, &body("gpt-4o", json!({})), 1);
        assert_eq!((unknown.delay_ms, unknown.reply.status), (0, 400));
        assert_eq!(json_of(&unknown.reply.body)["error"]["code"], "model_not_found");
        // No body, no model: `demo`.
        assert_eq!(respond(CHAT, b"", 1).reply.status, 200);
    }

    #[test]
    fn demo_flaky_is_overloaded_on_a_first_attempt_only() {
        let first = respond(CHAT, &body("demo-flaky", json!({})), 1);
        assert_eq!((first.delay_ms, first.reply.status, first.reply.retry_after), (100, 503, Some("1")));
        let second = respond(CHAT, &body("demo-flaky", json!({})), 2);
        assert_eq!((second.delay_ms, second.reply.status, second.reply.retry_after), (300, 200, None));
    }

    #[test]
    fn the_triage_is_json_when_asked_except_from_demo_prose() {
        let asked = json!({ "response_format": { "type": "json_object" } });
        let triage = json_of(content(&respond(CHAT, &body("demo", asked.clone()), 1)).as_bytes());
        assert_eq!(triage["category"], "billing");
        assert_eq!(triage["priority"], "high");
        assert_eq!(triage["summary"], "I was charged twice, refund ASAP");
        let prose = content(&respond(CHAT, &body("demo-prose", asked), 1));
        assert!(prose.starts_with("category: billing\npriority: high\nsummary: "));
        let completion = json_of(&respond(CHAT, &body("demo", json!({})), 1).reply.body);
        assert_eq!(completion["object"], "chat.completion");
        assert_eq!(
            completion["usage"]["total_tokens"],
            completion["usage"]["prompt_tokens"].as_u64().unwrap()
                + completion["usage"]["completion_tokens"].as_u64().unwrap()
        );
    }

    #[test]
    fn it_answers_in_each_apis_format() {
        let anthropic = json_of(&respond("/v1/messages", &body("demo", json!({})), 1).reply.body);
        assert_eq!(anthropic["type"], "message");
        assert_eq!(anthropic["content"][0]["type"], "text");
        assert!(anthropic["usage"]["input_tokens"].is_u64());
        let input = json!({ "model": "demo", "input": "the login page crashes" }).to_string();
        let responses = json_of(&respond("/v1/responses", input.as_bytes(), 1).reply.body);
        assert_eq!(responses["object"], "response");
        let text = responses["output"][0]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("category: account\npriority: normal"));
    }

    #[test]
    fn an_outage_is_a_503_in_the_apis_format() {
        let anthropic = outage("/v1/messages?beta=1");
        assert_eq!(anthropic.status, 503);
        assert_eq!(json_of(&anthropic.body)["error"]["type"], "overloaded_error");
        let openai = outage(CHAT);
        assert_eq!((openai.status, json_of(&openai.body)["error"]["code"].as_str()), (503, Some("unavailable")));
    }

    fn texts(paced: &Paced) -> Vec<String> {
        paced.events.iter().map(|e| String::from_utf8_lossy(e).into_owned()).collect()
    }

    #[test]
    fn a_stream_is_paced_by_model_and_the_refused_calls_do_not_stream() {
        let streamed = |model: &str, attempt| stream(CHAT, &body(model, json!({"stream": true})), attempt);
        assert_eq!(streamed("demo", 1).map(|p| p.pause_ms), Some(40));
        assert_eq!(streamed("demo-slow", 1).map(|p| p.pause_ms), Some(250));
        assert_eq!(streamed("demo-flaky", 2).map(|p| p.pause_ms), Some(40));
        assert_eq!(streamed("demo-flaky", 1), None);
        assert_eq!(streamed("demo-timeout", 1), None);
        assert_eq!(streamed("nope", 1), None);
        assert_eq!(stream("/v1/embeddings", &body("demo", json!({})), 1), None);
        let whole = texts(&streamed("demo", 1).unwrap());
        assert_eq!(whole.last().map(String::as_str), Some("data: [DONE]\n\n"));
        assert!(whole.iter().all(|e| !e.contains("\"usage\"")));
        let with_usage =
            texts(&stream(CHAT, &body("demo", json!({"stream_options": {"include_usage": true}})), 1).unwrap());
        assert!(with_usage[with_usage.len() - 2].contains("\"total_tokens\""));
    }

    #[test]
    fn the_stream_misbehaviours_end_early() {
        let dropped = texts(&stream(CHAT, &body("demo-stream-drop", json!({})), 1).unwrap());
        assert!(dropped.iter().all(|e| !e.contains("[DONE]") && !e.contains("\"stop\"")));
        let failed = texts(&stream(CHAT, &body("demo-stream-error", json!({})), 1).unwrap());
        assert!(failed.last().unwrap().contains("the demo model failed mid-answer"));
        assert!(failed.iter().all(|e| !e.contains("[DONE]")));
    }

    #[test]
    fn the_anthropic_and_responses_streams_have_their_events() {
        let anthropic = texts(&stream("/v1/messages", &body("demo", json!({})), 1).unwrap());
        assert!(anthropic[0].starts_with("event: message_start\n"));
        assert!(anthropic.last().unwrap().starts_with("event: message_stop\n"));
        let responses = texts(&stream("/v1/responses", &body("demo", json!({})), 1).unwrap());
        assert!(responses[0].starts_with("event: response.created\n"));
        assert!(responses.last().unwrap().starts_with("event: response.completed\n"));
        assert!(responses[1].contains("\"sequence_number\":1"));
    }

    #[test]
    fn the_triage_reads_the_last_user_message_in_any_form() {
        assert_eq!(triage("My password reset fails"), ("account", "normal"));
        assert_eq!(triage("the app crashes, urgent"), ("bug", "high"));
        assert_eq!(triage("a feature I would suggest"), ("feature_request", "normal"));
        assert_eq!(triage("hello"), ("general", "normal"));
        assert_eq!(summary("  "), "(empty ticket)");
        assert_eq!(tokens("one two three"), 4);
        let blocks = json!({ "messages": [
            { "role": "user", "content": "first" },
            { "role": "user", "content": [{ "type": "text", "text": "a" }, { "type": "image" }, { "type": "text", "text": "b" }] }
        ]});
        assert_eq!(last_user_message(&blocks), "a b");
        assert_eq!(last_user_message(&json!({ "input": [{ "role": "user", "content": "c" }] })), "c");
        assert_eq!(last_user_message(&json!({})), "");
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
    }
}
