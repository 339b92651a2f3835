//! Per-deployment settings, read from `wrangler.toml` vars (or secrets) with
//! sane defaults. A malformed value is an operator error: the request gets a
//! 500 problem naming the variable, never a silently different behaviour.

use onejob_core::backoff::Backoff;
use onejob_core::job::{JobPolicy, UnknownPolicy};
use worker::Env;

/// Where upstream calls go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// The built-in demo provider (no network, no API key).
    Demo,
    /// An OpenAI-compatible API, e.g. `https://api.openai.com/v1`.
    Http { base_url: String },
}

/// Everything a deployment can tune.
#[derive(Debug, Clone)]
pub struct Config {
    pub upstream: Upstream,
    pub max_body_bytes: usize,
    pub coalesce_wait_ms: u64,
    pub upstream_timeout_ms: u64,
    pub retry_after_cap_ms: u64,
    pub backoff: Backoff,
    pub policy: JobPolicy,
}

/// Largest `Prefer: wait=N` honoured, so a duplicate cannot park a request forever.
pub const MAX_WAIT_MS: u64 = 120_000;

impl Config {
    /// Reads the configuration; `Err` names the variable that is wrong.
    pub fn from_env(env: &Env) -> Result<Self, String> {
        let upstream = match var(env, "UPSTREAM").as_deref() {
            None | Some("") | Some("demo") => Upstream::Demo,
            Some(url) if url.starts_with("http://") || url.starts_with("https://") => {
                Upstream::Http { base_url: url.trim_end_matches('/').to_owned() }
            }
            Some(other) => {
                return Err(format!("UPSTREAM must be \"demo\" or an http(s) base URL, not {other:?}"));
            }
        };
        let upstream_timeout_ms = number(env, "UPSTREAM_TIMEOUT_MS", 30_000)?;
        let unknown_policy = match var(env, "UNKNOWN_POLICY").as_deref() {
            None | Some("retry_after_lease") => UnknownPolicy::RetryAfterLease,
            Some("block") => UnknownPolicy::Block,
            Some(other) => {
                return Err(format!("UNKNOWN_POLICY must be retry_after_lease or block, not {other:?}"));
            }
        };
        // An attempt holds the job for its timeout plus slack for storage and
        // scheduling; past that the runtime must have lost it.
        let attempt_lease_ms = upstream_timeout_ms + 10_000;
        let policy = JobPolicy::new(
            number(env, "MAX_ATTEMPTS", 4)? as u32,
            attempt_lease_ms,
            number(env, "UNKNOWN_LEASE_MS", 60_000)?,
            number(env, "RETENTION_SECONDS", 86_400)?.saturating_mul(1000),
            unknown_policy,
        )
        .map_err(|e| format!("job policy: {e}"))?;
        let backoff = Backoff::new(
            number(env, "BACKOFF_BASE_MS", 250)?,
            number(env, "BACKOFF_CAP_MS", 10_000)?,
            Default::default(),
        )
        .map_err(|e| format!("BACKOFF_BASE_MS/BACKOFF_CAP_MS: {e}"))?;
        Ok(Self {
            upstream,
            max_body_bytes: number(env, "MAX_BODY_BYTES", 1024 * 1024)? as usize,
            coalesce_wait_ms: number(env, "COALESCE_WAIT_MS", 30_000)?.min(MAX_WAIT_MS),
            upstream_timeout_ms,
            retry_after_cap_ms: number(env, "RETRY_AFTER_CAP_MS", 60_000)?,
            backoff,
            policy,
        })
    }
}

fn var(env: &Env, name: &str) -> Option<String> {
    env.var(name).ok().map(|v| v.to_string())
}

fn number(env: &Env, name: &str, default: u64) -> Result<u64, String> {
    match var(env, name) {
        None => Ok(default),
        Some(text) => text.trim().parse().map_err(|_| format!("{name} must be a whole number, not {text:?}")),
    }
}
