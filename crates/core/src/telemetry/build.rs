//! The spans of one job request, built after its answer from what the
//! gateway saw (status, replay, timing) and from the job's own record (its
//! attempts' audit trail and its effects): a `SERVER` span for the
//! request, a `CLIENT` span per attempt this request made and one per
//! effect, with the GenAI semantic conventions' attribute names and
//! onejob's own. Never the key (its digest), a tenant's or provider's
//! key, or a body unless the deployment opted in (`capture_content`).

use super::span::{Span, SpanKind, StatusCode};
use super::trace::RequestTrace;
use crate::job::view::JobView;
use crate::job::{Attempt, AttemptOutcome};
use crate::job_type::effect::{Effect, EffectState};

/// Where a replayed answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplaySource {
    /// The job's Ledger: a finished job's stored answer, or the one result
    /// of a running job a duplicate waited for (coalesced).
    Ledger,
    /// The KV cache of finished results (the Ledger was not asked).
    Cache,
}

impl ReplaySource {
    /// Its name in `onejob.replay.source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ledger => "ledger",
            Self::Cache => "cache",
        }
    }
}

/// What the gateway knows about one job request once it has answered.
#[derive(Debug, Clone)]
pub struct RequestFacts<'a> {
    /// The request's trace and span ids.
    pub trace: &'a RequestTrace,
    /// `POST`.
    pub method: &'a str,
    /// The route (`/v1/chat/completions`, `/onejob/v1/run/triage`), no query.
    pub route: &'a str,
    /// When the gateway got the request and when it answered (ms since the epoch).
    pub started_ms: u64,
    /// See `started_ms`.
    pub ended_ms: u64,
    /// The answer's HTTP status.
    pub status: u16,
    /// The tenant id (never its key).
    pub tenant: &'a str,
    /// [`super::key_digest`] of the job.
    pub key_digest: &'a str,
    /// The model the request asked for.
    pub model: Option<&'a str>,
    /// The `model` of the answer's body, when it had one.
    pub response_model: Option<&'a str>,
    /// `onejob-job-state` of the answer.
    pub state: Option<&'a str>,
    /// `onejob-attempt` of the answer: the attempt whose result it is.
    pub answered_by: Option<u32>,
    /// The answer was a replay, and from where.
    pub replayed: Option<ReplaySource>,
    /// A job type's run: its name.
    pub job_type: Option<&'a str>,
    /// The request's and the answer's bodies, only when the deployment
    /// opted in (`OTEL_CAPTURE_CONTENT=true`), already cut to size.
    pub content: Option<(&'a str, &'a str)>,
}

/// What `gen_ai.operation.name` a route is.
pub fn operation_of(route: &str) -> &'static str {
    if route.ends_with("/embeddings") {
        "embeddings"
    } else if route.ends_with("/completions") && !route.ends_with("/chat/completions") {
        "text_completion"
    } else {
        "chat"
    }
}

/// The spans of one request: its own, then (unless it was a replay, which
/// made no call) one per attempt it started and one per effect of its job
/// that ran since. `provider_name(name)` is the `gen_ai.provider.name` of
/// the provider called `name` (`openai`, `anthropic`, …).
pub fn request_spans(
    facts: &RequestFacts<'_>,
    view: Option<&JobView>,
    provider_name: &dyn Fn(&str) -> String,
) -> Vec<Span> {
    let trace = facts.trace;
    let operation = operation_of(facts.route);
    // The attempts this request made: none for a replay; those that started
    // after it arrived otherwise (earlier ones were another request's).
    let ours: Vec<&Attempt> = match (facts.replayed, view) {
        (None, Some(view)) => view.attempts.iter().filter(|a| a.started_ms >= facts.started_ms).collect(),
        _ => Vec::new(),
    };
    let mut request = Span {
        trace_id: trace.trace_id,
        span_id: trace.span_id,
        parent: trace.parent,
        tracestate: trace.tracestate.clone(),
        name: format!("{} {}", facts.method, facts.route),
        kind: SpanKind::Server,
        start_ns: ms_to_ns(facts.started_ms),
        end_ns: ms_to_ns(facts.ended_ms),
        attributes: Vec::new(),
        status: if facts.status >= 500 { StatusCode::Error } else { StatusCode::Unset },
        status_message: None,
    };
    request.set("http.request.method", facts.method);
    request.set("http.route", facts.route);
    request.set("http.response.status_code", facts.status);
    request.set("gen_ai.operation.name", operation);
    request.set_some("gen_ai.request.model", facts.model);
    request.set_some("gen_ai.response.model", facts.response_model);
    request.set("onejob.tenant", facts.tenant);
    request.set("onejob.key.digest", facts.key_digest);
    request.set_some("onejob.job.state", facts.state);
    request.set("onejob.replayed", facts.replayed.is_some());
    request.set_some("onejob.replay.source", facts.replayed.map(ReplaySource::as_str));
    request.set_some("onejob.attempt", facts.answered_by);
    request.set_some("onejob.job_type", facts.job_type);
    request.set("onejob.upstream_calls", ours.len() as u64);
    let tokens = |pick: fn(&Attempt) -> Option<u64>| {
        let counted: Vec<u64> = ours.iter().filter_map(|a| pick(a)).collect();
        (!counted.is_empty()).then(|| counted.iter().sum::<u64>())
    };
    request.set_some("gen_ai.usage.input_tokens", tokens(|a| a.usage.map(|u| u.prompt_tokens)));
    request.set_some("gen_ai.usage.output_tokens", tokens(|a| a.usage.map(|u| u.completion_tokens)));
    if let Some((prompt, completion)) = facts.content {
        request.set("gen_ai.input.messages", prompt);
        request.set("gen_ai.output.messages", completion);
    }
    let mut spans = vec![request];
    for attempt in ours {
        spans.push(attempt_span(facts, attempt, operation, provider_name));
    }
    if facts.replayed.is_none()
        && let Some(view) = view
    {
        for (index, effect) in view.effects.iter().enumerate() {
            if let Some(span) = effect_span(facts, index as u32, effect) {
                spans.push(span);
            }
        }
    }
    spans
}

