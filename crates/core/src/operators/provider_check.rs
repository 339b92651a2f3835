//! What `POST /onejob/v1/providers/check` decides: whether a check is one
//! to run (its samples, its path), the request body each provider gets,
//! what each answer says about the route's output contract, and which
//! providers are safe fallbacks. The edge calls the providers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::front::{Refusal, refused};
use crate::retry::backoff::retries::Observation;
use crate::retry::breaker::{BreakerState, HealthView};
use crate::retry::classify::Decision;
use crate::upstream::contract::Contract;
use crate::upstream::providers::{Api, Providers, check_api_path};
use crate::wire::ProblemType;

/// At most this many samples per check.
pub const MAX_SAMPLES: usize = 10;

/// The path a check calls when it names none.
const DEFAULT_PATH: &str = "/v1/chat/completions";

/// What to check.
#[derive(Debug, Clone, Deserialize)]
pub struct CheckRequest {
    /// The route, by the model name requests use.
    pub model: String,
    /// Request bodies to send (their `model` is replaced per provider).
    pub samples: Vec<Value>,
    /// The API path; `/v1/chat/completions` by default.
    #[serde(default)]
    pub path: Option<String>,
}

impl CheckRequest {
    /// What a check's body must look like, for a caller who sent another.
    pub const SHAPE: &'static str = "{\"model\": …, \"samples\": [request bodies], \"path\"?: …}";

    /// The path to call, if the check is one to run: 1 to [`MAX_SAMPLES`]
    /// samples, each a request body (nothing is paid for before all are),
    /// and a path under the provider's base URL (its key goes with each
    /// call); `400` otherwise.
    pub fn path(&self) -> Result<String, Refusal> {
        if self.samples.is_empty() || self.samples.len() > MAX_SAMPLES {
            return Err(refused(ProblemType::InvalidQuery, format!("send 1 to {MAX_SAMPLES} samples")));
        }
        if let Some(index) = self.samples.iter().position(|sample| !sample.is_object()) {
            let detail = format!("sample {index} is not a JSON object (a request body)");
            return Err(refused(ProblemType::InvalidQuery, detail));
        }
        let path = self.path.clone().unwrap_or_else(|| DEFAULT_PATH.into());
        check_api_path(&path).map_err(|why| refused(ProblemType::InvalidQuery, format!("path: {why}")))?;
        Ok(path)
    }

    /// The model a provider's step is asked for: its own, else the route's.
    pub fn model_at(&self, step_model: Option<&str>) -> String {
        step_model.unwrap_or(&self.model).to_owned()
    }
}

/// A check to run: its path, the route's contract, and each provider of
/// the route that speaks the path's API, with the model it is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckPlan<'a> {
    /// The path every call goes to.
    pub path: String,
    /// The route's output contract, if it has one.
    pub contract: Option<&'a Contract>,
    /// The providers to call, by index, each with its model, in route order.
    pub calls: Vec<(usize, String)>,
}

impl CheckRequest {
    /// The check to run among `providers`: its path ([`CheckRequest::path`],
    /// else the `400`), the route of its model (else `400 no-route`), and
    /// the providers of that route that speak the path's API (a provider
    /// of another API is not a fallback for it).
    pub fn plan<'a>(&self, providers: &'a Providers) -> Result<CheckPlan<'a>, Refusal> {
        let path = self.path()?;
        let route = providers
            .route(Some(&self.model))
            .ok_or_else(|| refused(ProblemType::NoRoute, "no route serves this model"))?;
        let api = Api::of_path(&path);
        let calls = route
            .steps
            .iter()
            .filter(|step| providers.get(step.provider).kind.serves(api))
            .map(|step| (step.provider, self.model_at(step.model.as_deref())))
            .collect();
        Ok(CheckPlan { path, contract: route.contract.as_ref(), calls })
    }
}

impl CheckPlan<'_> {
    /// The check's answer: the model, the path, whether the route has a
    /// contract, and each provider's results.
    pub fn report(&self, model: &str, providers: &[ProviderResult]) -> Value {
        serde_json::json!({
            "model": model,
            "path": self.path,
            "contract": self.contract.is_some(),
            "providers": providers,
        })
    }
}

/// A sample as one provider gets it: its `model` that provider's, never
/// streamed (the check reads whole answers).
pub fn sample_body(sample: &Value, model: &str) -> Value {
    let mut body = sample.clone();
    if let Some(object) = body.as_object_mut() {
        object.insert("model".into(), Value::from(model));
        object.remove("stream");
    }
    body
}

/// What a provider answered one sample.
pub enum Answer<'a> {
    /// An HTTP answer: its status, headers and body.
    Reply {
        /// Its status.
        status: u16,
        /// Its headers, by name.
        headers: &'a dyn Fn(&str) -> Option<String>,
        /// Its body.
        body: &'a [u8],
        /// When it came (ms since the epoch).
        now_ms: u64,
    },
    /// A streamed answer (a check asks for none).
    Stream,
    /// No HTTP answer: why.
    Transport(&'a str),
}

