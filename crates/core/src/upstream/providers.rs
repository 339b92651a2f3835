//! Providers and routes: where a job's attempts go.
//!
//! A **provider** is a named upstream (`PROVIDERS`): its kind (the API it
//! speaks), its base URL and the name of the secret holding its API key. A
//! **route** (`ROUTES`) maps a request's `model` (or `*`, any other model)
//! to an ordered list of providers and the model name at each, with an
//! optional hedge delay and output contract.
//!
//! Every attempt of a job is placed by [`Route::rotation`]: the first
//! attempt goes to the route's first provider, and after a failure the next
//! attempt goes to the provider after the one that failed (wrapping around),
//! so a fallback is a new attempt of the same job under the same cap. The
//! breakers (see [`crate::retry::breaker`]) then skip providers that are open.
//!
//! Without `PROVIDERS` the deployment has the single provider `UPSTREAM`
//! names, which forwards every API as it comes and has no breaker, exactly as
//! before providers existed. The demo (`UPSTREAM=demo`) adds two more demo
//! providers and three routes so that failover, hedging and contracts show
//! without keys.

use serde_json::Value;

mod request_body;
pub use request_body::{RequestFacts, with_model};

use crate::upstream::contract::Contract;
use crate::wire::{Problem, ProblemType};

/// The API a request speaks, by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI's (`/v1/chat/completions`, `/v1/responses`, `/v1/embeddings`, …).
    OpenAi,
    /// Anthropic's Messages API (`/v1/messages`).
    Anthropic,
}

impl Api {
    /// The API of a request to `path` (path and query).
    pub fn of_path(path: &str) -> Self {
        let path = path.split('?').next().unwrap_or(path);
        if path == "/v1/messages" || path.starts_with("/v1/messages/") { Self::Anthropic } else { Self::OpenAi }
    }
}

/// The Messages API version sent when the caller sent none.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Where one call to an HTTP provider goes and the headers it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamRequest {
    /// The provider's base URL joined with the request's target.
    pub url: String,
    /// Every header, in the order they are set.
    pub headers: Vec<(String, String)>,
}

impl UpstreamRequest {
    /// The request to the provider at `base_url` for a caller's `target`
    /// (path and query): `/v1/…` against a base URL that already ends in
    /// `/v1` (`https://api.openai.com/v1`) is not doubled. It carries the
    /// body's content type, the job's key for the provider (never the
    /// caller's own), the provider headers the caller sent (`caller`:
    /// `anthropic-version`, betas) and the provider's key where its API
    /// wants it: `x-api-key` (with a default `anthropic-version`) for
    /// Anthropic's Messages API, `Authorization: Bearer` for OpenAI's. A
    /// target that could resolve outside the base URL ([`check_api_path`])
    /// is refused: the key goes with every request.
    pub fn new(
        base_url: &str,
        target: &str,
        api_key: Option<&str>,
        content_type: &str,
        upstream_key: &str,
        caller: &[(String, String)],
    ) -> Result<Self, &'static str> {
        check_api_path(target)?;
        let path = if base_url.ends_with("/v1") { target.strip_prefix("/v1").unwrap_or(target) } else { target };
        let mut headers = vec![
            ("Content-Type".to_owned(), content_type.to_owned()),
            (crate::wire::header::IDEMPOTENCY_KEY.to_owned(), upstream_key.to_owned()),
        ];
        headers.extend(caller.iter().cloned());
        match (Api::of_path(target), api_key) {
            (Api::Anthropic, key) => {
                headers.extend(key.map(|key| ("x-api-key".to_owned(), key.to_owned())));
                if !caller.iter().any(|(name, _)| name == "anthropic-version") {
                    headers.push(("anthropic-version".to_owned(), ANTHROPIC_VERSION.to_owned()));
                }
            }
            (Api::OpenAi, Some(key)) => headers.push(("Authorization".to_owned(), format!("Bearer {key}"))),
            (Api::OpenAi, None) => {}
        }
        Ok(Self { url: format!("{base_url}{path}"), headers })
    }
}

/// No route serves a request's model with its API (the one kept here):
/// the `400 no-route` problem, built only where it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoute(pub Api);

impl NoRoute {
    /// The problem the caller is answered.
    pub fn problem(self) -> Problem {
        Problem::new(
            ProblemType::NoRoute,
            match self.0 {
                Api::OpenAi => "no route serves this model with the OpenAI API; see ROUTES",
                Api::Anthropic => "no route serves this model with the Anthropic Messages API; see ROUTES",
            },
        )
    }
}

