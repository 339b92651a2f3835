//! Dead letters: one row per dead background job (recorded by the dead-letter
//! queue's consumer), listed and grouped by cause for the console and for
//! replays, and marked replayed when an operator replays the job.

use serde::{Deserialize, Serialize};
use wasm_bindgen::JsValue;
use worker::{Env, Result};

use crate::api::handoff::{DeadFacts, JobMessage};
use crate::env::clock::now_ms;

const HOUR_MS: u64 = 3_600_000;

/// Records (or refreshes) a dead job's entry.
pub async fn record_dead_letter(env: &Env, job: &JobMessage, facts: &DeadFacts) -> Result<()> {
    let db = super::database(env).await?;
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
    let db = super::database(env).await?;
    db.prepare("UPDATE dead_letters SET replayed_ms = ?3 WHERE tenant = ?1 AND job_key = ?2 AND user = ?4")
        .bind(&[tenant.into(), key.into(), JsValue::from(now_ms() as f64), user.unwrap_or("").into()])?
        .run()
        .await?;
    Ok(())
}
