//! Performs a job type's effects and asks their destinations for receipts.
//! The Ledger decides (with [`onejob_core::effect`]) what to do and records
//! what happened; this module only talks to D1 and to HTTP receivers.
//!
//! - `d1`: `INSERT … ON CONFLICT (source, delivery_id) DO NOTHING RETURNING *`.
//!   The row is the receipt; a row already there under the delivery id is
//!   compared by the payload's fingerprint, never overwritten.
//! - `webhook`: a signed POST with `Idempotency-Key: <delivery id>`; the
//!   receipt is the receiver's status and body, or `GET {receipt_url}/{id}`.
//!
//! [`webhook`] signs every webhook onejob sends (effects and the operators'
//! alerts). May import: `env`, `demo` (its inbox, one way) and the core.

pub mod webhook;

use std::cell::RefCell;
use std::collections::HashSet;
use std::time::Duration;

use futures_util::future::{Either, select};
use onejob_core::effect::{Effect, EffectSpec, EffectTarget, Found, Outcome, outcome_of_status};
use onejob_core::ledger::effects::Performed;
use serde_json::Value;
use wasm_bindgen::JsValue;
use worker::{D1Database, Delay, Env, Fetch};

use crate::demo;
use crate::env::clock::now_ms;
use crate::error::EdgeError;

/// How long a webhook receiver has to answer before the outcome is unknown.
const WEBHOOK_TIMEOUT_MS: u64 = 10_000;

/// Performs `effect` (claimed) as `spec` says; `source` names the job type.
/// (`spec` is `None` only if the deployment no longer defines the effect,
/// which the core's machine never performs: then nothing is sent.)
pub async fn perform(env: &Env, spec: Option<&EffectSpec>, effect: &Effect, source: &str) -> Performed {
    let Some(spec) = spec else {
        return Performed::Outcome(Outcome::Permanent {
            status: None,
            detail: "its job type no longer defines it".into(),
        });
    };
    match &spec.target {
        EffectTarget::D1 { database, table, .. } => match insert_row(env, database, table, effect, source).await {
            Ok(Some(row)) => Performed::Outcome(Outcome::Done(row)),
            // The row was there already: the destination tells what it holds.
            Ok(None) => Performed::AlreadyThere(find_row(env, database, table, effect, source).await),
            // A failed call may still have committed: ask before writing again.
            Err(error) => Performed::Outcome(Outcome::Unknown { detail: format!("the database call failed: {error}") }),
        },
        EffectTarget::Inbox { .. } => match demo::deliver_mail(env, &effect.delivery_id, &effect.payload).await {
            Ok(receipt) => Performed::Outcome(Outcome::Done(receipt)),
            Err(error) => Performed::Outcome(Outcome::Unknown { detail: format!("the demo inbox failed: {error}") }),
        },
        EffectTarget::Webhook { url, secret, .. } => {
            Performed::Outcome(post(url, secret.as_deref(), &effect.delivery_id, &effect.payload).await)
        }
    }
}

/// What the destination holds under `effect`'s delivery id.
pub async fn ask(env: &Env, spec: Option<&EffectSpec>, effect: &Effect, source: &str) -> Found {
    let Some(spec) = spec else { return Found::NoReceiptSource };
    match &spec.target {
        EffectTarget::D1 { database, table, .. } => find_row(env, database, table, effect, source).await,
        EffectTarget::Inbox { receipts: true, .. } => match demo::mail_receipt(env, &effect.delivery_id).await {
            Ok(Some(receipt)) => Found::Same(receipt),
            Ok(None) => Found::Absent,
            Err(error) => Found::CouldNotAsk { detail: error.to_string() },
        },
        EffectTarget::Webhook { receipt_url: Some(url), .. } => receipt(url, &effect.delivery_id).await,
        EffectTarget::Webhook { receipt_url: None, .. } | EffectTarget::Inbox { receipts: false, .. } => {
            Found::NoReceiptSource
        }
    }
}

thread_local! {
    /// The (database, table) pairs this isolate has created: once each, not
    /// one more D1 round trip per attempt.
    static TABLES_READY: RefCell<HashSet<(String, String)>> = RefCell::new(HashSet::new());
}

async fn table_ready(db: &D1Database, database: &str, table: &str, effect: &Effect) -> worker::Result<()> {
    let pair = (database.to_owned(), table.to_owned());
    if TABLES_READY.with(|ready| ready.borrow().contains(&pair)) {
        return Ok(());
    }
    // Tables and columns come from the job type, checked as SQL names when
    // it was read (onejob_core::job_type::is_sql_name); never from a request.
    let columns: String = payload_columns(effect).iter().map(|c| format!(", \"{c}\"")).collect();
    let create = format!(
        "CREATE TABLE IF NOT EXISTS \"{table}\" (source TEXT NOT NULL, delivery_id TEXT NOT NULL, \
         fingerprint TEXT NOT NULL, written_ms INTEGER NOT NULL{columns}, PRIMARY KEY (source, delivery_id))"
    );
    db.exec(&create).await?;
    TABLES_READY.with(|ready| ready.borrow_mut().insert(pair));
    Ok(())
}

fn payload_columns(effect: &Effect) -> Vec<String> {
    effect.payload.as_object().map(|row| row.keys().cloned().collect()).unwrap_or_default()
}

