//! The stateless front of the worker: everything that can be checked without
//! the job is checked here, so bad input never reaches (or creates) a Ledger.

use onejob_core::fingerprint::{Body, Fingerprint};
use onejob_core::key::{IdempotencyKey, StorageId};
use onejob_core::protocol::{Problem, ProblemType, header, prefer_wait_seconds};
use worker::{Context, Env, Headers, Method, Request, RequestInit, Response, Result};

use crate::auth::{AuthError, tenant_of};
use crate::cache;
use crate::config::{Config, MAX_WAIT_MS};
use crate::http::{self, problem_of};
use crate::ledger::internal;

/// `POST /v1/{path}`.
pub async fn proxy(mut req: Request, env: &Env, _ctx: &Context) -> Result<Response> {
    let config = match Config::from_env(env) {
        Ok(config) => config,
        Err(detail) => {
            return problem_of(ProblemType::Internal, format!("gateway misconfigured: {detail}"));
        }
    };
    let tenant = match authenticate(&req, env) {
        Ok(tenant) => tenant,
        Err(response) => return response,
    };
    if req.method() != Method::Post {
        let mut response =
            problem_of(ProblemType::MethodNotAllowed, format!("{} is not allowed here; use POST", req.method()))?;
        response.headers_mut().set("Allow", "POST, OPTIONS")?;
        return Ok(response);
    }
    let key = match idempotency_key(&req) {
        Ok(key) => key,
        Err(response) => return response,
    };
    let content_type = req.headers().get("Content-Type")?.unwrap_or_else(|| "application/json".into());
    if !is_json(&content_type) {
        return problem_of(
            ProblemType::UnsupportedMediaType,
            format!("the body must be application/json, not {content_type}"),
        );
    }
    let too_large = |len: usize| {
        problem(
            Problem::new(
                ProblemType::PayloadTooLarge,
                format!("the body has {len} bytes; the limit is {} bytes", config.max_body_bytes),
            )
            .with("max_bytes", config.max_body_bytes),
        )
    };
    let declared = req.headers().get("Content-Length")?.and_then(|v| v.parse::<usize>().ok());
    if let Some(len) = declared.filter(|len| *len > config.max_body_bytes) {
        return too_large(len);
    }
    let body = req.bytes().await?;
    if body.len() > config.max_body_bytes {
        return too_large(body.len());
    }
    let path = req.path();
    let fingerprint = match Fingerprint::of_request("POST", &path, Body::Json(&body)) {
        Ok(fp) => fp,
        Err(error) => {
            return problem_of(ProblemType::InvalidJson, format!("the body is not valid JSON: {error}"));
        }
    };
    let storage_id = StorageId::derive(&tenant, &key);

    if let Some(replay) = cache::replay(env, storage_id.as_str(), &fingerprint, key.as_str()).await {
        return Ok(replay);
    }

    let wait_ms = req
        .headers()
        .get(header::PREFER)?
        .and_then(|prefer| prefer_wait_seconds(&prefer))
        .map_or(config.coalesce_wait_ms, |s| s.saturating_mul(1000).min(MAX_WAIT_MS));
    let headers = Headers::new();
    headers.set("Content-Type", &content_type)?;
    headers.set(internal::KEY, key.as_str())?;
    headers.set(internal::FINGERPRINT, fingerprint.as_str())?;
    headers.set(internal::PATH, &path)?;
    headers.set(internal::WAIT_MS, &wait_ms.to_string())?;
    headers.set(internal::STORAGE_ID, storage_id.as_str())?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers);
    init.with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    call_ledger(env, &storage_id, "/run", &init).await
}

/// `GET /onejob/v1/jobs/{key}`.
pub async fn job(req: Request, env: &Env, raw_key: &str) -> Result<Response> {
    let tenant = match authenticate(&req, env) {
        Ok(tenant) => tenant,
        Err(response) => return response,
    };
    if req.method() != Method::Get {
        return problem_of(ProblemType::MethodNotAllowed, "use GET");
    }
    let decoded = percent_decode(raw_key);
    let key = match IdempotencyKey::parse(&decoded) {
        Ok(key) => key,
        Err(error) => return problem_of(ProblemType::InvalidIdempotencyKey, error.to_string()),
    };
    let storage_id = StorageId::derive(&tenant, &key);
    let headers = Headers::new();
    headers.set(internal::KEY, key.as_str())?;
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    call_ledger(env, &storage_id, "/job", &init).await
}

/// `GET /onejob/problems/{slug}`: the problem type's documentation, so a
/// `type` URI resolves to something a developer can read.
pub fn problem_doc(slug: &str) -> Result<Response> {
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
        None => problem_of(ProblemType::NotFound, format!("no problem type {slug:?}")),
    }
}

/// Sends `init` to `route` of the Ledger that owns `storage_id`.
async fn call_ledger(env: &Env, storage_id: &StorageId, route: &str, init: &RequestInit) -> Result<Response> {
    let ledger = env.durable_object("LEDGER")?.get_by_name(storage_id.as_str())?;
    ledger.fetch_with_request(Request::new_with_init(&format!("https://ledger{route}"), init)?).await
}

fn authenticate(req: &Request, env: &Env) -> std::result::Result<String, Result<Response>> {
    tenant_of(req, env).map_err(|error| match error {
        AuthError::Unauthorized(detail) => problem_of(ProblemType::Unauthorized, detail).map(|mut r| {
            let _ = r.headers_mut().set("WWW-Authenticate", "Bearer");
            r
        }),
        AuthError::Misconfigured(detail) => {
            problem_of(ProblemType::Internal, format!("gateway misconfigured: {detail}"))
        }
    })
}

fn idempotency_key(req: &Request) -> std::result::Result<IdempotencyKey, Result<Response>> {
    let Some(raw) = req.headers().get(header::IDEMPOTENCY_KEY).ok().flatten() else {
        return Err(problem_of(
            ProblemType::MissingIdempotencyKey,
            "send an Idempotency-Key header (16–255 visible ASCII characters, e.g. a UUIDv4) so retries are recognised",
        ));
    };
    IdempotencyKey::parse(&raw).map_err(|error| problem_of(ProblemType::InvalidIdempotencyKey, error.to_string()))
}

fn is_json(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

fn problem(problem: Problem) -> Result<Response> {
    http::problem(&problem)
}

/// Decodes `%XX` escapes of a path segment (keys may contain reserved characters).
fn percent_decode(segment: &str) -> String {
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
