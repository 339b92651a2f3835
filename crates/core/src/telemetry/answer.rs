//! What the edge reads of a traced request's answer, decided here: where a
//! replayed answer came from, whether the answer streamed, what the spans
//! need of its body, when the job's record has settled enough to build
//! them, the answer's `model`, the content captured (opted in), a
//! provider's `gen_ai.provider.name`, and the isolate's export queue (its
//! bound, and whether an export is under way).

use serde::Deserialize;

use super::build::ReplaySource;
use super::truncated;
use crate::job::view::JobView;
use crate::upstream::providers::{Api, ProviderKind};
use crate::upstream::sse;

/// What the spans need of an answer's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyNeed {
    /// A stream passed through: watch for its end (its body is not kept).
    StreamEnd,
    /// A copy of the whole answer (its `model`, and the completion if captured).
    Copy,
    /// Nothing (a replay, without content capture).
    Nothing,
}

/// An answer's headers as the spans read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerFacts {
    /// Answered without a call: from the KV cache, or a Ledger's replay.
    pub replayed: Option<ReplaySource>,
    /// The attempt that answered (`OneJob-Attempt`).
    pub answered_by: Option<u32>,
    /// A live stream (`text/event-stream`).
    pub streamed: bool,
    /// What the spans need of the body.
    pub body: BodyNeed,
}

impl AnswerFacts {
    /// Reads an answer: `from_cache` (the KV cache answered; the Ledger was
    /// not asked), its `Idempotent-Replayed`, `OneJob-Attempt` and
    /// `Content-Type` headers, and whether content is captured.
    pub fn read(
        from_cache: bool,
        replayed: Option<&str>,
        attempt: Option<&str>,
        content_type: Option<&str>,
        capture_content: bool,
    ) -> Self {
        let replayed = match (from_cache, replayed) {
            (true, _) => Some(ReplaySource::Cache),
            (false, Some("true")) => Some(ReplaySource::Ledger),
            _ => None,
        };
        let streamed = content_type.is_some_and(|t| t.starts_with(sse::MEDIA_TYPE));
        let body = match (streamed, capture_content || replayed.is_none()) {
            (true, _) => BodyNeed::StreamEnd,
            (false, true) => BodyNeed::Copy,
            (false, false) => BodyNeed::Nothing,
        };
        Self { replayed, answered_by: attempt.and_then(|n| n.parse::<u32>().ok()), streamed, body }
    }

    /// Whether the job's record is read for the spans (a replay made no
    /// attempt: its spans come from the request alone).
    pub fn wants_view(&self) -> bool {
        self.replayed.is_none()
    }

    /// Whether `view` (read in `round`, from 0) is the one to build the
    /// spans from: after a stream, once the answering attempt has ended
    /// (the pump writes it just after the last event), or at the last of
    /// [`VIEW_ROUNDS`].
    pub fn view_settled(&self, view: &JobView, round: u32) -> bool {
        let running = self
            .answered_by
            .and_then(|n| view.attempts.iter().find(|a| a.number == n))
            .is_some_and(|a| a.ended_ms.is_none());
        !(self.streamed && running) || round + 1 >= VIEW_ROUNDS
    }
}

/// How many times the job's record is read, [`VIEW_WAIT_MS`] apart, for
/// its streamed attempt to end.
pub const VIEW_ROUNDS: u32 = 5;
/// The wait between two reads of the job's record.
pub const VIEW_WAIT_MS: u64 = 200;
/// How long a stream's end (or its reader going away) is waited for.
pub const STREAM_END_WAIT_MS: u64 = 15 * 60_000;

/// The answer's `model`, if its body is a JSON object with one.
pub fn model_of(body: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct ModelOnly {
        model: Option<String>,
    }
    if !body.trim_start().starts_with('{') {
        return None;
    }
    serde_json::from_str::<ModelOnly>(body).ok()?.model
}

