//! OpenTelemetry traces of job requests, exported after the answer: the
//! gateway starts a request's trace ([`start`]: only with telemetry
//! configured; otherwise nothing happens on the request path), and
//! [`finish`] returns its `traceparent` on the answer and, in `waitUntil`,
//! reads the job's record (its attempts and effects) from the Ledger, has
//! the core build the spans, queues them in the isolate and POSTs them as
//! OTLP/HTTP JSON in bounded batches, each with a short timeout. A
//! collector that is slow, down or failing costs a log line, never a
//! request: nothing of the answer waits for it.
//!
//! The spans' shape, ids and encoding are the core's
//! ([`onejob_core::telemetry`]); this module only collects and sends.

use std::cell::RefCell;
use std::rc::Rc;

use futures_channel::oneshot;
use futures_util::future::{Either, select};
use futures_util::{StreamExt, stream};
use onejob_core::front::head::Head;
use onejob_core::identity::key::{IdempotencyKey, StorageId};
use onejob_core::job::view::JobView;
use onejob_core::telemetry::answer::{self, AnswerFacts, BodyNeed};
use onejob_core::telemetry::build::{RequestFacts, request_spans};
use onejob_core::telemetry::config::{CAPTURED_BYTES, TelemetrySettings};
use onejob_core::telemetry::export::ExportQueue;
use onejob_core::telemetry::key_digest;
use onejob_core::telemetry::span::{Resource, Span, encode_batches};
use onejob_core::telemetry::trace::{Propagation, RequestTrace};
use onejob_core::upstream::providers::Api;
use onejob_core::wire::header;
use worker::{AbortController, Context, Env, Fetch, Headers, Method, Request, RequestInit, Response, Result};

use crate::api::client;
use crate::api::handoff::JobQuery;
use crate::api::ledger::LedgerCall;
use crate::env::clock::{self, now_ms};
use crate::env::config::Config;
use crate::env::random::MathRandom;

/// A request's trace, from its arrival.
pub struct Started {
    trace: RequestTrace,
    started_ms: u64,
}

impl Started {
    /// What the job's submission carries to the Ledger: the attempts send
    /// a `traceparent` of their own span upstream.
    pub fn propagation(&self) -> Propagation {
        self.trace.propagation()
    }
}

/// The trace of a job request, when telemetry is configured: a child of
/// the caller's `traceparent` (and `tracestate`), or a new trace.
pub fn start(head: &Head, config: &Config) -> Option<Started> {
    config.telemetry.as_ref()?;
    let trace = RequestTrace::start(head.header("traceparent"), head.header("tracestate"), &mut MathRandom);
    Some(Started { trace, started_ms: now_ms() })
}

/// What the gateway knows about the job a request was for.
pub struct JobFacts {
    pub tenant: String,
    pub key: IdempotencyKey,
    pub storage_id: StorageId,
    /// The route, without its query (`/v1/chat/completions`).
    pub route: String,
    pub model: Option<String>,
    pub job_type: Option<String>,
    /// Answered from the KV cache (the Ledger was not asked).
    pub from_cache: bool,
    /// The request's body (read only with `OTEL_CAPTURE_CONTENT=true`).
    pub request_body: Option<String>,
}

/// The answer to a traced request: with its `traceparent`; the spans are
/// built and exported after it (`waitUntil`). Without a trace (telemetry
/// off), the answer as it is.
pub fn finish(
    ctx: &Context,
    env: &Env,
    config: &Rc<Config>,
    started: Option<Started>,
    answer: Result<Response>,
    job: Option<JobFacts>,
) -> Result<Response> {
    let (Some(started), Some(job)) = (started, job) else { return answer };
    let response = answer?;
    let Some(settings) = config.telemetry.as_ref() else { return Ok(response) };
    let headers = response.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    let status = response.status_code();
    let state = header(header::JOB_STATE);
    let read = AnswerFacts::read(
        job.from_cache,
        header(header::IDEMPOTENT_REPLAYED).as_deref(),
        header(header::ATTEMPT).as_deref(),
        header("Content-Type").as_deref(),
        settings.capture_content,
    );
    // A Ledger's answer has the immutable headers of a fetched response: a copy.
    let headers = response.headers().clone();
    headers.set("traceparent", &started.trace.traceparent())?;
    let mut response = response.with_headers(headers);
    // What the spans need of the answer's body: its `model` (and, opted
    // in, the completion): a copy of a whole answer, or the stream's end.
    let (response, body, ended) = match read.body {
        BodyNeed::StreamEnd => {
            let (response, ended) = watch_end(response, status)?;
            (response, None, Some(ended))
        }
        BodyNeed::Copy => {
            let copy = response.cloned()?;
            (response, Some(copy), None)
        }
        BodyNeed::Nothing => (response, None, None),
    };
    let (env, config) = (env.clone(), Rc::clone(config));
    ctx.wait_until(async move {
        if let Some(ended) = ended {
            // The stream's end (or its reader going away), bounded.
            let _ = select(ended, clock::sleep(answer::STREAM_END_WAIT_MS)).await;
        }
        let body = match body {
            Some(mut copy) => copy.text().await.ok(),
            None => None,
        };
        let ended_ms = now_ms();
        let view = if read.wants_view() { job_view(&env, &job, &read).await } else { None };
        let Some(settings) = config.telemetry.as_ref() else { return };
        let digest = key_digest(&job.storage_id);
        let response_model = body.as_deref().and_then(answer::model_of);
        let captured =
            answer::captured(settings.capture_content, job.request_body.as_deref(), body.as_deref(), CAPTURED_BYTES);
        let facts = RequestFacts {
            trace: &started.trace,
            method: "POST",
            route: &job.route,
            started_ms: started.started_ms,
            ended_ms,
            status,
            tenant: &job.tenant,
            key_digest: &digest,
            model: job.model.as_deref(),
            response_model: response_model.as_deref(),
            state: state.as_deref(),
            answered_by: read.answered_by,
            replayed: read.replayed,
            job_type: job.job_type.as_deref(),
            content: captured,
        };
        let api = Api::of_path(&job.route);
        let spans = request_spans(&facts, view.as_ref(), &|name| provider_name(&config, name, api));
        if started.trace.sampled() {
            export(settings, spans).await;
        }
    });
    Ok(response)
}

