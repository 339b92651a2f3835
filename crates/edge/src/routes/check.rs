//! `POST /onejob/v1/providers/check`: runs sample requests against every
//! provider of one route and says which providers honour the route's output
//! contract, i.e. which are safe fallbacks. `make provider-check` calls it.
//!
//! A check calls providers directly (no job, no dedup, a fresh key per call)
//! and is paid for like any call: it is for operators before they add a
//! fallback, not for traffic. Its calls do not touch the breakers.

use onejob_core::backoff::retries::Observation;
use onejob_core::classify::Decision;
use onejob_core::protocol::ProblemType;
use onejob_core::providers::{Api, check_api_path};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use worker::{Request, Response, Result};

use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::http::body;
use crate::http::{self, problem_of};
use crate::upstream::{self, Call, CallResult};

/// At most this many samples per check.
const MAX_SAMPLES: usize = 10;

/// What to check.
#[derive(Deserialize)]
struct CheckRequest {
    /// The route, by the model name requests use.
    model: String,
    /// Request bodies to send (their `model` is replaced per provider).
    samples: Vec<Value>,
    /// The API path; `/v1/chat/completions` by default.
    #[serde(default)]
    path: Option<String>,
}

/// One sample's result at one provider.
#[derive(Serialize)]
struct SampleResult {
    sample: usize,
    status: Option<u16>,
    latency_ms: u64,
    /// `ok`, `none` (the route has no contract) or why it failed.
    contract: String,
    accepted: bool,
}

#[derive(Serialize)]
struct ProviderResult {
    name: String,
    model: Option<String>,
    /// Every sample was answered with a 2xx that meets the contract.
    safe: bool,
    results: Vec<SampleResult>,
}

pub async fn run(mut req: Request, config: &Config) -> Result<Response> {
    let shape = "{\"model\": …, \"samples\": [request bodies], \"path\"?: …}";
    let check = match body::read_json::<CheckRequest>(&mut req, config.settings.max_body_bytes, shape).await? {
        Ok(check) => check,
        Err(refused) => return Ok(refused),
    };
    if check.samples.is_empty() || check.samples.len() > MAX_SAMPLES {
        return problem_of(ProblemType::InvalidQuery, format!("send 1 to {MAX_SAMPLES} samples"));
    }
    // Every sample is a request body: nothing is paid for before all are.
    if let Some(index) = check.samples.iter().position(|sample| !sample.is_object()) {
        return problem_of(ProblemType::InvalidQuery, format!("sample {index} is not a JSON object (a request body)"));
    }
    let path = check.path.unwrap_or_else(|| "/v1/chat/completions".into());
    // The provider's key goes with each call: the path must stay under its base URL.
    if let Err(why) = check_api_path(&path) {
        return problem_of(ProblemType::InvalidQuery, format!("path: {why}"));
    }
    let providers = &config.settings.providers;
    let Some(route) = providers.route(Some(&check.model)) else {
        return problem_of(ProblemType::NoRoute, "no route serves this model");
    };
    let settings = &config.settings;
    let mut report = Vec::new();
    for step in &route.steps {
        let provider = providers.get(step.provider);
        if !provider.kind.serves(Api::of_path(&path)) {
            continue;
        }
        let model = step.model.clone().or_else(|| Some(check.model.clone()));
        let mut results = Vec::new();
        for (sample, body) in check.samples.iter().enumerate() {
            let mut body = body.clone();
            if let (Some(model), Some(object)) = (&model, body.as_object_mut()) {
                object.insert("model".into(), Value::from(model.as_str()));
                object.remove("stream");
            }
            let call = Call {
                target: path.clone(),
                body: serde_json::to_vec(&body)?.into(),
                content_type: "application/json".into(),
                upstream_key: format!("onejob-check-{:016x}", (js_sys::Math::random() * 1e16) as u64),
                attempt: 1,
                timeout_ms: settings.upstream_timeout_ms,
                stream: false,
                headers: Vec::new(),
            };
            let started = now_ms();
            let answered =
                upstream::call(provider.clone(), config.api_key(step.provider).map(str::to_owned), call).await;
            let latency_ms = now_ms().saturating_sub(started);
            let (status, accepted, contract) = match answered {
                CallResult::Reply(reply) => {
                    let (observed, _) =
                        Observation::of_llm_reply(reply.status, &|n| reply.header(n), &reply.body, now_ms(), 0);
                    let accepted = observed.classification.decision == Decision::Accept;
                    let contract = match (&route.contract, accepted) {
                        (None, _) => "none".to_owned(),
                        (Some(_), false) => "not checked (no answer)".to_owned(),
                        (Some(contract), true) => match contract.check(&reply.body) {
                            Ok(()) => "ok".to_owned(),
                            Err(violation) => violation.0,
                        },
                    };
                    (Some(reply.status), accepted, contract)
                }
                CallResult::Stream(_) => (Some(200), false, "not checked (streamed)".to_owned()),
                CallResult::Transport { detail, .. } => (None, false, format!("not checked ({detail})")),
            };
            results.push(SampleResult { sample, status, latency_ms, contract, accepted });
        }
        let safe = results.iter().all(|r| r.accepted && (r.contract == "ok" || r.contract == "none"));
        report.push(ProviderResult { name: provider.name.clone(), model, safe, results });
    }
    let body = serde_json::json!({
        "model": check.model,
        "path": path,
        "contract": route.contract.is_some(),
        "providers": report,
    });
    http::with_cors(Response::from_json(&body)?)
}