/// One sample's result at one provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SampleResult {
    /// The sample's index.
    pub sample: usize,
    /// The answer's status, if there was one.
    pub status: Option<u16>,
    /// How long the call took.
    pub latency_ms: u64,
    /// `ok`, `none` (the route has no contract) or why it failed.
    pub contract: String,
    /// The answer is one a job would accept.
    pub accepted: bool,
}

impl SampleResult {
    /// What `answer` to sample `sample` says, under the route's `contract`.
    pub fn of(sample: usize, latency_ms: u64, answer: Answer, contract: Option<&Contract>) -> Self {
        let (status, accepted, contract) = match answer {
            Answer::Reply { status, headers, body, now_ms } => {
                let (observed, _) = Observation::of_llm_reply(status, headers, body, now_ms, 0);
                let accepted = observed.classification.decision == Decision::Accept;
                (Some(status), accepted, contract_text(contract, accepted, body))
            }
            Answer::Stream => (Some(200), false, "not checked (streamed)".to_owned()),
            Answer::Transport(detail) => (None, false, format!("not checked ({detail})")),
        };
        Self { sample, status, latency_ms, contract, accepted }
    }

    /// Accepted and within the contract (or there is none).
    fn safe(&self) -> bool {
        self.accepted && matches!(self.contract.as_str(), "ok" | "none")
    }
}

/// What the contract says of an answer: `none` without one, not checked
/// when the answer is not one a job would accept, else `ok` or why not.
fn contract_text(contract: Option<&Contract>, accepted: bool, body: &[u8]) -> String {
    match (contract, accepted) {
        (None, _) => "none".to_owned(),
        (Some(_), false) => "not checked (no answer)".to_owned(),
        (Some(contract), true) => contract.check(body).map_or_else(|violation| violation.0, |()| "ok".to_owned()),
    }
}

/// One provider's results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderResult {
    /// The provider's name.
    pub name: String,
    /// The model it was asked for.
    pub model: Option<String>,
    /// Every sample was answered with a 2xx that meets the contract.
    pub safe: bool,
    /// Each sample's result.
    pub results: Vec<SampleResult>,
}

impl ProviderResult {
    /// A provider's results, and whether it is safe.
    pub fn of(name: String, model: String, results: Vec<SampleResult>) -> Self {
        let safe = results.iter().all(SampleResult::safe);
        Self { name, model: Some(model), safe, results }
    }
}

/// The providers whose health the providers' page asks for: those with a
/// breaker, by index and name (a provider without one is always shown closed).
pub fn with_breaker(providers: &Providers) -> impl Iterator<Item = (usize, &str)> {
    providers.list().iter().enumerate().filter(|(_, p)| p.breaker).map(|(index, p)| (index, p.name.as_str()))
}

/// `GET /onejob/v1/providers`: each provider's name, kind and health
/// (`health`: the views of [`with_breaker`]'s providers, by index; any
/// other shows a closed breaker with nothing counted), and every route by
/// the model it serves, its providers by name. No URL, no key.
pub fn providers_page(providers: &Providers, health: &[(usize, HealthView)]) -> Value {
    let listed: Vec<Value> = providers
        .list()
        .iter()
        .enumerate()
        .map(|(index, provider)| {
            let health = health.iter().find(|(asked, _)| *asked == index).map(|(_, view)| view);
            serde_json::json!({
                "name": provider.name,
                "kind": provider.kind.as_str(),
                "breaker": provider.breaker,
                "state": health.map_or(BreakerState::Closed, |h| h.state),
                "consecutive_failures": health.map_or(0, |h| h.consecutive_failures),
                "calls": health.map_or(0, |h| h.calls),
                "failures": health.map_or(0, |h| h.failures),
                "error_rate": health.map_or(0.0, |h| h.error_rate),
                "retry_after_ms": health.map_or(0, |h| h.retry_after_ms),
                "transitions": health.map(|h| h.transitions.clone()).unwrap_or_default(),
            })
        })
        .collect();
    let routes: Vec<Value> = providers
        .routes()
        .map(|(model, route)| {
            let steps: Vec<Value> = route
                .steps
                .iter()
                .map(|s| serde_json::json!({ "provider": providers.get(s.provider).name, "model": s.model }))
                .collect();
            serde_json::json!({
                "model": model,
                "providers": steps,
                "hedge_after_ms": route.hedge_after_ms,
                "contract": route.contract.is_some(),
            })
        })
        .collect();
    serde_json::json!({ "providers": listed, "routes": routes })
}

#[cfg(test)]
mod tests;
