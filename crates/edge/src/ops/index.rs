//! The jobs index: one row per job, written in batches as the Ledgers change
//! their jobs, for the operators' jobs list and the spend per tenant and model.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use onejob_core::job::Job;
use onejob_core::operators::query::{COSTS_GROUPS, IndexedJob, JobsPage, JobsQuery};
use onejob_core::operators::savings::Spent;
use wasm_bindgen::JsValue;
use worker::{Delay, Env, Result};

use crate::api::handoff::JobMeta;
use crate::env::config::Config;

/// How long index rows wait to be written together: one D1 batch for the
/// jobs of every Ledger in this isolate that changed meanwhile, instead of
/// one write each.
const INDEX_FLUSH_MS: u64 = 200;

/// The rows of a flush as one statement: its one parameter is a JSON array
/// of rows (each an array in the columns' order), so a flush is one
/// statement whatever its size, not one per row (D1 binds at most 100
/// parameters per statement; a row has 14). `WHERE true` keeps SQLite from
/// reading `ON CONFLICT` as a join's.
const UPSERT_JOBS: &str =
    "INSERT INTO jobs_index (tenant, user, job_key, state, model, provider, error_class, attempts,
                                 tokens, cost_usd, background, created_ms, updated_ms, version)
     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
            json_extract(value, '$[3]'), json_extract(value, '$[4]'), json_extract(value, '$[5]'),
            json_extract(value, '$[6]'), json_extract(value, '$[7]'), json_extract(value, '$[8]'),
            json_extract(value, '$[9]'), json_extract(value, '$[10]'), json_extract(value, '$[11]'),
            json_extract(value, '$[12]'), json_extract(value, '$[13]')
     FROM json_each(?1) WHERE true
     ON CONFLICT (tenant, user, job_key) DO UPDATE SET state = excluded.state, model = excluded.model,
         provider = excluded.provider, error_class = excluded.error_class, attempts = excluded.attempts,
         tokens = excluded.tokens, cost_usd = excluded.cost_usd, background = excluded.background,
         updated_ms = excluded.updated_ms, version = excluded.version
     WHERE excluded.version >= jobs_index.version";

/// Rows per statement: a flush of more is written as several statements
/// of one batch (a bound string stays far under D1's 2 MB per value).
const ROWS_PER_STATEMENT: usize = 500;

thread_local! {
    /// Index rows waiting for the next flush, one per job (the newest).
    static PENDING_ROWS: RefCell<Vec<(String, serde_json::Value)>> = const { RefCell::new(Vec::new()) };
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
    let db = super::database(env).await?;
    let upsert = db.prepare(UPSERT_JOBS);
    let statements = rows
        .chunks(ROWS_PER_STATEMENT)
        .map(|chunk| {
            let rows: Vec<&serde_json::Value> = chunk.iter().map(|(_, row)| row).collect();
            upsert.clone().bind(&[JsValue::from(serde_json::to_string(&rows)?)])
        })
        .collect::<Result<Vec<_>>>()?;
    db.batch(statements).await?;
    Ok(())
}

/// A job's row of the index, in the upsert's columns' order.
fn index_row(config: &Config, meta: &JobMeta, job: &Job) -> serde_json::Value {
    let shown = job.replayed_attempt().or(job.attempts().last());
    // The savings count a replay's call with the same figures (`Spent`).
    let Spent { model, tokens, cost_usd: cost } = Spent::of_job(job, meta.model.as_deref(), &config.prices);
    let error_class = shown.and_then(|a| a.error_class).map(onejob_core::retry::classify::ErrorClass::name);
    serde_json::json!([
        meta.tenant,
        meta.user.as_deref().unwrap_or(""),
        meta.key,
        job.state().as_str(),
        // The model asked for (the route), as callers and filters name it.
        model,
        shown.map(|a| a.provider.as_str()),
        error_class,
        job.attempts().len(),
        tokens,
        cost,
        u8::from(job.is_background()),
        job.created_ms(),
        job.updated_ms(),
        job.version(),
    ])
}

/// A page of the jobs list, newest first, and the cursor of the next.
pub async fn jobs(env: &Env, filter: &JobsQuery) -> Result<JobsPage> {
    let db = super::database(env).await?;
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
    Ok(JobsPage::of(rows, limit))
}

/// Jobs, tokens and estimated spend since `since_ms` (of one tenant with
/// `tenant`), grouped as [`COSTS_GROUPS`] says: per tenant, per model (the
/// answer is the core's, `admin_query::costs_answer`).
pub async fn costs(env: &Env, since_ms: u64, tenant: Option<&str>) -> Result<Vec<Vec<serde_json::Value>>> {
    let db = super::database(env).await?;
    let mut grouped = Vec::with_capacity(COSTS_GROUPS.len());
    for (_, column) in COSTS_GROUPS {
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
        grouped.push(rows);
    }
    Ok(grouped)
}
