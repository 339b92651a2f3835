//! Job types: intents defined on the server (the `*.json` of the folder a
//! build names, bundled into the worker: `jobs/`, the demo's, for `make dev`
//! and the tests, the deployment's own or none for `make package`; or the
//! `JOB_TYPES` variable), so a browser names a type and sends its input,
//! never a prompt. A type declares:
//!
//! - `input`: a JSON Schema (the [`crate::upstream::contract`] subset) the input must meet;
//! - `model` and `prompt`: the chat request the input becomes (templates);
//! - `output`: the schema the model's JSON answer must meet before any effect runs;
//! - `once_per`: an input field naming the *subject* (a ticket id, say): a
//!   subject whose job succeeded is not run again under a new key;
//! - `effects`: what is written (`d1`) or sent (`webhook`) once the answer is in;
//!   a webhook whose `url` is `demo:inbox` goes to the demo's mail inbox
//!   ([`crate::job_type::effect::EffectTarget::Inbox`]).
//!
//! What a type needs of its deployment (its webhooks' `env:` variables and
//! secrets, its d1 effects' databases) is [`JobType::needs`]; a deployment
//! lacking one runs without that type ([`JobTypes::resolve`]).
//!
//! Templates are strings with `{{input.NAME}}` and `{{output.NAME}}`
//! placeholders; a string that is exactly one placeholder takes the value
//! itself (a number stays a number). Every placeholder is checked against
//! the input and output schemas when the type is read ([`crate::job_type::template`]).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::job_type::effect::{EffectRetry, EffectSpec, EffectTarget};
use crate::upstream::contract::{self, Contract, Violation};
// `render` moved to the template module; its old path stays.
pub use crate::job_type::template::render;
use crate::job_type::template::{Known, render_text};
use crate::wire::{Problem, ProblemType};
pub use resolve::{Provided, Setting};

/// The job types of a deployment, by name: those it runs, and those it
/// turned off because a setting they need is missing
/// ([`JobTypes::resolve`]).
#[derive(Debug, Clone, Default)]
pub struct JobTypes {
    types: BTreeMap<String, JobType>,
}

/// One server-defined intent.
#[derive(Debug, Clone)]
pub struct JobType {
    /// The name in `POST /onejob/v1/run/{name}`.
    pub name: String,
    /// The model (or route) the chat request names.
    pub model: String,
    /// The input's schema.
    pub input: Value,
    system: String,
    user: String,
    /// The answer's schema: an answer outside it fails the job (class `contract`).
    pub output: Contract,
    /// The input field naming the job's subject (see the module).
    pub once_per: Option<String>,
    /// What happens once the answer is in, in order.
    pub effects: Vec<EffectSpec>,
    /// What its effects need of the deployment, as written (before any
    /// `env:` is resolved): see [`JobType::needs`].
    needs: Vec<Setting>,
    /// What of it the deployment lacks (empty: it runs), set by
    /// [`JobTypes::resolve`].
    lacks: Vec<Setting>,
}

/// Why a job type's definition is refused (read when the deployment starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTypeError(pub String);

impl std::fmt::Display for JobTypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "job types: {}", self.0)
    }
}