/// The job's record as its Ledger has it now (after a stream, once the
/// answering attempt has ended: the pump writes it just after the last event).
async fn job_view(env: &Env, job: &JobFacts, read: &AnswerFacts) -> Option<JobView> {
    let query = JobQuery { key: job.key.to_string(), from: None, ids: false };
    for round in 0..answer::VIEW_ROUNDS {
        let mut response = client::ledger(env, &job.storage_id, &LedgerCall::View(query.clone())).await.ok()?;
        let view: JobView = response.json().await.ok()?;
        if read.view_settled(&view, round) {
            return Some(view);
        }
        clock::sleep(answer::VIEW_WAIT_MS).await;
    }
    None
}

/// A streamed answer passed through, and a signal of its end.
fn watch_end(mut response: Response, status: u16) -> Result<(Response, oneshot::Receiver<()>)> {
    let (sender, ended) = oneshot::channel();
    let headers = response.headers().clone();
    let body = response.stream()?;
    let mut sender = Some(sender);
    let end = stream::once(async move {
        if let Some(sender) = sender.take() {
            let _ = sender.send(());
        }
        None
    })
    .filter_map(|item: Option<Result<Vec<u8>>>| async move { item });
    let body = body.chain(end);
    Ok((Response::from_stream(body)?.with_status(status).with_headers(headers), ended))
}

/// `gen_ai.provider.name` of the provider called `name` (see
/// [`answer::provider_name`]).
fn provider_name(config: &Config, name: &str, api: Api) -> String {
    let providers = &config.settings.providers;
    let kind = providers.index_of(name).map(|index| providers.get(index).kind);
    answer::provider_name(kind, api).into()
}

thread_local! {
    /// Spans waiting for an export in this isolate, and the export under
    /// way: what to send when is the core's ([`ExportQueue`]).
    static QUEUE: RefCell<ExportQueue<Span>> = const { RefCell::new(ExportQueue::new()) };
}

/// Queues `spans` and, when the core's queue says this request exports,
/// posts what it hands out, batch by batch, for one turn.
async fn export(settings: &TelemetrySettings, spans: Vec<Span>) {
    let started = now_ms();
    if !QUEUE.with(|queue| queue.borrow_mut().offer(spans, settings.max_queued_spans, started)) {
        return;
    }
    let resource =
        Resource { service_name: settings.service_name.clone(), service_version: env!("CARGO_PKG_VERSION").into() };
    let max = settings.max_spans_per_export;
    while let Some(batch) = QUEUE.with(|queue| queue.borrow_mut().next_batch(max, started, now_ms())) {
        for body in encode_batches(&resource, &batch, max, settings.max_export_bytes) {
            if let Err(why) = post(settings, body).await {
                worker::console_warn!("onejob: exporting spans failed ({why}); they are dropped");
            }
        }
    }
    if let Some(dropped) = QUEUE.with(|queue| queue.borrow_mut().finish()) {
        worker::console_warn!("onejob: {dropped} spans dropped: the export queue was full");
    }
}

/// One OTLP/HTTP JSON export, abandoned after the settings' timeout.
async fn post(settings: &TelemetrySettings, body: String) -> std::result::Result<(), String> {
    let headers = Headers::new();
    for (name, value) in settings.export_headers() {
        headers.set(name, value).map_err(|e| e.to_string())?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(body.into()));
    let request = Request::new_with_init(&settings.traces_url, &init).map_err(|e| e.to_string())?;
    let controller = AbortController::default();
    let signal = controller.signal();
    let sent = Box::pin(async move { Fetch::Request(request).send_with_signal(&signal).await });
    match select(sent, clock::sleep(settings.timeout_ms)).await {
        Either::Left((Ok(response), _)) => answer::export_result(response.status_code()),
        Either::Left((Err(error), _)) => Err(error.to_string()),
        Either::Right(_) => {
            controller.abort();
            Err(format!("no answer within {} ms", settings.timeout_ms))
        }
    }
}
