//! What the operator API (`/onejob/v1/admin/…`) decides before and after
//! its I/O: which route a path is and the method it takes, the list
//! filters read and scoped to what the admin reaches, the job a path names,
//! a keyed request's key, the bodies of a replay and a resolve, and how a
//! keyed request's answer is kept and replayed. The edge reads the request,
//! asks [`AdminRoute::parse`] and performs the route it gets.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::admin::{Admin, Scope};
use crate::config::pricing::{BUNDLED_AS_OF, Prices};
use crate::front::head::Head;
use crate::front::{Method, Refusal, expect, percent_decode, refused};
use crate::identity::key::IdempotencyKey;
use crate::operators::query::{CostsQuery, DeadLettersQuery, JobsQuery, QueryError};
use crate::wire::ProblemType;

/// The most jobs one replay of a cause touches.
pub const MAX_REPLAY: u32 = 100;

/// The most dead letters `GET dead-letters` lists.
pub const DEAD_LETTERS_LISTED: u32 = 500;

/// The detail of every `403` about a tenant an admin does not reach.
const OUT_OF_REACH: &str = "this admin key does not reach that tenant";

/// A job as an operator names it: its tenant, user (a user's job) and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobName {
    /// The job's tenant.
    pub tenant: String,
    /// The user whose job it is, if a user's.
    pub user: Option<String>,
    /// Its idempotency key.
    pub key: String,
}

/// What an operator asks of one of a job type's effects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectAction {
    /// `resend`: perform it again.
    Resend,
    /// `mark_done`: record it as done without performing it.
    MarkDone,
}

impl EffectAction {
    /// The action as the path and the Ledger spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            EffectAction::Resend => "resend",
            EffectAction::MarkDone => "mark_done",
        }
    }
}

/// An operator route, read and checked: what the edge performs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminRoute {
    /// `GET dead-letters`: its filters, the tenant scoped.
    DeadLetters(DeadLettersQuery),
    /// `GET jobs`: the jobs index's filters, the tenant scoped.
    Jobs(JobsQuery),
    /// `GET costs`: its filters, the tenant scoped.
    Costs(CostsQuery),
    /// `GET savings`: the costs' filters, the tenant scoped.
    Savings(CostsQuery),
    /// `POST dead-letters/replay` (keyed): its body is read next ([`ReplayBody`]).
    Replay {
        /// The operator request's `Idempotency-Key`.
        request: String,
    },
    /// `POST jobs/resolve` (keyed): its body is read next ([`ResolveBody`]).
    Resolve {
        /// The operator request's `Idempotency-Key`.
        request: String,
    },
    /// `GET jobs/{tenant}/{key}`.
    JobView(JobName),
    /// `POST jobs/{tenant}/{key}/approve`.
    Approve(JobName),
    /// `POST jobs/{tenant}/{key}/enqueue`.
    Enqueue(JobName),
    /// `POST jobs/{tenant}/{key}/effects/{name}/{resend | mark_done}` (keyed).
    Effect {
        /// The operator request's `Idempotency-Key`.
        request: String,
        /// The job.
        job: JobName,
        /// The effect's name (decoded).
        effect: String,
        /// What to do with it.
        action: EffectAction,
    },
}

/// What the edge read of an admin request.
#[derive(Debug, Clone, Copy)]
pub struct AdminRequest<'a> {
    /// Its method.
    pub method: &'a str,
    /// The path after `/onejob/v1/admin/`.
    pub rest: &'a str,
    /// The query string's decoded pairs.
    pub query: &'a [(String, String)],
    /// Its `Idempotency-Key` header, if any.
    pub operator_key: Option<&'a str>,
}

impl<'a> AdminRequest<'a> {
    /// The admin request of a request whose `head` was read, at `rest`
    /// (the path after `/onejob/v1/admin/`): its method, query and
    /// `Idempotency-Key`.
    pub fn of(head: &'a Head, rest: &'a str) -> Self {
        AdminRequest {
            method: &head.method,
            rest,
            query: &head.params,
            operator_key: head.header(crate::wire::header::IDEMPOTENCY_KEY),
        }
    }
}

/// What an operator route answers, however it was reached (a list, a
/// Ledger's answer, a replay's report, a keyed request's kept answer, a
/// refusal met while performing one): its status, its JSON body, and
/// whether it is a kept answer given again. The edge answers it once,
/// with [`AdminAnswer::headers`] and CORS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminAnswer {
    /// Its status.
    pub status: u16,
    /// Its body (JSON, or problem+JSON for a status of 400 and over).
    pub body: String,
    /// A keyed request's kept answer, given again.
    pub replayed: bool,
}