/// Checks that `path` (path and query) is an API path that stays under a
/// provider's base URL once joined to it: it starts with `/v1/`, and its
/// path has no empty, `.` or `..` segment, no backslash and no
/// percent-encoded dot, slash or backslash (which URL parsers or providers
/// may decode into one). The provider's key goes with every request, so a
/// path that could resolve elsewhere on the provider's host is refused
/// before any call.
pub fn check_api_path(path: &str) -> Result<(), &'static str> {
    let (path, query) = match path.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path, None),
    };
    let Some(rest) = path.strip_prefix("/v1/") else { return Err("the path must start with /v1/") };
    if path.bytes().any(|b| b == b'\\' || b == b'#' || !b.is_ascii_graphic()) {
        return Err("the path may hold only visible ASCII, without backslashes or #");
    }
    if query.is_some_and(|q| q.bytes().any(|b| b == b'#' || !b.is_ascii_graphic())) {
        return Err("the query may hold only visible ASCII, without #");
    }
    let lower = path.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c"].iter().any(|escape| lower.contains(escape)) {
        return Err("the path may not percent-encode dots, slashes or backslashes");
    }
    if rest.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return Err("the path may not have empty, . or .. segments");
    }
    Ok(())
}

/// What a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// An OpenAI-compatible API (OpenAI, Azure-style hosts, Workers AI's
    /// OpenAI endpoint, vLLM, …).
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// The built-in demo provider: answers both APIs, no network.
    Demo,
    /// The single `UPSTREAM`: forwards every API as it comes.
    Passthrough,
}

impl ProviderKind {
    /// Whether this kind serves requests of `api`.
    pub fn serves(self, api: Api) -> bool {
        match self {
            Self::OpenAi => api == Api::OpenAi,
            Self::Anthropic => api == Api::Anthropic,
            Self::Demo | Self::Passthrough => true,
        }
    }

    /// Its name in configuration and on the providers' page.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Demo => "demo",
            Self::Passthrough => "passthrough",
        }
    }
}

/// Where a provider is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The built-in demo provider. `outage` makes it answer every call with
    /// a 503, to show failover and breakers.
    Demo {
        /// Always unavailable.
        outage: bool,
    },
    /// An HTTP API at this base URL (without a trailing slash, usually
    /// ending in `/v1`).
    Http {
        /// The base URL.
        base_url: String,
    },
}

/// One named upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    /// Its name in routes, the audit trail and the providers' page.
    pub name: String,
    /// The API it speaks.
    pub kind: ProviderKind,
    /// Where it is.
    pub endpoint: Endpoint,
    /// The name of the variable or secret that holds its API key.
    pub api_key_var: Option<String>,
    /// Whether a circuit breaker guards it (every provider listed in
    /// `PROVIDERS`; not the single `UPSTREAM`).
    pub breaker: bool,
}

impl Provider {
    /// Whether `key`, its API key as read (`None`: unset or blank), lets it
    /// be called: a listed provider whose key secret is missing would
    /// answer every call with a 401, so the deployment is refused instead,
    /// by the secret's name (the single `UPSTREAM` forwards the caller's).
    pub fn check_key(&self, key: Option<&str>) -> Result<(), String> {
        match (&self.api_key_var, key) {
            (Some(name), None) if self.kind != ProviderKind::Passthrough => {
                Err(format!("the secret {name} (the API key of provider {}) is not set", self.name))
            }
            _ => Ok(()),
        }
    }
}

/// One provider of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteStep {
    /// The provider's index in [`Providers::list`].
    pub provider: usize,
    /// The model name to send it; `None` sends the request's own.
    pub model: Option<String>,
}

/// How requests for one model are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The providers, in order of preference.
    pub steps: Vec<RouteStep>,
    /// Start a second attempt on the next provider if the first has not
    /// answered after this long (non-streamed requests only).
    pub hedge_after_ms: Option<u64>,
    /// What an answer must contain to be accepted.
    pub contract: Option<Contract>,
}

/// The providers and routes of a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Providers {
    list: Vec<Provider>,
    routes: Vec<(String, Route)>,
    any_model: Option<Route>,
}

/// What is wrong with `PROVIDERS` or `ROUTES` (never quoting a value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProvidersError {
    /// `PROVIDERS` or `ROUTES`.
    pub name: &'static str,
    /// What it must be.
    pub expected: &'static str,
}

/// The longest hedge delay accepted (an hour).
const MAX_HEDGE_MS: u64 = 3_600_000;

impl Providers {
    /// The single provider of `UPSTREAM` (an HTTP base URL, or `None` for
    /// the demo), with one route for every model.
    pub fn single(base_url: Option<&str>) -> Self {
        let Some(base_url) = base_url else { return Self::demo() };
        let name = host_of(base_url).to_owned();
        let provider = Provider {
            name,
            kind: ProviderKind::Passthrough,
            endpoint: Endpoint::Http { base_url: base_url.to_owned() },
            api_key_var: Some("UPSTREAM_API_KEY".into()),
            breaker: false,
        };
        Self { list: vec![provider], routes: Vec::new(), any_model: Some(only(0)) }
    }

