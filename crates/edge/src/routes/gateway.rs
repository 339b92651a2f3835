//! The proxy (`/v1/…`), job-type runs and the routes of one job: everything
//! that can be checked without the job is checked here, so bad input never
//! reaches (or creates) a Ledger.

use onejob_core::fingerprint::{Body, Fingerprint};
use onejob_core::key::{IdempotencyKey, StorageId};
use onejob_core::keyless;
use onejob_core::protocol::{Problem, ProblemType, header, prefer_wait_seconds, prefers_async};
use onejob_core::providers::{check_api_path, models_page};
use onejob_core::result_cache::RETRY_COUNT;
use onejob_core::savings::AnswerKind;
use onejob_core::settings::MAX_WAIT_MS;
use onejob_core::token::UserToken;
use worker::{Context, Env, Method, Request, Response, Result};

use crate::api::client;
use crate::api::handoff::{self, JobQuery, OperatorRequest, RunOf, Submission};
use crate::api::ledger::LedgerCall;
use crate::cache;
use crate::env::config::{self, Config};
use crate::http::body;
use crate::http::{self, problem_of};
use crate::ops;
use crate::ops::telemetry::{self, JobFacts};
use crate::routes::auth::{Caller, Refusal, caller_of};

/// `POST /v1/{path}`.
pub async fn proxy(mut req: Request, env: &Env, ctx: &Context) -> Result<Response> {
    let (config, caller) = match admit_caller(&req, env) {
        Ok(found) => found,
        Err(response) => return response,
    };
    // With telemetry on: the request's trace (nothing at all otherwise).
    let traced = telemetry::start(&req, &config);
    let (sent_key, content_type, body) = match read_keyed(&mut req, &config, true).await? {
        Ok(read) => read,
        Err(refused) => return Ok(refused),
    };
    let url = req.url()?;
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    // Forwarded with the provider's key: it must stay under the provider's base URL.
    if let Err(why) = check_api_path(&target) {
        return problem_of(ProblemType::InvalidQuery, format!("path: {why}"));
    }
    let fingerprint = match Fingerprint::of_url("POST", &target, Body::Json(&body)) {
        Ok(fp) => fp,
        Err(error) => return problem_of(ProblemType::InvalidJson, format!("the body is not valid JSON: {error}")),
    };
    // A user token reaches only the models and paths it names.
    if let Some(token) = &caller.token
        && let Err(error) = token.allows(&target, handoff::model_of(&body).as_deref())
    {
        return problem_of(ProblemType::Forbidden, error.to_string());
    }
    // No key (KEYLESS lets the gateway derive one): the caller's identical
    // requests are one job, under a key derived from who asks and what.
    let (key, keyless) = match sent_key {
        Some(key) => (key, None),
        None => {
            if req.headers().get(header::PREFER)?.is_some_and(|prefer| prefers_async(&prefer)) {
                let detail =
                    "a background job (Prefer: respond-async) needs an Idempotency-Key: its Location names the job";
                return problem_of(ProblemType::MissingIdempotencyKey, detail);
            }
            let cache_control = req.headers().get("Cache-Control")?;
            let mode = keyless::for_request(config.settings.keyless, cache_control.as_deref());
            (keyless::derive_key(&caller.tenant, caller.user.as_deref(), &fingerprint), mode)
        }
    };
    let storage_id = StorageId::of(&caller.tenant, caller.user.as_deref(), &key);
    // What the spans need of the job (only when traced).
    let job = traced.as_ref().map(|_| job_facts(&config, &caller, &key, &storage_id, url.path(), &body, None));

    // A keyless job's answer is replayed only within its window, which the
    // Ledger decides: KV, whose entries outlive it, is neither read nor written.
    // Otherwise KV is looked in first when the setting says this request
    // should (by default a retry: a first call would only miss it).
    if keyless.is_none()
        && config.settings.result_cache.reads(req.headers().get(RETRY_COUNT)?.as_deref())
        && let Some((result, spent)) = cache::lookup(env, storage_id.as_str(), fingerprint.as_str()).await
    {
        // Counted after the answer: a call this replay did not make.
        ctx.wait_until(ops::count_saved(env.clone(), caller.tenant.clone(), AnswerKind::KvReplay, spent));
        let answer = result.into_response(key.as_str(), true);
        let job = job.map(|job| JobFacts { from_cache: true, ..job });
        return telemetry::finish(ctx, env, &config, traced, answer, job);
    }
    let mut submission = submission_of(&req, &config, caller, &key, &fingerprint, target, content_type)?;
    submission.keyless = keyless;
    submission.trace = traced.as_ref().map(telemetry::Started::propagation);
    let answer = submit(env, &storage_id, submission, body).await;
    telemetry::finish(ctx, env, &config, traced, answer, job)
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
    let capture = config.telemetry.as_ref().is_some_and(|t| t.capture_content);
    JobFacts {
        tenant: caller.tenant.clone(),
        key: key.clone(),
        storage_id: storage_id.clone(),
        route: route.to_owned(),
        model: handoff::model_of(body),
        job_type: job_type.map(str::to_owned),
        from_cache: false,
        request_body: capture.then(|| String::from_utf8_lossy(body).into_owned()),
    }
}

