//! The savings table: answers given without an upstream call, counted per
//! tenant, model, kind and hour ([`onejob_core::operators::savings`]), and read back
//! next to the jobs index's spend for `GET admin/savings`.
//!
//! Counting is off the answer's path: [`count_saved`] is handed to
//! `wait_until` after the answer is built, adds the answer to this
//! isolate's tally, and the first counter of a batch writes the whole
//! tally [`SAVINGS_FLUSH_MS`] later in one D1 batch. A failed write is
//! logged and its counts are dropped: savings are for looking, and an
//! answer never waits for (or fails with) them.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use onejob_core::operators::savings::{
    AnswerKind, BUCKET_MS, Report, SavedRow, Spent, SpentRow, Sums, Tally, bucket_of,
};
use wasm_bindgen::JsValue;
use worker::{Delay, Env, Result};

use crate::env::clock::now_ms;

/// How long counted answers wait to be written together (as the jobs index's rows).
const SAVINGS_FLUSH_MS: u64 = 200;

const ADD_SAVED: &str = "INSERT INTO savings (tenant, model, kind, bucket_ms, answers, tokens, cost_usd)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
     ON CONFLICT (tenant, model, kind, bucket_ms) DO UPDATE SET answers = answers + excluded.answers,
         tokens = tokens + excluded.tokens, cost_usd = cost_usd + excluded.cost_usd";

thread_local! {
    /// Answers counted and not written yet.
    static PENDING: RefCell<Tally> = RefCell::new(Tally::default());
    /// A flush is scheduled: answers counted now go with it.
    static FLUSH_SCHEDULED: Cell<bool> = const { Cell::new(false) };
}

/// Counts one answer of `kind` given to `tenant` without an upstream call,
/// the call it did not repeat having used `spent`. Run it under
/// `wait_until`, never before the answer.
pub async fn count_saved(env: Env, tenant: String, kind: AnswerKind, spent: Spent) {
    PENDING.with(|tally| tally.borrow_mut().add(&tenant, kind, &spent, now_ms()));
    if FLUSH_SCHEDULED.with(|f| f.replace(true)) {
        return;
    }
    Delay::from(Duration::from_millis(SAVINGS_FLUSH_MS)).await;
    FLUSH_SCHEDULED.with(|f| f.set(false));
    let rows = PENDING.with(|tally| tally.borrow_mut().drain());
    if let Err(error) = write(&env, &rows).await {
        worker::console_warn!("onejob: counting {} savings rows failed (dropped): {error}", rows.len());
    }
}

async fn write(env: &Env, rows: &[SavedRow]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let db = super::database(env).await?;
    let add = db.prepare(ADD_SAVED);
    let statements = rows
        .iter()
        .map(|row| {
            add.clone().bind(&[
                row.tenant.as_str().into(),
                row.model.as_str().into(),
                row.kind.as_str().into(),
                JsValue::from(row.bucket_ms as f64),
                JsValue::from(row.answers as f64),
                JsValue::from(row.tokens as f64),
                JsValue::from(row.cost_usd),
            ])
        })
        .collect::<Result<Vec<_>>>()?;
    db.batch(statements).await?;
    Ok(())
}

/// Saved and spent from the start of `since_ms`'s hour (savings are kept
/// per hour: both sides cover the same hours), of one tenant with `tenant`,
/// per tenant, model and hour. The database sums (one batch of four
/// queries): a month of hours of many tenants stays a few rows here.
pub async fn savings(env: &Env, since_ms: u64, tenant: Option<&str>) -> Result<Report> {
    let db = super::database(env).await?;
    let params = [JsValue::from(bucket_of(since_ms) as f64), tenant.map_or(JsValue::NULL, JsValue::from)];
    let saved = |group: &str, names: &str| {
        format!(
            "SELECT {names}, kind, SUM(answers) AS answers, SUM(tokens) AS tokens, SUM(cost_usd) AS cost_usd
             FROM savings WHERE bucket_ms >= ?1 AND (?2 IS NULL OR tenant = ?2) GROUP BY {group}, kind"
        )
    };
    let spent = |group: &str, names: &str| {
        format!(
            "SELECT {names}, COUNT(*) AS jobs, SUM(tokens) AS tokens, SUM(cost_usd) AS cost_usd
             FROM jobs_index WHERE created_ms >= ?1 AND (?2 IS NULL OR tenant = ?2) GROUP BY {group}"
        )
    };
    let hour = format!("(created_ms / {BUCKET_MS}) * {BUCKET_MS}");
    let statements = [
        saved("tenant, model", "tenant, model, 0 AS bucket_ms"),
        spent("tenant, model", "tenant, model, 0 AS bucket_ms"),
        saved("bucket_ms", "'' AS tenant, '' AS model, bucket_ms"),
        spent("bucket_ms", &format!("'' AS tenant, NULL AS model, {hour} AS bucket_ms")),
    ]
    .iter()
    .map(|sql| db.prepare(sql).bind(&params))
    .collect::<Result<Vec<_>>>()?;
    // Read as JSON, as the costs are (one decoder in the wasm for every row shape).
    let mut rows = Vec::with_capacity(4);
    for result in db.batch(statements).await? {
        rows.push(result.results::<serde_json::Value>()?);
    }
    rows.resize_with(4, Vec::new); // never indexed past what came back
    let saved_rows = |rows: &[serde_json::Value]| rows.iter().filter_map(SavedRow::from_json).collect();
    let spent_rows = |rows: &[serde_json::Value]| rows.iter().filter_map(SpentRow::from_json).collect();
    Ok(Report::build(&Sums {
        saved_by_name: saved_rows(&rows[0]),
        spent_by_name: spent_rows(&rows[1]),
        saved_by_bucket: saved_rows(&rows[2]),
        spent_by_bucket: spent_rows(&rows[3]),
    }))
}
