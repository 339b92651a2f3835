//! The demo's mail inbox: where the bundled triage job type's mail effect
//! goes when `MAIL_URL = "demo:inbox"` (the development default), so the
//! demo sends mail exactly once without a mail API. `/demo/inbox` lists it.

use serde_json::{Value, json};

// A webhook effect whose `url` (and `receipt_url`) is `demo:inbox`
// (`MAIL_URL = "demo:inbox"`; core reads it as `EffectTarget::Inbox`): mails
// go to a table of the TICKETS database, keyed by delivery id as a real mail
// API keys by `Idempotency-Key`, and `/demo/inbox` lists them.

thread_local! {
    /// This isolate created the inbox's table already.
    static INBOX_READY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The inbox's table (in the TICKETS database), created on first use in
/// this isolate.
pub async fn database(env: &worker::Env) -> worker::Result<worker::D1Database> {
    let db = env.d1(crate::env::binding::TICKETS)?;
    if !INBOX_READY.with(std::cell::Cell::get) {
        db.exec("CREATE TABLE IF NOT EXISTS demo_inbox (delivery_id TEXT PRIMARY KEY, payload TEXT NOT NULL, received_ms INTEGER NOT NULL)")
            .await?;
        INBOX_READY.with(|ready| ready.set(true));
    }
    Ok(db)
}

/// Delivers a mail to the demo inbox; its receipt.
pub async fn deliver_mail(env: &worker::Env, delivery_id: &str, payload: &Value) -> worker::Result<Value> {
    let db = database(env).await?;
    db.prepare("INSERT INTO demo_inbox (delivery_id, payload, received_ms) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING")
        .bind(&[delivery_id.into(), payload.to_string().into(), (crate::env::clock::now_ms() as f64).into()])?
        .run()
        .await?;
    Ok(json!({ "status": 202, "body": { "id": delivery_id } }))
}

/// The demo inbox's receipt for a delivery id, if it has the mail.
pub async fn mail_receipt(env: &worker::Env, delivery_id: &str) -> worker::Result<Option<Value>> {
    let db = database(env).await?;
    db.prepare("SELECT delivery_id, received_ms FROM demo_inbox WHERE delivery_id = ?1")
        .bind(&[delivery_id.into()])?
        .first::<Value>(None)
        .await
}