    /// The demo: `demo` (every model, as before), plus `demo-backup` and
    /// `demo-outage` (always 503) with breakers, and the routes
    /// `demo-failover` (outage → backup), `demo-hedge` (a slow primary
    /// hedged on the backup after 300 ms) and `demo-json` (a primary that
    /// answers prose → a backup that honours the JSON contract).
    fn demo() -> Self {
        let demo = |name: &str, outage: bool, breaker: bool| Provider {
            name: name.into(),
            kind: ProviderKind::Demo,
            endpoint: Endpoint::Demo { outage },
            api_key_var: None,
            breaker,
        };
        let step = |provider, model: &str| RouteStep { provider, model: Some(model.into()) };
        let failover = Route { steps: vec![step(2, "demo"), step(1, "demo")], hedge_after_ms: None, contract: None };
        let hedge =
            Route { steps: vec![step(0, "demo-slow"), step(1, "demo")], hedge_after_ms: Some(300), contract: None };
        let contract = Contract::RequiredKeys(vec!["category".into(), "priority".into()]);
        let json = Route {
            steps: vec![step(0, "demo-prose"), step(1, "demo")],
            hedge_after_ms: None,
            contract: Some(contract),
        };
        Self {
            list: vec![demo("demo", false, false), demo("demo-backup", false, true), demo("demo-outage", true, true)],
            routes: vec![("demo-failover".into(), failover), ("demo-hedge".into(), hedge), ("demo-json".into(), json)],
            any_model: Some(only(0)),
        }
    }

    /// Reads `PROVIDERS` (a JSON array) and `ROUTES` (a JSON object; when
    /// absent, every model goes to every provider in order).
    pub fn parse(providers: &str, routes: Option<&str>) -> Result<Self, ProvidersError> {
        let bad = |expected| ProvidersError { name: "PROVIDERS", expected };
        let value: Value = serde_json::from_str(providers).map_err(|_| bad("a JSON array of providers"))?;
        let entries = value.as_array().filter(|a| !a.is_empty()).ok_or(bad("a non-empty JSON array of providers"))?;
        let mut list: Vec<Provider> = Vec::new();
        for entry in entries {
            let provider = provider_of(entry).map_err(bad)?;
            if list.iter().any(|p| p.name == provider.name) {
                return Err(bad("a list of providers with distinct names"));
            }
            list.push(provider);
        }
        let (routes, any_model) = match routes {
            None => {
                let every = (0..list.len()).map(|provider| RouteStep { provider, model: None }).collect();
                (Vec::new(), Some(Route { steps: every, hedge_after_ms: None, contract: None }))
            }
            Some(text) => routes_of(text, &list)?,
        };
        Ok(Self { list, routes, any_model })
    }

    /// Every provider, in configuration order.
    pub fn list(&self) -> &[Provider] {
        &self.list
    }

    /// The route for a request's `model` (its own, else `*`).
    pub fn route(&self, model: Option<&str>) -> Option<&Route> {
        let own = model.and_then(|m| self.routes.iter().find(|(name, _)| name == m)).map(|(_, route)| route);
        own.or(self.any_model.as_ref())
    }

    /// The route that serves `model` with `api`, or [`NoRoute`] when none
    /// does (no route for the model, or none of its providers speaks that API).
    pub fn serving(&self, api: Api, model: Option<&str>) -> Result<&Route, NoRoute> {
        match self.route(model) {
            Some(route) if !route.rotation(self, api, None).is_empty() => Ok(route),
            _ => Err(NoRoute(api)),
        }
    }

    /// Every route with the model it serves (`*` for any other), in
    /// configuration order.
    pub fn routes(&self) -> impl Iterator<Item = (&str, &Route)> {
        let named = self.routes.iter().map(|(model, route)| (model.as_str(), route));
        named.chain(self.any_model.iter().map(|route| ("*", route)))
    }

    /// A provider's index by name.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|p| p.name == name)
    }

    /// A provider by index.
    pub fn get(&self, index: usize) -> &Provider {
        &self.list[index]
    }
}

fn only(provider: usize) -> Route {
    Route { steps: vec![RouteStep { provider, model: None }], hedge_after_ms: None, contract: None }
}

impl Route {
    /// The route's steps that serve `api`, in the order the next attempt
    /// should try them: after the step whose provider served the job's last
    /// attempt (`last`, by provider name), wrapping around; from the first
    /// step when there was none.
    pub fn rotation<'a>(&'a self, providers: &'a Providers, api: Api, last: Option<&str>) -> Vec<&'a RouteStep> {
        let serving: Vec<&RouteStep> =
            self.steps.iter().filter(|s| providers.get(s.provider).kind.serves(api)).collect();
        let start = last
            .and_then(|name| serving.iter().position(|s| providers.get(s.provider).name == name))
            .map_or(0, |i| i + 1);
        (0..serving.len()).map(|i| serving[(start + i) % serving.len()]).collect()
    }
}

/// Where a job's next attempt may go: the route's steps in the order to try
/// them, each with the wait it owes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement<'a> {
    /// The step (provider and model).
    pub step: &'a RouteStep,
    /// Milliseconds to wait before calling it.
    pub wait_ms: u64,
}

