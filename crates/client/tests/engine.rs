//! The engine's own exports, called as the JavaScript shell calls them (the
//! SDK's behaviour end to end is tested in JavaScript: tests/sdk). Runs in
//! Node (`wasm-pack test --node`).

use onejob_client::{Engine, EventSplitter, Intent, fingerprint, intent_id, last_error};
use wasm_bindgen_test::wasm_bindgen_test;

const DELIVER: f64 = -1.0;
const GIVE_UP: f64 = -2.0;

/// Defaults but for a short backoff: base 10 ms, cap 50 ms.
fn engine() -> Engine {
    Engine::new(10.0, 50.0, 500, 5, 10, 1, 60_000.0, 86_400_000.0).unwrap()
}

fn fp(body: &str) -> String {
    fingerprint("POST", "https://gw.test/v1/chat/completions", body.as_bytes())
}

#[wasm_bindgen_test]
fn transient_answers_wait_within_the_backoff_and_final_ones_are_delivered() {
    let mut engine = engine();
    let mut attempts = engine.attempts();
    let now = 1.7e12;
    for _ in 0..3 {
        let delay = engine.next(&mut attempts, 503, None, None, None, now, true);
        assert!((0.0..=50.0).contains(&delay), "{delay}");
        assert_eq!(attempts.reason(), "unavailable (503)");
    }
    assert!(engine.next(&mut attempts, 0, None, None, None, now, true) >= 0.0, "a network error is resent");
    assert_eq!(attempts.reason(), "network error");
    assert_eq!(engine.next(&mut attempts, 200, None, None, None, now, true), DELIVER);
    assert_eq!(engine.next(&mut attempts, 422, None, None, None, now, true), DELIVER);
    assert_eq!(engine.next(&mut attempts, 503, Some("false".into()), None, None, now, true), DELIVER);
    assert_eq!(engine.next(&mut attempts, 503, None, None, None, now, false), GIVE_UP, "no attempts left");
}

#[wasm_bindgen_test]
fn the_servers_wait_is_honoured_and_capped() {
    let mut engine = Engine::new(10.0, 50.0, 500, 5, 10, 1, 2_000.0, 86_400_000.0).unwrap();
    let mut attempts = engine.attempts();
    let delay = engine.next(&mut attempts, 429, None, Some("1200".into()), None, 0.0, true);
    assert_eq!(delay, 1200.0);
    assert!(attempts.server_asked());
    assert_eq!(attempts.reason(), "rate limited (429); server asked to wait 1200 ms");
    let delay = engine.next(&mut attempts, 429, None, None, Some("3600".into()), 0.0, true);
    assert_eq!(delay, 2000.0, "cut to retryAfterCapMs");
    assert_eq!(engine.server_delay(None, Some("1".into()), 0.0), 1000.0);
    assert_eq!(engine.server_delay(None, None, 0.0), -1.0);
    let jitter = engine.jitter(40);
    assert!((0.0..=50.0).contains(&jitter));
}

/// The shell's calls: the three header values (`x-should-retry`,
/// `retry-after-ms`, `Retry-After`) joined by line feeds, empty when absent.
#[wasm_bindgen_test]
fn joined_headers_mean_what_the_values_apart_mean() {
    let mut engine = Engine::new(10.0, 50.0, 500, 5, 10, 1, 2_000.0, 86_400_000.0).unwrap();
    let mut attempts = engine.attempts();
    assert_eq!(engine.next_joined(&mut attempts, 429, "\n1200\n", 0.0, true), 1200.0);
    assert!(attempts.server_asked());
    assert_eq!(attempts.reason(), "rate limited (429); server asked to wait 1200 ms");
    assert_eq!(engine.next_joined(&mut attempts, 429, "\n\n3600", 0.0, true), 2000.0, "cut to retryAfterCapMs");
    assert_eq!(engine.next_joined(&mut attempts, 503, "false\n\n", 0.0, true), DELIVER);
    assert_eq!(engine.next_joined(&mut attempts, 200, "", 0.0, true), DELIVER);
    let delay = engine.next_joined(&mut attempts, 503, "\n\n", 0.0, true);
    assert!((0.0..=50.0).contains(&delay), "{delay}");
    assert!(!attempts.server_asked());
    assert_eq!(engine.server_delay_joined("\n\n1", 0.0), 1000.0);
    assert_eq!(engine.server_delay_joined("true\n250\n1", 0.0), 250.0, "retry-after-ms first");
    assert_eq!(engine.server_delay_joined("\n\nSun, 06 Nov 1994 08:49:37 GMT", 784_111_777_000.0 - 1_500.0), 1_500.0);
    for nothing in ["", "\n\n", "true\n\n"] {
        assert_eq!(engine.server_delay_joined(nothing, 0.0), -1.0, "{nothing:?}");
    }
}

