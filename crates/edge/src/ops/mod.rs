//! The operators' index in D1: dead letters (one row per dead background
//! job, grouped by cause for the console and for replays), the alerts they
//! raised, and keyed operator requests (a replay sent twice is answered,
//! not done, twice).
//! The Ledgers stay the authority on every job; this is what operators
//! search. Tables are created on first use in each isolate.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use onejob_core::admin_query::{JobsQuery, cursor_of};
use onejob_core::alert;
use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{D1Database, Delay, Env, Fetch, Result};

use crate::api::handoff::{DeadFacts, JobMessage, JobMeta};
use crate::env::binding;
use crate::env::clock::now_ms;
use crate::env::config::{AlertWebhook, Config};
use onejob_core::job::Job;

thread_local! {
    static TABLES_READY: Cell<bool> = const { Cell::new(false) };
}

const HOUR_MS: u64 = 3_600_000;

async fn database(env: &Env) -> Result<D1Database> {
    let db = env.d1(binding::OPS)?;
    if !TABLES_READY.with(Cell::get) {
        db.batch(vec![
            db.prepare(
                "CREATE TABLE IF NOT EXISTS dead_letters (
                    tenant TEXT NOT NULL,
                    user TEXT NOT NULL,
                    job_key TEXT NOT NULL,
                    error_class TEXT NOT NULL,
                    last_status INTEGER,
                    detail TEXT NOT NULL,
                    attempts INTEGER NOT NULL,
                    first_seen_ms INTEGER NOT NULL,
                    last_seen_ms INTEGER NOT NULL,
                    replayed_ms INTEGER,
                    PRIMARY KEY (tenant, user, job_key)
                )",
            ),
            db.prepare("CREATE INDEX IF NOT EXISTS dead_letters_by_class ON dead_letters (error_class, last_seen_ms)"),
            db.prepare(
                "CREATE TABLE IF NOT EXISTS jobs_index (
                    tenant TEXT NOT NULL,
                    user TEXT NOT NULL,
                    job_key TEXT NOT NULL,
                    state TEXT NOT NULL,
                    model TEXT,
                    provider TEXT,
                    error_class TEXT,
                    attempts INTEGER NOT NULL,
                    tokens INTEGER NOT NULL,
                    cost_usd REAL NOT NULL,
                    background INTEGER NOT NULL,
                    created_ms INTEGER NOT NULL,
                    updated_ms INTEGER NOT NULL,
                    version INTEGER NOT NULL,
                    PRIMARY KEY (tenant, user, job_key)
                )",
            ),
            db.prepare("CREATE INDEX IF NOT EXISTS jobs_by_time ON jobs_index (created_ms, job_key)"),
            db.prepare(
                "CREATE TABLE IF NOT EXISTS alerts (
                    delivery_id TEXT PRIMARY KEY,
                    cause TEXT NOT NULL,
                    body TEXT NOT NULL,
                    claimed_ms INTEGER,
                    sent_ms INTEGER
                )",
            ),
            db.prepare(
                "CREATE TABLE IF NOT EXISTS subjects (
                    tenant TEXT NOT NULL,
                    job_type TEXT NOT NULL,
                    subject TEXT NOT NULL,
                    job_key TEXT NOT NULL,
                    user TEXT NOT NULL,
                    claimed_ms INTEGER NOT NULL,
                    answered_ms INTEGER,
                    PRIMARY KEY (tenant, job_type, subject)
                )",
            ),
            db.prepare(
                "CREATE TABLE IF NOT EXISTS operator_requests (
                    id TEXT PRIMARY KEY,
                    response TEXT NOT NULL,
                    at_ms INTEGER NOT NULL
                )",
            ),
        ])
        .await?;
        TABLES_READY.with(|t| t.set(true));
    }
    Ok(db)
}

