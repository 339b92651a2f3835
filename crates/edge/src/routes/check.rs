//! `POST /onejob/v1/providers/check`: runs sample requests against every
//! provider of one route and says which providers honour the route's output
//! contract, i.e. which are safe fallbacks. `make provider-check` calls it.
//!
//! A check calls providers directly (no job, no dedup, a fresh key per call)
//! and is paid for like any call: it is for operators before they add a
//! fallback, not for traffic. Its calls do not touch the breakers.

use onejob_core::operators::provider_check::{Answer, CheckRequest, ProviderResult, SampleResult};
use worker::{Request, Response};

use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::http::{self, Step, body};
use crate::upstream::{self, Call, CallResult};

pub async fn run(mut req: Request, config: &Config) -> Step<Response> {
    let check: CheckRequest = body::read_json(&mut req, config.settings.max_body_bytes, CheckRequest::SHAPE).await?;
    let providers = &config.settings.providers;
    let plan = check.plan(providers)?;
    let settings = &config.settings;
    let mut report = Vec::new();
    for (index, model) in &plan.calls {
        let provider = providers.get(*index);
        let mut results = Vec::new();
        for (sample, body) in check.samples.iter().enumerate() {
            let body = onejob_core::operators::provider_check::sample_body(body, model);
            let call = Call {
                target: plan.path.clone(),
                body: serde_json::to_vec(&body)?.into(),
                content_type: "application/json".into(),
                upstream_key: format!("onejob-check-{:016x}", (js_sys::Math::random() * 1e16) as u64),
                attempt: 1,
                timeout_ms: settings.upstream_timeout_ms,
                stream: false,
                headers: Vec::new(),
            };
            let started = now_ms();
            let answered = upstream::call(provider.clone(), config.api_key(*index).map(str::to_owned), call).await;
            let latency_ms = now_ms().saturating_sub(started);
            let result = match &answered {
                CallResult::Reply(reply) => {
                    let headers = |name: &str| reply.header(name);
                    let answer =
                        Answer::Reply { status: reply.status, headers: &headers, body: &reply.body, now_ms: now_ms() };
                    SampleResult::of(sample, latency_ms, answer, plan.contract)
                }
                CallResult::Stream(_) => SampleResult::of(sample, latency_ms, Answer::Stream, plan.contract),
                CallResult::Transport { detail, .. } => {
                    SampleResult::of(sample, latency_ms, Answer::Transport(detail), plan.contract)
                }
            };
            results.push(result);
        }
        report.push(ProviderResult::of(provider.name.clone(), model.clone(), results));
    }
    http::json(&plan.report(&check.model, &report))
}