impl Route {
    /// The order in which the next attempt tries the route's providers,
    /// after `last` and without `except`:
    ///
    /// - a provider whose server asked for time (`Retry-After`, kept in
    ///   `not_before_ms` by provider index) is skipped while another owes
    ///   nothing: that time is owed to it, not to the route;
    /// - the others come in rotation order, the one that just failed owing
    ///   the job's backoff (`backoff_ms`) when it is tried again;
    /// - then, unless `may_wait` is false (a hedge never waits), the
    ///   providers still owed time, soonest first.
    #[allow(clippy::too_many_arguments)]
    pub fn placement<'a>(
        &'a self,
        providers: &'a Providers,
        api: Api,
        last: Option<&str>,
        except: Option<usize>,
        not_before_ms: &[u64],
        backoff_ms: u64,
        now_ms: u64,
        may_wait: bool,
    ) -> Vec<Placement<'a>> {
        let asked = |index: usize| not_before_ms.get(index).copied().unwrap_or(0).saturating_sub(now_ms);
        let last_index = last.and_then(|name| providers.index_of(name));
        let rotation: Vec<&RouteStep> =
            self.rotation(providers, api, last).into_iter().filter(|s| Some(s.provider) != except).collect();
        let mut order: Vec<Placement<'a>> = rotation
            .iter()
            .filter(|s| asked(s.provider) == 0)
            .map(|s| Placement { step: s, wait_ms: if Some(s.provider) == last_index { backoff_ms } else { 0 } })
            .collect();
        if may_wait {
            let mut waiting: Vec<Placement<'a>> = rotation
                .iter()
                .filter(|s| asked(s.provider) > 0)
                .map(|s| Placement { step: s, wait_ms: asked(s.provider) })
                .collect();
            waiting.sort_by_key(|p| p.wait_ms);
            order.extend(waiting);
        }
        order
    }
}

fn provider_of(entry: &Value) -> Result<Provider, &'static str> {
    const SHAPE: &str = "a list of {name, kind, base_url, api_key} objects";
    let object = entry.as_object().ok_or(SHAPE)?;
    if object.keys().any(|k| !["name", "kind", "base_url", "api_key"].contains(&k.as_str())) {
        return Err("a list of providers with only name, kind, base_url and api_key");
    }
    let text = |field: &str| object.get(field).and_then(Value::as_str);
    let name = text("name").filter(|n| is_name(n)).ok_or("a list of providers named with 1 to 32 of a-z 0-9 - _")?;
    let kind = match text("kind") {
        Some("openai") => ProviderKind::OpenAi,
        Some("anthropic") => ProviderKind::Anthropic,
        Some("demo") => ProviderKind::Demo,
        _ => return Err("a list of providers of kind openai, anthropic or demo"),
    };
    let endpoint = match (kind, text("base_url")) {
        (ProviderKind::Demo, None) => Endpoint::Demo { outage: false },
        (ProviderKind::Demo, Some(_)) => return Err("a list of providers where demo ones have no base_url"),
        (_, Some(url)) if is_base_url(url) => Endpoint::Http { base_url: url.trim_end_matches('/').to_owned() },
        _ => return Err("a list of providers with http(s) base URLs holding no credentials, query or fragment"),
    };
    let api_key_var = match object.get("api_key") {
        None => None,
        Some(Value::String(var)) if is_variable_name(var) => Some(var.clone()),
        // A key pasted here instead of a secret's name: refused, never echoed.
        Some(_) => return Err("a list of providers whose api_key names a secret (A-Z 0-9 _), not the key itself"),
    };
    Ok(Provider { name: name.to_owned(), kind, endpoint, api_key_var, breaker: true })
}

/// Routes by model name, and the route for any other model (`*`).
type RoutesByModel = (Vec<(String, Route)>, Option<Route>);

fn routes_of(text: &str, list: &[Provider]) -> Result<RoutesByModel, ProvidersError> {
    let bad = |expected| ProvidersError { name: "ROUTES", expected };
    let value: Value = serde_json::from_str(text).map_err(|_| bad("a JSON object of routes by model"))?;
    let object = value.as_object().ok_or(bad("a JSON object of routes by model"))?;
    let mut routes = Vec::new();
    let mut any_model = None;
    for (model, route) in object {
        let route = route_of(route, list).map_err(bad)?;
        if model == "*" {
            any_model = Some(route);
        } else {
            routes.push((model.clone(), route));
        }
    }
    Ok((routes, any_model))
}

fn route_of(value: &Value, list: &[Provider]) -> Result<Route, &'static str> {
    let object = value.as_object().ok_or("an object of {providers, hedge_after_ms, contract} routes")?;
    if object.keys().any(|k| !["providers", "hedge_after_ms", "contract"].contains(&k.as_str())) {
        return Err("routes with only providers, hedge_after_ms and contract");
    }
    let entries = object
        .get("providers")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or("routes each with a non-empty providers list")?;
    let mut steps = Vec::new();
    for entry in entries {
        let name = entry.get("provider").and_then(Value::as_str).ok_or("route steps of {provider, model}")?;
        let provider = list.iter().position(|p| p.name == name).ok_or("routes naming providers of PROVIDERS")?;
        let model = match entry.get("model") {
            None => None,
            Some(Value::String(m)) if !m.is_empty() && m.len() <= 256 => Some(m.clone()),
            Some(_) => return Err("route steps whose model is a non-empty string"),
        };
        steps.push(RouteStep { provider, model });
    }
    // A route serves one API: a fallback must answer in the caller's format.
    let serves = |api| steps.iter().all(|s| list[s.provider].kind.serves(api));
    if !serves(Api::OpenAi) && !serves(Api::Anthropic) {
        return Err("routes whose providers all speak one API (openai or anthropic)");
    }
    let hedge_after_ms = match object.get("hedge_after_ms") {
        None => None,
        Some(ms) => {
            Some(ms.as_u64().filter(|ms| (1..=MAX_HEDGE_MS).contains(ms)).ok_or("hedge_after_ms 1 to 3600000")?)
        }
    };
    let contract = object.get("contract").map(Contract::parse).transpose()?;
    Ok(Route { steps, hedge_after_ms, contract })
}