/// Records (or refreshes) a dead job's entry.
pub async fn record_dead_letter(env: &Env, job: &JobMessage, facts: &DeadFacts) -> Result<()> {
    let db = database(env).await?;
    let now = now_ms() as f64;
    let status = facts.last_status.map_or(JsValue::NULL, |s| JsValue::from(f64::from(s)));
    db.prepare(
        "INSERT INTO dead_letters (tenant, user, job_key, error_class, last_status, detail, attempts, first_seen_ms, last_seen_ms)
         VALUES (?1, ?8, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
         ON CONFLICT (tenant, user, job_key) DO UPDATE SET error_class = ?3, last_status = ?4, detail = ?5,
             attempts = ?6, last_seen_ms = ?7, replayed_ms = NULL",
    )
    .bind(&[
        job.tenant.as_str().into(),
        job.key.as_str().into(),
        facts.error_class.as_str().into(),
        status,
        facts.detail.as_str().into(),
        JsValue::from(f64::from(facts.attempts)),
        JsValue::from(now),
        job.user.as_deref().unwrap_or("").into(),
    ])?
    .run()
    .await?;
    worker::console_log!("onejob: dead letter of class {} recorded", facts.error_class);
    Ok(())
}

/// Alerts about `error_class` if its dead letters call for one (see
/// [`onejob_core::alert`]): one signed POST per cause and window to
/// `ALERT_WEBHOOK_URL`, its delivery id the same on every retry. `Err` when
/// the receiver did not take it (the dead-letter message is retried, and
/// the same alert with it).
pub async fn alert_if_due(env: &Env, config: &Config, error_class: &str) -> Result<()> {
    let Some(webhook) = &config.alert_webhook else { return Ok(()) };
    let policy = config.settings.alerts;
    let db = database(env).await?;
    let now = now_ms();
    let window = alert::window_of(policy, now);
    let window_start = window * policy.window_ms;
    let count = db
        .prepare(
            "SELECT COUNT(*) AS n FROM dead_letters
             WHERE error_class = ?1 AND last_seen_ms >= ?2 AND replayed_ms IS NULL",
        )
        .bind(&[error_class.into(), JsValue::from(window_start as f64)])?
        .first::<u32>(Some("n"))
        .await?
        .unwrap_or(0);
    if !alert::should_alert(policy, error_class, count) {
        return Ok(());
    }
    let delivery_id = alert::delivery_id(error_class, window);
    let samples = dead_letters(env, None, Some(error_class), 5).await?;
    let body = serde_json::json!({
        "type": "onejob.dead_letters",
        "delivery_id": delivery_id,
        "cause": error_class,
        "count": count,
        "threshold": policy.threshold,
        "window_start_ms": window_start,
        "window_end_ms": window_start + policy.window_ms,
        "samples": samples.iter().map(|l| serde_json::json!({
            "tenant": l.tenant, "key": l.key, "last_status": l.last_status, "detail": l.detail, "attempts": l.attempts,
        })).collect::<Vec<_>>(),
    })
    .to_string();
    // The first dead letter to get here writes the alert; every later one
    // (and every retry) sends that same body under the same id.
    db.prepare(
        "INSERT INTO alerts (delivery_id, cause, body) VALUES (?1, ?2, ?3) ON CONFLICT (delivery_id) DO NOTHING",
    )
    .bind(&[delivery_id.as_str().into(), error_class.into(), body.as_str().into()])?
    .run()
    .await?;
    // Claim the sending (one sender at a time; a claim older than 30 s is
    // presumed lost).
    let claimed = db
        .prepare(
            "UPDATE alerts SET claimed_ms = ?2
             WHERE delivery_id = ?1 AND sent_ms IS NULL AND (claimed_ms IS NULL OR claimed_ms < ?2 - 30000)",
        )
        .bind(&[delivery_id.as_str().into(), JsValue::from(now as f64)])?
        .run()
        .await?
        .meta()?
        .and_then(|m| m.changes)
        .unwrap_or(0);
    if claimed == 0 {
        return Ok(());
    }
    let body = db
        .prepare("SELECT body FROM alerts WHERE delivery_id = ?1")
        .bind(&[delivery_id.as_str().into()])?
        .first::<String>(Some("body"))
        .await?
        .unwrap_or(body);
    let sent = post_alert(webhook, &delivery_id, &body).await;
    let mark = match sent {
        Ok(()) => "UPDATE alerts SET sent_ms = ?2 WHERE delivery_id = ?1",
        Err(_) => "UPDATE alerts SET claimed_ms = NULL WHERE delivery_id = ?1 AND ?2 > 0",
    };
    db.prepare(mark).bind(&[delivery_id.as_str().into(), JsValue::from(now_ms() as f64)])?.run().await?;
    sent
}

/// POSTs an alert, signed: `OneJob-Signature: sha256=<hex HMAC-SHA256 of
/// "<timestamp>.<body>">`, with `OneJob-Timestamp` and `OneJob-Delivery`.
async fn post_alert(webhook: &AlertWebhook, delivery_id: &str, body: &str) -> Result<()> {
    let request = crate::effects::webhook::signed_post(&webhook.url, Some(&webhook.secret), delivery_id, body)?;
    let response = Fetch::Request(request).send().await?;
    if (200..300).contains(&response.status_code()) {
        worker::console_log!("onejob: alert {delivery_id} delivered");
        Ok(())
    } else {
        Err(worker::Error::RustError(format!("the alert receiver answered {}", response.status_code())))
    }
}

/// How long index rows wait to be written together: one D1 batch for the
/// jobs of every Ledger in this isolate that changed meanwhile, instead of
/// one write each.
const INDEX_FLUSH_MS: u64 = 200;

const UPSERT_JOB: &str = "INSERT INTO jobs_index (tenant, user, job_key, state, model, provider, error_class, attempts,
                                 tokens, cost_usd, background, created_ms, updated_ms, version)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
     ON CONFLICT (tenant, user, job_key) DO UPDATE SET state = ?4, model = ?5, provider = ?6, error_class = ?7,
         attempts = ?8, tokens = ?9, cost_usd = ?10, background = ?11, updated_ms = ?13, version = ?14
     WHERE excluded.version >= jobs_index.version";

