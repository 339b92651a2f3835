//! The signed POST of every webhook onejob sends: dead-letter alerts and
//! job types' `webhook` effects. Receivers check `OneJob-Signature` (see
//! [`onejob_core::config::signature::webhook_signature`]) and keep
//! `Idempotency-Key` / `OneJob-Delivery`, the same on every retry.

use onejob_core::config::signature;
use worker::{Headers, Method, Request, RequestInit, Result};

use crate::env::clock::now_ms;

/// A POST of the JSON `body` to `url`, keyed by `delivery_id`, signed with
/// `secret` when there is one (its headers: [`signature::webhook_headers`]).
pub fn signed_post(url: &str, secret: Option<&str>, delivery_id: &str, body: &str) -> Result<Request> {
    let headers = Headers::new();
    for (name, value) in signature::webhook_headers(delivery_id, secret, now_ms(), body) {
        headers.set(name, &value)?;
    }
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(body.into()));
    Request::new_with_init(url, &init)
}