fn is_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn is_variable_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// An http(s) URL with a host and no user info, query or fragment: the
/// provider's name in the audit trail is its host, and nothing secret may
/// hide in the URL.
pub fn is_base_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else {
        return false;
    };
    let host = rest.split('/').next().unwrap_or("");
    !host.is_empty() && !host.contains('@') && !url.contains(['?', '#', ' '])
}

/// The host (and port) of a base URL.
pub fn host_of(base_url: &str) -> &str {
    let rest = base_url.split_once("://").map_or(base_url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

/// The demo provider's own models, each misbehaving its own way (what a
/// route of every other model to the demo serves under `make dev`).
pub const DEMO_MODELS: &[&str] =
    &["demo", "demo-flaky", "demo-slow", "demo-timeout", "demo-stream-drop", "demo-stream-error", "demo-prose"];

/// A model the deployment routes, as `GET /v1/models` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedModel {
    /// The model a request names.
    pub id: String,
    /// The provider that serves it first.
    pub owned_by: String,
}

impl Providers {
    /// The models a request may name: every named route (in the order the
    /// routes are kept), then, when the route of any other model (`*`) goes to the
    /// demo provider, the demo's own models. A `*` route to an HTTP
    /// provider forwards any model, so it names none.
    pub fn models(&self) -> Vec<ListedModel> {
        let first = |route: &Route| route.steps.first().map_or("onejob", |s| self.list[s.provider].name.as_str());
        let mut models: Vec<ListedModel> = self
            .routes
            .iter()
            .map(|(id, route)| ListedModel { id: id.clone(), owned_by: first(route).to_owned() })
            .collect();
        if let Some(any) = &self.any_model {
            let demo = any.steps.iter().find(|s| self.list[s.provider].endpoint == Endpoint::Demo { outage: false });
            if let Some(step) = demo {
                for id in DEMO_MODELS {
                    if !models.iter().any(|m| m.id == *id) {
                        models.push(ListedModel {
                            id: (*id).to_owned(),
                            owned_by: self.list[step.provider].name.clone(),
                        });
                    }
                }
            }
        }
        models
    }
}

/// The body of `GET /v1/models`: one list both official SDKs read. OpenAI's
/// `models.list()` reads `data[]` of `{id, object: "model", created,
/// owned_by}`; Anthropic's reads `data[]` of `{type: "model", id,
/// display_name, created_at}` and pages by `has_more`, `first_id` and
/// `last_id`. Each model carries both sets of fields (each SDK ignores the
/// other's), and the page says it is the only one.
pub fn models_page(models: &[ListedModel]) -> Value {
    let data: Vec<Value> = models
        .iter()
        .map(|m| {
            serde_json::json!({
                "id": m.id,
                "object": "model",
                "created": 0,
                "owned_by": m.owned_by,
                "type": "model",
                "display_name": m.id,
                "created_at": "1970-01-01T00:00:00Z",
            })
        })
        .collect();
    serde_json::json!({
        "object": "list",
        "first_id": models.first().map(|m| m.id.as_str()),
        "last_id": models.last().map(|m| m.id.as_str()),
        "has_more": false,
        "data": data,
    })
}

#[cfg(test)]
mod model_list_tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn the_demo_lists_its_routes_then_its_own_models() {
        let ids: Vec<String> = Providers::single(None).models().into_iter().map(|m| m.id).collect();
        assert_eq!(&ids[..3], ["demo-failover", "demo-hedge", "demo-json"]);
        assert_eq!(&ids[3..], DEMO_MODELS);
        let models = Providers::single(None).models();
        assert_eq!(models[0].owned_by, "demo-outage", "a route is owned by its first provider");
        assert_eq!(models[3].owned_by, "demo");
    }

    #[test]
    fn an_http_upstream_names_only_its_routes() {
        assert!(Providers::single(Some("https://api.example/v1")).models().is_empty());
        let providers = r#"[{"name": "openai", "kind": "openai", "base_url": "https://a.example/v1"},
                            {"name": "claude", "kind": "anthropic", "base_url": "https://c.example/v1"}]"#;
        let routes = r#"{"gpt-4o-mini": {"providers": [{"provider": "openai"}]},
                         "claude-sonnet": {"providers": [{"provider": "claude", "model": "claude-sonnet-4-5"}]},
                         "*": {"providers": [{"provider": "openai"}]}}"#;
        let models = Providers::parse(providers, Some(routes)).unwrap().models();
        let listed: Vec<(&str, &str)> = models.iter().map(|m| (m.id.as_str(), m.owned_by.as_str())).collect();
        // In the order the routes are kept (ROUTES is read as an object: by name).
        assert_eq!(listed, [("claude-sonnet", "claude"), ("gpt-4o-mini", "openai")]);
    }

    #[test]
    fn the_page_reads_as_both_sdks_list() {
        let page = models_page(&[
            ListedModel { id: "a".into(), owned_by: "p".into() },
            ListedModel { id: "b".into(), owned_by: "q".into() },
        ]);
        assert_eq!(page["object"], "list");
        assert_eq!(page["has_more"], false);
        assert_eq!((page["first_id"].as_str(), page["last_id"].as_str()), (Some("a"), Some("b")));
        let first = &page["data"][0];
        assert_eq!(
            (first["id"].as_str(), first["object"].as_str(), first["owned_by"].as_str()),
            (Some("a"), Some("model"), Some("p"))
        );
        assert_eq!((first["type"].as_str(), first["display_name"].as_str()), (Some("model"), Some("a")));
        assert!(first["created"].is_u64() && first["created_at"].is_string());
        let empty = models_page(&[]);
        assert_eq!(empty["data"].as_array().map(Vec::len), Some(0));
        assert!(empty["first_id"].is_null());
    }
}

