//! One send shared by every submission of an intent (double clicks join the
//! request already running). Each caller gets its own clone of the response
//! and may abort its own wait at once; the network request and any backoff
//! stop only when every caller that could abort has, so one impatient caller
//! cannot cancel another's result.

use std::cell::Cell;
use std::rc::Rc;

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{AbortSignal, Response};

use crate::js;

pub struct Running {
    /// Resolves to the send's original response (never read; callers get clones).
    result: Promise,
    /// Aborts the send.
    controller: JsValue,
    /// Callers with a signal that are still waiting.
    waiting: Cell<u32>,
    /// A caller without a signal is waiting: the send can no longer be aborted.
    pinned: Cell<bool>,
}

/// A fresh `AbortController` and its signal, for one send.
pub fn controller() -> Result<(JsValue, AbortSignal), JsValue> {
    let class: Function = js::global("AbortController")
        .ok_or_else(|| js::error("OneJobConfigError", "this runtime has no AbortController"))?
        .dyn_into()?;
    let controller = Reflect::construct(&class, &js_sys::Array::new())?;
    let signal = Reflect::get(&controller, &"signal".into())?.dyn_into()?;
    Ok((controller, signal))
}

impl Running {
    pub fn new(result: Promise, controller: JsValue) -> Rc<Self> {
        Rc::new(Self { result, controller, waiting: Cell::new(0), pinned: Cell::new(false) })
    }

    /// A caller's view of the send: a clone of its response, or the caller's
    /// own abort reason as soon as its `signal` aborts.
    pub fn join(self: &Rc<Self>, signal: Option<AbortSignal>) -> Promise {
        let cloned = js::then(&self.result, clone_response());
        let Some(signal) = signal else {
            self.pinned.set(true);
            return cloned;
        };
        if signal.aborted() {
            self.waiting.set(self.waiting.get() + 1);
            self.release(&signal.reason());
            return Promise::reject(&signal.reason());
        }
        self.waiting.set(self.waiting.get() + 1);
        let this = Rc::clone(self);
        Promise::new(&mut |resolve: Function, reject: Function| {
            let _forwarded = js::then_or(&cloned, resolve.into(), reject.clone().into());
            let (aborted, this) = (signal.clone(), Rc::clone(&this));
            js::on_abort(&signal, move || {
                let reason = aborted.reason();
                let _ = reject.call1(&JsValue::UNDEFINED, &reason);
                this.release(&reason);
            });
        })
    }

    /// One caller stopped waiting; abort the send when nobody is left.
    fn release(&self, reason: &JsValue) {
        self.waiting.set(self.waiting.get().saturating_sub(1));
        if self.waiting.get() == 0 && !self.pinned.get() {
            let abort: Option<Function> =
                Reflect::get(&self.controller, &"abort".into()).ok().and_then(|a| a.dyn_into().ok());
            if let Some(abort) = abort {
                let _ = abort.call1(&self.controller, reason);
            }
        }
    }
}

/// `response => response.clone()`, as a JS callback owned by the JS GC.
fn clone_response() -> JsValue {
    Closure::<dyn FnMut(JsValue) -> Result<JsValue, JsValue>>::new(|response: JsValue| {
        let response: Response = response.dyn_into()?;
        Ok(response.clone()?.into())
    })
    .into_js_value()
}