impl AdminAnswer {
    /// An answer of `status` and `body`, given the first time.
    pub fn new(status: u16, body: String) -> Self {
        AdminAnswer { status, body, replayed: false }
    }

    /// A list's answer: `200` and `body` as JSON.
    pub fn json(body: &impl Serialize) -> Result<Self, serde_json::Error> {
        Ok(Self::new(200, serde_json::to_string(body)?))
    }

    /// A keyed request's answer as it was kept ([`kept_answer`]), given again.
    pub fn kept(stored: &str) -> Self {
        let (status, body) = kept_answer(stored);
        AdminAnswer { status, body, replayed: true }
    }

    /// A refusal met while a keyed request was performed, as its answer
    /// ([`refused_answer`]).
    pub fn refused(refusal: &Refusal) -> Self {
        let (status, body) = refused_answer(refusal);
        Self::new(status, body)
    }

    /// Whether it is kept for a keyed request's repeats ([`keeps`]).
    pub fn keeps(&self) -> bool {
        keeps(self.status)
    }

    /// The form it is kept in: `[status, body]`, as [`kept_answer`] reads it.
    pub fn kept_form(&self) -> String {
        // A number and a string: nothing here can fail to serialize.
        serde_json::to_string(&(self.status, &self.body)).unwrap_or_default()
    }

    /// Whether, as a Ledger's answer to a resolve, it settled the job ([`settled`]).
    pub fn settled(&self) -> bool {
        settled(self.status)
    }

    /// Its headers besides CORS ([`answer_headers`]).
    pub fn headers(&self) -> Vec<(&'static str, &'static str)> {
        answer_headers(self.status, self.replayed)
    }
}

/// The routes by path, before their method and parameters are checked.
enum Path<'a> {
    DeadLetters,
    Jobs,
    Costs,
    Savings,
    Replay,
    Resolve,
    JobView(&'a str),
    Approve(&'a str),
    Enqueue(&'a str),
    Effect { job: &'a str, effect: &'a str, action: EffectAction },
}

impl Path<'_> {
    fn of(rest: &str) -> Option<Path<'_>> {
        Some(match rest {
            "dead-letters" => Path::DeadLetters,
            "jobs" => Path::Jobs,
            "costs" => Path::Costs,
            "savings" => Path::Savings,
            "dead-letters/replay" => Path::Replay,
            "jobs/resolve" => Path::Resolve,
            _ => {
                let inner = rest.strip_prefix("jobs/")?;
                inner
                    .strip_suffix("/approve")
                    .map(Path::Approve)
                    .or_else(|| inner.strip_suffix("/enqueue").map(Path::Enqueue))
                    .or_else(|| effect_path(inner))
                    .or_else(|| (inner.matches('/').count() == 1).then_some(Path::JobView(inner)))?
            }
        })
    }

    fn method(&self) -> Method {
        match self {
            Path::DeadLetters | Path::Jobs | Path::Costs | Path::Savings | Path::JobView(_) => Method::Get,
            _ => Method::Post,
        }
    }
}

/// `{tenant}/{key}/effects/{name}/{resend | mark_done}` (after `jobs/`).
fn effect_path(inner: &str) -> Option<Path<'_>> {
    let (rest, action) = inner.rsplit_once('/')?;
    let (job, effect) = rest.rsplit_once("/effects/")?;
    let action = match action {
        "resend" => EffectAction::Resend,
        "mark_done" => EffectAction::MarkDone,
        _ => return None,
    };
    Some(Path::Effect { job, effect, action })
}

impl AdminRoute {
    /// The route `request` asks `admin` for, or why it is refused, in this
    /// order: `404` (no such route), `405`, then the route's own checks: a
    /// list's filters (`400`) and their tenant (`403`); a keyed request's
    /// `Idempotency-Key` (`400`); the job a path names (`404`, `400`, `403`).
    pub fn parse(admin: &Admin, request: &AdminRequest) -> Result<AdminRoute, Refusal> {
        let path = Path::of(request.rest).ok_or_else(|| refused(ProblemType::NotFound, "no such admin route"))?;
        expect(request.method, path.method())?;
        let query = request.query;
        let key = || operator_key(request.operator_key);
        Ok(match path {
            Path::DeadLetters => AdminRoute::DeadLetters(scoped(admin, DeadLettersQuery::parse(query))?),
            Path::Jobs => AdminRoute::Jobs(scoped(admin, JobsQuery::parse(query))?),
            Path::Costs => AdminRoute::Costs(scoped(admin, CostsQuery::parse(query))?),
            Path::Savings => AdminRoute::Savings(scoped(admin, CostsQuery::parse(query))?),
            Path::Replay => AdminRoute::Replay { request: key()? },
            Path::Resolve => AdminRoute::Resolve { request: key()? },
            Path::JobView(inner) => AdminRoute::JobView(job_of_path(admin, query, inner)?),
            Path::Approve(inner) => AdminRoute::Approve(job_of_path(admin, query, inner)?),
            Path::Enqueue(inner) => AdminRoute::Enqueue(job_of_path(admin, query, inner)?),
            Path::Effect { job, effect, action } => {
                let request = key()?;
                let job = job_of_path(admin, query, job)?;
                AdminRoute::Effect { request, job, effect: percent_decode(effect), action }
            }
        })
    }
}