/// `GET /v1/models`: the models the deployment routes, in a list both
/// official SDKs read ([`models_page`]); a user token sees the models it
/// may ask for.
pub fn models(req: &Request, env: &Env) -> Result<Response> {
    let (config, caller) = match admit_caller(req, env) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if req.method() != Method::Get {
        return http::method_not_allowed(&req.method(), &Method::Get);
    }
    let mut models = config.settings.providers.models();
    if let Some(token) = &caller.token {
        // Its paths as for any route; its models by the list.
        let paths_only = UserToken { models: None, ..token.clone() };
        if let Err(error) = paths_only.allows("/v1/models", None) {
            return problem_of(ProblemType::Forbidden, error.to_string());
        }
        if let Some(allowed) = &token.models {
            models.retain(|model| allowed.contains(&model.id));
        }
    }
    http::with_cors(Response::from_json(&models_page(&models))?)
}

/// `POST /onejob/v1/run/{type}`: a job type's input becomes its job. The
/// identity is the type and the input (as JSON, canonical); the chat
/// request is rendered from the type's prompt on the server.
pub async fn run(mut req: Request, env: &Env, ctx: &Context, type_name: &str) -> Result<Response> {
    let (config, caller) = match admit_caller(&req, env) {
        Ok(found) => found,
        Err(response) => return response,
    };
    let traced = telemetry::start(&req, &config);
    let type_name = percent_decode(type_name);
    let Some(job_type) = config.job_types.get(&type_name) else {
        return problem_of(ProblemType::UnknownJobType, "no job type has this name; see jobs/ and JOB_TYPES");
    };
    // A job type's effects happen once per intent: its runs are always keyed.
    let (key, _, input_bytes) = match read_keyed(&mut req, &config, false).await? {
        Ok((Some(key), content_type, body)) => (key, content_type, body),
        Ok((None, _, _)) => return missing_key(),
        Err(refused) => return Ok(refused),
    };
    // `Accept: text/event-stream` streams the answer (the effects run once
    // it has ended). Streamed or not are two intents, as on /v1.
    let stream = req.headers().get("Accept")?.is_some_and(|accept| accept.contains("text/event-stream"));
    let target =
        if stream { format!("/onejob/v1/run/{type_name}?stream") } else { format!("/onejob/v1/run/{type_name}") };
    if let Some(token) = &caller.token
        && let Err(error) = token.allows(&target, Some(&job_type.model))
    {
        return problem_of(ProblemType::Forbidden, error.to_string());
    }
    let fingerprint = match Fingerprint::of_url("POST", &target, Body::Json(&input_bytes)) {
        Ok(fp) => fp,
        Err(error) => return problem_of(ProblemType::InvalidJson, format!("the input is not valid JSON: {error}")),
    };
    let input: serde_json::Value = serde_json::from_slice(&input_bytes)?;
    let violations = job_type.check_input(&input);
    if !violations.is_empty() {
        let problem = Problem::new(
            ProblemType::InvalidInput,
            format!("the input does not meet the {type_name} job type's schema"),
        )
        .with_key(key.as_str())
        .with_violations(violations.into_iter().map(|v| v.0).collect());
        return http::problem(&problem);
    }
    let body = job_type.render_request(&input, stream);
    let storage_id = StorageId::of(&caller.tenant, caller.user.as_deref(), &key);
    let route = format!("/onejob/v1/run/{type_name}");
    let job = traced.as_ref().map(|_| {
        let mut facts = job_facts(&config, &caller, &key, &storage_id, &route, &body, Some(&type_name));
        facts.model = Some(job_type.model.clone());
        facts
    });
    let mut submission = submission_of(
        &req,
        &config,
        caller,
        &key,
        &fingerprint,
        "/v1/chat/completions".into(),
        "application/json".into(),
    )?;
    submission.run = Some(RunOf { job_type: type_name, input });
    submission.trace = traced.as_ref().map(telemetry::Started::propagation);
    let answer = submit(env, &storage_id, submission, body).await;
    telemetry::finish(ctx, env, &config, traced, answer, job)
}

