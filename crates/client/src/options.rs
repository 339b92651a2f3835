//! `new OneJob(options)`: reading and validating the options object.

use js_sys::{Function, Reflect};
use onejob_core::backoff::budget::{BudgetConfig, BudgetError};
use onejob_core::backoff::{Backoff, BackoffError, Jitter};
use onejob_core::settings::defaults;
use wasm_bindgen::{JsCast, JsValue};

use crate::js::{self, error};
use crate::store::IntentStore;

/// How the SDK retries one intent.
pub struct RetryPolicy {
    /// Requests per `fetch()` call, the first included.
    pub max_attempts: u32,
    pub backoff: Backoff,
    /// The longest `Retry-After` honoured.
    pub retry_after_cap_ms: u64,
    pub budget: BudgetConfig,
    /// The longest a send waits, in all, for the browser to be back online.
    pub offline_wait_ms: u64,
}

pub struct Options {
    pub endpoint: Option<String>,
    pub token: Option<String>,
    pub store: IntentStore,
    pub retry: RetryPolicy,
    pub on_event: Option<Function>,
    pub retention_ms: u64,
}

/// Reads `options`; a wrong value is a `OneJobConfigError` naming the field.
pub fn parse(options: &JsValue) -> Result<Options, JsValue> {
    let get = |obj: &JsValue, name: &str| -> JsValue {
        if obj.is_object() {
            Reflect::get(obj, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED)
        } else {
            JsValue::UNDEFINED
        }
    };
    let string = |obj: &JsValue, name: &str| -> Result<Option<String>, JsValue> {
        let value = get(obj, name);
        if value.is_undefined() || value.is_null() {
            return Ok(None);
        }
        value.as_string().map(Some).ok_or_else(|| config_error(&[name, " must be a string"].concat()))
    };
    let number = |obj: &JsValue, name: &str, default: u64, min: u64| -> Result<u64, JsValue> {
        let value = get(obj, name);
        if value.is_undefined() {
            return Ok(default);
        }
        match value.as_f64() {
            Some(n) if n.is_finite() && n >= min as f64 && n.fract() == 0.0 => Ok(n as u64),
            _ => Err(config_error(&[name, " must be a whole number ≥ ", &js::digits(min)].concat())),
        }
    };

    let store = match string(options, "storage")?.as_deref() {
        None | Some("auto") => IntentStore::auto(),
        Some("local") => IntentStore::local()
            .ok_or_else(|| config_error("storage \"local\": this runtime has no usable localStorage"))?,
        Some("memory") => IntentStore::memory(),
        Some(other) => {
            return Err(config_error(
                &["storage must be \"auto\", \"local\" or \"memory\", not \"", other, "\""].concat(),
            ));
        }
    };
    let on_event = match get(options, "onEvent") {
        v if v.is_undefined() || v.is_null() => None,
        v => Some(v.dyn_into::<Function>().map_err(|_| config_error("onEvent must be a function"))?),
    };
    let retry = get(options, "retry");
    let budget = get(&retry, "budget");
    let backoff = Backoff::new(number(&retry, "baseMs", 500, 1)?, number(&retry, "capMs", 20_000, 1)?, Jitter::Full)
        .map_err(|e| {
            config_error(match e {
                BackoffError::ZeroBase => "retry: baseMs must be at least 1 ms",
                BackoffError::CapBelowBase { .. } => "retry: capMs must be at least baseMs",
            })
        })?;
    let budget = BudgetConfig::new(
        number(&budget, "capacity", 500, 1)? as u32,
        number(&budget, "retryCost", 5, 1)? as u32,
        number(&budget, "timeoutRetryCost", 10, 1)? as u32,
        number(&budget, "successRefund", 1, 0)? as u32,
    )
    .map_err(|e| {
        config_error(match e {
            BudgetError::FreeRetries => "retry.budget: a retry must cost at least one token",
            BudgetError::CostAboveCapacity { .. } => "retry.budget: a retry costs more tokens than the budget holds",
        })
    })?;
    Ok(Options {
        endpoint: string(options, "endpoint")?.map(|e| e.trim_end_matches('/').to_owned()),
        token: string(options, "token")?,
        store,
        retry: RetryPolicy {
            max_attempts: number(&retry, "maxAttempts", 4, 1)? as u32,
            backoff,
            retry_after_cap_ms: number(&retry, "retryAfterCapMs", 60_000, 0)?,
            budget,
            offline_wait_ms: number(&retry, "offlineWaitMs", 300_000, 0)?,
        },
        on_event,
        // The gateway's default retention: a key is remembered as long as the gateway keeps its job.
        retention_ms: number(options, "retentionMs", defaults::RETENTION_MS, 1)?,
    })
}

pub fn config_error(message: &str) -> JsValue {
    error("OneJobConfigError", &["onejob: ", message].concat())
}
