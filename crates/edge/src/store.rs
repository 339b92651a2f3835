//! The Ledger's SQLite tables: the job record and one stored response per
//! attempt. SQL calls are synchronous inside a Durable Object, so a read,
//! a transition and its write happen with no other request in between.

use onejob_core::job::Job;
use serde::Deserialize;
use worker::{SqlStorage, SqlStorageValue};

/// A response as stored, and as replayed byte for byte.
#[derive(Debug, Clone)]
pub struct StoredResponse {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl StoredResponse {
    /// An error of onejob's own (no upstream response to keep), as problem+json.
    pub fn problem(problem: &onejob_core::protocol::Problem) -> Self {
        Self {
            status: problem.status,
            content_type: onejob_core::protocol::PROBLEM_CONTENT_TYPE.into(),
            body: problem.to_json().into_bytes(),
        }
    }
}

pub struct Store {
    sql: SqlStorage,
}

#[derive(Deserialize)]
struct JobRow {
    record: String,
}

#[derive(Deserialize)]
struct ResponseRow {
    status: i64,
    content_type: String,
    body: serde_bytes_compat::Bytes,
}

/// `serde_wasm_bindgen` hands a BLOB over as a byte sequence.
mod serde_bytes_compat {
    use serde::{Deserialize, Deserializer};

    pub struct Bytes(pub Vec<u8>);

    impl<'de> Deserialize<'de> for Bytes {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            Vec::<u8>::deserialize(deserializer).map(Bytes)
        }
    }
}

impl Store {
    pub fn new(sql: SqlStorage) -> Self {
        Self { sql }
    }

    /// Creates the tables if they do not exist yet.
    pub fn create_tables(&self) -> worker::Result<()> {
        self.sql.exec(
            "CREATE TABLE IF NOT EXISTS job (
                id INTEGER PRIMARY KEY CHECK (id = 1),
                idempotency_key TEXT NOT NULL,
                record TEXT NOT NULL
            )",
            None,
        )?;
        self.sql.exec(
            "CREATE TABLE IF NOT EXISTS response (
                attempt INTEGER PRIMARY KEY,
                status INTEGER NOT NULL,
                content_type TEXT NOT NULL,
                body BLOB NOT NULL
            )",
            None,
        )?;
        Ok(())
    }

    pub fn load_job(&self) -> worker::Result<Option<Job>> {
        let rows: Vec<JobRow> = self.sql.exec("SELECT record FROM job WHERE id = 1", None)?.to_array()?;
        match rows.into_iter().next() {
            None => Ok(None),
            Some(row) => serde_json::from_str(&row.record)
                .map(Some)
                .map_err(|e| worker::Error::RustError(format!("stored job record is unreadable: {e}"))),
        }
    }

    pub fn save_job(&self, key: &str, job: &Job) -> worker::Result<()> {
        let record = serde_json::to_string(job).map_err(|e| worker::Error::RustError(e.to_string()))?;
        self.sql.exec(
            "INSERT INTO job (id, idempotency_key, record) VALUES (1, ?, ?)
             ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            vec![SqlStorageValue::String(key.to_owned()), SqlStorageValue::String(record)],
        )?;
        Ok(())
    }

    pub fn save_response(&self, attempt: u32, response: &StoredResponse) -> worker::Result<()> {
        self.sql.exec(
            "INSERT OR REPLACE INTO response (attempt, status, content_type, body) VALUES (?, ?, ?, ?)",
            vec![
                SqlStorageValue::Integer(i64::from(attempt)),
                SqlStorageValue::Integer(i64::from(response.status)),
                SqlStorageValue::String(response.content_type.clone()),
                SqlStorageValue::Blob(response.body.clone()),
            ],
        )?;
        Ok(())
    }

    pub fn load_response(&self, attempt: u32) -> worker::Result<Option<StoredResponse>> {
        let rows: Vec<ResponseRow> = self
            .sql
            .exec(
                "SELECT status, content_type, body FROM response WHERE attempt = ?",
                vec![SqlStorageValue::Integer(i64::from(attempt))],
            )?
            .to_array()?;
        Ok(rows.into_iter().next().map(|row| StoredResponse {
            status: u16::try_from(row.status).unwrap_or(500),
            content_type: row.content_type,
            body: row.body.0,
        }))
    }

    pub fn delete_everything(&self) -> worker::Result<()> {
        self.sql.exec("DELETE FROM response", None)?;
        self.sql.exec("DELETE FROM job", None)?;
        Ok(())
    }
}
