//! The SDK's behaviour: one key per intent, joined in-page submissions,
//! persisted records, and the retry loop. Every rule it applies (keys,
//! fingerprints, intent lifecycle, backoff, `Retry-After`, classification,
//! budget) comes from `onejob-core`.

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Object, Promise, Reflect};
use onejob_core::backoff::budget::RetryBudget;
use onejob_core::backoff::retries::{Observation, Retries, Step, UnknownOutcomes};
use onejob_core::classify::{ErrorClass, TransportFailure};
use onejob_core::intent::{IntentRecord, IntentState, SavedRequest, intent_id, is_live, submit};
use onejob_core::protocol::header;
use onejob_core::reply::BodyHint;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, spawn_local};
use web_sys::Response;

use crate::events::{Events, Field};
use crate::js::{self, CryptoRandom, error};
use crate::options::{Options, RetryPolicy};
use crate::request::Outgoing;
use crate::running::{self, Running};
use crate::store::IntentStore;
use crate::stream::{self, Resume};

pub struct Client {
    endpoint: Option<String>,
    token: Option<String>,
    store: IntentStore,
    retry: RetryPolicy,
    retention_ms: u64,
    budget: RefCell<RetryBudget>,
    events: Events,
    /// Intents being sent right now, so a second submission joins the first.
    /// (A few entries at most: a list beats a hash map's code size.)
    inflight: RefCell<Vec<(String, Rc<Running>)>>,
}

