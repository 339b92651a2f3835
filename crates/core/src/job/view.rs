//! The job view served by `GET /onejob/v1/jobs/{key}`: the top of the
//! crate, a job as its tenant may see it, with its effects beside it.

use serde::{Deserialize, Serialize};

use crate::identity::key::IdempotencyKey;
use crate::job::{Attempt, Job, JobState, OperatorEvent};

/// `GET /onejob/v1/jobs/{key}`: a job as its tenant may see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    /// The idempotency key.
    pub key: IdempotencyKey,
    /// The job's state.
    pub state: JobState,
    /// The fingerprint of the request that created the job.
    pub fingerprint: String,
    /// The job's version (bumped by every transition).
    pub version: u64,
    /// The how-manieth job under this key (from 0): a keyless job that
    /// ended is replaced by a new one under its derived key.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// Milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Milliseconds since the Unix epoch.
    pub updated_ms: u64,
    /// When the job will be deleted.
    pub expires_ms: u64,
    /// In flight or unknown: when the current lease ends.
    pub lease_until_ms: Option<u64>,
    /// The attempt whose result is replayed.
    pub completed_by: Option<u32>,
    /// Attempts allowed for this job (operator grants included).
    pub max_attempts: u32,
    /// Every attempt, oldest first.
    pub attempts: Vec<Attempt>,
    /// Run by the queue consumer (`Prefer: respond-async`).
    #[serde(default)]
    pub background: bool,
    /// Queue messages sent for the job (the Ledger fills it in: sends are
    /// counted outside the job record).
    #[serde(default)]
    pub enqueued: u32,
    /// What operators did to the job, oldest first.
    #[serde(default)]
    pub events: Vec<OperatorEvent>,
    /// The job is unknown and nothing retries it automatically
    /// (`UNKNOWN_POLICY=block`): only an operator can settle it, so a
    /// poller should stop waiting.
    #[serde(default)]
    pub waiting_for_operator: bool,
    /// A job type's effects (the Ledger fills them in: they are kept
    /// beside the job record).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub effects: Vec<crate::job_type::effect::Effect>,
    /// Where the effects stand together, for a job type's job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects_state: Option<crate::job_type::effect::EffectsState>,
}

impl JobView {
    /// The view of `job`, stored under `key`.
    pub fn new(key: IdempotencyKey, job: &Job) -> Self {
        Self {
            key,
            state: job.state(),
            fingerprint: job.fingerprint().to_string(),
            version: job.version(),
            generation: job.generation(),
            created_ms: job.created_ms(),
            updated_ms: job.updated_ms(),
            expires_ms: job.expires_ms(),
            lease_until_ms: job.lease_until_ms(),
            completed_by: job.completed_by(),
            max_attempts: job.max_attempts(),
            attempts: job.attempts().to_vec(),
            background: job.is_background(),
            enqueued: 0,
            events: job.operator_events().to_vec(),
            waiting_for_operator: job.state() == JobState::Unknown
                && job.policy().unknown_policy() == crate::job::UnknownPolicy::Block,
            effects: Vec::new(),
            effects_state: None,
        }
    }
}

impl JobView {
    /// Fills a job type's `effects` in, with where they stand together; a
    /// job with none (not a job type's, or not planned yet) shows neither.
    pub fn set_effects(&mut self, effects: Vec<crate::job_type::effect::Effect>) {
        if !effects.is_empty() {
            self.effects_state = Some(crate::job_type::effect::effects_state(&effects, effects.len()));
            self.effects = effects;
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// How much of a stored answer an operator's view of the job shows.
pub const RESULT_PREVIEW_BYTES: usize = 64 * 1024;

/// A job as an operator sees it: the tenant's view, whose it is and what it
/// asked for, and its stored answer ([`StoredResult`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdminJob<'a> {
    /// The view its tenant gets.
    #[serde(flatten)]
    pub view: JobView,
    /// Its tenant.
    pub tenant: &'a str,
    /// Its user, if a user token asked.
    pub user: Option<&'a str>,
    /// The model asked for.
    pub model: Option<&'a str>,
    /// Its stored answer (none before one is stored).
    pub result: Option<StoredResult>,
}

/// A stored answer as an operator's view shows it: its body as text, cut to
/// [`RESULT_PREVIEW_BYTES`] (bytes that are not UTF-8 shown as U+FFFD).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredResult {
    /// Its status (a stream's: 200).
    pub status: u16,
    /// Its content type.
    pub content_type: String,
    /// Its body's first [`RESULT_PREVIEW_BYTES`] bytes.
    pub body: String,
}

impl StoredResult {
    /// The preview of an answer of `status` and `content_type` whose body is
    /// `body` (a stream's: its events, in order).
    pub fn preview<'b>(status: u16, content_type: &str, body: impl IntoIterator<Item = &'b [u8]>) -> Self {
        let mut kept = Vec::new();
        for part in body {
            let room = RESULT_PREVIEW_BYTES - kept.len();
            kept.extend_from_slice(&part[..part.len().min(room)]);
        }
        Self { status, content_type: content_type.to_owned(), body: String::from_utf8_lossy(&kept).into_owned() }
    }