/// The checks every keyed POST passes: an `Idempotency-Key` (or none, when
/// `keyless` routes may derive one and the deployment's `KEYLESS` does), a
/// JSON body within the size limit. The key, the content type and the body,
/// or the refusal.
async fn read_keyed(
    req: &mut Request,
    config: &Config,
    keyless: bool,
) -> Result<std::result::Result<(Option<IdempotencyKey>, String, Vec<u8>), Response>> {
    if req.method() != Method::Post {
        return http::method_not_allowed(&req.method(), &Method::Post).map(Err);
    }
    let key = match req.headers().get(header::IDEMPOTENCY_KEY)? {
        Some(raw_key) => match IdempotencyKey::parse(&raw_key) {
            Ok(key) => Some(key),
            Err(error) => return problem_of(ProblemType::InvalidIdempotencyKey, error.to_string()).map(Err),
        },
        None if keyless && config.settings.keyless.derives() => None,
        None => return missing_key().map(Err),
    };
    let content_type = match body::json_content_type(req)? {
        Ok(content_type) => content_type,
        Err(refused) => return Ok(Err(refused)),
    };
    let body = match body::read_bounded(req, config.settings.max_body_bytes).await? {
        Ok(body) => body,
        Err(refused) => return Ok(Err(refused)),
    };
    Ok(Ok((key, content_type, body)))
}

/// 400: the request has no `Idempotency-Key` (and none is derived for it).
fn missing_key() -> Result<Response> {
    problem_of(
        ProblemType::MissingIdempotencyKey,
        "send an Idempotency-Key header (16–255 visible ASCII characters, e.g. a UUIDv4) so retries are recognised",
    )
}

/// The submission of a keyed request the gateway accepted.
fn submission_of(
    req: &Request,
    config: &Config,
    caller: Caller,
    key: &IdempotencyKey,
    fingerprint: &Fingerprint,
    target: String,
    content_type: String,
) -> Result<Submission> {
    let prefer = req.headers().get(header::PREFER)?;
    let wait_ms = prefer
        .as_deref()
        .and_then(prefer_wait_seconds)
        .map_or(config.settings.coalesce_wait_ms, |s| s.saturating_mul(1000).min(MAX_WAIT_MS));
    Ok(Submission {
        tenant: caller.tenant,
        user: caller.user,
        key: key.clone(),
        fingerprint: fingerprint.clone(),
        target,
        content_type,
        wait_ms,
        background: prefer.is_some_and(|prefer| prefers_async(&prefer)),
        provider_headers: handoff::PROVIDER_HEADERS
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), req.headers().get(name).ok().flatten()?)))
            .collect(),
        run: None,
        keyless: None,
        generation: 0,
        trace: None,
    })
}

/// Hands a submission to the Ledger of its job.
async fn submit(env: &Env, storage_id: &StorageId, submission: Submission, body: Vec<u8>) -> Result<Response> {
    client::ledger(env, storage_id, &LedgerCall::Submit { submission, body }).await
}

/// The routes about one job, under `/onejob/v1/jobs/{key}`.
#[derive(Clone, Copy)]
pub enum JobRoute {
    /// `GET …/{key}`: the job and its attempts.
    View,
    /// `GET …/{key}/stream?from=N` (or `Last-Event-ID: N`; `&ids=1` for
    /// `id:` lines): a streamed answer after its first `N` events.
    Stream,
    /// `POST …/{key}/cancel`: stops a streaming answer.
    Cancel,
    /// `POST …/{key}/approve`: lets a job type's effects that wait for an
    /// approval run (the tenant's key, or a user token with `approve`).
    Approve,
}

