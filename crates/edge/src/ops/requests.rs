//! Keyed operator requests: a replay or resolve sent twice is answered
//! twice and done once.

use wasm_bindgen::JsValue;
use worker::{Env, Result};

use crate::env::clock::now_ms;

/// The stored answer of an operator request already done, by its id.
pub async fn done_request(env: &Env, id: &str) -> Result<Option<String>> {
    let db = super::database(env).await?;
    db.prepare("SELECT response FROM operator_requests WHERE id = ?1")
        .bind(&[id.into()])?
        .first::<String>(Some("response"))
        .await
}

/// Keeps an operator request's answer, so the same request is answered again, not done again.
pub async fn remember_request(env: &Env, id: &str, response: &str) -> Result<()> {
    let db = super::database(env).await?;
    db.prepare("INSERT INTO operator_requests (id, response, at_ms) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO NOTHING")
        .bind(&[id.into(), response.into(), JsValue::from(now_ms() as f64)])?
        .run()
        .await?;
    Ok(())
}
