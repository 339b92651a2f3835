//! What the edge's stateless front decides before any job is touched: which
//! route a request is ([`Route::of`]), which method a route takes, and every
//! check of a tenant's request that needs no I/O (its key, its target, its
//! fingerprint, what a user token reaches, `Prefer: wait`, a job route's
//! user and stream position). The edge reads the request, asks these
//! functions, and performs what they return.

pub mod body;
pub mod head;
pub mod response;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::config::admin::{Admin, AdminDirectory};
use crate::config::settings::MAX_WAIT_MS;
use crate::config::tenant::{TenantDirectory, bearer_token};
use crate::config::token::{self, TokenError, TokenSecrets, UserToken};
use crate::identity::canonical::canonicalize;
use crate::identity::fingerprint::{Body, Fingerprint};
use crate::identity::key::IdempotencyKey;
use crate::identity::keyless::{self, Keyless};
use crate::job_type::resolve::disabled_detail;
use crate::job_type::{JobType, JobTypes};
use crate::upstream::contract::Violation;
use crate::upstream::providers::{ListedModel, check_api_path};
use crate::wire::{Problem, ProblemType, prefer_wait_seconds, prefers_async};

/// A method the front's routes take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
}

impl Method {
    /// The method's name as HTTP spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

/// A request refused before any I/O: a problem, or a method the route does
/// not take (a `405` that must carry `Allow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A problem to answer with (boxed: a refusal is returned on every
    /// check, a problem is large and rare).
    Problem(Box<Problem>),
    /// `used` is not `allowed` here.
    Method {
        /// The method the request used.
        used: String,
        /// The one the route takes.
        allowed: Method,
    },
    /// A tenant route's `401`: what the caller must fix, and a challenge
    /// for a bearer credential.
    Unauthenticated(String),
}

impl Refusal {
    /// The problem to answer with.
    pub fn problem(&self) -> Problem {
        match self {
            Refusal::Problem(problem) => (**problem).clone(),
            Refusal::Method { used, allowed } => Problem::new(
                ProblemType::MethodNotAllowed,
                format!("{used} is not allowed here; use {}", allowed.as_str()),
            ),
            Refusal::Unauthenticated(detail) => Problem::new(ProblemType::Unauthorized, detail.clone()),
        }
    }

    /// The headers its answer carries besides the problem's: a `405`'s
    /// `Allow` (RFC 9110 §15.5.6: the route's method and the CORS
    /// preflight's), a tenant route's `401`'s `WWW-Authenticate: Bearer`.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            Refusal::Problem(_) => Vec::new(),
            Refusal::Method { allowed, .. } => vec![("Allow", format!("{}, OPTIONS", allowed.as_str()))],
            Refusal::Unauthenticated(_) => vec![("WWW-Authenticate", "Bearer".to_owned())],
        }
    }
}

impl From<Problem> for Refusal {
    fn from(problem: Problem) -> Self {
        Refusal::Problem(Box::new(problem))
    }
}

/// A refusal with a problem of `kind` saying `detail`.
pub fn refused(kind: ProblemType, detail: impl Into<String>) -> Refusal {
    Problem::new(kind, detail).into()
}

/// `Ok` when `used` is `allowed`, else the `405`.
pub fn expect(used: &str, allowed: Method) -> Result<(), Refusal> {
    match used == allowed.as_str() {
        true => Ok(()),
        false => Err(Refusal::Method { used: used.to_owned(), allowed }),
    }
}

/// Who is calling a tenant route: a tenant (its own key), or one user of a
/// tenant (a user token, with the scopes it carries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The tenant.
    pub tenant: String,
    /// The user, for a user token.
    pub user: Option<String>,
    /// The user token, if that is what the caller sent.
    pub token: Option<UserToken>,
}

/// The credentials a request presents: `Authorization: Bearer <key or
/// token>`, or `x-api-key: <tenant key>` (as Anthropic's SDK sends its key).
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
    /// The `x-api-key` header.
    pub api_key: Option<&'a str>,
}

