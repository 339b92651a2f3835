//! Calls to Durable Objects by name: the one way this worker reaches a
//! job's Ledger, a provider's breaker or a usage meter.

use onejob_core::identity::key::{IdempotencyKey, StorageId};
use worker::{Env, Method, Request, RequestInit, Response, Result};

use crate::api::handoff::JobMessage;
use crate::api::ledger::LedgerCall;
use crate::env::binding;
use crate::error::EdgeError;

/// Sends `init` to `url` of the object named `name` in namespace `binding`.
pub async fn call(env: &Env, binding: &str, name: &str, url: &str, init: &RequestInit) -> Result<Response> {
    let stub = env.durable_object(binding)?.get_by_name(name)?;
    stub.fetch_with_request(Request::new_with_init(url, init)?).await
}

/// A `POST` of `body` (or a `GET` with none).
pub fn init(body: Option<String>) -> RequestInit {
    let mut init = RequestInit::new();
    match body {
        Some(body) => init.with_method(Method::Post).with_body(Some(body.into())),
        None => init.with_method(Method::Get),
    };
    init
}

/// Makes `call` to the Ledger that owns `storage_id`.
pub async fn ledger(env: &Env, storage_id: &StorageId, call: &LedgerCall) -> Result<Response> {
    let (url, body) = call.encode();
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_body(Some(js_sys::Uint8Array::from(body.as_slice()).into()));
    self::call(env, binding::LEDGER, storage_id.as_str(), &url, &init).await
}

/// Makes `call` to the Ledger of `job` (a tenant's or a user's).
pub async fn to_ledger(env: &Env, job: &JobMessage, call: &LedgerCall) -> Result<Response> {
    let key = IdempotencyKey::parse(&job.key).map_err(|e| EdgeError::Malformed(e.to_string()))?;
    ledger(env, &StorageId::of(&job.tenant, job.user.as_deref(), &key), call).await
}