/// A job type as written (TOML turned into JSON, or JSON).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Definition {
    #[serde(default)]
    description: Option<String>,
    model: String,
    input: Value,
    prompt: PromptDefinition,
    output: Value,
    #[serde(default)]
    once_per: Option<String>,
    #[serde(default)]
    effects: Vec<EffectDefinition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptDefinition {
    system: String,
    user: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EffectDefinition {
    name: String,
    kind: String,
    #[serde(default)]
    approve: bool,
    #[serde(default)]
    approval_ttl_ms: Option<u64>,
    #[serde(default)]
    attempts: Option<u32>,
    #[serde(default)]
    backoff_base_ms: Option<u64>,
    #[serde(default)]
    backoff_cap_ms: Option<u64>,
    // d1
    #[serde(default)]
    database: Option<String>,
    #[serde(default)]
    table: Option<String>,
    #[serde(default)]
    columns: Option<Map<String, Value>>,
    // webhook
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    receipt_url: Option<String>,
    #[serde(default)]
    secret: Option<String>,
    #[serde(default)]
    payload: Option<Value>,
}

/// How long an approval may wait by default: twelve hours (a deployment
/// refuses approvals longer than half its retention: the job must outlive them).
pub const DEFAULT_APPROVAL_TTL_MS: u64 = 43_200_000;

impl JobTypes {
    /// Reads `{"name": {definition}, …}`.
    pub fn from_json(text: &str) -> Result<Self, JobTypeError> {
        let map: BTreeMap<String, Value> =
            serde_json::from_str(text).map_err(|e| JobTypeError(format!("not a JSON object of job types: {e}")))?;
        let mut types = BTreeMap::new();
        for (name, definition) in map {
            let job_type = JobType::parse(&name, definition)?;
            types.insert(name, job_type);
        }
        Ok(Self { types })
    }

    /// Reads one definition per name (the bundled `jobs/*.json` files).
    pub fn from_definitions(definitions: &[(&str, &str)]) -> Result<Self, JobTypeError> {
        let mut types = BTreeMap::new();
        for (name, text) in definitions {
            let definition: Value =
                serde_json::from_str(text).map_err(|e| JobTypeError(format!("{name}: not JSON: {e}")))?;
            types.insert((*name).to_owned(), JobType::parse(name, definition)?);
        }
        Ok(Self { types })
    }

    /// Every type, to resolve what the deployment's environment fills in.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut JobType> {
        self.types.values_mut()
    }

    /// Adds (or replaces, by name) the types of `other`.
    pub fn merge(&mut self, other: JobTypes) {
        self.types.extend(other.types);
    }

    /// The type called `name`, if the deployment runs it (a disabled type
    /// is not: see [`JobTypes::disabled`]).
    pub fn get(&self, name: &str) -> Option<&JobType> {
        self.types.get(name).filter(|job_type| job_type.lacks.is_empty())
    }

    /// Every type the deployment runs, by name.
    pub fn iter(&self) -> impl Iterator<Item = &JobType> {
        self.types.values().filter(|job_type| job_type.lacks.is_empty())
    }

    /// The settings the type called `name` lacks, if the deployment has the
    /// type but turned it off for them ([`JobTypes::resolve`]).
    pub fn disabled(&self, name: &str) -> Option<&[Setting]> {
        self.types.get(name).map(|job_type| job_type.lacks.as_slice()).filter(|lacks| !lacks.is_empty())
    }

    /// Every disabled type's name and the settings it lacks, by name.
    pub fn iter_disabled(&self) -> impl Iterator<Item = (&str, &[Setting])> {
        self.types.values().filter(|t| !t.lacks.is_empty()).map(|t| (t.name.as_str(), t.lacks.as_slice()))
    }
}

impl JobType {
    fn parse(name: &str, definition: Value) -> Result<Self, JobTypeError> {
        let fail = |what: String| JobTypeError(format!("{name}: {what}"));
        if !is_identifier(name) {
            return Err(fail("a job type's name is 1 to 64 of a-z 0-9 _ -".into()));
        }
        let d: Definition = serde_json::from_value(definition).map_err(|e| fail(e.to_string()))?;
        let _ = d.description;
        contract::check_schema(&d.input).map_err(|e| fail(format!("input: {e}")))?;
        if d.input.get("type") != Some(&Value::from("object")) {
            return Err(fail("input: the input is an object (\"type\": \"object\")".into()));
        }
        contract::check_schema(&d.output).map_err(|e| fail(format!("output: {e}")))?;
        if d.model.trim().is_empty() {
            return Err(fail("model is empty".into()));
        }
        let known = Known { input: &d.input, output: &d.output };
        known.check_template(&d.prompt.system, false).map_err(|e| fail(format!("prompt.system: {e}")))?;
        known.check_template(&d.prompt.user, false).map_err(|e| fail(format!("prompt.user: {e}")))?;
        if let Some(field) = &d.once_per
            && !known.has("input", field)
        {
            return Err(fail(format!("once_per: the input has no property \"{field}\"")));
        }
        let mut effects = Vec::new();
        for e in d.effects {
            let spec = effect_spec(e, &known).map_err(fail)?;
            if effects.iter().any(|other: &EffectSpec| other.name == spec.name) {
                return Err(fail(format!("two effects are called \"{}\"", spec.name)));
            }
            effects.push(spec);
        }
        let needs = resolve::needs_of(&effects);
        Ok(Self {
            name: name.to_owned(),
            model: d.model,
            input: d.input,
            system: d.prompt.system,
            user: d.prompt.user,
            output: Contract::Schema(d.output),
            once_per: d.once_per,
            effects,
            needs,
            lacks: Vec::new(),
        })
    }

