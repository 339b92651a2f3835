//! The one call the worker's front (and its queue consumer, its telemetry)
//! makes to a job's `Ledger` Durable Object, and the payloads it carries: a
//! typed enum, so a call is named once, its payload travels with it, and
//! the Ledger's entry decodes one value instead of matching URL strings.
//!
//! On the wire a call is a `POST https://ledger/<name>` whose body is its
//! payload: a submission's JSON header, length-prefixed (u32, big-endian),
//! followed by the request's bytes as they arrived ([`encode`]); a query's
//! or an operator request's JSON; or nothing. Every call but a submission
//! is serde's adjacently tagged form of [`LedgerCall`] split in two, its tag
//! the name and its content the body ([`LedgerCall::encode`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::admin::Admin;
use crate::front::{self, Caller, JobRoute, Refusal};
use crate::identity::fingerprint::Fingerprint;
use crate::identity::key::{IdempotencyKey, StorageId};
use crate::identity::keyless::Keyless;
use crate::job_type::{JobType, JobTypes};
use crate::ledger::effects::subject::Subject;
use crate::operators::route::{EffectAction, JobName, ResolveBody, ResolvedResponse};
use crate::telemetry::trace::Propagation;

/// A background job's queue message: which Ledger runs it. The request
/// itself stays in the Ledger (messages stay far below the queue's limit).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobMessage {
    /// The job's tenant.
    pub tenant: String,
    /// Its user (a user token's job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Its key.
    pub key: String,
    /// When its Ledger sent it (0: not said, as by a message of an older
    /// worker): the queue's cursor learns from it how far the consumer has
    /// got ([`crate::ledger::background::progress`]).
    #[serde(default, skip_serializing_if = "no_time")]
    pub sent_ms: u64,
}

fn no_time(ms: &u64) -> bool {
    *ms == 0
}

/// Who a job belongs to and what it asked for (for the operators' index).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobMeta {
    /// The job's tenant.
    pub tenant: String,
    /// Its user (a user token's job).
    #[serde(default)]
    pub user: Option<String>,
    /// Its key.
    pub key: String,
    /// The model the request asked for.
    #[serde(default)]
    pub model: Option<String>,
    /// Tokens of this job already counted against its quotas.
    #[serde(default)]
    pub metered: u64,
}

/// An operator's request about one job, as the admin API hands it over.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperatorRequest {
    /// The job's key.
    pub key: String,
    /// The admin's name, for the audit.
    pub by: String,
    /// The operator request's own idempotency key.
    pub request: String,
    /// Resolve: `succeeded` or `retry`.
    #[serde(default)]
    pub action: Option<String>,
    /// Resolve as succeeded: the response to record.
    #[serde(default)]
    pub status: Option<u16>,
    /// Resolve as succeeded: the body to record.
    #[serde(default)]
    pub body: Option<Value>,
    /// Effect actions: the effect's name.
    #[serde(default)]
    pub effect: Option<String>,
}

impl OperatorRequest {
    /// `admin`'s request about `job`, under the operator request's key
    /// `request` (empty for a look or a kick), with nothing more to say.
    pub fn of(admin: &Admin, job: &JobName, request: &str) -> Self {
        OperatorRequest {
            key: job.key.clone(),
            by: admin.name.clone(),
            request: request.to_owned(),
            action: None,
            status: None,
            body: None,
            effect: None,
        }
    }
}