impl Credentials<'_> {
    fn bearer(&self) -> Option<&str> {
        self.authorization.and_then(bearer_token)
    }

    /// The tenant whose key this is (`Err`: what the caller must fix, a `401`).
    pub fn tenant(&self, tenants: &TenantDirectory) -> Result<String, &'static str> {
        let key = self
            .bearer()
            .or(self.api_key.map(str::trim))
            .ok_or("send Authorization: Bearer <tenant key> (or x-api-key: <tenant key>)")?;
        tenants.tenant_of(key).map(str::to_owned).ok_or("the key names no tenant")
    }

    /// The admin whose key this is (`Authorization: Bearer <admin key>`), or
    /// the `401`.
    pub fn admin<'d>(&self, admins: &'d AdminDirectory) -> Result<&'d Admin, Refusal> {
        let unauthorized = |detail: &str| refused(ProblemType::Unauthorized, detail);
        let key = self.bearer().ok_or_else(|| unauthorized("send Authorization: Bearer <admin key>"))?;
        admins.admin_of(key).ok_or_else(|| unauthorized("the key names no admin (see ADMIN_KEYS)"))
    }

    /// Any tenant or any admin (`401` for neither, saying what an admin sends).
    pub fn tenant_or_admin(&self, tenants: &TenantDirectory, admins: &AdminDirectory) -> Result<(), Refusal> {
        self.tenant(tenants).map(|_| ()).or_else(|_| self.admin(admins).map(|_| ()))
    }

    /// An admin of the whole deployment (`401`; `403` for an admin of one tenant).
    pub fn deployment_admin(&self, admins: &AdminDirectory) -> Result<(), Refusal> {
        match self.admin(admins)?.reaches_all() {
            true => Ok(()),
            false => Err(refused(ProblemType::Forbidden, "provider checks need an admin key for every tenant (\"*\")")),
        }
    }

    /// The caller of a tenant route: a bearer that looks like a user token
    /// is verified as one (expired, tampered or foreign: `401`; over-scoped:
    /// `403`), anything else is a tenant key (`401` with a challenge when it
    /// names no tenant).
    pub fn caller(&self, tenants: &TenantDirectory, secrets: &TokenSecrets, now_s: u64) -> Result<Caller, Refusal> {
        if let Some(bearer) = self.bearer().filter(|bearer| token::looks_like_token(bearer)) {
            let user_token = token::verify(bearer, secrets, now_s).map_err(token_refusal)?;
            let (tenant, user) = (user_token.tenant.clone(), Some(user_token.user.clone()));
            return Ok(Caller { tenant, user, token: Some(user_token) });
        }
        let tenant = self.tenant(tenants).map_err(|detail| Refusal::Unauthenticated(detail.to_owned()))?;
        Ok(Caller { tenant, user: None, token: None })
    }
}

/// A user token's error as a refusal: expired, tampered or foreign tokens
/// are `401`; over-scoped ones `403`.
pub fn token_refusal(error: TokenError) -> Refusal {
    match error.is_unauthenticated() {
        true => Refusal::Unauthenticated(error.to_string()),
        false => refused(ProblemType::Forbidden, error.to_string()),
    }
}

/// The routes about one job, under `/onejob/v1/jobs/{key}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl JobRoute {
    /// The (still percent-encoded) key and the route of `rest`, the path
    /// after `/onejob/v1/jobs/`.
    pub fn of(rest: &str) -> (&str, JobRoute) {
        [("/stream", JobRoute::Stream), ("/cancel", JobRoute::Cancel), ("/approve", JobRoute::Approve)]
            .into_iter()
            .find_map(|(suffix, route)| Some((rest.strip_suffix(suffix)?, route)))
            .unwrap_or((rest, JobRoute::View))
    }

    /// The one method the route takes.
    pub fn method(self) -> Method {
        match self {
            JobRoute::View | JobRoute::Stream => Method::Get,
            JobRoute::Cancel | JobRoute::Approve => Method::Post,
        }
    }
}

/// A path prefix and the route of what follows it.
type Prefixed<'a> = (&'static str, fn(&'a str) -> Route<'a>);