impl Client {
    /// A client; expired records are pruned at once, so apps that never
    /// call `resume()` do not keep them either.
    pub fn new(options: Options) -> Self {
        let client = Self {
            endpoint: options.endpoint,
            token: options.token,
            store: options.store,
            budget: RefCell::new(RetryBudget::new(options.retry.budget)),
            retry: options.retry,
            retention_ms: options.retention_ms,
            events: Events::new(options.on_event),
            inflight: RefCell::new(Vec::new()),
        };
        client.live_records();
        client
    }

    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    pub fn storage_kind(&self) -> &'static str {
        self.store.kind()
    }

    /// Submits `request` as (part of) the intent `name`. Synchronous up to
    /// the in-flight check, so rapid double clicks cannot both start a send.
    pub fn submit(self: &Rc<Self>, request: Outgoing, name: Option<String>) -> Promise {
        let fingerprint = request.fingerprint();
        let intent = intent_id(name.as_deref(), &fingerprint);
        if let Some(running) = self.running(&intent) {
            return running.join(request.signal.clone());
        }
        let stored = self.load(&intent);
        let (mut record, _is_new) = submit(
            stored,
            &intent,
            fingerprint,
            Some(request.saved()),
            js::now_ms(),
            self.retention_ms,
            &mut CryptoRandom,
        );
        if record.request.is_none() {
            record.request = Some(request.saved());
        }
        let caller_signal = request.signal.clone();
        match self.start(record, request) {
            Ok(running) => running.join(caller_signal),
            Err(error) => Promise::reject(&error),
        }
    }

    /// Re-sends every unresolved intent with its original key.
    pub fn resume(self: &Rc<Self>) -> Promise {
        let results = js_sys::Array::new();
        for record in self.live_records() {
            let intent = record.intent.clone();
            let key = record.key.as_str().to_owned();
            let running = match (self.running(&intent), &record.request) {
                (Some(running), _) => running.join(None),
                (None, Some(saved)) => {
                    let request = Outgoing::from_saved(saved);
                    match self.start(record, request) {
                        Ok(running) => running.join(None),
                        Err(error) => Promise::reject(&error),
                    }
                }
                (None, None) => continue,
            };
            let entry = js::then(
                &running,
                Closure::once_into_js(move |response: JsValue| {
                    let entry = Object::new();
                    let _ = Reflect::set(&entry, &"intent".into(), &intent.into());
                    let _ = Reflect::set(&entry, &"key".into(), &key.into());
                    let _ = Reflect::set(&entry, &"response".into(), &response);
                    JsValue::from(entry)
                }),
            );
            results.push(&entry);
        }
        Promise::all(&results)
    }

    /// The stored intents, as plain objects.
    pub fn intents(&self) -> js_sys::Array {
        self.records().iter().filter_map(|record| js_sys::JSON::parse(&record.to_json()).ok()).collect()
    }

    /// Every readable stored record; unreadable ones are dropped with a warning.
    fn records(&self) -> Vec<IntentRecord> {
        let (records, dropped) = self.store.all();
        for d in dropped {
            self.events.warning(&d.intent, &d.reason);
        }
        records
    }

    /// The unresolved, unexpired records; the others are removed (records
    /// marked delivered come from SDK versions that kept them).
    fn live_records(&self) -> Vec<IntentRecord> {
        let now = js::now_ms();
        let mut records = self.records();
        records.retain(|r| {
            let live = is_live(r, now) && r.state != IntentState::Delivered;
            if !live {
                self.store.remove(&r.intent);
            }
            live
        });
        records
    }

    /// A streamed answer was read to its end: the intent is delivered.
    pub fn stream_read(&self, intent: &str) {
        self.store.remove(intent);
    }

    pub fn forget(&self, intent: &str) -> bool {
        self.store.remove(intent)
    }

    /// The send of `intent`, if one is running.
    fn running(&self, intent: &str) -> Option<Rc<Running>> {
        self.inflight.borrow().iter().find(|(i, _)| i == intent).map(|(_, running)| Rc::clone(running))
    }

    fn load(&self, intent: &str) -> Option<IntentRecord> {
        match self.store.load(intent) {
            Ok(record) => record,
            Err(dropped) => {
                self.events.warning(&dropped.intent, &dropped.reason);
                None
            }
        }
    }

    /// Persists `record`; `request_json` is its request, serialised once per
    /// submission (see `IntentStore::save`).
    fn save(&self, record: &IntentRecord, request_json: Option<&str>) {
        match self.store.save(record, request_json) {
            Ok(dropped) => {
                for d in dropped {
                    self.events.warning(&d.intent, &d.reason);
                }
            }
            Err(reason) => self.events.warning(&record.intent, &["intent not persisted: ", &reason].concat()),
        }
    }

    /// Starts sending and registers the send so later submissions join it.
    /// The send has its own abort controller (see [`Running`]).
    fn start(self: &Rc<Self>, record: IntentRecord, mut request: Outgoing) -> Result<Rc<Running>, JsValue> {
        let request_json = record.request.as_ref().map(SavedRequest::to_json);
        self.save(&record, request_json.as_deref());
        let (controller, signal) = running::controller()?;
        request.signal = Some(signal);
        let running = Running::new(controller);
        self.inflight.borrow_mut().push((record.intent.clone(), Rc::clone(&running)));
        let (this, shared) = (Rc::clone(self), Rc::clone(&running));
        spawn_local(async move {
            let intent = record.intent.clone();
            let result = this.send(record, request, request_json).await;
            // Unregistered and settled in one step: no submission can join a
            // send whose result was already handed out.
            this.inflight.borrow_mut().retain(|(i, _)| *i != intent);
            shared.settle(result);
        });
        Ok(running)
    }

    /// The retry loop of one intent.
    async fn send(
        self: &Rc<Self>,
        mut record: IntentRecord,
        request: Outgoing,
        request_json: Option<String>,
    ) -> Result<Response, JsValue> {
        let request_json = request_json.as_deref();
        let intent = record.intent.clone();
        let key = record.key.as_str().to_owned();
        let signal = request.signal.clone();
        let mut sent = 0u32;
        let mut last_network_error = JsValue::UNDEFINED;
        // Every resend carries the same key, so even an unknown outcome may be resent.
        let mut retries = Retries::new(self.retry.backoff, UnknownOutcomes::Resend);
        // While the browser says it is offline, the send waits for `online`
        // instead of spending attempts; all such waits share one deadline.
        let offline_deadline = js::now_ms().saturating_add(self.retry.offline_wait_ms);
        loop {
            self.wait_while_offline(&intent, &key, offline_deadline, signal.as_ref()).await?;
            record.record_attempt(js::now_ms());
            self.save(&record, request_json);
            sent += 1;
            self.events.emit("attempt", &intent, &key, &[("attempt", Field::Num(f64::from(record.attempts)))]);
            let init = self.init_for(&request, &key)?;
            let (observed, response) = match self.try_once(&request.url, &init, signal.as_ref()).await {
                // A background job was accepted: follow it until it has
                // finished, then ask again with the same key for its result.
                Ok(Ok(response)) if is_accepted_job(&response) => {
                    js::discard_body(&response);
                    self.follow_job(&request, &intent, &key, self.observe(&response)).await?;
                    continue;
                }
                Ok(Ok(response)) => {
                    if response.headers().get(header::IDEMPOTENT_REPLAYED).ok().flatten().as_deref() == Some("true") {
                        let fields = [("status", Field::Num(f64::from(response.status())))];
                        self.events.emit("replayed", &intent, &key, &fields);
                    }
                    (self.observe(&response), Some(response))
                }
                // Lost before or after reaching the gateway: with the same
                // key a resend is safe either way.
                // The network went away under the request: the attempt is
                // not counted, the same key goes again once back online.
                Ok(Err(_)) if js::offline() && js::now_ms() < offline_deadline => {
                    sent -= 1;
                    continue;
                }
                Ok(Err(failure)) => {
                    last_network_error = failure;
                    (Observation::transport(TransportFailure::DroppedAfterSend), None)
                }
                Err(aborted) => {
                    self.save(&record, request_json);
                    return Err(aborted);
                }
            };
            let status = observed.status.unwrap_or(0);
            let may_try_again = sent < self.retry.max_attempts;
            let step = retries.next(&observed, may_try_again, &mut self.budget.borrow_mut(), &mut CryptoRandom);
            match (step, response) {
                (Step::Deliver, Some(response)) => {
                    self.events.emit("settled", &intent, &key, &[("status", Field::Num(f64::from(status)))]);
                    if !stream::is_event_stream(&response) {
                        // Delivered: nothing left to remember, and the next
                        // identical submission is a new intent with a new key.
                        self.store.remove(&intent);
                        return Ok(response);
                    }
                    // A stream is delivered once it has been read to its end
                    // (see `stream_read`): until then a reload's resume()
                    // sends it again with the same key and gets it whole.
                    let url =
                        [gateway(&request.url, self.endpoint()), "/onejob/v1/jobs/", &key, "/stream?from="].concat();
                    let init = self.init_for(&Outgoing { method: "GET".into(), body: None, ..request }, &key)?;
                    let resume = Resume { client: Rc::clone(self), intent, key, url, init, signal };
                    return stream::resumable(response, resume);
                }
                (Step::Wait(delay), response) => {
                    // The answer is not delivered: release its connection now.
                    if let Some(response) = &response {
                        js::discard_body(response);
                    }
                    let why = reason(observed.classification.class, status, observed.server_delay_ms);
                    self.back_off(&intent, &key, delay, &why, &observed, signal.as_ref()).await?;
                }
                // Out of attempts or budget (a final answer always has a response).
                (_, response) => {
                    let why = reason(observed.classification.class, status, observed.server_delay_ms);
                    record.mark_gave_up(js::now_ms());
                    self.save(&record, request_json);
                    let fields = [("reason", Field::Str(&why)), ("status", Field::Num(f64::from(status)))];
                    self.events.emit("gave_up", &intent, &key, &fields);
                    return response.ok_or_else(|| {
                        let message = [
                            "onejob: gave up after ",
                            &js::digits(u64::from(sent)),
                            " attempts: ",
                            &why,
                            "; resume() can ask again with the same key",
                        ]
                        .concat();
                        let gave_up = error("OneJobNetworkError", &message);
                        let _ = Reflect::set(&gave_up, &"cause".into(), &last_network_error);
                        gave_up
                    });
                }
            }
        }
    }

    /// Waits while the browser reports offline (`navigator.onLine` false) for
    /// its `online` event, until `deadline_ms` at most; the caller's signal
    /// ends the wait at once. Emits `offline` when it starts waiting and
    /// `online` (with how long it waited) when the send goes on.
    async fn wait_while_offline(
        &self,
        intent: &str,
        key: &str,
        deadline_ms: u64,
        signal: Option<&web_sys::AbortSignal>,
    ) -> Result<(), JsValue> {
        let started = js::now_ms();
        if !js::offline() || started >= deadline_ms {
            return Ok(());
        }
        self.events.emit("offline", intent, key, &[]);
        while js::offline() && js::now_ms() < deadline_ms {
            js::online(deadline_ms - js::now_ms(), signal).await?;
        }
        let waited = [("waitedMs", Field::Num((js::now_ms() - started) as f64))];
        self.events.emit("online", intent, key, &waited);
        Ok(())
    }

    /// Polls a background job (`GET /onejob/v1/jobs/{key}`) until it has
    /// finished: each wait is the job's `Retry-After`, or full-jitter backoff
    /// when it gives none or cannot be reached; the caller's signal ends it.
    /// Polls are not attempts: the job runs in the gateway's queue.
    async fn follow_job(
        &self,
        request: &Outgoing,
        intent: &str,
        key: &str,
        accepted: Observation,
    ) -> Result<(), JsValue> {
        const WHY: &str = "background job queued or running";
        let signal = request.signal.clone();
        let url = [gateway(&request.url, self.endpoint()), "/onejob/v1/jobs/", key].concat();
        let init = self.init_for(&Outgoing { method: "GET".into(), body: None, ..request.clone() }, key)?;
        let mut observed = accepted;
        let mut polls = 0u32;
        loop {
            polls = polls.saturating_add(1);
            let jitter = self.retry.backoff.delay_ms(polls.min(16), None, &mut CryptoRandom);
            self.back_off(intent, key, observed.server_delay_ms.unwrap_or(jitter), WHY, &observed, signal.as_ref())
                .await?;
            match self.try_once(&url, &init, signal.as_ref()).await? {
                Ok(response) if response.ok() => {
                    observed = self.observe(&response);
                    let view = JsFuture::from(response.json()?).await?;
                    let state = Reflect::get(&view, &"state".into())?.as_string().unwrap_or_default();
                    // Finished, or waiting for an operator (nothing will run
                    // it again): asking again gives its answer.
                    let stuck = Reflect::get(&view, &"waiting_for_operator".into())?.as_bool() == Some(true);
                    if is_finished(&state) || stuck {
                        return Ok(());
                    }
                }
                // Gone (past retention) or refused: asking again decides.
                Ok(response) if (400..500).contains(&response.status()) => {
                    js::discard_body(&response);
                    return Ok(());
                }
                Ok(response) => {
                    observed = self.observe(&response);
                    js::discard_body(&response);
                }
                Err(_) => observed = Observation::transport(TransportFailure::DroppedAfterSend),
            }
        }
    }

    /// After a streamed answer's body failed: asks for the events after those
    /// delivered (`url`) with the usual backoff and attempt limits, until
    /// the gateway answers `200` (or the rules say stop).
    pub async fn reopen_stream(
        &self,
        resume: &Resume,
        url: &str,
        mut last_error: JsValue,
    ) -> Result<Response, JsValue> {
        let (intent, key, signal) = (&resume.intent, &resume.key, resume.signal.as_ref());
        let mut retries = Retries::new(self.retry.backoff, UnknownOutcomes::Resend);
        let mut observed = Observation::transport(TransportFailure::DroppedAfterSend);
        // The read that failed counts as the first try.
        let mut sent = 1;
        loop {
            let status = observed.status.unwrap_or(0);
            let why =
                ["stream interrupted: ", &reason(observed.classification.class, status, observed.server_delay_ms)]
                    .concat();
            let step = retries.next(
                &observed,
                sent < self.retry.max_attempts,
                &mut self.budget.borrow_mut(),
                &mut CryptoRandom,
            );
            let Step::Wait(delay) = step else {
                self.events.emit(
                    "gave_up",
                    intent,
                    key,
                    &[("reason", Field::Str(&why)), ("status", Field::Num(f64::from(status)))],
                );
                let message =
                    ["onejob: ", &why, "; could not resume it after ", &js::digits(u64::from(sent)), " tries"].concat();
                let gave_up = error("OneJobNetworkError", &message);
                let _ = Reflect::set(&gave_up, &"cause".into(), &last_error);
                return Err(gave_up);
            };
            self.back_off(intent, key, delay, &why, &observed, signal).await?;
            sent += 1;
            match self.try_once(url, &resume.init, signal).await? {
                Ok(response) if response.status() == 200 => return Ok(response),
                Ok(response) => {
                    observed = self.observe(&response);
                    js::discard_body(&response);
                    last_error = JsValue::UNDEFINED;
                }
                Err(failure) => {
                    observed = Observation::transport(TransportFailure::DroppedAfterSend);
                    last_error = failure;
                }
            }
        }
    }

    /// One fetch: its response, or (inner `Err`) the error of a request
    /// that failed on the way; outer `Err` is the caller's abort reason.
    async fn try_once(
        &self,
        url: &str,
        init: &JsValue,
        signal: Option<&web_sys::AbortSignal>,
    ) -> Result<Result<Response, JsValue>, JsValue> {
        match js::fetch(url, init).await {
            Ok(response) => Ok(Ok(response)),
            Err(_) if let Some(signal) = signal.filter(|s| s.aborted()) => Err(signal.reason()),
            Err(failure) => Ok(Err(failure)),
        }
    }

    /// What a response means for retrying (core's rule, the server's hints).
    fn observe(&self, response: &Response) -> Observation {
        let headers = response.headers();
        let get = |name: &str| headers.get(name).ok().flatten();
        Observation::from_http(response.status(), &get, BodyHint::None, js::now_ms(), self.retry.retry_after_cap_ms)
    }

    /// Says why and how long it waits (a `backoff` event), then waits; the
    /// caller's signal ends the wait at once.
    async fn back_off(
        &self,
        intent: &str,
        key: &str,
        delay: u64,
        why: &str,
        observed: &Observation,
        signal: Option<&web_sys::AbortSignal>,
    ) -> Result<(), JsValue> {
        let fields = [
            ("delayMs", Field::Num(delay as f64)),
            ("reason", Field::Str(why)),
            ("serverAsked", Field::Bool(observed.server_delay_ms.is_some())),
        ];
        self.events.emit("backoff", intent, key, &fields);
        js::sleep(delay, signal).await
    }

    /// The `init` of one send: the app's headers plus the key and the token.
    fn init_for(&self, request: &Outgoing, key: &str) -> Result<JsValue, JsValue> {
        let headers = web_sys::Headers::new()?;
        for (name, value) in &request.headers {
            headers.append(name, value)?;
        }
        headers.set(header::IDEMPOTENCY_KEY, key)?;
        if let (Some(token), None) = (&self.token, request.header("authorization")) {
            headers.set("Authorization", &["Bearer ", token].concat())?;
        }
        let init = Object::new();
        Reflect::set(&init, &"method".into(), &request.method.as_str().into())?;
        Reflect::set(&init, &"headers".into(), &headers)?;
        if let Some(body) = &request.body {
            Reflect::set(&init, &"body".into(), &body.as_str().into())?;
        }
        if let Some(signal) = &request.signal {
            Reflect::set(&init, &"signal".into(), signal)?;
        }
        Ok(init.into())
    }
}

