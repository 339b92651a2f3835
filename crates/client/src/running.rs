//! One send shared by every submission of an intent (double clicks join the
//! request already running). Each caller may abort its own wait at once; the
//! network request and any backoff stop only when every caller that could
//! abort has, so one impatient caller cannot cancel another's result.
//!
//! The result goes to the callers still waiting: every one but the last gets
//! a clone of the response, the last gets the response itself. So each body
//! is read or cancelled by its own caller alone. (Keeping the original unread
//! and handing out clones made `body.cancel()` wait forever: by the Streams
//! rules a cancelled clone waits for its unread sibling, and the `openai`
//! package cancels a body before each of its retries.)

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{AbortSignal, Response};

use crate::js;

pub struct Running {
    /// Aborts the send.
    controller: JsValue,
    /// Callers waiting for the result, in the order they joined: an id (for
    /// an abort to find its own entry), `resolve`, `reject`.
    waiting: RefCell<Vec<(u32, Function, Function)>>,
    /// Ids handed out so far.
    joined: Cell<u32>,
    /// Callers with a signal that has not aborted.
    abortable: Cell<u32>,
    /// A caller without a signal joined: the send can no longer be aborted.
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
    pub fn new(controller: JsValue) -> Rc<Self> {
        Rc::new(Self {
            controller,
            waiting: RefCell::new(Vec::new()),
            joined: Cell::new(0),
            abortable: Cell::new(0),
            pinned: Cell::new(false),
        })
    }

    /// A caller's view of the send: its response, or the caller's own abort
    /// reason as soon as its `signal` aborts.
    pub fn join(self: &Rc<Self>, signal: Option<AbortSignal>) -> Promise {
        let Some(signal) = signal else {
            self.pinned.set(true);
            return self.wait().1;
        };
        self.abortable.set(self.abortable.get() + 1);
        if signal.aborted() {
            self.release(&signal.reason());
            return Promise::reject(&signal.reason());
        }
        let (id, promise) = self.wait();
        let this = Rc::clone(self);
        let aborted = signal.clone();
        js::on_abort(&signal, move || {
            let reason = aborted.reason();
            let entry = this.waiting.borrow().iter().position(|(i, ..)| *i == id);
            if let Some(entry) = entry {
                let (_, _, reject) = this.waiting.borrow_mut().remove(entry);
                let _ = reject.call1(&JsValue::UNDEFINED, &reason);
            }
            this.release(&reason);
        });
        promise
    }

    /// Hands the send's result to every caller still waiting (see the module
    /// comment); with nobody left, the body is cancelled so the connection
    /// is freed.
    ///
    /// Called once, by the send itself, in the same step that unregisters it:
    /// no caller can join after the response was handed out.
    pub fn settle(&self, result: Result<Response, JsValue>) {
        let waiting = self.waiting.take();
        let response = match result {
            Ok(response) => response,
            Err(error) => {
                for (_, _, reject) in &waiting {
                    let _ = reject.call1(&JsValue::UNDEFINED, &error);
                }
                return;
            }
        };
        let Some(((_, resolve_last, _), others)) = waiting.split_last() else {
            // Everyone aborted, which usually errors the body already.
            js::discard_body(&response);
            return;
        };
        // Clone before the original changes hands: a read body cannot be cloned.
        for (_, resolve, reject) in others {
            let _ = match response.clone() {
                Ok(clone) => resolve.call1(&JsValue::UNDEFINED, &clone),
                Err(error) => reject.call1(&JsValue::UNDEFINED, &error),
            };
        }
        let _ = resolve_last.call1(&JsValue::UNDEFINED, &response);
    }

    /// A new waiting caller's id, and its promise (settled by [`Running::settle`]).
    fn wait(&self) -> (u32, Promise) {
        let id = self.joined.get();
        self.joined.set(id + 1);
        (id, Promise::new(&mut |resolve, reject| self.waiting.borrow_mut().push((id, resolve, reject))))
    }

    /// One caller stopped waiting; abort the send when nobody who could is left.
    fn release(&self, reason: &JsValue) {
        self.abortable.set(self.abortable.get().saturating_sub(1));
        if self.abortable.get() == 0 && !self.pinned.get() {
            let abort: Option<Function> =
                Reflect::get(&self.controller, &"abort".into()).ok().and_then(|a| a.dyn_into().ok());
            if let Some(abort) = abort {
                let _ = abort.call1(&self.controller, reason);
            }
        }
    }
}