/// A keyed request the gateway has authenticated and validated. Its key and
/// fingerprint are the core's validated types (checked again when the
/// message is read back, so a malformed one never reaches the Ledger's
/// decisions), and nothing downstream parses them again.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Submission {
    /// The caller's tenant.
    pub tenant: String,
    /// The user of a user token: jobs are scoped by tenant and user.
    #[serde(default)]
    pub user: Option<String>,
    /// The job's key (sent or derived).
    pub key: IdempotencyKey,
    /// What "the same request" is for this job.
    pub fingerprint: Fingerprint,
    /// Path and query, as sent upstream.
    pub target: String,
    /// The request body's media type.
    pub content_type: String,
    /// How long a duplicate may wait for a running request.
    pub wait_ms: u64,
    /// Provider headers the caller sent ([`PROVIDER_HEADERS`]), passed on.
    #[serde(default)]
    pub provider_headers: Vec<(String, String)>,
    /// `Prefer: respond-async`: run by the queue consumer, answered `202`.
    #[serde(default)]
    pub background: bool,
    /// `POST /onejob/v1/run/{type}`: the job type and its (valid) input;
    /// the body is the chat request rendered from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunOf>,
    /// A request that carried no `Idempotency-Key`: its key was derived
    /// (`keyless-…`, [`crate::identity::keyless`]) and it is admitted under this
    /// mode (`coalesce` or `window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyless: Option<Keyless>,
    /// The generation of the job it runs (set by the Ledger from the job:
    /// a keyless job that replaced an ended one calls its provider under
    /// a key of its own).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// The request's trace, when telemetry is on: each attempt sends a
    /// `traceparent` of its own span (and the caller's `tracestate`) upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Propagation>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Submission {
    /// A keyed request the gateway accepted, as its job's Ledger gets it,
    /// reading the request's headers by name (`header`): how long a
    /// duplicate waits (`Prefer: wait=N`, capped, else `coalesce_wait_ms`),
    /// whether it runs in the background (`Prefer: respond-async`), and the
    /// provider headers it passes on ([`PROVIDER_HEADERS`]). Not yet a
    /// job type's run, keyless, traced or renewed.
    pub fn new(
        caller: Caller,
        key: &IdempotencyKey,
        fingerprint: &Fingerprint,
        target: String,
        content_type: String,
        coalesce_wait_ms: u64,
        header: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        let prefer = header(crate::wire::header::PREFER);
        Submission {
            tenant: caller.tenant,
            user: caller.user,
            key: key.clone(),
            fingerprint: fingerprint.clone(),
            target,
            content_type,
            wait_ms: front::wait_ms(prefer.as_deref(), coalesce_wait_ms),
            background: prefer.is_some_and(|prefer| crate::wire::prefers_async(&prefer)),
            provider_headers: PROVIDER_HEADERS
                .iter()
                .filter_map(|name| Some(((*name).to_owned(), header(name)?)))
                .collect(),
            run: None,
            keyless: None,
            generation: 0,
            trace: None,
        }
    }

    /// Where its job lives: the storage id of (tenant, user, key).
    pub fn storage_id(&self) -> StorageId {
        StorageId::of(&self.tenant, self.user.as_deref(), &self.key)
    }

    /// The `Idempotency-Key` its provider gets: derived from the storage
    /// id and the job's generation, never the client's key.
    pub fn upstream_key(&self) -> String {
        self.storage_id().upstream_key_of(self.generation)
    }

    /// The job's queue message.
    pub fn message(&self) -> JobMessage {
        JobMessage { tenant: self.tenant.clone(), user: self.user.clone(), key: self.key.to_string(), sent_ms: 0 }
    }
}

/// The job type a submission runs, and its input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunOf {
    /// The job type's name.
    pub job_type: String,
    /// Its input (checked against the type's schema).
    pub input: Value,
}

/// The job type `run` runs: none for a job that is not a job type's (or
/// kept no request), or whose type is gone from the deployment (what it
/// still has runs nothing).
pub fn job_type_of<'t>(job_types: &'t JobTypes, run: Option<&RunOf>) -> Option<&'t JobType> {
    job_types.get(&run?.job_type)
}

/// The subject the job of `run` holds (`once_per`): none for a job that is
/// not a job type's, and as [`Subject::of`] says.
pub fn subject_of<'a>(job_types: &'a JobTypes, run: Option<&'a RunOf>) -> Option<Subject<'a>> {
    let run = run?;
    Subject::of(job_types, &run.job_type, &run.input)
}

/// A request body's `model`, read alone (only an object has one: serde
/// would read `["gpt-x"]` by position): [`RequestFacts::of`]'s model.
///
/// [`RequestFacts::of`]: crate::upstream::providers::RequestFacts::of
pub fn model_of(body: &[u8]) -> Option<String> {
    crate::upstream::providers::RequestFacts::of(body).model
}