/// Inserts the row; `Some(row)` when this call wrote it, `None` when a row
/// was there already.
async fn insert_row(
    env: &Env,
    database: &str,
    table: &str,
    effect: &Effect,
    source: &str,
) -> worker::Result<Option<Value>> {
    let db = env.d1(database)?;
    table_ready(&db, database, table, effect).await?;
    let columns = payload_columns(effect);
    // Names are quoted: a column may be called `from` or `order`.
    let names: String = columns.iter().map(|c| format!(", \"{c}\"")).collect();
    let marks: String = (0..columns.len()).map(|i| format!(", ?{}", i + 5)).collect();
    let sql = format!(
        "INSERT INTO \"{table}\" (source, delivery_id, fingerprint, written_ms{names}) VALUES (?1, ?2, ?3, ?4{marks}) \
         ON CONFLICT (source, delivery_id) DO NOTHING RETURNING *"
    );
    let mut args: Vec<JsValue> = vec![
        source.into(),
        effect.delivery_id.as_str().into(),
        effect.fingerprint.as_str().into(),
        JsValue::from(now_ms() as f64),
    ];
    args.extend(columns.iter().map(|c| sql_value(effect.payload.get(c).unwrap_or(&Value::Null))));
    let rows = db.prepare(&sql).bind(&args)?.all().await?.results::<Value>()?;
    Ok(rows.into_iter().next())
}

async fn find_row(env: &Env, database: &str, table: &str, effect: &Effect, source: &str) -> Found {
    let found = async {
        let db = env.d1(database)?;
        table_ready(&db, database, table, effect).await?;
        let sql = format!("SELECT * FROM \"{table}\" WHERE source = ?1 AND delivery_id = ?2");
        db.prepare(&sql).bind(&[source.into(), effect.delivery_id.as_str().into()])?.first::<Value>(None).await
    };
    match found.await {
        Ok(Some(row)) => match row.get("fingerprint").and_then(Value::as_str) {
            Some(stored) if stored == effect.fingerprint => Found::Same(row),
            stored => Found::Different { stored_fingerprint: stored.unwrap_or_default().to_owned() },
        },
        Ok(None) => Found::Absent,
        Err(error) => Found::CouldNotAsk { detail: format!("the database call failed: {error}") },
    }
}

/// A payload value as a D1 parameter (objects and lists as JSON text).
fn sql_value(value: &Value) -> JsValue {
    match value {
        Value::Null => JsValue::NULL,
        Value::Bool(b) => JsValue::from(i32::from(*b)),
        Value::Number(n) => JsValue::from(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => JsValue::from(s.as_str()),
        other => JsValue::from(other.to_string()),
    }
}

/// POSTs the payload (see [`crate::effects::webhook::signed_post`]): `OneJob-Signature:
/// sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`.
async fn post(url: &str, secret: Option<&str>, delivery_id: &str, payload: &Value) -> Outcome {
    let body = payload.to_string();
    let sent = async {
        let mut response =
            Fetch::Request(crate::effects::webhook::signed_post(url, secret, delivery_id, &body)?).send().await?;
        let status = response.status_code();
        let text = response.text().await.unwrap_or_default();
        Ok::<_, worker::Error>((status, text))
    };
    let timeout = Delay::from(Duration::from_millis(WEBHOOK_TIMEOUT_MS));
    match select(Box::pin(sent), timeout).await {
        Either::Left((Ok((status, text)), _)) => outcome_of_status(status, bounded_receipt(text)),
        // The request may have arrived: the receipt (or an operator) tells.
        Either::Left((Err(error), _)) => {
            Outcome::Unknown { detail: format!("the receiver could not be reached: {error}") }
        }
        Either::Right(_) => {
            Outcome::Unknown { detail: format!("the receiver did not answer in {WEBHOOK_TIMEOUT_MS} ms") }
        }
    }
}

/// `GET {receipt_url}/{delivery id}`: 200 it arrived, 404 it did not.
async fn receipt(receipt_url: &str, delivery_id: &str) -> Found {
    let url = format!("{}/{}", receipt_url.trim_end_matches('/'), percent_encode(delivery_id));
    let asked = async {
        let mut response =
            Fetch::Url(url.parse().map_err(|_| EdgeError::Malformed("the receipt URL".into()))?).send().await?;
        let status = response.status_code();
        let text = response.text().await.unwrap_or_default();
        Ok::<_, worker::Error>((status, text))
    };
    match select(Box::pin(asked), Delay::from(Duration::from_millis(WEBHOOK_TIMEOUT_MS))).await {
        Either::Left((Ok((200..=299, text)), _)) => Found::Same(bounded_receipt(text)),
        Either::Left((Ok((404 | 410, _)), _)) => Found::Absent,
        Either::Left((Ok((status, _)), _)) => {
            Found::CouldNotAsk { detail: format!("the receipt URL answered {status}") }
        }
        Either::Left((Err(error), _)) => Found::CouldNotAsk { detail: error.to_string() },
        Either::Right(_) => Found::CouldNotAsk { detail: "the receipt URL did not answer".into() },
    }
}

/// How much of a receiver's answer an effect keeps as its receipt.
const MAX_RECEIPT_BYTES: usize = 4_096;

/// A receiver's answer as a receipt: its JSON, or (too long, or not JSON)
/// the start of its text.
fn bounded_receipt(text: String) -> Value {
    if text.len() <= MAX_RECEIPT_BYTES
        && let Ok(json) = serde_json::from_str(&text)
    {
        return json;
    }
    Value::String(text.chars().take(MAX_RECEIPT_BYTES / 2).collect())
}

/// Escapes everything but unreserved characters (a delivery id holds `:`).
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