/// The prompt and completion a span carries: only with `capture_content`
/// and a request body read, each cut to `max` bytes (a missing completion
/// is empty).
pub fn captured<'a>(
    capture_content: bool,
    request_body: Option<&'a str>,
    body: Option<&'a str>,
    max: usize,
) -> Option<(&'a str, &'a str)> {
    let prompt = request_body.filter(|_| capture_content)?;
    Some((truncated(prompt, max), truncated(body.unwrap_or(""), max)))
}

/// `gen_ai.provider.name` of a provider of `kind` (`None`: not a named
/// one): its API's vendor (`openai`, `anthropic`), or onejob's demo; the
/// single `UPSTREAM` forwards every API as it comes (the request's `api`).
pub fn provider_name(kind: Option<ProviderKind>, api: Api) -> &'static str {
    match (kind, api) {
        (Some(ProviderKind::OpenAi), _) => "openai",
        (Some(ProviderKind::Anthropic), _) => "anthropic",
        (Some(ProviderKind::Demo), _) => "onejob.demo",
        (Some(ProviderKind::Passthrough) | None, Api::Anthropic) => "anthropic",
        (Some(ProviderKind::Passthrough) | None, Api::OpenAi) => "openai",
    }
}

/// What a collector's status means for an export: 2xx taken, anything
/// else a failure to log.
pub fn export_result(status: u16) -> Result<(), String> {
    match status {
        200..=299 => Ok(()),
        _ => Err(format!("the collector answered {status}")),
    }
}

/// How long one request's `waitUntil` goes on exporting what others queued.
pub const EXPORT_TURN_MS: u64 = 10_000;
/// An export under way for longer than this was lost with its request (the
/// runtime ended its `waitUntil`): the next one takes over.
pub const EXPORT_LOST_MS: u64 = 30_000;

/// Whether an export started at `since` is still under way at `now_ms`.
pub fn export_busy(since: Option<u64>, now_ms: u64) -> bool {
    since.is_some_and(|since| now_ms.saturating_sub(since) < EXPORT_LOST_MS)
}

