//! Dead letters: one row per dead background job (recorded by the dead-letter
//! queue's consumer), listed and grouped by cause for the console and for
//! replays, and marked replayed when an operator replays the job.

pub use onejob_core::operators::dead_letters::DeadLetter;
use wasm_bindgen::JsValue;
use worker::{Env, Result};

use crate::api::handoff::{DeadFacts, JobMessage};
use crate::env::clock::now_ms;

/// Records (or refreshes) a dead job's entry; returns when (its
/// `last_seen_ms`: the window its alert is decided in, see [`super::alert_if_due`]).
pub async fn record_dead_letter(env: &Env, job: &JobMessage, facts: &DeadFacts) -> Result<u64> {
    let db = super::database(env).await?;
    let recorded_ms = now_ms();
    let now = recorded_ms as f64;
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
    Ok(recorded_ms)
}

/// The dead letters not yet replayed, newest first (of one tenant, or of
/// all with `None`), at most `limit`.
pub async fn dead_letters(
    env: &Env,
    tenant: Option<&str>,
    error_class: Option<&str>,
    limit: u32,
) -> Result<Vec<DeadLetter>> {
    let db = super::database(env).await?;
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

/// Marks a dead letter replayed (it leaves the list until the job dies again).
pub async fn mark_replayed(env: &Env, tenant: &str, user: Option<&str>, key: &str) -> Result<()> {
    let db = super::database(env).await?;
    db.prepare("UPDATE dead_letters SET replayed_ms = ?3 WHERE tenant = ?1 AND job_key = ?2 AND user = ?4")
        .bind(&[tenant.into(), key.into(), JsValue::from(now_ms() as f64), user.unwrap_or("").into()])?
        .run()
        .await?;
    Ok(())
}