/// The caller's headers that are passed to the provider: they choose the
/// API's version and betas, not who pays.
pub const PROVIDER_HEADERS: [&str; 3] = ["anthropic-version", "anthropic-beta", "openai-beta"];

/// `GET /onejob/v1/jobs/{key}` (and `…/stream?from=N`) for one tenant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobQuery {
    /// The job's key.
    pub key: String,
    /// For a stream: the number of events the reader already has.
    #[serde(default)]
    pub from: Option<u64>,
    /// For a stream: number the events with `id:` lines.
    #[serde(default)]
    pub ids: bool,
}

/// The body of a submission: header, then the request bytes.
pub fn encode(submission: &Submission, request_body: &[u8]) -> Vec<u8> {
    // A struct of strings and a number always serialises.
    let header = serde_json::to_vec(submission).unwrap_or_default();
    let mut out = Vec::with_capacity(4 + header.len() + request_body.len());
    out.extend_from_slice(&(header.len() as u32).to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(request_body);
    out
}

/// Splits a submission's body back into the struct and the request bytes.
pub fn decode(mut bytes: Vec<u8>) -> Option<(Submission, Vec<u8>)> {
    let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let header = bytes.get(4..4usize.checked_add(len)?)?;
    let submission = serde_json::from_slice(header).ok()?;
    let body = bytes.split_off(4 + len);
    Some((submission, body))
}

/// One call to a job's Ledger.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "call", content = "payload", rename_all = "kebab-case")]
pub enum LedgerCall {
    /// A keyed request: run, replay, wait or refuse. Its body is not JSON
    /// (see [`encode`]): serde never sees it.
    #[serde(skip)]
    Submit {
        /// Who asks what, validated by the gateway.
        submission: Submission,
        /// The request's bytes as they arrived.
        body: Vec<u8>,
    },
    /// The job view (read-only).
    View(JobQuery),
    /// A streamed answer from an event offset (read-only).
    Stream(JobQuery),
    /// Cancel a streaming answer.
    Cancel(JobQuery),
    /// A queue delivery: run one attempt if the job should run.
    Deliver,
    /// Run what follows a job type's answer (after its stream ended).
    #[serde(rename = "effects")]
    FollowUp,
    /// What a dead letter records about the job (read-only).
    Facts,
    /// The job for an operator: view, owner and stored result (read-only).
    AdminView,
    /// An operator sends the job's message again.
    Enqueue(OperatorRequest),
    /// An operator gives a dead job fresh attempts (or its effects another run).
    Replay(OperatorRequest),
    /// An operator settles an unknown job.
    Resolve(OperatorRequest),
    /// The effects waiting for an approval may run.
    Approve(OperatorRequest),
    /// An operator resends an effect or marks it done.
    Effect(OperatorRequest),
}

/// A call the Ledger could not read (a caller of another version, or a bug):
/// never a user's input, which the gateway validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// The queue consumer's question to a job's Ledger as the call that asks it.
impl From<crate::ledger::background::consumer::Ask> for LedgerCall {
    fn from(ask: crate::ledger::background::consumer::Ask) -> Self {
        match ask {
            crate::ledger::background::consumer::Ask::Deliver => Self::Deliver,
            crate::ledger::background::consumer::Ask::Facts => Self::Facts,
        }
    }
}

/// The name of [`LedgerCall::Submit`].
const SUBMIT: &str = "submit";

impl LedgerCall {
    /// Whether the call may change the job (the operators' index then
    /// hears of it after the answer). Cancelling only asks the pump to stop
    /// (the pump's own end is indexed); a resend touches only the outbox.
    pub fn mutates(&self) -> bool {
        !matches!(
            self,
            Self::View(_) | Self::Stream(_) | Self::Cancel(_) | Self::Facts | Self::AdminView | Self::Enqueue(_)
        )
    }

    /// The call of a tenant's job route (`GET …/jobs/{key}`, its `stream`,
    /// `cancel`, `approve`) for `caller`, once the core has read its key:
    /// a stream's offset (`from`, or `Last-Event-ID`) and its `ids`, an
    /// approval's approver (a `403` for a token without `approve`).
    pub fn of_job_route(
        route: JobRoute,
        caller: &Caller,
        key: &IdempotencyKey,
        ids: Option<&str>,
        from: Option<&str>,
    ) -> Result<Self, Refusal> {
        let query = JobQuery { key: key.to_string(), from: None, ids: false };
        Ok(match route {
            JobRoute::View => Self::View(query),
            JobRoute::Stream => {
                Self::Stream(JobQuery { from: Some(front::stream_from(from)?), ids: front::stream_ids(ids), ..query })
            }
            JobRoute::Cancel => Self::Cancel(query),
            JobRoute::Approve => Self::Approve(OperatorRequest {
                key: key.to_string(),
                by: front::approver(caller.token.as_ref(), &caller.tenant, caller.user.as_deref())?,
                request: String::new(),
                action: None,
                status: None,
                body: None,
                effect: None,
            }),
        })
    }

    /// An operator's resolve (a checked body) of the job the body names,
    /// under the operator request's key `request`: the job and the call.
    pub fn resolve(admin: &Admin, request: &str, body: ResolveBody) -> (JobName, Self) {
        let job = body.job();
        let response = body.response.unwrap_or(ResolvedResponse { status: None, body: None });
        let call = Self::Resolve(OperatorRequest {
            action: Some(body.action),
            status: response.status,
            body: response.body,
            ..OperatorRequest::of(admin, &job, request)
        });
        (job, call)
    }

    /// An operator's `action` on the effect `effect` of `job`.
    pub fn effect(admin: &Admin, job: &JobName, request: &str, effect: String, action: EffectAction) -> Self {
        Self::Effect(OperatorRequest {
            action: Some(action.as_str().to_owned()),
            effect: Some(effect),
            ..OperatorRequest::of(admin, job, request)
        })
    }

    /// The call's URL (`https://ledger/<name>`) and body.
    pub fn encode(&self) -> (String, Vec<u8>) {
        if let Self::Submit { submission, body } = self {
            return (format!("https://ledger/{SUBMIT}"), encode(submission, body));
        }
        // Structs of strings, numbers and JSON values always serialise.
        let tagged = serde_json::to_value(self).unwrap_or_default();
        let body = tagged.get("payload").map(|payload| payload.to_string().into_bytes()).unwrap_or_default();
        (format!("https://ledger/{}", tagged["call"].as_str().unwrap_or_default()), body)
    }

    /// Reads a call from its URL path (`/submit`, …) and body.
    pub fn decode(path: &str, body: Vec<u8>) -> Result<Self, Malformed> {
        let name = path.trim_start_matches('/');
        if name == SUBMIT {
            let (submission, body) = decode(body).ok_or(Malformed("malformed submission"))?;
            return Ok(Self::Submit { submission, body });
        }
        let mut tagged = serde_json::json!({ "call": name });
        if !body.is_empty() {
            tagged["payload"] = serde_json::from_slice(&body).map_err(|_| Malformed("malformed ledger call"))?;
        }
        serde_json::from_value(tagged).map_err(|_| Malformed("unknown or malformed ledger call"))
    }
}

/// The Ledger's answer to [`LedgerCall::Replay`] (a `200`; a refusal is a
/// problem): whether the job (or a job type's effects) goes again, and if
/// not, why. The operator API reads it as this type, not as loose JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayReply {
    /// Whether it goes again.
    pub replayed: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A job type's effects sent again, by name (only when they are what was replayed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<Vec<String>>,
}

impl ReplayReply {
    /// It goes again.
    pub fn replayed() -> Self {
        Self { replayed: true, reason: None, effects: None }
    }

    /// It does not, for `reason`.
    pub fn not_replayed(reason: &str) -> Self {
        Self { replayed: false, reason: Some(reason.to_owned()), effects: None }
    }
}

#[cfg(test)]
mod tests;