    /// What its runs need of the deployment, in the order its effects name
    /// them, each once: the variable (or secret) of each webhook's `env:`
    /// URL, each webhook's signing secret, each d1 effect's database
    /// binding. A receipt URL's `env:` variable is optional (unset: no
    /// receipts), so it is not listed. A type lacking one is turned off
    /// ([`JobTypes::resolve`]).
    pub fn needs(&self) -> &[Setting] {
        &self.needs
    }

    /// What is wrong with `input` (empty: nothing).
    pub fn check_input(&self, input: &Value) -> Vec<Violation> {
        contract::violations(&self.input, input)
    }

    /// The subject of `input` (its `once_per` field, as text), if the type has one.
    pub fn subject_of(&self, input: &Value) -> Option<String> {
        let value = input.get(self.once_per.as_deref()?)?;
        Some(match value {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }

    /// The refusal of a new job of this type (`name`) under `key` whose
    /// `subject` another job holds (`holder_key`, of `holder_user`). The
    /// holder's key is named only to that job's own user: another user's key
    /// names a job this caller cannot read.
    pub fn subject_taken(
        &self,
        name: &str,
        subject: &str,
        key: &str,
        (holder_user, holder_key): (&str, &str),
        caller_user: Option<&str>,
    ) -> Problem {
        let field = self.once_per.as_deref().unwrap_or("subject");
        let problem = Problem::new(
            ProblemType::AlreadyRun,
            format!("{field} {subject:?} already has a {name} job; it is not run again"),
        )
        .with_key(key);
        if holder_user == caller_user.unwrap_or("") { problem.with_job_key(holder_key) } else { problem }
    }

    /// The chat completion request `input` becomes (OpenAI's format, JSON
    /// answer asked for), streamed (with usage) when `stream`.
    pub fn render_request(&self, input: &Value, stream: bool) -> Vec<u8> {
        let mut body = json!({
            "model": self.model,
            "messages": [
                { "role": "system", "content": render_text(&self.system, input, &Value::Null) },
                { "role": "user", "content": render_text(&self.user, input, &Value::Null) },
            ],
            "response_format": { "type": "json_object" },
        });
        if stream {
            body["stream"] = Value::Bool(true);
            body["stream_options"] = json!({ "include_usage": true });
        }
        body.to_string().into_bytes()
    }

    /// The answer's JSON content, if the answer meets the output contract.
    /// A streamed answer (its stored events) is read as its whole text.
    pub fn output_of(&self, response_body: &[u8]) -> Result<Value, Violation> {
        let content = if crate::upstream::sse::is_event_stream(response_body) {
            contract::content_json(&crate::upstream::sse::assistant_text(response_body))
        } else {
            contract::assistant_json(response_body)
        };
        let content = content.ok_or_else(|| Violation("the answer's content is not JSON".into()))?;
        self.output.check_content(&content)?;
        Ok(content)
    }

    /// The longest any of its effects waits for an approval.
    pub fn longest_approval_ms(&self) -> u64 {
        self.effects.iter().filter(|e| e.approve).map(|e| e.approval_ttl_ms).max().unwrap_or(0)
    }
}

/// A job type's subject (its `once_per` value) as its row holds it: the
/// job's key and user, and whether that job got its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubjectHold<'a> {
    /// The holding job's idempotency key.
    pub key: &'a str,
    /// Its user ('' for the tenant's own).
    pub user: &'a str,
    /// It got its answer: the subject is taken for good.
    pub answered: bool,
}

impl SubjectHold<'_> {
    /// Whether the subject is another's for the job `key` of `user`: held
    /// by another job (or another user's), or by this very job once it was
    /// answered (it expired; a new job may not run the subject again). This
    /// job's hold without an answer (a retry after a crash) is its own.
    pub fn refuses(&self, key: &str, user: &str) -> bool {
        self.key != key || self.user != user || self.answered
    }
}

