// The SDK's own logic, run in Node (`wasm-pack test --node`) and in headless
// Chromium (`wasm-pack test --headless --chrome`).

mod support;

use support::{calls, cancel_body, client, events, fetch, field, intents, js, post, script, text, within};
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::wasm_bindgen_test;

const FAST: &str =
    r#"{ endpoint: "https://gateway.test", token: "tenant-key", storage: "memory", retry: { baseMs: 1, capMs: 5 } }"#;

#[wasm_bindgen_test]
async fn retries_with_the_same_key_and_reports_events_in_order() {
    script(r#"[{"status": 503}, {"status": 200}]"#);
    let oj = client(FAST);
    let response = post(&oj, r#"{"q":1}"#, None, None).await.unwrap();
    assert_eq!(response.status(), 200);
    let calls = calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].key, calls[1].key);
    assert_eq!(calls[0].key.len(), 36, "a UUIDv4");
    assert_eq!(calls[0].authorization.as_deref(), Some("Bearer tenant-key"));
    assert_eq!(events(), ["attempt", "backoff", "attempt", "settled"]);
}

#[wasm_bindgen_test]
async fn twenty_rapid_submissions_make_one_request_and_twenty_results() {
    script(r#"[{"status": 200, "delayMs": 50}]"#);
    let oj = client(FAST);
    let pending: Vec<_> = (0..20).map(|_| post(&oj, r#"{"ticket":"8812"}"#, Some("triage:8812"), None)).collect();
    let responses = futures_join_all(pending).await;
    assert_eq!(calls().len(), 1);
    let mut bodies = Vec::new();
    for response in responses {
        bodies.push(text(&response.unwrap()).await);
    }
    assert!(bodies.iter().all(|b| b == &bodies[0]), "{bodies:?}");
    assert_eq!(bodies.len(), 20);
}

#[wasm_bindgen_test]
async fn a_delivered_intent_is_repeated_with_a_new_key() {
    script(r#"[{"status": 200}, {"status": 200}]"#);
    let oj = client(FAST);
    post(&oj, r#"{"q":"same"}"#, None, None).await.unwrap();
    post(&oj, r#"{ "q" : "same" }"#, None, None).await.unwrap();
    let calls = calls();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0].key, calls[1].key);
}

#[wasm_bindgen_test]
async fn an_intent_given_up_on_keeps_its_key() {
    script(r#"[{"status": 503}, {"status": 200}]"#);
    let oj = client(r#"{ storage: "memory", endpoint: "https://gateway.test", retry: { maxAttempts: 1 } }"#);
    let first = post(&oj, "{}", Some("keep"), None).await.unwrap();
    assert_eq!(first.status(), 503);
    assert_eq!(events(), ["attempt", "gave_up"]);
    let second = post(&oj, "{}", Some("keep"), None).await.unwrap();
    assert_eq!(second.status(), 200);
    let calls = calls();
    assert_eq!(calls[0].key, calls[1].key);
}

#[wasm_bindgen_test]
async fn final_errors_are_not_retried_and_should_retry_false_wins() {
    script(r#"[{"status": 422}, {"status": 503, "headers": {"x-should-retry": "false"}}]"#);
    let oj = client(FAST);
    assert_eq!(post(&oj, r#"{"a":1}"#, None, None).await.unwrap().status(), 422);
    assert_eq!(post(&oj, r#"{"a":2}"#, None, None).await.unwrap().status(), 503);
    assert_eq!(calls().len(), 2);
}

#[wasm_bindgen_test]
async fn network_errors_retry_with_the_same_key_then_fail_with_a_named_error() {
    script(r#"[{"networkError": true}, {"networkError": true}]"#);
    let oj = client(
        r#"{ storage: "memory", endpoint: "https://gateway.test", retry: { maxAttempts: 2, baseMs: 1, capMs: 2 } }"#,
    );
    let error = post(&oj, "{}", None, None).await.unwrap_err();
    let name = js_sys::Reflect::get(&error, &"name".into()).unwrap().as_string();
    assert_eq!(name.as_deref(), Some("OneJobNetworkError"));
    let cause = js_sys::Reflect::get(&error, &"cause".into()).unwrap();
    assert_eq!(
        js_sys::Reflect::get(&cause, &"name".into()).unwrap().as_string().as_deref(),
        Some("TypeError"),
        "the fetch error is the cause"
    );
    let calls = calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].key, calls[1].key);
}

#[wasm_bindgen_test]
async fn retry_after_is_honoured() {
    script(r#"[{"status": 429, "headers": {"Retry-After": "1"}}, {"status": 200}]"#);
    let oj = client(FAST);
    post(&oj, "{}", None, None).await.unwrap();
    let calls = calls();
    let waited = calls[1].at - calls[0].at;
    assert!(waited >= 990.0, "waited {waited} ms");
}

#[wasm_bindgen_test]
async fn abort_during_a_3_s_backoff_settles_at_once() {
    script(r#"[{"status": 503, "headers": {"Retry-After": "3"}}]"#);
    let oj = client(FAST);
    let controller = web_sys_abort_controller();
    let signal = abort_signal(&controller);
    let pending = post(&oj, "{}", None, Some(&signal));
    let abort_later = async {
        sleep_ms(100).await;
        let started = performance_now();
        abort(&controller);
        started
    };
    let (result, started) = futures_join(pending, abort_later).await;
    let latency = performance_now() - started;
    let error = result.unwrap_err();
    let name = js_sys::Reflect::get(&error, &"name".into()).unwrap().as_string();
    assert_eq!(name.as_deref(), Some("AbortError"));
    web_sys_log(&format!("abort during a 3 s backoff settled in {latency:.2} ms"));
    assert!(latency < 100.0, "abort took {latency} ms");
    assert_eq!(calls().len(), 1);
}

#[wasm_bindgen_test]
async fn one_joined_caller_aborting_does_not_cancel_the_others() {
    script(r#"[{"status": 503, "headers": {"Retry-After": "1"}}, {"status": 200}]"#);
    let oj = client(FAST);
    let impatient = web_sys_abort_controller();
    let first = post(&oj, r#"{"joined":1}"#, None, Some(&abort_signal(&impatient)));
    let patient = web_sys_abort_controller();
    let second = post(&oj, r#"{"joined":1}"#, None, Some(&abort_signal(&patient)));
    sleep_ms(100).await;
    abort(&impatient);
    let error = first.await.unwrap_err();
    assert_eq!(js_sys::Reflect::get(&error, &"name".into()).unwrap().as_string().as_deref(), Some("AbortError"));
    let response = second.await.unwrap();
    assert_eq!(response.status(), 200, "the other caller still gets the result");
    let calls = calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].key, calls[1].key);
}

#[wasm_bindgen_test]
async fn when_every_joined_caller_aborts_the_send_stops() {
    script(r#"[{"status": 503, "headers": {"Retry-After": "1"}}, {"status": 200}]"#);
    let oj = client(FAST);
    let (a, b) = (web_sys_abort_controller(), web_sys_abort_controller());
    let first = post(&oj, r#"{"joined":2}"#, None, Some(&abort_signal(&a)));
    let second = post(&oj, r#"{"joined":2}"#, None, Some(&abort_signal(&b)));
    sleep_ms(100).await;
    abort(&a);
    abort(&b);
    assert!(first.await.is_err() && second.await.is_err());
    sleep_ms(1_300).await;
    assert_eq!(calls().len(), 1, "no retry after everyone gave up waiting");
    assert_eq!(events().last().map(String::as_str), Some("backoff"));
}

#[wasm_bindgen_test]
async fn a_response_body_can_be_cancelled() {
    // Bug 12: the SDK kept the original response unread and handed out a
    // clone, whose cancel() then waits for the original forever (Streams tee).
    script(r#"[{"status": 200}]"#);
    let oj = client(FAST);
    let response = post(&oj, r#"{"cancel":1}"#, None, None).await.unwrap();
    within(2_000, cancel_body(&response)).await.expect("body.cancel() settles");
}

#[wasm_bindgen_test]
async fn joined_callers_each_cancel_or_read_their_own_body() {
    script(r#"[{"status": 200, "delayMs": 50}, {"status": 200, "delayMs": 50}]"#);
    let oj = client(FAST);
    let pending: Vec<_> = (0..3).map(|_| post(&oj, r#"{"joined":3}"#, Some("three"), None)).collect();
    let responses = futures_join_all(pending).await.into_iter().map(Result::unwrap).collect::<Vec<_>>();
    assert_eq!(calls().len(), 1);
    // One caller cancels, one reads its whole body, one cancels after that.
    let first_cancel = cancel_body(&responses[0]);
    assert_eq!(text(&responses[1]).await, r#"{"ok":true,"n":1}"#);
    within(2_000, first_cancel).await.expect("the first caller's cancel settles");
    within(2_000, cancel_body(&responses[2])).await.expect("the last caller's cancel settles");

    // Two joined callers that both cancel.
    let pending: Vec<_> = (0..2).map(|_| post(&oj, r#"{"joined":2}"#, Some("two"), None)).collect();
    let responses = futures_join_all(pending).await.into_iter().map(Result::unwrap).collect::<Vec<_>>();
    assert_eq!(calls().len(), 2);
    let cancels: Vec<_> = responses.iter().map(cancel_body).collect();
    for cancel in cancels {
        within(2_000, cancel).await.expect("each joined caller's cancel settles");
    }
}

#[wasm_bindgen_test]
async fn an_answer_nobody_waits_for_any_more_has_its_body_cancelled() {
    // The caller aborts while the (signal-blind) fetch is still under way;
    // the answer that arrives anyway must not sit unread on the connection.
    script(r#"[{"status": 200, "delayMs": 100, "openBody": true}]"#);
    let oj = client(FAST);
    let controller = web_sys_abort_controller();
    let pending = post(&oj, r#"{"late":1}"#, None, Some(&abort_signal(&controller)));
    sleep_ms(20).await;
    abort(&controller);
    assert!(pending.await.is_err());
    sleep_ms(200).await;
    assert_eq!(calls().len(), 1);
    assert_eq!(support::cancelled(), 1, "the unread answer's body was cancelled");
}

#[wasm_bindgen_test]
async fn a_final_replay_with_should_retry_false_is_delivered_not_resent() {
    // Bug 1 (SDK side): a dead job replays its last error with
    // `x-should-retry: false`; the SDK must deliver it, not keep retrying.
    script(
        r#"[{"status": 503}, {"status": 503},
            {"status": 503, "headers": {"x-should-retry": "false", "OneJob-Job-State": "dead"}}]"#,
    );
    let oj = client(FAST);
    let response = post(&oj, r#"{"dead":1}"#, Some("dead-job"), None).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(events(), ["attempt", "backoff", "attempt", "backoff", "attempt", "settled"]);
    assert!(intents(&oj).is_empty(), "delivered: no record left");
    let resumed = JsFuture::from(js_sys::Promise::from(JsValue::from(oj.resume()))).await.unwrap();
    assert_eq!(js_sys::Array::from(&resumed).length(), 0);
    assert_eq!(calls().len(), 3, "resume() re-sends nothing");
}

#[wasm_bindgen_test]
async fn a_delivered_intent_leaves_no_record() {
    // Bug 8: delivered records stayed for 24 h; apps that never call
    // resume() grew localStorage without bound.
    script(r#"[{"status": 200}, {"status": 503}]"#);
    let oj = client(r#"{ endpoint: "https://gateway.test", storage: "memory", retry: { maxAttempts: 1 } }"#);
    post(&oj, r#"{"n":1}"#, Some("done"), None).await.unwrap();
    assert_eq!(intents(&oj).len(), 0);
    post(&oj, r#"{"n":2}"#, Some("pending"), None).await.unwrap();
    let kept = intents(&oj);
    assert_eq!(kept.len(), 1, "an unresolved intent is kept");
    assert_eq!(field(&kept[0], "intent").as_deref(), Some("pending"));
}

#[wasm_bindgen_test]
async fn a_get_request_object_is_sent_in_one_call() {
    // Bug 9: a GET `Request` got an empty body attached, fetch threw, and
    // the TypeError was retried as a network error.
    script(r#"[{"status": 200}]"#);
    let oj = client(FAST);
    let request = web_sys::Request::new_with_str("https://gateway.test/v1/models").unwrap();
    let response = fetch(&oj, &request.into(), None).await.unwrap();
    assert_eq!(response.status(), 200);
    let calls = calls();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].method.as_str(), calls[0].body.as_deref()), ("GET", None));

    // A GET with a body is the app's mistake: a named error, nothing sent.
    let init = js(r#"({ method: "GET", body: "{}" })"#);
    let error = fetch(&oj, &"/v1/models".into(), Some(&init)).await.unwrap_err();
    assert_eq!(field(&error, "name").as_deref(), Some("OneJobConfigError"));
    assert_eq!(support::calls().len(), 1);
}

#[wasm_bindgen_test]
async fn the_fingerprint_is_cores_request_identity() {
    // Bug 10: the SDK had its own copy of "which part of the URL counts";
    // the edge and the SDK now share core's `Fingerprint::of_url`.
    script(r#"[{"status": 503}]"#);
    let oj = client(r#"{ endpoint: "https://gateway.test", storage: "memory", retry: { maxAttempts: 1 } }"#);
    let url = "https://gateway.test/v1/chat/completions?api-version=2024-10-21#ignored";
    let body = r#"{"b":2,"a":1}"#;
    let init = js(&format!("({{ method: 'POST', body: {body:?} }})"));
    fetch(&oj, &url.into(), Some(&init)).await.unwrap();
    let expected = onejob_core::fingerprint::Fingerprint::of_url(
        "POST",
        "/v1/chat/completions?api-version=2024-10-21",
        onejob_core::fingerprint::Body::Json(br#"{"a":1,"b":2}"#),
    )
    .unwrap();
    let record = &intents(&oj)[0];
    assert_eq!(field(record, "fingerprint"), Some(expected.to_string()));
}

#[wasm_bindgen_test]
fn malformed_options_throw_named_errors() {
    for options in [r#"{ storage: "disk" }"#, r#"{ retry: { baseMs: -1 } }"#, r#"{ onEvent: 3 }"#] {
        let value = js_sys::Function::new_no_args(&format!("return {options};")).call0(&JsValue::UNDEFINED).unwrap();
        let error = onejob_client::OneJob::new(Some(wasm_bindgen::JsCast::unchecked_into(value))).err().expect(options);
        let name = js_sys::Reflect::get(&error, &"name".into()).unwrap().as_string();
        assert_eq!(name.as_deref(), Some("OneJobConfigError"), "{options}");
    }
}

/// JCS numbers must be exactly what JavaScript's Number#toString writes:
/// JSON.stringify is the oracle, on random doubles of every magnitude.
#[wasm_bindgen_test]
fn jcs_numbers_match_javascript() {
    let mut rng = onejob_core::random::SplitMix64::new(2026);
    let mut checked = 0;
    while checked < 5_000 {
        let x = f64::from_bits(onejob_core::random::RandomSource::next_u64(&mut rng));
        if !x.is_finite() {
            continue;
        }
        let ours = onejob_core::canonical::canonicalize(format!("[{x:e}]").as_bytes()).unwrap();
        let theirs = js_sys::JSON::stringify(&js_sys::Array::of1(&JsValue::from_f64(x))).unwrap().as_string().unwrap();
        assert_eq!(ours, theirs, "bits {:#018x}", x.to_bits());
        checked += 1;
    }
}

/// A streamed answer whose connection drops mid-event: the caller gets the
/// whole events, then the rest from `…/stream?from=<whole events>`, as one body.
#[wasm_bindgen_test]
async fn a_stream_cut_mid_event_continues_after_the_events_delivered() {
    script(
        r#"[{"headers": {"Content-Type": "text/event-stream"}, "body": "data: a\n\ndata: b\n\ndata: c", "drop": true},
            {"headers": {"Content-Type": "text/event-stream"}, "body": "data: c\n\ndata: [DONE]\n\n"}]"#,
    );
    let oj = client(FAST);
    let response = post(&oj, r#"{"stream":true}"#, None, None).await.unwrap();
    assert_eq!(text(&response).await, "data: a\n\ndata: b\n\ndata: c\n\ndata: [DONE]\n\n");
    let calls = calls();
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[1].method.as_str(), calls[1].authorization.as_deref()), ("GET", Some("Bearer tenant-key")));
    assert_eq!(calls[1].url, format!("https://gateway.test/onejob/v1/jobs/{}/stream?from=2", calls[0].key));
    assert_eq!(events(), ["attempt", "settled", "backoff"]);
}

/// A stream that ends cleanly is the whole answer, even without a terminal
/// event (the gateway appends its own error event to an interrupted one).
#[wasm_bindgen_test]
async fn a_stream_that_ends_cleanly_is_not_resumed() {
    script(r#"[{"headers": {"Content-Type": "text/event-stream"}, "body": "data: a\n\ndata: b\n\ndata: partial"}]"#);
    let oj = client(FAST);
    let response = post(&oj, r#"{"stream":true}"#, None, None).await.unwrap();
    assert_eq!(text(&response).await, "data: a\n\ndata: b\n\ndata: partial");
    assert_eq!(calls().len(), 1);
}

// Small helpers, kept here so the SDK itself needs no futures crate.

/// The requests are already running (`post` calls fetch at once); await each.
async fn futures_join_all<F: std::future::Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut outputs = Vec::new();
    for future in futures {
        outputs.push(future.await);
    }
    outputs
}

async fn futures_join<A: std::future::Future, B: std::future::Future>(a: A, b: B) -> (A::Output, B::Output) {
    let mut a = Box::pin(a);
    let mut b = Box::pin(b);
    let mut a_out = None;
    let mut b_out = None;
    std::future::poll_fn(|cx| {
        if a_out.is_none()
            && let std::task::Poll::Ready(v) = a.as_mut().poll(cx)
        {
            a_out = Some(v);
        }
        if b_out.is_none()
            && let std::task::Poll::Ready(v) = b.as_mut().poll(cx)
        {
            b_out = Some(v);
        }
        if a_out.is_some() && b_out.is_some() { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
    (a_out.unwrap(), b_out.unwrap())
}

fn web_sys_abort_controller() -> JsValue {
    let class: js_sys::Function = js_sys::Reflect::get(&js_sys::global(), &"AbortController".into()).unwrap().into();
    js_sys::Reflect::construct(&class, &js_sys::Array::new()).unwrap()
}

fn abort_signal(controller: &JsValue) -> web_sys::AbortSignal {
    wasm_bindgen::JsCast::unchecked_into(js_sys::Reflect::get(controller, &"signal".into()).unwrap())
}

fn abort(controller: &JsValue) {
    let abort: js_sys::Function = js_sys::Reflect::get(controller, &"abort".into()).unwrap().into();
    abort.call0(controller).unwrap();
}

async fn sleep_ms(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        let set_timeout: js_sys::Function =
            js_sys::Reflect::get(&js_sys::global(), &"setTimeout".into()).unwrap().into();
        set_timeout.call2(&JsValue::UNDEFINED, &resolve, &ms.into()).unwrap();
    });
    wasm_bindgen_futures::JsFuture::from(promise).await.unwrap();
}

fn performance_now() -> f64 {
    let performance = js_sys::Reflect::get(&js_sys::global(), &"performance".into()).unwrap();
    let now: js_sys::Function = js_sys::Reflect::get(&performance, &"now".into()).unwrap().into();
    now.call0(&performance).unwrap().as_f64().unwrap()
}

fn web_sys_log(message: &str) {
    let console = js_sys::Reflect::get(&js_sys::global(), &"console".into()).unwrap();
    let log: js_sys::Function = js_sys::Reflect::get(&console, &"log".into()).unwrap().into();
    log.call1(&console, &message.into()).unwrap();
}

/// `fingerprint()` (numbers written by the JavaScript engine) gives the same
/// identity as the core's native path (ryu), which the gateway uses.
#[wasm_bindgen_test]
fn fingerprint_export_matches_the_gateways_identity() {
    use onejob_core::fingerprint::{Body, Fingerprint};
    let bodies = [
        r#"{"b":[1.50,1e2,-0,0.1,1e21,1e-7,123456789012345678,5e-324,1.7976931348623157e308,333333333.33333329],"a":"\u00e9\ud83d\ude00"}"#,
        r#"{"model":"gpt-4o-mini","temperature":0.7,"messages":[{"role":"user","content":"héllo \"there\"\n"}]}"#,
        "not json at all",
        "[]",
    ];
    for body in bodies {
        let url = "https://gw.example/v1/chat/completions?api-version=1#frag";
        let native = Fingerprint::of_url("POST", url, Body::Json(body.as_bytes()))
            .unwrap_or_else(|_| Fingerprint::of_bytes("POST", "/v1/chat/completions?api-version=1", body.as_bytes()));
        assert_eq!(onejob_client::fingerprint("post", url, Some(body.into())), native.as_str(), "{body}");
    }
    assert_eq!(onejob_client::fingerprint("GET", "/v1/models", None).len(), 64);
}

/// The SDK's allocator (size classes with free lists): blocks of every size
/// keep their contents while others are freed, reused and grown.
#[wasm_bindgen_test]
fn the_allocator_keeps_every_block_intact() {
    let sizes = [1usize, 7, 16, 17, 100, 4096, 4097, 70_000, 300_000];
    let fill = |i: usize, n: usize| (0..n).map(|j| (i * 31 + j) as u8).collect::<Vec<u8>>();
    let mut kept: Vec<(usize, Vec<u8>)> = Vec::new();
    for round in 0..20 {
        for (i, &n) in sizes.iter().enumerate() {
            kept.push((round * 100 + i, fill(round * 100 + i, n)));
        }
        // Free every other block, then grow a few of the rest in place or not.
        let mut k = 0;
        kept.retain(|_| {
            k += 1;
            k % 2 == 0
        });
        for (id, block) in kept.iter_mut().take(3) {
            let extra = fill(*id, 5000);
            block.extend_from_slice(&extra);
            block.truncate(block.len() - 5000);
        }
    }
    for (id, block) in &kept {
        assert_eq!(block, &fill(*id, block.len()), "block {id}");
    }
}