fn attempt_span(
    facts: &RequestFacts<'_>,
    attempt: &Attempt,
    operation: &'static str,
    provider_name: &dyn Fn(&str) -> String,
) -> Span {
    let trace = facts.trace;
    let model = attempt.model.as_deref().or(facts.model);
    let failed = !matches!(attempt.outcome, AttemptOutcome::Succeeded | AttemptOutcome::Running);
    let outcome = outcome_name(attempt.outcome);
    let mut span = Span {
        trace_id: trace.trace_id,
        span_id: trace.attempt_span_id(attempt.number),
        parent: Some(trace.span_id),
        tracestate: None,
        name: match model {
            Some(model) => format!("{operation} {model}"),
            None => operation.to_owned(),
        },
        kind: SpanKind::Client,
        start_ns: ms_to_ns(attempt.started_ms),
        end_ns: ms_to_ns(attempt.ended_ms.unwrap_or(facts.ended_ms.max(attempt.started_ms))),
        attributes: Vec::new(),
        status: if failed { StatusCode::Error } else { StatusCode::Unset },
        status_message: failed.then(|| outcome.to_owned()),
    };
    let provider = provider_name(&attempt.provider);
    span.set("gen_ai.operation.name", operation);
    span.set("gen_ai.provider.name", provider.as_str());
    // The name before semantic conventions 1.37, for backends that still read it.
    span.set("gen_ai.system", provider);
    span.set_some("gen_ai.request.model", model);
    if facts.answered_by == Some(attempt.number) {
        span.set_some("gen_ai.response.model", facts.response_model);
    }
    span.set_some("gen_ai.usage.input_tokens", attempt.usage.map(|u| u.prompt_tokens));
    span.set_some("gen_ai.usage.output_tokens", attempt.usage.map(|u| u.completion_tokens));
    span.set_some("http.response.status_code", attempt.status);
    if failed {
        span.set("error.type", attempt.error_class.map_or_else(|| outcome.to_owned(), |class| class.name()));
    }
    span.set("onejob.attempt", attempt.number);
    span.set("onejob.provider", attempt.provider.as_str());
    span.set("onejob.attempt.outcome", outcome);
    span.set_some("onejob.error_class", attempt.error_class.map(|class| class.name()));
    span.set_some("onejob.latency_ms", attempt.latency_ms);
    if attempt.streamed {
        span.set("onejob.streamed", true);
    }
    span.set("onejob.key.digest", facts.key_digest);
    span
}

fn effect_span(facts: &RequestFacts<'_>, index: u32, effect: &Effect) -> Option<Span> {
    // An effect this request's answer started: its first attempt came after
    // the request (an older job's effects were another request's).
    let first = effect.attempts.first()?;
    if first.started_ms < facts.started_ms {
        return None;
    }
    let ended = effect.attempts.iter().filter_map(|a| a.ended_ms).max().unwrap_or(facts.ended_ms);
    let failed =
        matches!(effect.state, EffectState::Dead | EffectState::Unknown | EffectState::Conflict | EffectState::Expired);
    let kind = serde_json::to_value(effect.kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let mut span = Span {
        trace_id: facts.trace.trace_id,
        span_id: facts.trace.effect_span_id(index),
        parent: Some(facts.trace.span_id),
        tracestate: None,
        name: format!("effect {}", effect.name),
        kind: if kind == "d1" { SpanKind::Internal } else { SpanKind::Client },
        start_ns: ms_to_ns(first.started_ms),
        end_ns: ms_to_ns(ended.max(first.started_ms)),
        attributes: Vec::new(),
        status: if failed { StatusCode::Error } else { StatusCode::Unset },
        status_message: failed.then(|| effect.state.as_str().to_owned()),
    };
    span.set("onejob.effect.name", effect.name.as_str());
    span.set("onejob.effect.kind", kind);
    span.set("onejob.effect.state", effect.state.as_str());
    span.set("onejob.effect.attempts", effect.attempts.len() as u64);
    span.set_some("http.response.status_code", effect.attempts.iter().rev().find_map(|a| a.status));
    span.set("onejob.key.digest", facts.key_digest);
    Some(span)
}

/// An attempt's outcome as the audit names it (`failed`, `lost_race`, …).
pub fn outcome_name(outcome: AttemptOutcome) -> &'static str {
    match outcome {
        AttemptOutcome::Running => "running",
        AttemptOutcome::Succeeded => "succeeded",
        AttemptOutcome::Rejected => "rejected",
        AttemptOutcome::Failed => "failed",
        AttemptOutcome::Unknown => "unknown",
        AttemptOutcome::Abandoned => "abandoned",
        AttemptOutcome::Discarded => "discarded",
        AttemptOutcome::LostRace => "lost_race",
        AttemptOutcome::Interrupted => "interrupted",
        AttemptOutcome::Cancelled => "cancelled",
    }
}

fn ms_to_ns(ms: u64) -> u64 {
    ms.saturating_mul(1_000_000)
}