/// Where the worker sends a request, by its method and path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `OPTIONS *`: the CORS preflight.
    Preflight,
    /// `/v1/models`.
    Models,
    /// `/v1/{path}`: the proxy.
    Proxy,
    /// `/onejob/v1/run/{type}` (the type as the path spells it).
    Run(&'a str),
    /// `/onejob/v1/jobs/{key}[/…]`.
    Job(&'a str, JobRoute),
    /// `/onejob/v1/admin/{rest}`.
    Admin(&'a str),
    /// `/onejob/v1/providers`.
    Providers,
    /// `/onejob/v1/providers/check`.
    ProvidersCheck,
    /// `/demo/token`.
    DemoToken,
    /// `/demo/tickets` or `/demo/inbox`: `tickets` or `inbox`.
    DemoReadOut(&'a str),
    /// `/onejob/problems/{slug}`.
    ProblemDoc(&'a str),
    /// Anything else: `404`.
    NotFound,
}

impl<'a> Route<'a> {
    /// The route of a request.
    pub fn of(method: &str, path: &'a str) -> Route<'a> {
        if method == "OPTIONS" {
            return Route::Preflight;
        }
        let prefixed: [Prefixed<'a>; 4] = [
            ("/onejob/v1/run/", Route::Run),
            ("/onejob/v1/jobs/", |rest| {
                let (key, route) = JobRoute::of(rest);
                Route::Job(key, route)
            }),
            ("/onejob/v1/admin/", Route::Admin),
            ("/onejob/problems/", Route::ProblemDoc),
        ];
        match path {
            "/v1/models" => Route::Models,
            "/onejob/v1/providers" => Route::Providers,
            "/onejob/v1/providers/check" => Route::ProvidersCheck,
            "/demo/token" => Route::DemoToken,
            "/demo/tickets" | "/demo/inbox" => Route::DemoReadOut(&path["/demo/".len()..]),
            _ if path.starts_with("/v1/") => Route::Proxy,
            _ => prefixed
                .into_iter()
                .find_map(|(prefix, route)| path.strip_prefix(prefix).map(route))
                .unwrap_or(Route::NotFound),
        }
    }
}

/// Decodes `%XX` escapes of a path segment (keys may contain reserved
/// characters); a `%` not followed by two hex digits stays as it is.
pub fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let hex = |b: u8| (b as char).to_digit(16);
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%').then(|| bytes.get(i + 1..i + 3)).flatten();
        match escaped.and_then(|pair| hex(pair[0]).zip(hex(pair[1]))) {
            Some((high, low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether `content_type` is JSON (`application/json` or `application/*+json`).
pub fn is_json(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

/// A body's content type: `application/json` when the request names none
/// (the official SDKs and `curl --json` name it; a bare body is taken as
/// JSON), or the `415` refusal of any other.
pub fn json_content_type(sent: Option<&str>) -> Result<String, Refusal> {
    let content_type = sent.unwrap_or("application/json");
    match is_json(content_type) {
        true => Ok(content_type.to_owned()),
        false => Err(refused(ProblemType::UnsupportedMediaType, "the body must be application/json")),
    }
}

/// `413`: the body is larger than `limit` bytes.
pub fn too_large(limit: u64) -> Refusal {
    Problem::new(ProblemType::PayloadTooLarge, format!("the body is larger than {limit} bytes"))
        .with_max_bytes(limit)
        .into()
}

/// The length a body declares (`Content-Length`, when it is a number), or
/// the `413` when it is over `limit`. Within it, the runtime delivers no
/// more (it frames the body by it); a body without one (chunked) is counted
/// as it arrives ([`within_limit`]).
pub fn declared_length(content_length: Option<&str>, limit: u64) -> Result<Option<u64>, Refusal> {
    match content_length.and_then(|value| value.parse::<u64>().ok()) {
        Some(length) if length > limit => Err(too_large(limit)),
        declared => Ok(declared),
    }
}

/// `Ok` while `read` bytes and the next `chunk` stay within `limit`, else the `413`.
pub fn within_limit(read: usize, chunk: usize, limit: u64) -> Result<(), Refusal> {
    match (read + chunk) as u64 > limit {
        true => Err(too_large(limit)),
        false => Ok(()),
    }
}

/// `bytes` as a `T`, if they are strict JSON (core's reader: duplicate
/// names, lone surrogates, numbers beyond a double, nesting past its limit
/// are refused) of that shape; else the `400`, and `shape` tells a caller
/// whose JSON is valid but not a `T` what to send.
pub fn parse_strict<T: DeserializeOwned>(bytes: &[u8], shape: &str) -> Result<T, Refusal> {
    // The canonical form has no duplicates, no lone surrogates and only
    // numbers a double holds: serde reads exactly what core accepted.
    let invalid = |detail: String| refused(ProblemType::InvalidJson, detail);
    let canonical = canonicalize(bytes).map_err(|error| invalid(format!("the body is not valid JSON: {error}")))?;
    serde_json::from_str(&canonical)
        .map_err(|_| invalid(format!("the body is JSON but not what this route takes: {shape}")))
}

/// `500` with nothing of the configuration in it (the detail is in the
/// log): a route that cannot read the deployment's configuration.
pub fn misconfigured() -> Refusal {
    refused(ProblemType::Misconfigured, "gateway misconfigured; the operator has the details in the log")
}

/// 400: the request has no `Idempotency-Key` (and none is derived for it).
pub fn missing_key() -> Problem {
    Problem::new(
        ProblemType::MissingIdempotencyKey,
        "send an Idempotency-Key header (16–255 visible ASCII characters, e.g. a UUIDv4) so retries are recognised",
    )
}

/// The `Idempotency-Key` a keyed POST sent: the key, `None` when it sent
/// none and one may be derived (`may_derive`: the route and `KEYLESS`
/// allow it), else the `400`.
pub fn key_of(sent: Option<&str>, may_derive: bool) -> Result<Option<IdempotencyKey>, Refusal> {
    match sent {
        Some(raw) => IdempotencyKey::parse(raw)
            .map(Some)
            .map_err(|error| refused(ProblemType::InvalidIdempotencyKey, error.to_string())),
        None if may_derive => Ok(None),
        None => Err(missing_key().into()),
    }
}

/// The key a job route names (percent-encoded in its path), or the `400`.
pub fn job_key(raw: &str) -> Result<IdempotencyKey, Refusal> {
    IdempotencyKey::parse(&percent_decode(raw))
        .map_err(|error| refused(ProblemType::InvalidIdempotencyKey, error.to_string()))
}

/// A keyless request's refusal if it asks for a background job: its
/// `Location` would name a job by a key the caller never had.
pub fn check_keyless(prefer: Option<&str>) -> Result<(), Refusal> {
    match prefer.is_some_and(prefers_async) {
        true => Err(refused(
            ProblemType::MissingIdempotencyKey,
            "a background job (Prefer: respond-async) needs an Idempotency-Key: its Location names the job",
        )),
        false => Ok(()),
    }
}

/// The target a `/v1` request is forwarded to (its path and query), which
/// must stay under the provider's base URL: the provider's key goes with it.
pub fn proxy_target(path: &str, query: Option<&str>) -> Result<String, Refusal> {
    let target = query.map_or_else(|| path.to_owned(), |query| format!("{path}?{query}"));
    check_api_path(&target).map_err(|why| refused(ProblemType::InvalidQuery, format!("path: {why}")))?;
    Ok(target)
}

/// What the edge read of a `/v1` request, for [`proxy_job`].
#[derive(Debug, Clone, Copy)]
pub struct ProxyRequest<'a> {
    /// The URL's path.
    pub path: &'a str,
    /// The URL's query string, if any.
    pub query: Option<&'a str>,
    /// The body (JSON, within the limit).
    pub body: &'a [u8],
    /// The model the body asks for, if it names one.
    pub model: Option<&'a str>,
    /// `Prefer`.
    pub prefer: Option<&'a str>,
    /// `Cache-Control`.
    pub cache_control: Option<&'a str>,
}

/// A proxied request's job: where it goes, what it is, and under which key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyJob {
    /// The target: the path and query, under the provider's base URL.
    pub target: String,
    /// What "the same request" is.
    pub fingerprint: Fingerprint,
    /// The key: the one sent, or one derived from who asks and what.
    pub key: IdempotencyKey,
    /// For a derived key, the mode it is admitted under.
    pub keyless: Option<Keyless>,
}

/// The job of a `/v1` request by `caller` that sent `sent_key` (or none,
/// when the `deployment`'s `KEYLESS` derives one): its target under the
/// provider's base URL (the provider's key goes with it), its fingerprint,
/// what a user token reaches, and its key. Without a key the caller's
/// identical requests are one job, under a key derived from who asks and
/// what; a background job (`Prefer: respond-async`) needs a key of its own,
/// as its `Location` names the job.
pub fn proxy_job(
    caller: &Caller,
    deployment: Keyless,
    sent_key: Option<IdempotencyKey>,
    request: &ProxyRequest,
) -> Result<ProxyJob, Refusal> {
    let target = proxy_target(request.path, request.query)?;
    let fingerprint = fingerprint(&target, request.body, "body")?;
    token_allows(caller.token.as_ref(), &target, request.model)?;
    let (key, keyless) = match sent_key {
        Some(key) => (key, None),
        None => {
            check_keyless(request.prefer)?;
            let mode = keyless::for_request(deployment, request.cache_control);
            (keyless::derive_key(&caller.tenant, caller.user.as_deref(), &fingerprint), mode)
        }
    };
    Ok(ProxyJob { target, fingerprint, key, keyless })
}

/// The fingerprint of a POST of `body` to `target`, or the `400` when the
/// body (`what`: "body", "input") is not JSON core reads.
pub fn fingerprint(target: &str, body: &[u8], what: &str) -> Result<Fingerprint, Refusal> {
    Fingerprint::of_url("POST", target, Body::Json(body))
        .map_err(|error| refused(ProblemType::InvalidJson, format!("the {what} is not valid JSON: {error}")))
}

/// Whether the caller may ask `target` for `model`: a tenant's own key may
/// ask anything, a user token what it names (`403` otherwise).
pub fn token_allows(token: Option<&UserToken>, target: &str, model: Option<&str>) -> Result<(), Refusal> {
    token
        .map_or(Ok(()), |token| token.allows(target, model))
        .map_err(|error| refused(ProblemType::Forbidden, error.to_string()))
}

/// The models `GET /v1/models` lists: the routed ones, for a user token
/// those it may ask for (`403` when its paths leave out `/v1/models`).
pub fn models_for(token: Option<&UserToken>, mut models: Vec<ListedModel>) -> Result<Vec<ListedModel>, Refusal> {
    // Its paths as for any route; its models by the list.
    let paths_only = token.map(|token| UserToken { models: None, ..token.clone() });
    token_allows(paths_only.as_ref(), "/v1/models", None)?;
    if let Some(allowed) = token.and_then(|token| token.models.as_ref()) {
        models.retain(|model| allowed.contains(&model.id));
    }
    Ok(models)
}

/// The route of a job type's runs: `/onejob/v1/run/{type}`.
pub fn run_route(type_name: &str) -> String {
    format!("/onejob/v1/run/{type_name}")
}

/// Whether a run streams (`Accept: text/event-stream`), and the target its
/// fingerprint names: streamed or not are two intents, as on `/v1`.
pub fn run_target(type_name: &str, accept: Option<&str>) -> (bool, String) {
    let stream = accept.is_some_and(|accept| accept.contains("text/event-stream"));
    let route = run_route(type_name);
    let target = if stream { format!("{route}?stream") } else { route };
    (stream, target)
}

/// The job type a run names (its name percent-decoded): the `503
/// job-type-not-configured` problem naming the type and the settings it
/// lacks when the deployment turned it off for them (and nothing else of
/// the configuration), the `unknown-job-type` problem when it has none.
pub fn job_type<'a>(types: &'a JobTypes, name: &str) -> Result<&'a JobType, Refusal> {
    if let Some(missing) = types.disabled(name) {
        return Err(refused(ProblemType::JobTypeNotConfigured, disabled_detail(name, missing)));
    }
    types.get(name).ok_or_else(|| {
        refused(ProblemType::UnknownJobType, "no job type has this name; see the deployment's job types and JOB_TYPES")
    })
}

/// A job type's run as its job: whether it streams, its fingerprint, its
/// input and the chat request rendered from it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunJob {
    /// `Accept: text/event-stream`: the answer is streamed.
    pub stream: bool,
    /// The type's route (with `?stream` when streamed) and the input's canonical JSON.
    pub fingerprint: Fingerprint,
    /// The input, valid against the type's schema.
    pub input: Value,
    /// The chat request rendered from it.
    pub body: Vec<u8>,
}

/// The job of a run of `job_type` with the body `input` (its size and
/// media type already checked), in this order: what a user token reaches
/// (`403`: the type's route and model), the input as JSON (`400`), the
/// input against the type's schema (`400 invalid-input`, every violation
/// listed).
pub fn run_job(
    job_type: &JobType,
    token: Option<&UserToken>,
    key: &IdempotencyKey,
    input: &[u8],
    accept: Option<&str>,
) -> Result<RunJob, Refusal> {
    let (stream, target) = run_target(&job_type.name, accept);
    token_allows(token, &target, Some(&job_type.model))?;
    let fingerprint = fingerprint(&target, input, "input")?;
    let input: Value = serde_json::from_slice(input)
        .map_err(|error| refused(ProblemType::InvalidJson, format!("the input is not valid JSON: {error}")))?;
    check_input(&job_type.name, key, job_type.check_input(&input))?;
    let body = job_type.render_request(&input, stream);
    Ok(RunJob { stream, fingerprint, input, body })
}

/// `400 invalid-input` when a run's input breaks its job type's schema,
/// every violation listed.
pub fn check_input(type_name: &str, key: &IdempotencyKey, violations: Vec<Violation>) -> Result<(), Refusal> {
    if violations.is_empty() {
        return Ok(());
    }
    let detail = format!("the input does not meet the {type_name} job type's schema");
    Err(Problem::new(ProblemType::InvalidInput, detail)
        .with_key(key.as_str())
        .with_violations(violations.into_iter().map(|v| v.0).collect())
        .into())
}

/// How long a request waits for a job in flight: `Prefer: wait=N` (capped at
/// [`MAX_WAIT_MS`]), else the deployment's `default_ms`.
pub fn wait_ms(prefer: Option<&str>, default_ms: u64) -> u64 {
    prefer.and_then(prefer_wait_seconds).map_or(default_ms, |s| s.saturating_mul(1000).min(MAX_WAIT_MS))
}

/// Whose job a job route names: the tenant's own key may name one of its
/// users' (`?user=`); a user token only its own.
pub fn job_user(token: bool, caller_user: Option<&str>, asked: Option<String>) -> Option<String> {
    match (token, asked) {
        (false, Some(user)) => Some(user),
        _ => caller_user.map(str::to_owned),
    }
}

/// Where a stream is followed from: `?from=N` or `Last-Event-ID: N` (the
/// first given), `0` when neither is; `400` when it is not a whole number.
pub fn stream_from(from: Option<&str>) -> Result<u64, Refusal> {
    from.map_or(Ok(0), |text| text.trim().parse::<u64>())
        .map_err(|_| refused(ProblemType::InvalidQuery, "from (or Last-Event-ID) must be a whole number of events"))
}

/// Whether a stream's events carry `id:` lines: only when asked for
/// (`ids=1` or `ids=true`); OpenAI-compatible clients must not see them.
pub fn stream_ids(ids: Option<&str>) -> bool {
    matches!(ids, Some("1" | "true"))
}

/// Who approves a job's waiting effects, as the audit names them
/// (`user:…` or `tenant:…`): the tenant's own key, or a user token that
/// carries `approve` (`403` otherwise: approving spends what the effect does).
pub fn approver(token: Option<&UserToken>, tenant: &str, user: Option<&str>) -> Result<String, Refusal> {
    if token.is_some_and(|token| !token.approve) {
        return Err(refused(ProblemType::Forbidden, "approving needs the tenant's key or a token with approve"));
    }
    Ok(user.map_or_else(|| format!("tenant:{tenant}"), |user| format!("user:{user}")))
}

/// The demo's routes (`/demo/token`, `/demo/tickets`, `/demo/inbox`)
/// answer only where the demo is on (`DEMO_TOKEN_ISSUER=on`; elsewhere a
/// `404`, as any unknown route), and only a `GET`.
pub fn demo_route(demo_on: bool, method: &str) -> Result<(), Refusal> {
    if !demo_on {
        return Err(refused(ProblemType::NotFound, "no such route"));
    }
    expect(method, Method::Get)
}

/// `GET /demo/token?user=<id>`'s answer at `now_s`: a one-hour user token of
/// the demo's tenant for `user` (`400` unless 1 to 64 of `A-Z a-z 0-9 - _`;
/// `404` when that tenant has no token secret), as `{token, expires_s}`.
pub fn demo_token(user: Option<&str>, secrets: &TokenSecrets, now_s: u64) -> Result<serde_json::Value, Refusal> {
    let Some(user) = crate::demo::token_user(user) else {
        return Err(refused(ProblemType::InvalidQuery, "user must be 1 to 64 of A-Z a-z 0-9 - _"));
    };
    let Some(secret) = secrets.secret_of(crate::demo::TOKEN_TENANT) else {
        return Err(refused(ProblemType::NotFound, "the dev tenant has no token secret"));
    };
    let claims = crate::demo::token_claims(user, now_s);
    Ok(serde_json::json!({ "token": token::mint(&claims, secret), "expires_s": claims.exp }))
}

/// `GET /onejob/problems/{slug}`: the problem type's documentation as text,
/// so a `type` URI resolves to something a developer can read (`404` for
/// no such type).
pub fn problem_doc(slug: &str) -> Result<String, Refusal> {
    let kind =
        ProblemType::from_type_uri(slug).ok_or_else(|| Problem::new(ProblemType::NotFound, "no such problem type"))?;
    let retry = if kind.should_retry() { "yes, after Retry-After" } else { "no" };
    Ok(format!(
        "{}\n\nHTTP status: {}\nRetry with the same key: {retry}\nType URI: {}\n",
        kind.title(),
        kind.status(),
        kind.type_uri()
    ))
}

#[cfg(test)]
mod tests;