thread_local! {
    /// Index rows waiting for the next flush, one per job (the newest).
    static PENDING_ROWS: RefCell<Vec<(String, Vec<JsValue>)>> = const { RefCell::new(Vec::new()) };
    /// A flush is scheduled: rows added now go with it.
    static FLUSH_SCHEDULED: Cell<bool> = const { Cell::new(false) };
}

/// Writes a job's row in the operators' index (newer versions only: two
/// writes may land out of order). Rows are written in batches: the first
/// caller of a batch waits [`INDEX_FLUSH_MS`] and writes every row queued
/// meanwhile in this isolate (a row lost with its isolate is written again
/// at the job's next change; the index is for looking, the Ledger decides).
pub async fn index_job(env: &Env, config: &Config, meta: &JobMeta, job: &Job) -> Result<()> {
    let id = format!("{}\u{1f}{}\u{1f}{}", meta.tenant, meta.user.as_deref().unwrap_or(""), meta.key);
    let row = index_row(config, meta, job);
    PENDING_ROWS.with(|rows| {
        let mut rows = rows.borrow_mut();
        rows.retain(|(pending, _)| *pending != id);
        rows.push((id, row));
    });
    if FLUSH_SCHEDULED.with(|f| f.replace(true)) {
        return Ok(());
    }
    Delay::from(Duration::from_millis(INDEX_FLUSH_MS)).await;
    FLUSH_SCHEDULED.with(|f| f.set(false));
    let rows = PENDING_ROWS.with(|rows| std::mem::take(&mut *rows.borrow_mut()));
    let db = database(env).await?;
    let statements = rows.iter().map(|(_, row)| db.prepare(UPSERT_JOB).bind(row)).collect::<Result<Vec<_>>>()?;
    db.batch(statements).await?;
    Ok(())
}