/// A tenant's request about its job `raw_key`, handed to the job's Ledger.
pub async fn job(req: Request, env: &Env, raw_key: &str, route: JobRoute) -> Result<Response> {
    let (_, caller) = match admit_caller(&req, env) {
        Ok(found) => found,
        Err(response) => return response,
    };
    let method = match route {
        JobRoute::View | JobRoute::Stream => Method::Get,
        JobRoute::Cancel | JobRoute::Approve => Method::Post,
    };
    if req.method() != method {
        return http::method_not_allowed(&req.method(), &method);
    }
    let key = match IdempotencyKey::parse(&percent_decode(raw_key)) {
        Ok(key) => key,
        Err(error) => return problem_of(ProblemType::InvalidIdempotencyKey, error.to_string()),
    };
    let url = req.url()?;
    let param = |wanted: &str| url.query_pairs().find(|(name, _)| name == wanted).map(|(_, v)| v.into_owned());
    // The tenant's own key may look at one of its users' jobs (`?user=`); a
    // user token sees only its own.
    let user = match (caller.token.is_some(), param("user")) {
        (false, Some(user)) => Some(user),
        _ => caller.user.clone(),
    };
    let mut query = JobQuery { key: key.to_string(), from: None, ids: false };
    if let JobRoute::Stream = route {
        // `id:` lines only when asked for: OpenAI-compatible clients must not see them.
        query.ids = matches!(param("ids").as_deref(), Some("1" | "true"));
        let from = param("from").or(req.headers().get("Last-Event-ID")?);
        query.from = match from.map(|text| text.trim().parse::<u64>()) {
            None => Some(0),
            Some(Ok(n)) => Some(n),
            Some(Err(_)) => {
                let detail = "from (or Last-Event-ID) must be a whole number of events";
                return problem_of(ProblemType::InvalidQuery, detail);
            }
        };
    }
    let call = match route {
        JobRoute::View => LedgerCall::View(query),
        JobRoute::Stream => LedgerCall::Stream(query),
        JobRoute::Cancel => LedgerCall::Cancel(query),
        JobRoute::Approve => {
            // Approving spends what the effect does: the tenant's own key, or
            // a user token that carries the right.
            if caller.token.as_ref().is_some_and(|token| !token.approve) {
                return problem_of(ProblemType::Forbidden, "approving needs the tenant's key or a token with approve");
            }
            let by = match &caller.user {
                Some(user) => format!("user:{user}"),
                None => format!("tenant:{}", caller.tenant),
            };
            let request = OperatorRequest {
                key: key.to_string(),
                by,
                request: String::new(),
                action: None,
                status: None,
                body: None,
                effect: None,
            };
            LedgerCall::Approve(request)
        }
    };
    client::ledger(env, &StorageId::of(&caller.tenant, user.as_deref(), &key), &call).await
}

/// `GET /onejob/problems/{slug}`: the problem type's documentation, so a
/// `type` URI resolves to something a developer can read.
pub fn problem_doc(req: &Request, slug: &str) -> Result<Response> {
    if req.method() != Method::Get {
        return http::method_not_allowed(&req.method(), &Method::Get);
    }
    match ProblemType::from_type_uri(slug) {
        Some(kind) => {
            let text = format!(
                "{}\n\nHTTP status: {}\nRetry with the same key: {}\nType URI: {}\n",
                kind.title(),
                kind.status(),
                if kind.should_retry() { "yes, after Retry-After" } else { "no" },
                kind.type_uri()
            );
            http::with_cors(Response::ok(text)?)
        }
        None => problem_of(ProblemType::NotFound, "no such problem type"),
    }
}

/// The configuration and the caller (a tenant, or a user of one), or the
/// response refusing it.
fn admit_caller(req: &Request, env: &Env) -> std::result::Result<(std::rc::Rc<Config>, Caller), Result<Response>> {
    let config = config::load(env).map_err(|_| http::misconfigured())?;
    let caller = caller_of(req, &config).map_err(|refusal| match refusal {
        Refusal::Unauthenticated(detail) => problem_of(ProblemType::Unauthorized, detail).map(|mut response| {
            let _ = response.headers_mut().set("WWW-Authenticate", "Bearer");
            response
        }),
        Refusal::Forbidden(detail) => problem_of(ProblemType::Forbidden, detail),
    })?;
    Ok((config, caller))
}

/// Decodes `%XX` escapes of a path segment (keys may contain reserved characters).
pub fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        let escaped =
            if bytes[i] == b'%' && i + 2 < bytes.len() { hex(bytes[i + 1]).zip(hex(bytes[i + 2])) } else { None };
        if let Some((high, low)) = escaped {
            out.push((high * 16 + low) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
