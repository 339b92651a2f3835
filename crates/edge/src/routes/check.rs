//! `POST /onejob/v1/providers/check`: runs sample requests against every
//! provider of one route and says which providers honour the route's output
//! contract, i.e. which are safe fallbacks. `make provider-check` calls it.
//!
//! A check calls providers directly (no job, no dedup, a fresh key per call)
//! and is paid for like any call: it is for operators before they add a
//! fallback, not for traffic. Its calls do not touch the breakers.

use onejob_core::provider_check::{Answer, CheckRequest, ProviderResult, SampleResult};
use onejob_core::providers::Api;
use worker::{Request, Response, Result};

use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::http;
use crate::http::body;
use crate::upstream::{self, Call, CallResult};

pub async fn run(mut req: Request, config: &Config) -> Result<Response> {
    let check =
        match body::read_json::<CheckRequest>(&mut req, config.settings.max_body_bytes, CheckRequest::SHAPE).await? {
            Ok(check) => check,
            Err(refused) => return Ok(refused),
        };
    let path = match check.path() {
        Ok(path) => path,
        Err(refused) => return http::refuse(&refused),
    };
    let providers = &config.settings.providers;
    let Some(route) = providers.route(Some(&check.model)) else {
        return http::problem_of(onejob_core::protocol::ProblemType::NoRoute, "no route serves this model");
    };
    let settings = &config.settings;
    let mut report = Vec::new();
    for step in route.steps.iter().filter(|step| providers.get(step.provider).kind.serves(Api::of_path(&path))) {
        let provider = providers.get(step.provider);
        let model = check.model_at(step.model.as_deref());
        let mut results = Vec::new();
        for (sample, body) in check.samples.iter().enumerate() {
            let body = onejob_core::provider_check::sample_body(body, &model);
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
            let result = match &answered {
                CallResult::Reply(reply) => {
                    let headers = |name: &str| reply.header(name);
                    let answer =
                        Answer::Reply { status: reply.status, headers: &headers, body: &reply.body, now_ms: now_ms() };
                    SampleResult::of(sample, latency_ms, answer, route.contract.as_ref())
                }
                CallResult::Stream(_) => SampleResult::of(sample, latency_ms, Answer::Stream, route.contract.as_ref()),
                CallResult::Transport { detail, .. } => {
                    SampleResult::of(sample, latency_ms, Answer::Transport(detail), route.contract.as_ref())
                }
            };
            results.push(result);
        }
        report.push(ProviderResult::of(provider.name.clone(), model, results));
    }
    let body = serde_json::json!({
        "model": check.model,
        "path": path,
        "contract": route.contract.is_some(),
        "providers": report,
    });
    http::with_cors(Response::from_json(&body)?)
}
