//! The proxy (`/v1/…`), job-type runs and the routes of one job: everything
//! that can be checked without the job is checked here, so bad input never
//! reaches (or creates) a Ledger.

use onejob_core::config::result_cache::RETRY_COUNT;
use onejob_core::front::head::Head;
use onejob_core::front::{self, Caller, JobRoute, Method, ProxyJob, RunJob};
use onejob_core::identity::key::{IdempotencyKey, StorageId};
use onejob_core::operators::savings::AnswerKind;
use onejob_core::telemetry::config::captured_request;
use onejob_core::upstream::providers::models_page;
use worker::{Context, Env, Request, Response, Result};

use crate::api::client;
use crate::api::handoff::{self, RunOf, Submission};
use crate::api::ledger::LedgerCall;
use crate::cache;
use crate::env::clock::now_ms;
use crate::env::config::{self, Config};
use crate::http::body;
use crate::http::{self, Step, Stop};
use crate::ops;
use crate::ops::telemetry::{self, JobFacts};

/// `POST /v1/{path}`.
pub async fn proxy(req: Request, env: &Env, ctx: &Context) -> Result<Response> {
    proxied(req, env, ctx).await.or_else(Stop::respond)
}

async fn proxied(mut req: Request, env: &Env, ctx: &Context) -> Step<Response> {
    let (config, caller, head) = admit_caller(&req, env)?;
    // With telemetry on: the request's trace (nothing at all otherwise).
    let traced = telemetry::start(&head, &config);
    let may_derive = config.settings.keyless.derives();
    let post = front::body::keyed_post(&head.post(), may_derive, config.settings.max_body_bytes)?;
    let body = body::read(&mut req, &post.body).await?;
    // The model matters here only to a user token (which models it may ask
    // for): the body is read for it only then, not on every first call.
    let model = caller.token.as_ref().and_then(|_| handoff::model_of(&body));
    let request = head.proxy_request(&body, model.as_deref());
    let ProxyJob { target, fingerprint, key, keyless } =
        front::proxy_job(&caller, config.settings.keyless, post.key, &request)?;
    let storage_id = StorageId::of(&caller.tenant, caller.user.as_deref(), &key);
    // What the spans need of the job (only when traced).
    let job = traced.as_ref().map(|_| job_facts(&config, &caller, &key, &storage_id, &head.path, &body, None));

    // A keyless job's answer is replayed only within its window, which the
    // Ledger decides: KV, whose entries outlive it, is neither read nor written.
    // Otherwise KV is looked in first when the setting says this request
    // should (by default a retry: a first call would only miss it).
    if config.settings.result_cache.looks_first(keyless.is_some(), head.header(RETRY_COUNT))
        && let Some((result, spent)) = cache::lookup(env, storage_id.as_str(), fingerprint.as_str()).await
    {
        // Counted after the answer: a call this replay did not make.
        ctx.wait_until(ops::count_saved(env.clone(), caller.tenant.clone(), AnswerKind::KvReplay, spent));
        let answer = result.into_response(key.as_str(), true);
        let job = job.map(|job| JobFacts { from_cache: true, ..job });
        return Ok(telemetry::finish(ctx, env, &config, traced, answer, job)?);
    }
    let header = |name: &str| head.owned_header(name);
    let wait = config.settings.coalesce_wait_ms;
    let content_type = post.body.content_type;
    let mut submission = Submission::new(caller, &key, &fingerprint, target, content_type, wait, &header);
    submission.keyless = keyless;
    submission.trace = traced.as_ref().map(telemetry::Started::propagation);
    let answer = submit(env, &storage_id, submission, body).await;
    Ok(telemetry::finish(ctx, env, &config, traced, answer, job)?)
}

/// What a traced request's spans need to know of its job.
fn job_facts(
    config: &Config,
    caller: &Caller,
    key: &IdempotencyKey,
    storage_id: &StorageId,
    route: &str,
    body: &[u8],
    job_type: Option<&str>,
) -> JobFacts {
    JobFacts {
        tenant: caller.tenant.clone(),
        key: key.clone(),
        storage_id: storage_id.clone(),
        route: route.to_owned(),
        model: handoff::model_of(body),
        job_type: job_type.map(str::to_owned),
        from_cache: false,
        request_body: captured_request(config.telemetry.as_ref(), body),
    }
}

/// `GET /v1/models`: the models the deployment routes, in a list both
/// official SDKs read ([`models_page`]); a user token sees the models it
/// may ask for.
pub fn models(req: &Request, env: &Env) -> Result<Response> {
    listed(req, env).or_else(Stop::respond)
}

