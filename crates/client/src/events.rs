//! Events for UIs: `attempt`, `backoff`, `replayed`, `settled`, `gave_up`,
//! `warning`, delivered to the `onEvent` callback as plain objects.

use js_sys::{Function, Object, Reflect};
use wasm_bindgen::JsValue;

/// Calls the app's `onEvent`, if it gave one. A throwing handler is the app's
/// bug and must not break the request, so its exception is swallowed.
#[derive(Clone, Default)]
pub struct Events {
    handler: Option<Function>,
}

/// One field of an event.
pub enum Field<'a> {
    Str(&'a str),
    Num(f64),
    Bool(bool),
}

impl Events {
    pub fn new(handler: Option<Function>) -> Self {
        Self { handler }
    }

    pub fn emit(&self, kind: &str, intent: &str, key: &str, fields: &[(&str, Field<'_>)]) {
        let Some(handler) = &self.handler else { return };
        let event = Object::new();
        let set = |name: &str, value: JsValue| {
            let _ = Reflect::set(&event, &JsValue::from_str(name), &value);
        };
        set("type", kind.into());
        set("intent", intent.into());
        set("key", key.into());
        set("at", JsValue::from_f64(js_sys::Date::now()));
        for (name, value) in fields {
            set(
                name,
                match value {
                    Field::Str(s) => JsValue::from_str(s),
                    Field::Num(n) => JsValue::from_f64(*n),
                    Field::Bool(b) => JsValue::from_bool(*b),
                },
            );
        }
        let _ = handler.call1(&JsValue::UNDEFINED, &event);
    }

    pub fn warning(&self, intent: &str, message: &str) {
        self.emit("warning", intent, "", &[("message", Field::Str(message))]);
    }
}