/// How many of `incoming` spans a queue of `queued` (bounded by `max`)
/// takes; the rest are dropped.
pub fn queue_room(max: usize, queued: usize, incoming: usize) -> usize {
    max.saturating_sub(queued).min(incoming)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::{Body, Fingerprint};
    use crate::identity::key::IdempotencyKey;
    use crate::job::{AttemptReport, Job, JobPolicy, UnknownPolicy};

    /// The job's view while its attempt 1 runs, and once it has ended.
    fn views() -> (JobView, JobView) {
        let fp = Fingerprint::of_url("POST", "/v1/chat/completions", Body::Json(br#"{"model":"m"}"#)).unwrap();
        let policy = JobPolicy::new(3, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
        let key = IdempotencyKey::parse("telemetry-answer-key-01").unwrap();
        let mut job = Job::new(fp, 1_000, policy);
        let first = job.claim(0, 1_010, "demo", None).unwrap();
        let running = JobView::new(key.clone(), &job);
        job.complete(first, 1_300, AttemptReport { status: Some(200), usage: None, error_class: None }).unwrap();
        (running, JobView::new(key, &job))
    }

    #[test]
    fn a_replay_is_from_the_cache_or_the_ledger() {
        let read = |cache, replayed| AnswerFacts::read(cache, replayed, None, None, false).replayed;
        assert_eq!(read(true, None), Some(ReplaySource::Cache));
        assert_eq!(read(true, Some("false")), Some(ReplaySource::Cache));
        assert_eq!(read(false, Some("true")), Some(ReplaySource::Ledger));
        assert_eq!(read(false, Some("false")), None);
        assert_eq!(read(false, None), None);
    }

    #[test]
    fn the_body_is_watched_when_streamed_copied_when_needed_and_else_left() {
        let need =
            |replayed, content_type, capture| AnswerFacts::read(false, replayed, None, content_type, capture).body;
        assert_eq!(need(None, Some("text/event-stream; charset=utf-8"), true), BodyNeed::StreamEnd);
        assert_eq!(need(Some("true"), Some("text/event-stream"), false), BodyNeed::StreamEnd);
        assert_eq!(need(None, Some("application/json"), false), BodyNeed::Copy);
        assert_eq!(need(Some("true"), Some("application/json"), true), BodyNeed::Copy);
        assert_eq!(need(Some("true"), Some("application/json"), false), BodyNeed::Nothing);
        assert!(!AnswerFacts::read(false, None, None, None, false).streamed);
    }

    #[test]
    fn the_answering_attempt_is_its_number_or_none() {
        assert_eq!(AnswerFacts::read(false, None, Some("2"), None, false).answered_by, Some(2));
        assert_eq!(AnswerFacts::read(false, None, Some("x"), None, false).answered_by, None);
        assert!(AnswerFacts::read(false, None, None, None, false).wants_view());
        assert!(!AnswerFacts::read(true, None, None, None, false).wants_view());
    }

    #[test]
    fn the_view_settles_once_a_streamed_attempt_ended_or_at_the_last_round() {
        let streamed = AnswerFacts::read(false, None, Some("1"), Some("text/event-stream"), false);
        let plain = AnswerFacts::read(false, None, Some("1"), Some("application/json"), false);
        let (running, ended) = views();
        assert!(!streamed.view_settled(&running, 0));
        assert!(!streamed.view_settled(&running, VIEW_ROUNDS - 2));
        assert!(streamed.view_settled(&running, VIEW_ROUNDS - 1));
        assert!(streamed.view_settled(&ended, 0));
        assert!(plain.view_settled(&running, 0));
    }

    #[test]
    fn the_model_is_read_from_a_json_object_only() {
        assert_eq!(model_of(r#" {"model":"gpt-4o","x":1}"#).as_deref(), Some("gpt-4o"));
        assert_eq!(model_of(r#"{"x":1}"#), None);
        assert_eq!(model_of("data: {}"), None);
        assert_eq!(model_of("{not json"), None);
    }

    #[test]
    fn content_is_captured_only_when_opted_in_with_a_prompt() {
        assert_eq!(captured(true, Some("hello"), Some("world"), 3), Some(("hel", "wor")));
        assert_eq!(captured(true, Some("hi"), None, 8), Some(("hi", "")));
        assert_eq!(captured(false, Some("hi"), Some("x"), 8), None);
        assert_eq!(captured(true, None, Some("x"), 8), None);
    }

    #[test]
    fn a_providers_name_is_its_vendor_or_the_requests_api() {
        assert_eq!(provider_name(Some(ProviderKind::OpenAi), Api::Anthropic), "openai");
        assert_eq!(provider_name(Some(ProviderKind::Anthropic), Api::OpenAi), "anthropic");
        assert_eq!(provider_name(Some(ProviderKind::Demo), Api::OpenAi), "onejob.demo");
        assert_eq!(provider_name(Some(ProviderKind::Passthrough), Api::Anthropic), "anthropic");
        assert_eq!(provider_name(None, Api::OpenAi), "openai");
    }

    #[test]
    fn exports_are_judged_bounded_and_taken_over_when_lost() {
        assert_eq!(export_result(204), Ok(()));
        assert_eq!(export_result(503), Err("the collector answered 503".into()));
        assert!(!export_busy(None, 100));
        assert!(export_busy(Some(100), 100 + EXPORT_LOST_MS - 1));
        assert!(!export_busy(Some(100), 100 + EXPORT_LOST_MS));
        // A clock behind the start: still under way.
        assert!(export_busy(Some(100), 50));
        assert_eq!(queue_room(10, 4, 3), 3);
        assert_eq!(queue_room(10, 8, 5), 2);
        assert_eq!(queue_room(10, 12, 5), 0);
    }
}
