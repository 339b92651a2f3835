//! Performs a job type's effects and asks their destinations for receipts.
//! The Ledger decides (with [`onejob_core::job_type::effect`]) what to do and records
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
use onejob_core::job_type::effect::receipt::{self, Answered, SqlParam, WEBHOOK_TIMEOUT_MS, sql};
use onejob_core::job_type::effect::{Effect, EffectSpec, EffectTarget, Found, ReceiptSource};
use onejob_core::ledger::effects::run::Performed;
use serde_json::Value;
use wasm_bindgen::JsValue;
use worker::{D1Database, Delay, Env, Fetch};

use crate::demo;
use crate::env::clock::now_ms;
use crate::error::EdgeError;

/// Performs `effect` (claimed) as `spec` says; `source` names the job type.
/// (`spec` is `None` only if the deployment no longer defines the effect,
/// which the core's machine never performs: then nothing is sent.)
pub async fn perform(env: &Env, spec: Option<&EffectSpec>, effect: &Effect, source: &str) -> Performed {
    let Some(spec) = spec else { return Performed::Outcome(receipt::no_longer_defined()) };
    match &spec.target {
        EffectTarget::D1 { database, table, .. } => {
            match receipt::outcome_of_insert(insert_row(env, database, table, effect, source).await) {
                Some(outcome) => Performed::Outcome(outcome),
                // The row was there already: the destination tells what it holds.
                None => Performed::AlreadyThere(find_row(env, database, table, effect, source).await),
            }
        }
        EffectTarget::Inbox { .. } => Performed::Outcome(receipt::outcome_of_inbox(
            demo::deliver_mail(env, &effect.delivery_id, &effect.payload).await,
        )),
        EffectTarget::Webhook { url, secret, .. } => {
            Performed::Outcome(post(url, secret.as_deref(), &effect.delivery_id, &effect.payload).await)
        }
    }
}

/// What the destination holds under `effect`'s delivery id, asked where it
/// keeps its receipts ([`EffectTarget::receipt_source`]).
pub async fn ask(env: &Env, spec: Option<&EffectSpec>, effect: &Effect, source: &str) -> Found {
    let Some(spec) = spec else { return Found::NoReceiptSource };
    match spec.target.receipt_source() {
        ReceiptSource::Row { database, table } => find_row(env, database, table, effect, source).await,
        ReceiptSource::Inbox => receipt::found_of_lookup(demo::mail_receipt(env, &effect.delivery_id).await, None),
        ReceiptSource::Url(url) => receipt(url, &effect.delivery_id).await,
        ReceiptSource::None => Found::NoReceiptSource,
    }
}

thread_local! {
    /// The (database, table) pairs this isolate has created: once each, not
    /// one more D1 round trip per attempt.
    static TABLES_READY: RefCell<HashSet<(String, String)>> = RefCell::new(HashSet::new());
}

/// The D1 database `database`, its effect `table` created if this isolate
/// has not yet.
async fn table_ready(env: &Env, database: &str, table: &str, effect: &Effect) -> worker::Result<D1Database> {
    let db = env.d1(database)?;
    let pair = (database.to_owned(), table.to_owned());
    if TABLES_READY.with(|ready| ready.borrow().contains(&pair)) {
        return Ok(db);
    }
    db.exec(&sql::create(table, &receipt::payload_columns(&effect.payload))).await?;
    TABLES_READY.with(|ready| ready.borrow_mut().insert(pair));
    Ok(db)
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
    let db = table_ready(env, database, table, effect).await?;
    let columns = receipt::payload_columns(&effect.payload);
    let mut args: Vec<JsValue> = vec![
        source.into(),
        effect.delivery_id.as_str().into(),
        effect.fingerprint.as_str().into(),
        JsValue::from(now_ms() as f64),
    ];
    args.extend(receipt::sql_params(&effect.payload, &columns).into_iter().map(sql_value));
    let rows = db.prepare(sql::insert(table, &columns)).bind(&args)?.all().await?.results::<Value>()?;
    Ok(rows.into_iter().next())
}

async fn find_row(env: &Env, database: &str, table: &str, effect: &Effect, source: &str) -> Found {
    let found = async {
        let db = table_ready(env, database, table, effect).await?;
        let args = [source.into(), effect.delivery_id.as_str().into()];
        db.prepare(sql::select(table)).bind(&args)?.first::<Value>(None).await
    };
    receipt::found_of_row(found.await, &effect.fingerprint)
}

/// A payload value as a D1 parameter ([`receipt::sql_params`] decides which).
fn sql_value(param: SqlParam) -> JsValue {
    match param {
        SqlParam::Null => JsValue::NULL,
        SqlParam::Int(n) => JsValue::from(n),
        SqlParam::Number(n) => JsValue::from(n),
        SqlParam::Text(text) => JsValue::from(text),
    }
}

/// POSTs the payload (see [`crate::effects::webhook::signed_post`]): `OneJob-Signature:
/// sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`.
async fn post(
    url: &str,
    secret: Option<&str>,
    delivery_id: &str,
    payload: &Value,
) -> onejob_core::job_type::effect::Outcome {
    let body = payload.to_string();
    let request = crate::effects::webhook::signed_post(url, secret, delivery_id, &body);
    receipt::outcome_of_post(answered(async { Fetch::Request(request?).send().await }).await)
}

/// `GET {receipt_url}/{delivery id}`: 200 it arrived, 404 it did not.
async fn receipt(receipt_url: &str, delivery_id: &str) -> Found {
    let url = receipt::receipt_url(receipt_url, delivery_id);
    let sent =
        async { Fetch::Url(url.parse().map_err(|_| EdgeError::Malformed("the receipt URL".into()))?).send().await };
    receipt::found_of_receipt(answered(sent).await)
}

/// A receiver's answer (its status and text), its failure, or no answer
/// within [`WEBHOOK_TIMEOUT_MS`].
async fn answered(sent: impl std::future::Future<Output = worker::Result<worker::Response>>) -> Answered {
    let read = async {
        let mut response = sent.await?;
        Ok::<_, worker::Error>((response.status_code(), response.text().await.unwrap_or_default()))
    };
    let within = match select(Box::pin(read), Delay::from(Duration::from_millis(WEBHOOK_TIMEOUT_MS))).await {
        Either::Left((read, _)) => Some(read),
        Either::Right(_) => None,
    };
    Answered::of(within)
}