/// `Retry-After` dates are read by JavaScript's `Date.parse` (core's
/// `HostDates` picks what it is handed): as core reads them, in any zone.
#[wasm_bindgen_test]
fn http_dates_are_read_by_the_javascript_engine_as_core_reads_them() {
    let engine = Engine::new(10.0, 50.0, 500, 5, 10, 1, 60_000.0, 86_400_000.0).unwrap();
    // Sun, 06 Nov 1994 08:49:37 GMT, less 1.5 s.
    let now = 784_111_777_000.0 - 1_500.0;
    for date in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
        assert_eq!(engine.server_delay(None, Some(date.into()), now), 1_500.0, "{date}");
        assert_eq!(engine.server_delay(None, Some(date.into()), now + 9_000.0), 0.0, "{date}: past means now");
    }
    let mut engine = engine;
    let mut attempts = engine.attempts();
    let delay = engine.next(&mut attempts, 503, None, None, Some("Sun, 06 Nov 1994 08:49:37 GMT".into()), now, true);
    assert_eq!(delay, 1_500.0);
    assert_eq!(attempts.reason(), "unavailable (503); server asked to wait 1500 ms");
    // Text `Date.parse` would read but that is no HTTP-date (a day in 2001, a
    // Pacific time) or not a time at all: not a request to wait.
    for junk in [
        "1.5",
        "-1",
        "soon",
        "Sun, 06 Nov 1994 08:49:37 PST",
        "Sun, 06 Foo 1994 08:49:37 GMT",
        "Wed, 31 Dec 1969 23:59:59 GMT",
    ] {
        assert_eq!(engine.server_delay(None, Some(junk.into()), now), -1.0, "{junk}");
    }
}

#[wasm_bindgen_test]
fn a_500_is_retried_once_and_the_budget_runs_out() {
    let mut engine = engine();
    let mut attempts = engine.attempts();
    assert!(engine.next(&mut attempts, 500, None, None, None, 0.0, true) >= 0.0);
    assert_eq!(engine.next(&mut attempts, 500, None, None, None, 0.0, true), GIVE_UP);
    // capacity 10, a retry costs 5: two retries, then none for any send.
    let mut engine = Engine::new(10.0, 50.0, 10, 5, 10, 0, 60_000.0, 86_400_000.0).unwrap();
    let (mut a, mut b) = (engine.attempts(), engine.attempts());
    assert!(engine.next(&mut a, 503, None, None, None, 0.0, true) >= 0.0);
    assert!(engine.next(&mut b, 503, None, None, None, 0.0, true) >= 0.0);
    assert_eq!(engine.next(&mut a, 503, None, None, None, 0.0, true), GIVE_UP);
}

#[wasm_bindgen_test]
fn malformed_policies_are_refused_with_a_reason() {
    for (base, cap, capacity, cost, why) in [
        (0.0, 10.0, 500, 5, "onejob: retry: baseMs must be at least 1 ms"),
        (100.0, 10.0, 500, 5, "onejob: retry: capMs must be at least baseMs"),
        (1.0, 10.0, 4, 5, "onejob: retry.budget: a retry costs more tokens than the budget holds"),
        (1.0, 10.0, 500, 0, "onejob: retry.budget: a retry must cost at least one token"),
    ] {
        assert!(Engine::new(base, cap, capacity, cost, cost, 1, 0.0, 1.0).is_none(), "{why}");
        assert_eq!(last_error(), why);
    }
}

#[wasm_bindgen_test]
fn fingerprints_the_engine_did_not_compute_are_refused() {
    assert!(intent_id(None, "not a fingerprint").is_none());
    assert_eq!(last_error(), "onejob: malformed fingerprint");
    assert!(engine().submit(None, "x", &"A".repeat(64), None, 0.0).is_none());
    assert_eq!(last_error(), "onejob: malformed fingerprint");
}

