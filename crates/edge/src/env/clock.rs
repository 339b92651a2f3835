//! The worker's clock, read in one place (the core takes time as an
//! argument), and a timer for work that may outlive its request.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use wasm_bindgen::JsValue;
use wasm_bindgen::prelude::{Closure, wasm_bindgen};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(handle: &JsValue);
}

/// Waits `ms`, waking whichever task polled it last.
///
/// `worker::Delay` keeps the waker of its first poll. An upstream call can
/// move to another task: a hedge's loser is raced in the request's task and
/// then awaited past the response by the Ledger's `drive::audit_late`. A
/// `Delay` inside it (the demo provider's latency, the call's timeout) then
/// wakes the request's finished task, and the audit never runs. This timer
/// takes the waker of every poll, as `JsFuture` does.
pub fn sleep(ms: u64) -> Sleep {
    Sleep { ms, shared: Rc::new(RefCell::new(Shared::default())), timer: None }
}

pub struct Sleep {
    ms: u64,
    shared: Rc<RefCell<Shared>>,
    /// The callback and the timer's handle, once it is set.
    timer: Option<(Closure<dyn FnMut()>, JsValue)>,
}

#[derive(Default)]
struct Shared {
    fired: bool,
    waker: Option<Waker>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        {
            let mut shared = self.shared.borrow_mut();
            if shared.fired {
                return Poll::Ready(());
            }
            shared.waker = Some(cx.waker().clone());
        }
        if self.timer.is_none() {
            let shared = Rc::clone(&self.shared);
            let callback = Closure::<dyn FnMut()>::new(move || {
                let waker = {
                    let mut shared = shared.borrow_mut();
                    shared.fired = true;
                    shared.waker.take()
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
            });
            let handle = set_timeout(wasm_bindgen::JsCast::unchecked_ref(callback.as_ref()), self.ms as f64);
            self.timer = Some((callback, handle));
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    /// A timer dropped before it fired is cleared: its callback (dropped
    /// with it) must never be called.
    fn drop(&mut self) {
        if let Some((_, handle)) = &self.timer
            && !self.shared.borrow().fired
        {
            clear_timeout(handle);
        }
    }
}
