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
    let record = js_sys::Array::from(&JsValue::from(after_reload.intents())).get(0);
    assert_eq!(Reflect::get(&record, &"state".into()).unwrap().as_string().as_deref(), Some("delivered"));
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