/// A list's filters that name a tenant.
pub trait TenantFilter {
    /// The tenant the filter names, if any.
    fn tenant(&mut self) -> &mut Option<String>;
}

impl TenantFilter for DeadLettersQuery {
    fn tenant(&mut self) -> &mut Option<String> {
        &mut self.tenant
    }
}

impl TenantFilter for JobsQuery {
    fn tenant(&mut self) -> &mut Option<String> {
        &mut self.tenant
    }
}

impl TenantFilter for CostsQuery {
    fn tenant(&mut self) -> &mut Option<String> {
        &mut self.tenant
    }
}

/// A list's filters as read (`400` naming the parameter that cannot be),
/// their tenant scoped to what `admin` reaches ([`scoped_tenant`]).
pub fn scoped<Q: TenantFilter>(admin: &Admin, parsed: Result<Q, QueryError>) -> Result<Q, Refusal> {
    let mut query = parsed.map_err(|error| refused(ProblemType::InvalidQuery, error.to_string()))?;
    let asked = query.tenant().take();
    *query.tenant() = scoped_tenant(admin, asked)?;
    Ok(query)
}

/// The tenant an admin asks about: any (or none: every tenant) for an admin
/// of all tenants; its own for a scoped one, when it names none or its own
/// (`403` for another).
pub fn scoped_tenant(admin: &Admin, asked: Option<String>) -> Result<Option<String>, Refusal> {
    match (&admin.scope, asked) {
        (Scope::All, asked) => Ok(asked),
        (Scope::Tenant(own), None) => Ok(Some(own.clone())),
        (Scope::Tenant(own), Some(asked)) if *own == asked => Ok(Some(asked)),
        _ => Err(refused(ProblemType::Forbidden, OUT_OF_REACH)),
    }
}

/// `403` unless `admin` reaches `tenant`.
fn reach(admin: &Admin, tenant: &str) -> Result<(), Refusal> {
    match admin.reaches(tenant) {
        true => Ok(()),
        false => Err(refused(ProblemType::Forbidden, OUT_OF_REACH)),
    }
}

/// A keyed operator request's `Idempotency-Key` (`400` when it sent none,
/// or none well formed).
fn operator_key(sent: Option<&str>) -> Result<String, Refusal> {
    sent.filter(|key| IdempotencyKey::parse(key).is_ok()).map(str::to_owned).ok_or_else(|| {
        refused(
            ProblemType::MissingIdempotencyKey,
            "operator requests that change jobs need an Idempotency-Key (16–255 visible ASCII characters)",
        )
    })
}

/// The job `{tenant}/{key}` (percent-encoded; `?user=` for a user's) an
/// admin route names, if its names are well formed (`400` otherwise, as on
/// the tenant routes) and this admin reaches its tenant.
fn job_of_path(admin: &Admin, query: &[(String, String)], inner: &str) -> Result<JobName, Refusal> {
    let (tenant, key) = inner
        .split_once('/')
        .filter(|(_, key)| !key.contains('/'))
        .ok_or_else(|| refused(ProblemType::NotFound, "use /onejob/v1/admin/jobs/{tenant}/{key}"))?;
    let (tenant, key) = (percent_decode(tenant), percent_decode(key));
    let mut users = query.iter().filter(|(name, _)| name == "user").map(|(_, user)| user.clone());
    let user = users.next();
    if users.next().is_some() {
        return Err(refused(ProblemType::InvalidQuery, "query parameter user: given more than once"));
    }
    check_job_names(Some(&tenant), user.as_deref(), Some(&key))?;
    reach(admin, &tenant)?;
    Ok(JobName { tenant, user, key })
}

