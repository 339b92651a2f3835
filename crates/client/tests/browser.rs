//! What only a browser has: `localStorage` persistence across page loads and
//! resilience to corrupted entries. Runs under `wasm-pack test --headless --chrome`.

mod support;

use js_sys::Reflect;
use support::{calls, client, events, post, script};
use wasm_bindgen::JsValue;
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};

wasm_bindgen_test_configure!(run_in_browser);

fn local_storage() -> web_sys::Storage {
    wasm_bindgen::JsCast::unchecked_into(Reflect::get(&js_sys::global(), &"localStorage".into()).unwrap())
}

const LOCAL: &str = r#"{ endpoint: "https://gateway.test", storage: "local", retry: { maxAttempts: 1 } }"#;

#[wasm_bindgen_test]
async fn an_unresolved_intent_keeps_its_key_across_a_reload() {
    local_storage().clear().unwrap();
    script(r#"[{"status": 503}, {"status": 200}]"#);
    let before_reload = client(LOCAL);
    assert_eq!(before_reload.storage(), "local");
    assert_eq!(post(&before_reload, r#"{"t":1}"#, Some("triage:1"), None).await.unwrap().status(), 503);
    drop(before_reload);

    // A new client reads the same localStorage, as the reloaded page would.
    let after_reload = client(LOCAL);
    let intents = after_reload.intents();
    let intents: js_sys::Array = JsValue::from(intents).into();
    assert_eq!(intents.length(), 1);
    let resumed = wasm_bindgen_futures::JsFuture::from(js_sys::Promise::from(JsValue::from(after_reload.resume())))
        .await
        .unwrap();
    let resumed: js_sys::Array = resumed.into();
    assert_eq!(resumed.length(), 1);
    let calls = calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].key, calls[1].key, "resume() re-sends with the original key");
    assert_eq!(support::intents(&after_reload).len(), 0, "delivered: nothing left to remember");
}

#[wasm_bindgen_test]
async fn corrupted_and_foreign_entries_are_dropped_with_a_warning() {
    let storage = local_storage();
    storage.clear().unwrap();
    storage.set_item("onejob:v1:intent:garbage", "{not json").unwrap();
    storage.set_item("onejob:v1:intent:foreign", r#"{"intent":"someone-else"}"#).unwrap();
    storage.set_item("unrelated", "kept").unwrap();
    let oj = client(LOCAL);
    let intents: js_sys::Array = JsValue::from(oj.intents()).into();
    assert_eq!(intents.length(), 0);
    assert_eq!(events(), ["warning", "warning"]);
    assert_eq!(storage.get_item("onejob:v1:intent:garbage").unwrap(), None);
    assert_eq!(storage.get_item("unrelated").unwrap().as_deref(), Some("kept"));
    // And requests still work.
    script(r#"[{"status": 200}]"#);
    assert_eq!(post(&oj, "{}", None, None).await.unwrap().status(), 200);
}

#[wasm_bindgen_test]
async fn forget_drops_the_key() {
    local_storage().clear().unwrap();
    script(r#"[{"status": 503}, {"status": 200}]"#);
    let oj = client(LOCAL);
    post(&oj, "{}", Some("x"), None).await.unwrap();
    assert!(oj.forget("x"));
    post(&oj, "{}", Some("x"), None).await.unwrap();
    let calls = calls();
    assert_ne!(calls[0].key, calls[1].key);
}

/// A stored record of `intent`, as the SDK writes it.
fn planted(intent: &str, updated_ms: u64, expires_ms: u64) -> String {
    use onejob_core::fingerprint::Fingerprint;
    use onejob_core::intent::{IntentRecord, IntentState};
    let key = format!("planted-key-0000-{intent}");
    IntentRecord {
        intent: intent.to_owned(),
        key: onejob_core::key::IdempotencyKey::parse(&key).unwrap(),
        fingerprint: Fingerprint::of_bytes("POST", "/v1/chat/completions", intent.as_bytes()),
        state: IntentState::Pending,
        attempts: 1,
        created_ms: updated_ms,
        updated_ms,
        expires_ms,
        request: None,
    }
    .to_json()
}

fn stored_intents(storage: &web_sys::Storage) -> u32 {
    let len = storage.length().unwrap();
    (0..len).filter(|&i| storage.key(i).unwrap().is_some_and(|k| k.starts_with("onejob:v1:intent:"))).count() as u32
}

#[wasm_bindgen_test]
fn a_new_client_prunes_expired_records() {
    // Bug 8: expired records were pruned only inside resume().
    let storage = local_storage();
    storage.clear().unwrap();
    let now = js_sys::Date::now() as u64;
    storage.set_item("onejob:v1:intent:old", &planted("old", now - 2_000, now - 1_000)).unwrap();
    storage.set_item("onejob:v1:intent:live", &planted("live", now, now + 60_000)).unwrap();
    let _oj = client(LOCAL);
    assert_eq!(storage.get_item("onejob:v1:intent:old").unwrap(), None, "expired: pruned");
    assert!(storage.get_item("onejob:v1:intent:live").unwrap().is_some(), "live: kept");
}

#[wasm_bindgen_test]
async fn the_store_keeps_at_most_500_intents_and_warns_for_each_dropped() {
    // Bug 8: the store had no cap. The oldest unresolved records make room.
    let storage = local_storage();
    storage.clear().unwrap();
    let now = js_sys::Date::now() as u64;
    for i in 0..500u64 {
        let intent = format!("planted:{i}");
        storage
            .set_item(&format!("onejob:v1:intent:{intent}"), &planted(&intent, now - 10_000 + i, now + 60_000))
            .unwrap();
    }
    script(r#"[{"status": 503}]"#);
    let oj = client(LOCAL);
    post(&oj, "{}", Some("one-more"), None).await.unwrap();
    assert_eq!(stored_intents(&storage), 500);
    assert_eq!(storage.get_item("onejob:v1:intent:planted:0").unwrap(), None, "the oldest is dropped");
    assert!(storage.get_item("onejob:v1:intent:planted:1").unwrap().is_some());
    assert!(storage.get_item("onejob:v1:intent:one-more").unwrap().is_some());
    let warned: Vec<String> = support::warnings();
    assert_eq!(warned, ["planted:0"]);
    storage.clear().unwrap();
}