/// A job's row of the index, as the upsert's parameters.
fn index_row(config: &Config, meta: &JobMeta, job: &Job) -> Vec<JsValue> {
    let shown = job.replayed_attempt().or(job.attempts().last());
    let tokens: u64 = job.attempts().iter().filter_map(|a| a.usage).map(|u| u.total_tokens).sum();
    let cost: f64 = job
        .attempts()
        .iter()
        .filter_map(|a| Some(config.prices.cost_usd(a.model.as_deref(), a.usage.as_ref()?).unwrap_or(0.0)))
        .sum();
    let text = |value: Option<&str>| value.map_or(JsValue::NULL, JsValue::from);
    let error_class = shown.and_then(|a| a.error_class).map(onejob_core::classify::ErrorClass::name);
    vec![
        meta.tenant.as_str().into(),
        meta.user.as_deref().unwrap_or("").into(),
        meta.key.as_str().into(),
        job.state().as_str().into(),
        // The model asked for (the route), as callers and filters name it.
        text(meta.model.as_deref().or(shown.and_then(|a| a.model.as_deref()))),
        text(shown.map(|a| a.provider.as_str())),
        text(error_class.as_deref()),
        JsValue::from(job.attempts().len() as f64),
        JsValue::from(tokens as f64),
        JsValue::from(cost),
        JsValue::from(u8::from(job.is_background())),
        JsValue::from(job.created_ms() as f64),
        JsValue::from(job.updated_ms() as f64),
        JsValue::from(job.version() as f64),
    ]
}

/// One job in the operators' list.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexedJob {
    pub tenant: String,
    #[serde(default)]
    pub user: String,
    #[serde(rename = "key", alias = "job_key")]
    pub key: String,
    pub state: String,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub error_class: Option<String>,
    pub attempts: u32,
    pub tokens: u64,
    pub cost_usd: f64,
    pub background: u8,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// A page of the jobs list, newest first, and the cursor of the next.
pub async fn jobs(env: &Env, filter: &JobsQuery) -> Result<(Vec<IndexedJob>, Option<String>)> {
    let db = database(env).await?;
    let limit = filter.limit;
    let (cursor_ms, cursor_key) = filter
        .cursor
        .as_ref()
        .map_or((JsValue::NULL, JsValue::NULL), |(ms, key)| (JsValue::from(*ms as f64), JsValue::from(key.as_str())));
    let text = |value: &Option<String>| value.as_deref().map_or(JsValue::NULL, JsValue::from);
    let number = |value: Option<u64>| value.map_or(JsValue::NULL, |v| JsValue::from(v as f64));
    let rows = db
        .prepare(
            "SELECT tenant, user, job_key, state, model, provider, error_class, attempts, tokens, cost_usd, background,
                    created_ms, updated_ms
             FROM jobs_index
             WHERE (?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR user = ?2) AND (?3 IS NULL OR state = ?3)
               AND (?4 IS NULL OR model = ?4) AND (?5 IS NULL OR error_class = ?5)
               AND (?6 IS NULL OR created_ms >= ?6) AND (?7 IS NULL OR created_ms < ?7)
               AND (?8 IS NULL OR created_ms < ?8 OR (created_ms = ?8 AND job_key < ?9))
             ORDER BY created_ms DESC, job_key DESC
             LIMIT ?10",
        )
        .bind(&[
            text(&filter.tenant),
            text(&filter.user),
            filter.state.map_or(JsValue::NULL, |state| JsValue::from(state.as_str())),
            text(&filter.model),
            text(&filter.error_class),
            number(filter.since_ms),
            number(filter.until_ms),
            cursor_ms,
            cursor_key,
            JsValue::from(f64::from(limit)),
        ])?
        .all()
        .await?
        .results::<IndexedJob>()?;
    let next = (rows.len() as u32 == limit).then(|| rows.last().map(|j| cursor_of(j.created_ms, &j.key))).flatten();
    Ok((rows, next))
}