/// A job's tenant, user and key as an operator names them: the key as the
/// tenant routes take it (`400 invalid-idempotency-key`), the tenant and the
/// user as non-empty, bounded text (`400 invalid-query`).
pub fn check_job_names(tenant: Option<&str>, user: Option<&str>, key: Option<&str>) -> Result<(), Refusal> {
    let bad_text = |value: &&str| value.is_empty() || value.len() > 256 || value.chars().any(char::is_control);
    if let Some(name) =
        [("tenant", tenant), ("user", user)].into_iter().find_map(|(name, value)| value.filter(bad_text).map(|_| name))
    {
        return Err(refused(ProblemType::InvalidQuery, format!("{name} must be 1 to 256 bytes of text")));
    }
    key.map_or(Ok(()), |key| {
        IdempotencyKey::parse(key)
            .map(|_| ())
            .map_err(|error| refused(ProblemType::InvalidIdempotencyKey, error.to_string()))
    })
}

/// The body of `POST dead-letters/replay`: one dead job, or every dead job
/// of a cause.
#[derive(Debug, Clone, Deserialize)]
pub struct ReplayBody {
    /// The job's tenant (a cause's: only its dead letters).
    pub tenant: Option<String>,
    /// The job's user.
    pub user: Option<String>,
    /// The job's key.
    pub key: Option<String>,
    /// The cause: every dead letter of this error class.
    pub error_class: Option<String>,
}

/// What a replay replays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplaySelection {
    /// One dead job.
    One(JobName),
    /// The dead letters of a cause (at most [`MAX_REPLAY`]), of one tenant
    /// or every tenant the admin reaches.
    Cause {
        /// Only this tenant's.
        tenant: Option<String>,
        /// The error class.
        error_class: String,
    },
}

impl ReplayBody {
    /// What a replay's body must look like, for a caller who sent another.
    pub const SHAPE: &'static str = "{\"tenant\", \"key\", \"user\"?} or {\"error_class\", \"tenant\"?}";

    /// Its names, checked as a path's are (before the request is kept).
    pub fn check_names(&self) -> Result<(), Refusal> {
        check_job_names(self.tenant.as_deref(), self.user.as_deref(), self.key.as_deref())
    }

    /// What it replays, as `admin` may (the refusal is the keyed request's
    /// answer, kept as any other).
    pub fn selection(self, admin: &Admin) -> Result<ReplaySelection, Refusal> {
        match (self.key, self.error_class) {
            (Some(key), None) => {
                let tenant = self.tenant.ok_or_else(|| refused(ProblemType::InvalidJson, "a key needs its tenant"))?;
                reach(admin, &tenant)?;
                Ok(ReplaySelection::One(JobName { tenant, user: self.user, key }))
            }
            (None, Some(error_class)) => {
                Ok(ReplaySelection::Cause { tenant: scoped_tenant(admin, self.tenant)?, error_class })
            }
            _ => Err(refused(ProblemType::InvalidJson, "send either a tenant and key, or an error_class")),
        }
    }
}

/// The body of `POST jobs/resolve`: how an operator settles an unknown job.
#[derive(Debug, Clone, Deserialize)]
pub struct ResolveBody {
    /// The job's tenant.
    pub tenant: String,
    /// The job's user.
    pub user: Option<String>,
    /// The job's key.
    pub key: String,
    /// `succeeded` or `retry`.
    pub action: String,
    /// The response a `succeeded` job keeps.
    pub response: Option<ResolvedResponse>,
}

/// The response an operator gives a job it resolves as succeeded.
#[derive(Debug, Clone, Deserialize)]
pub struct ResolvedResponse {
    /// Its status.
    pub status: Option<u16>,
    /// Its body.
    pub body: Option<Value>,
}

impl ResolveBody {
    /// What a resolve's body must look like, for a caller who sent another.
    pub const SHAPE: &'static str =
        "{\"tenant\", \"key\", \"user\"?, \"action\": \"succeeded\" | \"retry\", \"response\"?}";

    /// Its names checked as a path's are, and its tenant in `admin`'s reach.
    pub fn check(&self, admin: &Admin) -> Result<(), Refusal> {
        check_job_names(Some(&self.tenant), self.user.as_deref(), Some(&self.key))?;
        reach(admin, &self.tenant)
    }

    /// The job it names.
    pub fn job(&self) -> JobName {
        JobName { tenant: self.tenant.clone(), user: self.user.clone(), key: self.key.clone() }
    }
}

/// Whether a Ledger's answer to a resolve settled the job (a 2xx): it
/// leaves the dead-letter list.
pub fn settled(status: u16) -> bool {
    (200..300).contains(&status)
}