fn listed(req: &Request, env: &Env) -> Step<Response> {
    let (config, caller, head) = admit_caller(req, env)?;
    front::expect(&head.method, Method::Get)?;
    let models = front::models_for(caller.token.as_ref(), config.settings.providers.models())?;
    http::json(&models_page(&models))
}

/// `POST /onejob/v1/run/{type}`: a job type's input becomes its job. The
/// identity is the type and the input (as JSON, canonical); the chat
/// request is rendered from the type's prompt on the server.
pub async fn run(req: Request, env: &Env, ctx: &Context, type_name: &str) -> Result<Response> {
    ran(req, env, ctx, type_name).await.or_else(Stop::respond)
}

async fn ran(mut req: Request, env: &Env, ctx: &Context, type_name: &str) -> Step<Response> {
    let (config, caller, head) = admit_caller(&req, env)?;
    let traced = telemetry::start(&head, &config);
    let type_name = front::percent_decode(type_name);
    let job_type = front::job_type(&config.job_types, &type_name)?;
    // A job type's effects happen once per intent: its runs are always keyed.
    let (key, plan) = front::body::always_keyed(&head.post(), config.settings.max_body_bytes)?;
    let input_bytes = body::read(&mut req, &plan).await?;
    // `Accept: text/event-stream` streams the answer (the effects run once
    // it has ended).
    let RunJob { fingerprint, input, body, .. } =
        front::run_job(job_type, caller.token.as_ref(), &key, &input_bytes, head.header("Accept"))?;
    let storage_id = StorageId::of(&caller.tenant, caller.user.as_deref(), &key);
    let route = front::run_route(&type_name);
    let job = traced.as_ref().map(|_| {
        let mut facts = job_facts(&config, &caller, &key, &storage_id, &route, &body, Some(&type_name));
        facts.model = Some(job_type.model.clone());
        facts
    });
    let header = |name: &str| head.owned_header(name);
    let (target, content_type) = ("/v1/chat/completions".into(), "application/json".into());
    let wait = config.settings.coalesce_wait_ms;
    let mut submission = Submission::new(caller, &key, &fingerprint, target, content_type, wait, &header);
    submission.run = Some(RunOf { job_type: type_name, input });
    submission.trace = traced.as_ref().map(telemetry::Started::propagation);
    let answer = submit(env, &storage_id, submission, body).await;
    Ok(telemetry::finish(ctx, env, &config, traced, answer, job)?)
}

/// Hands a submission to the Ledger of its job.
async fn submit(env: &Env, storage_id: &StorageId, submission: Submission, body: Vec<u8>) -> Result<Response> {
    client::ledger(env, storage_id, &LedgerCall::Submit { submission, body }).await
}

/// A tenant's request about its job `raw_key`, handed to the job's Ledger.
pub async fn job(req: Request, env: &Env, raw_key: &str, route: JobRoute) -> Result<Response> {
    to_job(req, env, raw_key, route).await.or_else(Stop::respond)
}

async fn to_job(req: Request, env: &Env, raw_key: &str, route: JobRoute) -> Step<Response> {
    let (_, caller, head) = admit_caller(&req, env)?;
    front::expect(&head.method, route.method())?;
    let key = front::job_key(raw_key)?;
    let call = LedgerCall::of_job_route(route, &caller, &key, head.param("ids"), head.stream_from())?;
    // The tenant's own key may look at one of its users' jobs (`?user=`).
    let user = front::job_user(caller.token.is_some(), caller.user.as_deref(), head.owned_param("user"));
    Ok(client::ledger(env, &StorageId::of(&caller.tenant, user.as_deref(), &key), &call).await?)
}

/// `GET /onejob/problems/{slug}`: the problem type's documentation, so a
/// `type` URI resolves to something a developer can read.
pub fn problem_doc(req: &Request, slug: &str) -> Result<Response> {
    let doc = front::expect(req.method().as_ref(), Method::Get).and_then(|()| front::problem_doc(slug));
    match doc {
        Ok(text) => http::with_cors(Response::ok(text)?),
        Err(refused) => http::refuse(&refused),
    }
}

/// The configuration, the caller (a tenant, or a user of one) and the
/// request's head, or the core's refusal of the caller.
fn admit_caller(req: &Request, env: &Env) -> Step<(std::rc::Rc<Config>, Caller, Head)> {
    let config = config::loaded(env)?;
    let head = body::head(req)?;
    let caller = head.credentials().caller(&config.tenants, &config.token_secrets, now_ms() / 1000)?;
    Ok((config, caller, head))
}