/// Jobs, tokens and estimated spend per tenant and per model since `since_ms`
/// (of one tenant with `tenant`).
pub async fn costs(env: &Env, since_ms: u64, tenant: Option<&str>) -> Result<serde_json::Value> {
    let db = database(env).await?;
    let mut out = serde_json::Map::new();
    for (name, column) in [("by_tenant", "tenant"), ("by_model", "model")] {
        let rows = db
            .prepare(format!(
                "SELECT {column} AS name, COUNT(*) AS jobs, SUM(tokens) AS tokens, SUM(cost_usd) AS cost_usd
                 FROM jobs_index WHERE created_ms >= ?1 AND (?2 IS NULL OR tenant = ?2)
                 GROUP BY {column} ORDER BY tokens DESC"
            ))
            .bind(&[JsValue::from(since_ms as f64), tenant.map_or(JsValue::NULL, JsValue::from)])?
            .all()
            .await?
            .results::<serde_json::Value>()?;
        let rows: Vec<serde_json::Value> = rows
            .into_iter()
            .map(|mut row| {
                if let Some(object) = row.as_object_mut()
                    && let Some(value) = object.remove("name")
                {
                    object.insert(column.into(), value);
                }
                row
            })
            .collect();
        out.insert(name.into(), serde_json::Value::from(rows));
    }
    out.insert("since_ms".into(), serde_json::Value::from(since_ms));
    Ok(serde_json::Value::Object(out))
}

/// One dead letter, as operators see it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeadLetter {
    pub tenant: String,
    /// The user of a user token's job ('' for the tenant's own).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(rename = "key", alias = "job_key")]
    pub key: String,
    pub error_class: String,
    pub last_status: Option<u16>,
    pub detail: String,
    pub attempts: u32,
    pub first_seen_ms: u64,
    pub last_seen_ms: u64,
}

/// A cause's dead letters: how many, when last, and a 24 h trend.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub error_class: String,
    pub count: usize,
    pub last_seen_ms: u64,
    /// Dead letters per hour over the last 24 hours, oldest first.
    pub trend: Vec<u32>,
}

/// The dead letters not yet replayed, newest first (of one tenant, or of
/// all with `None`), at most `limit`.
pub async fn dead_letters(
    env: &Env,
    tenant: Option<&str>,
    error_class: Option<&str>,
    limit: u32,
) -> Result<Vec<DeadLetter>> {
    let db = database(env).await?;
    let statement = db
        .prepare(
            "SELECT tenant, user, job_key, error_class, last_status, detail, attempts, first_seen_ms, last_seen_ms
             FROM dead_letters
             WHERE replayed_ms IS NULL AND (?1 IS NULL OR tenant = ?1) AND (?2 IS NULL OR error_class = ?2)
             ORDER BY last_seen_ms DESC LIMIT ?3",
        )
        .bind(&[
            tenant.map_or(JsValue::NULL, JsValue::from),
            error_class.map_or(JsValue::NULL, JsValue::from),
            JsValue::from(f64::from(limit)),
        ])?;
    statement.all().await?.results::<DeadLetter>()
}

/// Groups dead letters by cause, with each cause's hourly trend.
pub fn groups(letters: &[DeadLetter]) -> Vec<Group> {
    let now = now_ms();
    let mut groups: Vec<Group> = Vec::new();
    for letter in letters {
        let index = match groups.iter().position(|g| g.error_class == letter.error_class) {
            Some(index) => index,
            None => {
                groups.push(Group {
                    error_class: letter.error_class.clone(),
                    count: 0,
                    last_seen_ms: 0,
                    trend: vec![0; 24],
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[index];
        group.count += 1;
        group.last_seen_ms = group.last_seen_ms.max(letter.last_seen_ms);
        let hours_ago = now.saturating_sub(letter.last_seen_ms) / HOUR_MS;
        if hours_ago < 24 {
            group.trend[23 - hours_ago as usize] += 1;
        }
    }
    groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.error_class.cmp(&b.error_class)));
    groups
}

/// Marks a dead letter replayed (it leaves the list until the job dies again).
pub async fn mark_replayed(env: &Env, tenant: &str, user: Option<&str>, key: &str) -> Result<()> {
    let db = database(env).await?;
    db.prepare("UPDATE dead_letters SET replayed_ms = ?3 WHERE tenant = ?1 AND job_key = ?2 AND user = ?4")
        .bind(&[tenant.into(), key.into(), JsValue::from(now_ms() as f64), user.unwrap_or("").into()])?
        .run()
        .await?;
    Ok(())
}

/// The stored answer of an operator request already done, by its id.
pub async fn done_request(env: &Env, id: &str) -> Result<Option<String>> {
    let db = database(env).await?;
    db.prepare("SELECT response FROM operator_requests WHERE id = ?1")
        .bind(&[id.into()])?
        .first::<String>(Some("response"))
        .await
}

/// Keeps an operator request's answer, so the same request is answered again, not done again.
pub async fn remember_request(env: &Env, id: &str, response: &str) -> Result<()> {
    let db = database(env).await?;
    db.prepare("INSERT INTO operator_requests (id, response, at_ms) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO NOTHING")
        .bind(&[id.into(), response.into(), JsValue::from(now_ms() as f64)])?
        .run()
        .await?;
    Ok(())
}

/// One job's hold on a job type's subject (its `once_per` value).
pub struct SubjectClaim<'a> {
    pub tenant: &'a str,
    pub user: Option<&'a str>,
    pub job_type: &'a str,
    pub subject: &'a str,
    /// The job's idempotency key.
    pub key: &'a str,
}

impl SubjectClaim<'_> {
    /// `?1` tenant, `?2` job type, `?3` subject, `?4` key, `?5` user, `?6` now.
    fn params(&self) -> [JsValue; 6] {
        [
            self.tenant.into(),
            self.job_type.into(),
            self.subject.into(),
            self.key.into(),
            self.user.unwrap_or("").into(),
            JsValue::from(now_ms() as f64),
        ]
    }
}