/// A Ledger's `200` answer to one replay (the edge's `ReplayReply`, as
/// far as a replay's report reads it).
#[derive(Deserialize)]
struct Replied {
    replayed: bool,
    #[serde(default)]
    reason: Option<String>,
}

/// A job in the report of a replay: replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Replayed {
    key: String,
    tenant: String,
    user: Option<String>,
}

/// A job in the report of a replay: skipped, and why (when known).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct Skipped {
    key: String,
    reason: Option<String>,
    tenant: String,
}

/// The answer to a replay: the jobs replayed and those skipped, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    replayed: Vec<Replayed>,
    skipped: Vec<Skipped>,
}

impl ReplayReport {
    /// Whether `admin` reaches `job` (one outside is skipped, and said so).
    pub fn in_scope(&mut self, admin: &Admin, job: &JobName) -> bool {
        let reached = admin.reaches(&job.tenant);
        if !reached {
            self.skip(job, Some("out of this admin's scope".to_owned()));
        }
        reached
    }

    /// Records the Ledger's answer to `job`'s replay (`status`, `answer`);
    /// `true` when it was replayed (it leaves the dead-letter list). A `200`
    /// says whether and why not; any other answer is a problem, whose detail
    /// says why.
    pub fn record(&mut self, job: &JobName, status: u16, answer: &str) -> bool {
        let skipped_because = match (status, serde_json::from_str::<Replied>(answer)) {
            (200, Ok(Replied { replayed: true, .. })) => None,
            (200, Ok(Replied { reason, .. })) => Some(reason),
            _ => Some(
                serde_json::from_str::<Value>(answer)
                    .ok()
                    .and_then(|problem| problem.get("detail")?.as_str().map(str::to_owned)),
            ),
        };
        let replayed = skipped_because.is_none();
        match skipped_because {
            None => self.replayed.push(Replayed {
                key: job.key.clone(),
                tenant: job.tenant.clone(),
                user: job.user.clone(),
            }),
            Some(reason) => self.skip(job, reason),
        }
        replayed
    }

    fn skip(&mut self, job: &JobName, reason: Option<String>) {
        self.skipped.push(Skipped { key: job.key.clone(), reason, tenant: job.tenant.clone() });
    }

    /// The report as the answer's JSON body.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The id a keyed operator request is remembered by: who asked and what
/// they reach, so two admins of one name but different scopes never share
/// an answer.
pub fn request_id(admin: &Admin, request_key: &str) -> String {
    let scope = match &admin.scope {
        Scope::All => "*".to_owned(),
        Scope::Tenant(tenant) => format!("tenant:{tenant}"),
    };
    format!("{}\u{1f}{scope}\u{1f}{request_key}", admin.name)
}

/// Whether an operator request's answer is kept for its repeats: a settled
/// one (a `5xx` may be asked again).
pub fn keeps(status: u16) -> bool {
    status < 500
}

/// A kept answer: its status and body (an answer kept as a bare body, before
/// statuses were kept, is a `200`).
pub fn kept_answer(stored: &str) -> (u16, String) {
    serde_json::from_str::<(u16, String)>(stored).unwrap_or_else(|_| (200, stored.to_owned()))
}

/// A refusal met while a keyed request was performed (a replay's
/// selection): the request's answer, its problem's status and body, kept as
/// any other ([`keeps`]).
pub fn refused_answer(refusal: &Refusal) -> (u16, String) {
    let problem = refusal.problem();
    (problem.status(), problem.to_json())
}

/// The headers of an operator answer with `status` besides CORS: its
/// content type ([`content_type`]), and `Idempotent-Replayed: true` when
/// it is a keyed request's kept answer, given again.
pub fn answer_headers(status: u16, replayed: bool) -> Vec<(&'static str, &'static str)> {
    let mut headers = vec![("Content-Type", content_type(status))];
    headers.extend(replayed.then_some((crate::wire::header::IDEMPOTENT_REPLAYED, "true")));
    headers
}

/// The content type of an operator answer with `status`.
pub fn content_type(status: u16) -> &'static str {
    if status >= 400 { "application/problem+json" } else { "application/json" }
}

/// What the spend is counted with, for the console: the bundled table's
/// date and the models `PRICES` prices instead.
pub fn prices_note(prices: &Prices) -> Value {
    serde_json::json!({ "bundled_as_of": BUNDLED_AS_OF, "overridden": prices.overridden() })
}

#[cfg(test)]
mod tests;
