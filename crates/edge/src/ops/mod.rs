//! The operators' index in D1: dead letters (one row per dead background
//! job, grouped by cause for the console and for replays), the alerts they
//! raised, the jobs index, the savings (answers given without an upstream
//! call), job types' subjects, and keyed operator requests (a replay sent
//! twice is answered, not done, twice).
//! The Ledgers stay the authority on every job; this is what operators
//! search. Tables are created on first use in each isolate ([`database`]).
//!
//! Also what leaves the worker for operators' own tools: OpenTelemetry
//! traces of job requests ([`telemetry`], OTLP/HTTP to a collector).
//!
//! May import: `env`, `api` (the Ledger's records of a job), `effects` (the
//! signed webhook of an alert) and the core.

mod alerts;
mod dead_letters;
mod index;
mod requests;
mod savings;
mod subjects;
pub mod telemetry;

pub use alerts::{alert_if_due, budget_alert};
pub use dead_letters::{dead_letters, mark_replayed, record_dead_letter};
pub use index::{costs, index_job, jobs};
pub use requests::{done_request, remember_request};
pub use savings::{count_saved, savings};
pub use subjects::{SubjectClaim, claim_subject, release_subject, subject_answered};

use std::cell::Cell;

use worker::{D1Database, Env, Result};

use crate::env::binding;

thread_local! {
    static TABLES_READY: Cell<bool> = const { Cell::new(false) };
}

/// The operators' database, its tables created on first use in this isolate.
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
                "CREATE TABLE IF NOT EXISTS savings (
                    tenant TEXT NOT NULL,
                    model TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    bucket_ms INTEGER NOT NULL,
                    answers INTEGER NOT NULL,
                    tokens INTEGER NOT NULL,
                    cost_usd REAL NOT NULL,
                    PRIMARY KEY (tenant, model, kind, bucket_ms)
                )",
            ),
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