/// Who holds a job type's subject: the job's key and user.
pub struct SubjectHolder {
    pub key: String,
    pub user: String,
}

#[derive(Deserialize)]
struct SubjectRow {
    job_key: String,
    user: String,
    answered_ms: Option<f64>,
}

/// The subject for a new job: `None` if the job may have it — it is free,
/// or held by this very job before it got an answer (a retry after a
/// crash) — else who holds it (another job, or this key's answered job,
/// which expired). One row per (tenant, type, subject): the insert and the
/// read go in one batch (one round trip, one transaction), so D1 serialises
/// every claimant's pair.
pub async fn claim_subject(env: &Env, claim: &SubjectClaim<'_>) -> Result<Option<SubjectHolder>> {
    let db = database(env).await?;
    let insert = db
        .prepare(
            "INSERT INTO subjects (tenant, job_type, subject, job_key, user, claimed_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (tenant, job_type, subject) DO NOTHING",
        )
        .bind(&claim.params())?;
    let read = db
        .prepare("SELECT job_key, user, answered_ms FROM subjects WHERE tenant = ?1 AND job_type = ?2 AND subject = ?3")
        .bind(&claim.params()[..3])?;
    let results = db.batch(vec![insert, read]).await?;
    // No answer to the read is an error, never a free subject.
    let read = results.get(1).ok_or_else(|| worker::Error::RustError("the subject's read returned nothing".into()))?;
    let holder = read.results::<SubjectRow>()?.into_iter().next();
    let user = claim.user.unwrap_or("");
    Ok(holder
        .filter(|row| row.job_key != claim.key || row.user != user || row.answered_ms.is_some())
        .map(|row| SubjectHolder { key: row.job_key, user: row.user }))
}

/// The subject's job got its answer: the subject is taken for good.
pub async fn subject_answered(env: &Env, claim: &SubjectClaim<'_>) -> Result<()> {
    database(env)
        .await?
        .prepare(
            "UPDATE subjects SET answered_ms = ?6
             WHERE tenant = ?1 AND job_type = ?2 AND subject = ?3 AND job_key = ?4 AND user = ?5 AND answered_ms IS NULL",
        )
        .bind(&claim.params())?
        .run()
        .await?;
    Ok(())
}

/// Frees a subject whose job ended without an answer (a new intent may
/// try); an answered subject is never freed.
pub async fn release_subject(env: &Env, claim: &SubjectClaim<'_>) -> Result<()> {
    let params = claim.params();
    database(env)
        .await?
        .prepare(
            "DELETE FROM subjects
             WHERE tenant = ?1 AND job_type = ?2 AND subject = ?3 AND job_key = ?4 AND user = ?5 AND answered_ms IS NULL",
        )
        .bind(&params[..5])?
        .run()
        .await?;
    Ok(())
}
