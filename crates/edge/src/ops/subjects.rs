//! Job types' subjects (`once_per`): which job holds a subject, claimed
//! before the job runs, taken for good once it is answered, freed if it
//! ends without an answer.

use onejob_core::job_type::SubjectHold;
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::{Env, Result};

use crate::env::clock::now_ms;
use crate::error::EdgeError;

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
    let db = super::database(env).await?;
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
    let read = results.get(1).ok_or_else(|| EdgeError::broken("the subject's read returned nothing"))?;
    let holder = read.results::<SubjectRow>()?.into_iter().next();
    let user = claim.user.unwrap_or("");
    Ok(holder
        .filter(|row| {
            SubjectHold { key: &row.job_key, user: &row.user, answered: row.answered_ms.is_some() }
                .refuses(claim.key, user)
        })
        .map(|row| SubjectHolder { key: row.job_key, user: row.user }))
}

/// The subject's job got its answer: the subject is taken for good.
pub async fn subject_answered(env: &Env, claim: &SubjectClaim<'_>) -> Result<()> {
    super::database(env)
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
    super::database(env)
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