#[wasm_bindgen_test]
fn an_unresolved_intent_keeps_its_key_and_request_until_it_expires() {
    let engine = engine();
    let fingerprint = fp("{}");
    let id = intent_id(None, &fingerprint).unwrap();
    assert_eq!(id, format!("fp:{fingerprint}"));
    assert_eq!(intent_id(Some("triage:1".into()), &fingerprint).unwrap(), "triage:1");
    let request = r#"{"url":"https://gw.test/v1/chat/completions","method":"POST","headers":[["content-type","application/json"]],"body":"{}"}"#;
    let mut first = engine.submit(None, &id, &fingerprint, Some(request.into()), 1_000.0).unwrap();
    assert_eq!(first.key().len(), 36);
    let stored = first.attempt(2_000.0);
    let again = Intent::read(&stored, &id).unwrap();
    assert_eq!(again.attempts(), 1);
    assert_eq!(again.request().as_deref(), Some(request), "read back exactly");
    let key = first.key();
    let reused = engine.submit(Some(again), &id, &fingerprint, Some("{}".into()), 3_000.0).unwrap();
    assert_eq!(reused.key(), key);
    assert_eq!(reused.request().as_deref(), Some(request), "the first request is what resume() sends");
    assert!(reused.live(3_000.0));
    assert!(!reused.live(1_000.0 + 86_400_000.0), "expired with the gateway's retention");
    let expired = Intent::read(&reused.json(), &id).unwrap();
    let fresh = engine.submit(Some(expired), &id, &fingerprint, None, 1_000.0 + 86_400_000.0).unwrap();
    assert_ne!(fresh.key(), key);
    let mut gave_up = Intent::read(&reused.json(), &id).unwrap();
    assert!(gave_up.give_up(4_000.0).contains(r#""state":"gave_up""#));
}

#[wasm_bindgen_test]
fn unreadable_and_foreign_entries_are_refused_with_a_reason() {
    for (text, why) in [("{not json", "unreadable entry dropped"), (r#"{"intent":"x"}"#, "unreadable entry dropped")] {
        assert!(Intent::read(text, "x").is_none(), "{text}");
        let message = last_error();
        assert!(message.starts_with(why), "{message}");
    }
    let engine = engine();
    let record = engine.submit(None, "mine", &fp("{}"), None, 0.0).unwrap().json();
    assert!(Intent::read(&record, "theirs").is_none());
    assert_eq!(last_error(), "entry belongs to another intent; dropped");
}

#[wasm_bindgen_test]
fn the_splitter_hands_out_whole_events_only() {
    let mut splitter = EventSplitter::new();
    assert_eq!(splitter.push(b"data: a\n\ndata: b\r\n\r\nda"), b"data: a\n\ndata: b\r\n\r\n");
    assert_eq!((splitter.events(), splitter.ended()), (2, false));
    assert_eq!(splitter.push(b"ta: c\n"), b"");
    assert_eq!(splitter.events(), 0);
    assert_eq!(splitter.push(b"\ndata: [DONE]\n\n"), b"data: c\n\ndata: [DONE]\n\n");
    assert_eq!((splitter.events(), splitter.ended()), (2, true));
    splitter.push(b"tail");
    assert_eq!(splitter.rest(), b"tail");
}

/// JCS numbers must be exactly what JavaScript's Number#toString writes:
/// JSON.stringify is the oracle, on random doubles of every magnitude.
#[wasm_bindgen_test]
fn jcs_numbers_match_javascript() {
    let mut rng = onejob_core::identity::random::SplitMix64::new(2026);
    let mut checked = 0;
    while checked < 5_000 {
        let x = f64::from_bits(onejob_core::identity::random::RandomSource::next_u64(&mut rng));
        if !x.is_finite() {
            continue;
        }
        let ours = onejob_core::identity::canonical::canonicalize(format!("[{x:e}]").as_bytes()).unwrap();
        let theirs = js_sys::JSON::stringify(&js_sys::Array::of1(&wasm_bindgen::JsValue::from_f64(x)))
            .unwrap()
            .as_string()
            .unwrap();
        assert_eq!(ours, theirs, "bits {:#018x}", x.to_bits());
        checked += 1;
    }
}

/// `fingerprint()` (numbers written by the JavaScript engine) gives the same
/// identity as the core's native path (ryu), which the gateway uses.
#[wasm_bindgen_test]
fn fingerprint_export_matches_the_gateways_identity() {
    use onejob_core::identity::fingerprint::{Body, Fingerprint};
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
        assert_eq!(onejob_client::fingerprint("post", url, body.as_bytes()), native.as_str(), "{body}");
    }
    assert_eq!(onejob_client::fingerprint("GET", "/v1/models", b"").len(), 64);
}

/// The shell's path: the body written into the engine's buffer (as
/// `encodeInto` does), then fingerprinted by its length; the buffer is reused
/// by the next body, larger or smaller, and a huge one's is given back.
#[wasm_bindgen_test]
fn the_body_buffer_fingerprints_what_was_written_into_it() {
    use onejob_client::{body_buffer, fingerprint_body};
    let url = "https://gw.test/v1/chat/completions";
    let chat = r#"{"messages":[{"role":"user","content":"Voilà ✓ \"quoted\" C:\\x\n日本語 🙂 \u00e9"}]}"#;
    assert!(onejob_core::identity::canonical::canonicalize(chat.as_bytes()).is_ok());
    let big = format!(r#"{{"a":"{}"}}"#, "é".repeat(1 << 20));
    for body in [chat, "{}", "", "not json", &big, chat] {
        let at = body_buffer(body.len() * 3);
        // What encodeInto does: the bytes written at that address.
        // SAFETY: `body_buffer` reserved at least that many bytes there.
        unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), at, body.len()) };
        assert_eq!(
            fingerprint_body("POST", url, body.len()),
            fingerprint("POST", url, body.as_bytes()),
            "{}",
            body.chars().take(30).collect::<String>()
        );
    }
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
