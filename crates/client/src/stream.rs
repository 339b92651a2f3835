//! A streamed answer (`text/event-stream`) whose body survives a dropped
//! connection. The caller gets whole SSE events only (cut by core's
//! `sse::Splitter`, byte for byte) and the SDK counts them; when reading
//! fails, it asks the gateway for the events after those
//! (`GET …/onejob/v1/jobs/{key}/stream?from=N`) and goes on with the same
//! body. A clean end is the end: the gateway itself ends an interrupted
//! stream with an error event.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use js_sys::{Object, Reflect, Uint8Array};
use onejob_core::sse::{Splitter, ends_stream};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, future_to_promise};
use web_sys::{ReadableStream, ReadableStreamDefaultController, ReadableStreamDefaultReader, Response, ResponseInit};

use crate::client::Client;

/// What a stream needs to ask for the rest of itself.
pub struct Resume {
    pub client: Rc<Client>,
    pub intent: String,
    pub key: String,
    /// `{gateway}/onejob/v1/jobs/{key}/stream?from=`
    pub url: String,
    /// `init` of the GET (credential, signal).
    pub init: JsValue,
    pub signal: Option<web_sys::AbortSignal>,
}

struct Body {
    resume: Resume,
    reader: RefCell<ReadableStreamDefaultReader>,
    splitter: RefCell<Splitter>,
    /// Complete events handed to the caller.
    delivered: Cell<u64>,
    cancelled: Cell<bool>,
}

/// Whether `response` is a streamed answer worth resuming.
pub fn is_event_stream(response: &Response) -> bool {
    response.status() == 200
        && response.body().is_some()
        && response.headers().get("content-type").ok().flatten().is_some_and(|t| t.starts_with("text/event-stream"))
}

/// `response` with a body that resumes itself (see the module comment).
pub fn resumable(response: Response, resume: Resume) -> Result<Response, JsValue> {
    let Some(stream) = response.body() else { return Ok(response) };
    let body = Rc::new(Body {
        resume,
        reader: RefCell::new(ReadableStreamDefaultReader::new(&stream)?),
        splitter: RefCell::new(Splitter::new()),
        delivered: Cell::new(0),
        cancelled: Cell::new(false),
    });
    let source = Object::new();
    let pulling = Rc::clone(&body);
    // (One closure type for both: each type costs its own glue.)
    let pull = Closure::<dyn Fn(JsValue) -> JsValue>::new(move |controller: JsValue| {
        let body = Rc::clone(&pulling);
        future_to_promise(async move { body.pull(controller.unchecked_into()).await.map(|()| JsValue::UNDEFINED) })
            .into()
    });
    let cancel = Closure::<dyn Fn(JsValue) -> JsValue>::new(move |reason: JsValue| {
        body.cancelled.set(true);
        body.reader.borrow().cancel_with_reason(&reason).into()
    });
    Reflect::set(&source, &"pull".into(), &pull.into_js_value())?;
    Reflect::set(&source, &"cancel".into(), &cancel.into_js_value())?;
    let init = ResponseInit::new();
    init.set_status(response.status());
    init.set_status_text(&response.status_text());
    init.set_headers_headers(&response.headers());
    Response::new_with_opt_readable_stream_and_init(Some(&ReadableStream::new_with_underlying_source(&source)?), &init)
}

impl Body {
    /// Enqueues the next complete events (or the end). A rejection errors the stream.
    async fn pull(&self, controller: ReadableStreamDefaultController) -> Result<(), JsValue> {
        loop {
            let reader = self.reader.borrow().clone();
            match JsFuture::from(reader.read()).await {
                Ok(chunk) => {
                    if Reflect::get(&chunk, &"done".into())?.is_truthy() {
                        // Whatever follows the last blank line, as it came.
                        let rest = std::mem::take(&mut *self.splitter.borrow_mut());
                        if !rest.pending().is_empty() && !self.cancelled.get() {
                            controller.enqueue_with_chunk(&Uint8Array::from(rest.pending()))?;
                        }
                        let _ = controller.close();
                        self.resume.client.stream_read(&self.resume.intent);
                        return Ok(());
                    }
                    let bytes = Uint8Array::new(&Reflect::get(&chunk, &"value".into())?).to_vec();
                    let events = self.splitter.borrow_mut().push(&bytes);
                    if !events.is_empty() {
                        self.delivered.set(self.delivered.get() + events.len() as u64);
                        // The whole answer is here (SDKs often cancel the body right after).
                        if events.last().is_some_and(|e| ends_stream(e)) {
                            self.resume.client.stream_read(&self.resume.intent);
                        }
                        return controller.enqueue_with_chunk(&Uint8Array::from(&events.concat()[..]));
                    }
                }
                Err(error) => {
                    let resume = &self.resume;
                    if let Some(signal) = resume.signal.as_ref().filter(|s| s.aborted()) {
                        return Err(signal.reason());
                    }
                    if self.cancelled.get() {
                        return Ok(());
                    }
                    let url = [resume.url.as_str(), &crate::js::digits(self.delivered.get())].concat();
                    let response = resume.client.reopen_stream(resume, &url, error).await?;
                    if self.cancelled.get() {
                        crate::js::discard_body(&response);
                        return Ok(());
                    }
                    let stream = response.body().ok_or(JsValue::UNDEFINED)?;
                    *self.reader.borrow_mut() = ReadableStreamDefaultReader::new(&stream)?;
                    // The partial event is sent again, whole, by the new stream.
                    *self.splitter.borrow_mut() = Splitter::new();
                }
            }
        }
    }
}