fn effect_spec(e: EffectDefinition, known: &Known<'_>) -> Result<EffectSpec, String> {
    let at = |what: &str| format!("effect {}: {what}", e.name);
    if !is_identifier(&e.name) || e.name.contains('-') {
        return Err(at("an effect's name is 1 to 64 of a-z 0-9 _"));
    }
    let (default_retry, target) = match e.kind.as_str() {
        "d1" => {
            let database =
                e.database.filter(|d| !d.is_empty()).ok_or_else(|| at("a d1 effect names its database binding"))?;
            let table = e.table.filter(|t| is_sql_name(t)).ok_or_else(|| at("table is a SQL name (a-z 0-9 _)"))?;
            let columns = e.columns.filter(|c| !c.is_empty()).ok_or_else(|| at("a d1 effect has columns"))?;
            for (column, template) in &columns {
                if !is_sql_name(column) || RESERVED_COLUMNS.contains(&column.as_str()) {
                    return Err(at(&format!("column \"{column}\" is not a SQL name, or is one onejob writes")));
                }
                known.check_payload(template).map_err(|m| at(&m))?;
            }
            (EffectRetry::DATABASE, EffectTarget::D1 { database, table, columns })
        }
        "webhook" => {
            let url = e.url.filter(|u| !u.is_empty()).ok_or_else(|| at("a webhook effect has a url"))?;
            let payload = e.payload.ok_or_else(|| at("a webhook effect has a payload"))?;
            known.check_payload(&payload).map_err(|m| at(&m))?;
            let target = EffectTarget::webhook(url, e.receipt_url, e.secret, payload).map_err(|m| at(&m))?;
            (EffectRetry::WEBHOOK, target)
        }
        other => return Err(at(&format!("kind is d1 or webhook, not {other:?}"))),
    };
    let retry = EffectRetry {
        attempts: e.attempts.unwrap_or(default_retry.attempts),
        base_ms: e.backoff_base_ms.unwrap_or(default_retry.base_ms),
        cap_ms: e.backoff_cap_ms.unwrap_or(default_retry.cap_ms),
    };
    if !(1..=20).contains(&retry.attempts) || retry.base_ms == 0 || retry.cap_ms < retry.base_ms {
        return Err(at("attempts is 1 to 20, and 0 < backoff_base_ms <= backoff_cap_ms"));
    }
    if e.approval_ttl_ms.is_some() && !e.approve {
        return Err(at("approval_ttl_ms without approve = true"));
    }
    Ok(EffectSpec {
        name: e.name,
        approve: e.approve,
        approval_ttl_ms: e.approval_ttl_ms.unwrap_or(DEFAULT_APPROVAL_TTL_MS),
        retry,
        target,
    })
}

/// The columns onejob writes into every d1 effect's table.
pub const RESERVED_COLUMNS: [&str; 4] = ["source", "delivery_id", "fingerprint", "written_ms"];

fn is_identifier(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// A name that can go into SQL (quoted) as it is: tables and columns are
/// never taken from a request, but a definition must not smuggle SQL
/// either, nor start with SQLite's own `sqlite_`.
pub fn is_sql_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.starts_with("sqlite_")
}

pub mod effect;
pub mod resolve;
pub mod template;

#[cfg(test)]
mod tests;