    /// The preview of a streamed answer: its events, in order, as the `200`
    /// `text/event-stream` its callers got.
    pub fn of_events<'b>(events: impl IntoIterator<Item = &'b [u8]>) -> Self {
        Self::preview(200, crate::upstream::sse::MEDIA_TYPE, events)
    }
}

/// Where an operator's view reads a job's stored answer from: the answer
/// its replays give (the winning attempt's, or a dead job's last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultSource {
    /// A streamed answer: the attempt's stored events ([`StoredResult::of_events`]).
    Events {
        /// The attempt's number.
        attempt: u32,
    },
    /// The attempt's stored response, if one was kept ([`StoredResult::preview`]).
    Response {
        /// The attempt's number.
        attempt: u32,
    },
}

impl ResultSource {
    /// Where `job`'s answer is stored; `None` before there is one.
    pub fn of(job: &Job) -> Option<ResultSource> {
        job.replayed_attempt().map(|attempt| match attempt.streamed {
            true => ResultSource::Events { attempt: attempt.number },
            false => ResultSource::Response { attempt: attempt.number },
        })
    }
}

#[cfg(test)]
mod admin_job_tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn an_operator_sees_the_stored_answer_cut_to_its_preview() {
        let small = StoredResult::preview(201, "application/json", [b"{\"ok\":".as_slice(), b"true}"]);
        assert_eq!(
            small,
            StoredResult { status: 201, content_type: "application/json".into(), body: "{\"ok\":true}".into() }
        );
        let big = vec![b'a'; RESULT_PREVIEW_BYTES - 1];
        let cut = StoredResult::preview(200, "text/event-stream", [big.as_slice(), b"bc", b"d"]);
        assert_eq!(cut.body.len(), RESULT_PREVIEW_BYTES);
        assert!(cut.body.ends_with("ab"), "the events in order, up to the preview's size");
        assert_eq!(StoredResult::preview(200, "text/plain", [[0xff_u8].as_slice()]).body, "\u{fffd}");
    }

    #[test]
    fn a_streamed_answer_is_previewed_from_its_events_any_other_from_its_stored_response() {
        use crate::job::AttemptReport;
        let mut job = crate::job::test_job::new();
        assert_eq!(ResultSource::of(&job), None, "no answer yet");
        let ticket = job.claim(job.version(), 1, "p", None).expect("claim");
        job.complete(ticket, 2, AttemptReport::default()).expect("completed");
        assert_eq!(ResultSource::of(&job), Some(ResultSource::Response { attempt: 1 }));
        let mut streamed = crate::job::test_job::new();
        let ticket = streamed.claim(streamed.version(), 1, "p", None).expect("claim");
        let ticket = streamed.mark_streaming(ticket, 2).expect("streaming");
        streamed.complete(ticket, 3, AttemptReport::default()).expect("completed");
        assert_eq!(ResultSource::of(&streamed), Some(ResultSource::Events { attempt: 1 }));
        let events = StoredResult::of_events([b"data: {}\n\n".as_slice(), b"data: [DONE]\n\n"]);
        assert_eq!((events.status, events.content_type.as_str()), (200, "text/event-stream"));
        assert_eq!(events.body, "data: {}\n\ndata: [DONE]\n\n");
    }

    #[test]
    fn a_view_shows_a_job_type_s_planned_effects_and_where_they_stand() {
        let key = crate::identity::key::IdempotencyKey::parse("order-4711-checkout").expect("key");
        let mut view = JobView::new(key, &crate::job::test_job::new());
        view.set_effects(Vec::new());
        assert_eq!((view.effects.len(), view.effects_state), (0, None), "none planned: nothing shown");
        let spec = crate::job::test_job::webhook_spec();
        let planned =
            crate::job_type::effect::Effect::plan(&spec, "t:k", &serde_json::json!({}), &serde_json::json!({}), 0);
        view.set_effects(vec![planned.clone()]);
        assert_eq!(view.effects, vec![planned.clone()]);
        assert_eq!(view.effects_state, Some(crate::job_type::effect::effects_state(&[planned], 1)));
    }

    #[test]
    fn an_operators_view_is_the_tenants_with_owner_model_and_result() {
        let key = crate::identity::key::IdempotencyKey::parse("order-4711-checkout").expect("key");
        let view = JobView::new(key, &crate::job::test_job::new());
        let admin = AdminJob { view: view.clone(), tenant: "acme", user: None, model: Some("m"), result: None };
        let value = serde_json::to_value(&admin).expect("json");
        let mut expected = serde_json::to_value(&view).expect("json");
        let object = expected.as_object_mut().expect("an object");
        object.insert("tenant".into(), "acme".into());
        object.insert("user".into(), serde_json::Value::Null);
        object.insert("model".into(), "m".into());
        object.insert("result".into(), serde_json::Value::Null);
        assert_eq!(value, expected);
    }
}
