//! The signed POST of every webhook onejob sends: dead-letter alerts and
//! job types' `webhook` effects. Receivers check `OneJob-Signature` (see
//! [`onejob_core::signature::webhook_signature`]) and keep
//! `Idempotency-Key` / `OneJob-Delivery`, the same on every retry.

use onejob_core::signature;
use worker::{Headers, Method, Request, RequestInit, Result};

use crate::env::clock::now_ms;

/// A POST of the JSON `body` to `url`, keyed by `delivery_id`, signed with
/// `secret` when there is one.
pub fn signed_post(url: &str, secret: Option<&str>, delivery_id: &str, body: &str) -> Result<Request> {
    let headers = Headers::new();
    headers.set("Content-Type", "application/json")?;
    headers.set("Idempotency-Key", delivery_id)?;
    headers.set("OneJob-Delivery", delivery_id)?;
    if let Some(secret) = secret {
        let timestamp_s = now_ms() / 1000;
        headers.set("OneJob-Timestamp", &timestamp_s.to_string())?;
        headers
            .set("OneJob-Signature", &signature::webhook_signature(secret.as_bytes(), timestamp_s, body.as_bytes()))?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(body.into()));
    Request::new_with_init(url, &init)
}