#[cfg(test)]
mod api_path_tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::check_api_path;

    #[test]
    fn api_paths_that_stay_under_the_base_url_are_accepted() {
        for path in ["/v1/chat/completions", "/v1/messages", "/v1/responses?stream=true", "/v1/files/file-abc.json"] {
            assert_eq!(check_api_path(path), Ok(()), "{path}");
        }
    }

    #[test]
    fn paths_that_could_leave_the_base_url_are_refused() {
        for path in [
            "/v1/../../x",
            "/v1/chat/../../admin",
            "/v1/./chat/completions",
            "/v1/..",
            "/v1//evil.example/x",
            "/v1/chat//completions",
            "/v1/",
            "/v1/%2e%2e/x",
            "/v1/%2E./x",
            "/v1/.%2e/x",
            "/v1/a%2fb",
            "/v1/a%2F..%2Fb",
            "/v1/a%5cb",
            "/v1/a\\..\\b",
            "/v1/a#frag",
            "/v1/a b",
            "/v1/a?q=#x",
            "/v2/chat/completions",
            "v1/chat/completions",
            "",
        ] {
            assert!(check_api_path(path).is_err(), "{path}");
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn a_listed_provider_needs_its_key_and_the_single_upstream_does_not() {
        let provider = |kind, var: Option<&str>| Provider {
            name: "primary".into(),
            kind,
            endpoint: Endpoint::Http { base_url: "https://api.example/v1".into() },
            api_key_var: var.map(str::to_owned),
            breaker: true,
        };
        let openai = provider(ProviderKind::OpenAi, Some("OPENAI_API_KEY"));
        assert_eq!(openai.check_key(Some("sk-1")), Ok(()));
        assert_eq!(
            openai.check_key(None),
            Err("the secret OPENAI_API_KEY (the API key of provider primary) is not set".into())
        );
        assert_eq!(provider(ProviderKind::Passthrough, Some("UPSTREAM_KEY")).check_key(None), Ok(()));
        assert_eq!(provider(ProviderKind::Demo, None).check_key(None), Ok(()));
    }

    const PROVIDERS: &str = r#"[
        {"name": "primary", "kind": "openai", "base_url": "https://a.example/v1/", "api_key": "PRIMARY_KEY"},
        {"name": "backup", "kind": "openai", "base_url": "https://b.example/v1"},
        {"name": "claude", "kind": "anthropic", "base_url": "https://c.example/v1", "api_key": "ANTHROPIC_KEY"}
    ]"#;

    fn names<'a>(providers: &'a Providers, steps: &[&RouteStep]) -> Vec<&'a str> {
        steps.iter().map(|s| providers.get(s.provider).name.as_str()).collect()
    }

    #[test]
    fn routes_pick_by_model_and_rotate_after_the_last_provider() {
        let routes = r#"{
            "gpt-x": {"providers": [{"provider": "primary", "model": "gpt-x-1"}, {"provider": "backup"}], "hedge_after_ms": 800},
            "claude-x": {"providers": [{"provider": "claude", "model": "claude-x-2"}]}
        }"#;
        let p = Providers::parse(PROVIDERS, Some(routes)).unwrap();
        assert_eq!(p.get(0).endpoint, Endpoint::Http { base_url: "https://a.example/v1".into() });
        assert_eq!(p.get(0).api_key_var.as_deref(), Some("PRIMARY_KEY"));
        let route = p.route(Some("gpt-x")).unwrap();
        assert_eq!(route.hedge_after_ms, Some(800));
        assert_eq!(route.steps[0].model.as_deref(), Some("gpt-x-1"));
        assert_eq!(names(&p, &route.rotation(&p, Api::OpenAi, None)), ["primary", "backup"]);
        assert_eq!(names(&p, &route.rotation(&p, Api::OpenAi, Some("primary"))), ["backup", "primary"]);
        assert_eq!(names(&p, &route.rotation(&p, Api::OpenAi, Some("backup"))), ["primary", "backup"]);
        // A provider the route does not have (a config change): from the start.
        assert_eq!(names(&p, &route.rotation(&p, Api::OpenAi, Some("gone"))), ["primary", "backup"]);
        // The wrong API finds no provider on this route.
        assert!(route.rotation(&p, Api::Anthropic, None).is_empty());
        assert!(p.route(Some("other")).is_none());
    }

    #[test]
    fn a_request_is_served_by_its_model_s_route_only_if_a_provider_there_speaks_its_api() {
        let routes = r#"{"gpt-x": {"providers": [{"provider": "primary"}]}, "claude-x": {"providers": [{"provider": "claude"}]}}"#;
        let p = Providers::parse(PROVIDERS, Some(routes)).unwrap();
        assert_eq!(p.serving(Api::OpenAi, Some("gpt-x")).map(|r| r.steps.len()), Ok(1));
        assert_eq!(p.serving(Api::Anthropic, Some("claude-x")).map(|r| r.steps.len()), Ok(1));
        // The wrong API for the route's providers, a model no route serves, no model.
        assert_eq!(p.serving(Api::Anthropic, Some("gpt-x")).unwrap_err(), NoRoute(Api::Anthropic));
        assert_eq!(p.serving(Api::OpenAi, Some("other")).unwrap_err(), NoRoute(Api::OpenAi));
        assert_eq!(p.serving(Api::OpenAi, None).unwrap_err(), NoRoute(Api::OpenAi));
        let problem = NoRoute(Api::Anthropic).problem();
        assert_eq!((problem.kind, problem.status()), (ProblemType::NoRoute, 400));
        assert!(problem.detail.contains("Anthropic Messages API"), "{}", problem.detail);
        // Without routes every model is served by the providers that speak its API.
        let any = Providers::parse(PROVIDERS, None).unwrap();
        assert!(any.serving(Api::Anthropic, Some("whatever")).is_ok());
    }

    #[test]
    fn an_upstream_request_joins_the_path_once_and_puts_the_key_where_its_api_wants_it() {
        let caller = vec![("openai-beta".to_owned(), "assistants=v2".to_owned())];
        let openai = UpstreamRequest::new(
            "https://a.example/v1",
            "/v1/chat/completions?x=1",
            Some("sk-p"),
            "application/json",
            "t:k",
            &caller,
        )
        .unwrap();
        assert_eq!(openai.url, "https://a.example/v1/chat/completions?x=1");
        assert_eq!(
            openai.headers,
            [
                ("Content-Type", "application/json"),
                ("Idempotency-Key", "t:k"),
                ("openai-beta", "assistants=v2"),
                ("Authorization", "Bearer sk-p"),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
        // A base URL without /v1 gets the whole path; no key, no Authorization.
        let keyless =
            UpstreamRequest::new("http://127.0.0.1:9", "/v1/embeddings", None, "application/json", "t:k", &[]).unwrap();
        assert_eq!(keyless.url, "http://127.0.0.1:9/v1/embeddings");
        assert!(keyless.headers.iter().all(|(name, _)| name != "Authorization" && name != "x-api-key"));
        // Anthropic: x-api-key, never Authorization, and a version unless the caller chose one.
        let anthropic =
            UpstreamRequest::new("https://c.example/v1", "/v1/messages", Some("sk-a"), "application/json", "t:k", &[])
                .unwrap();
        let header =
            |r: &UpstreamRequest, name: &str| r.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        assert_eq!(header(&anthropic, "x-api-key").as_deref(), Some("sk-a"));
        assert_eq!(header(&anthropic, "Authorization"), None);
        assert_eq!(header(&anthropic, "anthropic-version").as_deref(), Some(ANTHROPIC_VERSION));
        let chosen = vec![("anthropic-version".to_owned(), "2024-01-01".to_owned())];
        let pinned = UpstreamRequest::new(
            "https://c.example/v1",
            "/v1/messages",
            Some("sk-a"),
            "application/json",
            "t:k",
            &chosen,
        )
        .unwrap();
        let versions: Vec<_> = pinned.headers.iter().filter(|(n, _)| n == "anthropic-version").collect();
        assert_eq!(versions.len(), 1, "the caller's version alone");
        // A target that could leave the base URL never carries the key anywhere.
        assert!(
            UpstreamRequest::new("https://a.example/v1", "/v1/../admin", Some("sk-p"), "application/json", "t:k", &[])
                .is_err()
        );
    }

    #[test]
    fn without_routes_every_model_goes_to_every_provider_in_order() {
        let p = Providers::parse(PROVIDERS, None).unwrap();
        let route = p.route(Some("anything")).unwrap();
        assert_eq!(names(&p, &route.rotation(&p, Api::OpenAi, None)), ["primary", "backup"]);
        assert_eq!(names(&p, &route.rotation(&p, Api::Anthropic, None)), ["claude"]);
        assert!(p.list().iter().all(|p| p.breaker));
    }

    #[test]
    fn the_single_upstream_and_the_demo() {
        let single = Providers::single(Some("https://api.example:8443/v1"));
        assert_eq!(single.list().len(), 1);
        assert_eq!(single.get(0).name, "api.example:8443");
        assert!(!single.get(0).breaker);
        assert_eq!(single.route(Some("m")).unwrap().steps.len(), 1);
        let demo = Providers::single(None);
        assert_eq!(demo.get(0).name, "demo");
        let failover = demo.route(Some("demo-failover")).unwrap();
        assert_eq!(names(&demo, &failover.rotation(&demo, Api::OpenAi, None)), ["demo-outage", "demo-backup"]);
        assert_eq!(demo.route(Some("demo-hedge")).unwrap().hedge_after_ms, Some(300));
        assert_eq!(names(&demo, &demo.route(Some("gpt-4o")).unwrap().rotation(&demo, Api::Anthropic, None)), ["demo"]);
    }

    #[test]
    fn malformed_configuration_is_refused_without_quoting_it() {
        let err = |providers: &str, routes: Option<&str>| Providers::parse(providers, routes).unwrap_err();
        let secret = "sk-live-0123456789";
        for bad in [
            format!(r#"[{{"name": "a", "kind": "openai", "base_url": "https://x/v1", "api_key": "{secret}"}}]"#),
            format!(r#"[{{"name": "a", "kind": "openai", "base_url": "https://u:{secret}@x/v1"}}]"#),
            r#"[{"name": "a", "kind": "cohere", "base_url": "https://x/v1"}]"#.into(),
            r#"[{"name": "A B", "kind": "openai", "base_url": "https://x/v1"}]"#.into(),
            r#"[{"name": "a", "kind": "openai"}]"#.into(),
            r#"[{"name": "a", "kind": "demo"}, {"name": "a", "kind": "demo"}]"#.into(),
            r#"[{"name": "a", "kind": "demo", "price": 1}]"#.into(),
            "[]".into(),
            "{".into(),
        ] {
            let e = err(&bad, None);
            assert_eq!(e.name, "PROVIDERS", "{bad}");
            assert!(!e.expected.contains(secret));
        }
        for bad in [
            r#"{"m": {"providers": [{"provider": "nobody"}]}}"#,
            r#"{"m": {"providers": []}}"#,
            r#"{"m": {"providers": [{"provider": "primary"}, {"provider": "claude"}]}}"#,
            r#"{"m": {"providers": [{"provider": "primary"}], "hedge_after_ms": 0}}"#,
            r#"{"m": {"providers": [{"provider": "primary"}], "contract": {"schema": {"oneOf": []}}}}"#,
            r#"{"m": {"providers": [{"provider": "primary"}], "retries": 3}}"#,
            r#"[]"#,
        ] {
            assert_eq!(err(PROVIDERS, Some(bad)).name, "ROUTES", "{bad}");
        }
    }

    #[test]
    fn placement_owes_a_servers_time_to_that_server_and_the_backoff_to_a_retry() {
        let routes = r#"{"m": {"providers": [{"provider": "primary"}, {"provider": "backup"}]}}"#;
        let p = Providers::parse(PROVIDERS, Some(routes)).unwrap();
        let route = p.route(Some("m")).unwrap();
        let order = |last, not_before: &[u64], may_wait| -> Vec<(&str, u64)> {
            route
                .placement(&p, Api::OpenAi, last, None, not_before, 100, 1_000, may_wait)
                .iter()
                .map(|pl| (p.get(pl.step.provider).name.as_str(), pl.wait_ms))
                .collect()
        };
        // A plain failure: the next provider at once, the same one after the backoff.
        assert_eq!(order(Some("primary"), &[0, 0, 0], true), [("backup", 0), ("primary", 100)]);
        assert_eq!(order(Some("backup"), &[0, 0, 0], true), [("primary", 0), ("backup", 100)]);
        // The primary asked for 2 s: the backup (even after its own failure) goes first.
        assert_eq!(order(Some("backup"), &[3_000, 0, 0], true), [("backup", 100), ("primary", 2_000)]);
        // A hedge never waits for a provider owed time.
        assert_eq!(order(Some("backup"), &[3_000, 0, 0], false), [("backup", 100)]);
        // Everyone owed time: soonest first.
        assert_eq!(order(Some("backup"), &[3_000, 1_500, 0], true), [("backup", 500), ("primary", 2_000)]);
    }

    #[test]
    fn the_api_is_read_from_the_path() {
        assert_eq!(Api::of_path("/v1/messages"), Api::Anthropic);
        assert_eq!(Api::of_path("/v1/messages?beta=true"), Api::Anthropic);
        assert_eq!(Api::of_path("/v1/messages/count_tokens"), Api::Anthropic);
        assert_eq!(Api::of_path("/v1/chat/completions"), Api::OpenAi);
        assert_eq!(Api::of_path("/v1/messagesx"), Api::OpenAi);
    }
}