/// Where the gateway of `url` answers: the endpoint when `url` is under
/// it, else `url`'s origin.
fn gateway<'a>(url: &'a str, endpoint: Option<&'a str>) -> &'a str {
    match endpoint {
        Some(base) if url.strip_prefix(base).is_some_and(|rest| rest.starts_with('/')) => base,
        _ => {
            let host = js::find(url, "://").map_or(0, |i| i + 3);
            let end = url.bytes().skip(host).position(|b| b == b'/').map_or(url.len(), |i| host + i);
            url.get(..end).unwrap_or(url)
        }
    }
}

/// A `202` for a background job (`Prefer: respond-async`).
fn is_accepted_job(response: &Response) -> bool {
    response.status() == 202
        && response
            .headers()
            .get("Preference-Applied")
            .ok()
            .flatten()
            .is_some_and(|p| js::find(&p, "respond-async").is_some())
}

/// A job state with a result to replay.
fn is_finished(state: &str) -> bool {
    matches!(state, "completed" | "dead" | "interrupted" | "cancelled")
}

/// What a backoff or give-up was about, for UIs.
fn reason(class: ErrorClass, status: u16, hint_ms: Option<u64>) -> String {
    let status = js::digits(u64::from(status));
    let what = match class {
        ErrorClass::RateLimited => "rate limited (429)".to_owned(),
        ErrorClass::Conflict => ["still in progress (", &status, ")"].concat(),
        ErrorClass::Unavailable => ["unavailable (", &status, ")"].concat(),
        ErrorClass::ServerError => "server error (500)".to_owned(),
        ErrorClass::Timeout if status == "408" => "request timeout (408)".to_owned(),
        ErrorClass::DroppedAfterSend | ErrorClass::Connect | ErrorClass::Timeout | ErrorClass::TimeoutAfterSend => {
            "network error".to_owned()
        }
        _ => ["status ", &status].concat(),
    };
    match hint_ms {
        Some(ms) => [&what, "; server asked to wait ", &js::digits(ms), " ms"].concat(),
        None => what,
    }
}
