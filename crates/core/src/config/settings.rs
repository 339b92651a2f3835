//! A deployment's settings, read from named variables (`wrangler.toml` vars
//! or secrets) with the defaults below. Every number has a range: a value
//! outside it, or one that does not parse, is a [`SettingsError`] naming the
//! variable and what it must be, never quoting the value (an operator who
//! pastes a secret into the wrong variable must not see it echoed anywhere).

use std::fmt;

use crate::config::alert::AlertPolicy;
use crate::config::result_cache::ResultCache;
use crate::identity::keyless::Keyless;
use crate::job::{JobPolicy, UnknownPolicy};
use crate::retry::backoff::{Backoff, Jitter};
use crate::retry::breaker::BreakerPolicy;
use crate::upstream::providers::{Providers, is_base_url};

/// The defaults, shared with the SDK where they must agree (retention).
pub mod defaults {
    /// `MAX_BODY_BYTES`: 1 MiB.
    pub const MAX_BODY_BYTES: u64 = 1024 * 1024;
    /// `COALESCE_WAIT_MS`: how long a duplicate waits for a running request.
    pub const COALESCE_WAIT_MS: u64 = 30_000;
    /// `UPSTREAM_TIMEOUT_MS`: per upstream call.
    pub const UPSTREAM_TIMEOUT_MS: u64 = 30_000;
    /// `UNKNOWN_LEASE_MS`: no new attempt this long after an unknown outcome.
    pub const UNKNOWN_LEASE_MS: u64 = 60_000;
    /// `MAX_ATTEMPTS`: attempts per job, across every layer.
    pub const MAX_ATTEMPTS: u64 = 4;
    /// `RETENTION_SECONDS`: 24 h.
    pub const RETENTION_SECONDS: u64 = 86_400;
    /// The same retention in milliseconds (the SDK remembers keys this long).
    pub const RETENTION_MS: u64 = RETENTION_SECONDS * 1000;
    /// `BACKOFF_BASE_MS`.
    pub const BACKOFF_BASE_MS: u64 = 250;
    /// `BACKOFF_CAP_MS`.
    pub const BACKOFF_CAP_MS: u64 = 10_000;
    /// `RETRY_AFTER_CAP_MS`: the longest `Retry-After` honoured.
    pub const RETRY_AFTER_CAP_MS: u64 = 60_000;
    /// `BREAKER_FAILURES`: consecutive failures that open a provider's breaker.
    pub const BREAKER_FAILURES: u64 = 5;
    /// `BREAKER_COOLDOWN_MS`: how long an open breaker skips its provider.
    pub const BREAKER_COOLDOWN_MS: u64 = 30_000;
    /// `OUTBOX_DELAY_MS`: a background job not run this long after its
    /// message was sent gets another.
    pub const OUTBOX_DELAY_MS: u64 = 5_000;
    /// `ALERT_THRESHOLD`: dead letters of one cause in a window before an alert.
    pub const ALERT_THRESHOLD: u64 = 10;
    /// `ALERT_WINDOW_MS`: 15 minutes.
    pub const ALERT_WINDOW_MS: u64 = 900_000;
    /// `KEYLESS_WINDOW_SECONDS`: how long an ended keyless job is replayed
    /// (`KEYLESS=window`).
    pub const KEYLESS_WINDOW_SECONDS: u64 = 60;
}

/// The longest `Prefer: wait=N` (and `COALESCE_WAIT_MS`) honoured, so a
/// duplicate cannot park a request forever.
pub const MAX_WAIT_MS: u64 = 120_000;

/// An attempt holds its job for the upstream timeout plus this slack for
/// storage and scheduling; past that the runtime must have lost it.
pub const ATTEMPT_LEASE_SLACK_MS: u64 = 10_000;

/// Everything a deployment can tune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `PROVIDERS` and `ROUTES`, or the single `UPSTREAM` (see
    /// [`crate::upstream::providers`]).
    pub providers: Providers,
    /// `BREAKER_FAILURES`, `BREAKER_COOLDOWN_MS`.
    pub breaker: BreakerPolicy,
    /// `OUTBOX_DELAY_MS`.
    pub outbox_delay_ms: u64,
    /// `ALERT_THRESHOLD`, `ALERT_WINDOW_MS`.
    pub alerts: AlertPolicy,
    /// `MAX_BODY_BYTES`: request bodies above it get a 413.
    pub max_body_bytes: u64,
    /// `COALESCE_WAIT_MS`.
    pub coalesce_wait_ms: u64,
    /// `UPSTREAM_TIMEOUT_MS`.
    pub upstream_timeout_ms: u64,
    /// `RETRY_AFTER_CAP_MS`.
    pub retry_after_cap_ms: u64,
    /// `BACKOFF_BASE_MS`, `BACKOFF_CAP_MS`: full jitter between attempts.
    pub backoff: Backoff,
    /// `MAX_ATTEMPTS`, `UNKNOWN_LEASE_MS`, `RETENTION_SECONDS`,
    /// `UNKNOWN_POLICY`, and the attempt lease they imply.
    pub policy: JobPolicy,
    /// `RESULT_CACHE`: when the gateway looks in KV for a finished result
    /// before it asks the Ledger (see [`ResultCache`]).
    pub result_cache: ResultCache,
    /// `KEYLESS` and `KEYLESS_WINDOW_SECONDS`: what a keyed route does with
    /// a request that carries no `Idempotency-Key` (see [`crate::identity::keyless`]).
    pub keyless: Keyless,
    /// `JOB_LOGS`: whether the Ledger prints a JSON line per job transition
    /// and attempt ([`crate::telemetry::log`]).
    pub job_logs: JobLogs,
}

/// `JOB_LOGS`: the job log lines, `off` (the default) or `json`.
///
/// Off unless asked for: each line is a `console.log` on the request path
/// (CPU in every first call) and a billed, capped line in Workers Logs, and
/// a deployment that never reads them should pay for neither. An operator
/// who wants them (Workers Logs, Logpush, a Tail Worker) sets `json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JobLogs {
    /// No job log lines.
    #[default]
    Off,
    /// One JSON line per job transition and per attempt.
    Json,
}

/// A variable that is malformed or out of range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The variable's name.
    pub name: &'static str,
    /// What it must be.
    pub expected: &'static str,
}

impl fmt::Display for SettingsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} must be {}", self.name, self.expected)
    }
}

impl std::error::Error for SettingsError {}

impl Settings {
    /// Reads the settings through `var` (a variable's value, if set).
    pub fn parse(var: &dyn Fn(&str) -> Option<String>) -> Result<Self, SettingsError> {
        const HOUR_MS: u64 = 3_600_000;
        let read = Reader { var };
        let providers = match read.text("PROVIDERS") {
            Some(list) => Providers::parse(&list, read.text("ROUTES").as_deref())
                .map_err(|e| SettingsError { name: e.name, expected: e.expected })?,
            None if read.text("ROUTES").is_some() => return Err(read.error("ROUTES", "set only with PROVIDERS")),
            None => match read.text("UPSTREAM").as_deref() {
                // Unset is an error, not the demo: a deployment that forgot
                // its provider must not answer every caller from the demo.
                None => {
                    return Err(read.error(
                        "UPSTREAM",
                        "set: \"demo\" (development) or the provider's http(s) base URL, or set PROVIDERS",
                    ));
                }
                Some("demo") => Providers::single(None),
                Some(url) if is_base_url(url) => Providers::single(Some(url.trim_end_matches('/'))),
                Some(_) => {
                    return Err(read.error(
                        "UPSTREAM",
                        "\"demo\" or an http(s) base URL with no credentials, query or fragment (the key is UPSTREAM_API_KEY)",
                    ));
                }
            },
        };
        let breaker = BreakerPolicy {
            failures: read.number("BREAKER_FAILURES", defaults::BREAKER_FAILURES, 0, 1_000, "0 to 1000")? as u32,
            cooldown_ms: read.number(
                "BREAKER_COOLDOWN_MS",
                defaults::BREAKER_COOLDOWN_MS,
                1,
                HOUR_MS,
                "1 to 3600000 (ms)",
            )?,
        };
        let unknown_policy = match read.text("UNKNOWN_POLICY").as_deref() {
            None | Some("retry_after_lease") => UnknownPolicy::RetryAfterLease,
            Some("block") => UnknownPolicy::Block,
            Some(_) => return Err(read.error("UNKNOWN_POLICY", "retry_after_lease or block")),
        };
        let result_cache = ResultCache::parse(read.text("RESULT_CACHE").as_deref())
            .ok_or_else(|| read.error("RESULT_CACHE", "retries, kv or off"))?;
        let upstream_timeout_ms =
            read.number("UPSTREAM_TIMEOUT_MS", defaults::UPSTREAM_TIMEOUT_MS, 1, HOUR_MS, "1 to 3600000 (ms)")?;
        let max_attempts = read.number("MAX_ATTEMPTS", defaults::MAX_ATTEMPTS, 1, 100, "1 to 100")?;
        let unknown_lease_ms =
            read.number("UNKNOWN_LEASE_MS", defaults::UNKNOWN_LEASE_MS, 1, 24 * HOUR_MS, "1 to 86400000 (ms)")?;
        let retention_s =
            read.number("RETENTION_SECONDS", defaults::RETENTION_SECONDS, 1, 30 * 86_400, "1 to 2592000 (30 days)")?;
        let policy = JobPolicy::new(
            max_attempts as u32,
            upstream_timeout_ms + ATTEMPT_LEASE_SLACK_MS,
            unknown_lease_ms,
            retention_s * 1000,
            unknown_policy,
        )
        .map_err(|_| read.error("RETENTION_SECONDS", "longer than UPSTREAM_TIMEOUT_MS + 10 s + UNKNOWN_LEASE_MS"))?;
        let backoff = Backoff::new(
            read.number("BACKOFF_BASE_MS", defaults::BACKOFF_BASE_MS, 1, HOUR_MS, "1 to 3600000 (ms)")?,
            read.number("BACKOFF_CAP_MS", defaults::BACKOFF_CAP_MS, 1, HOUR_MS, "1 to 3600000 (ms)")?,
            Jitter::Full,
        )
        .map_err(|_| read.error("BACKOFF_CAP_MS", "at least BACKOFF_BASE_MS"))?;
        let outbox_delay_ms =
            read.number("OUTBOX_DELAY_MS", defaults::OUTBOX_DELAY_MS, 100, HOUR_MS, "100 to 3600000 (ms)")?;
        let alerts = AlertPolicy {
            threshold: read.number("ALERT_THRESHOLD", defaults::ALERT_THRESHOLD, 0, 1_000_000, "0 to 1000000")? as u32,
            window_ms: read.number(
                "ALERT_WINDOW_MS",
                defaults::ALERT_WINDOW_MS,
                1_000,
                7 * 24 * HOUR_MS,
                "1000 to 604800000 (ms)",
            )?,
            format: match read.text("ALERT_FORMAT") {
                None => crate::config::alert::AlertFormat::OneJob,
                Some(name) => crate::config::alert::AlertFormat::from_name(&name)
                    .ok_or(read.error("ALERT_FORMAT", "onejob (signed JSON, the default) or slack"))?,
            },
            quota_share_permille: match read.text("QUOTA_ALERT_SHARE") {
                None => 800,
                Some(text) => crate::config::alert::parse_share(&text)
                    .ok_or(read.error("QUOTA_ALERT_SHARE", "a share from 0 (off) to 1, like 0.8"))?,
            },
        };
        // Read after the retention: a window cannot outlast the job it replays.
        let window_s = read.number(
            "KEYLESS_WINDOW_SECONDS",
            defaults::KEYLESS_WINDOW_SECONDS,
            1,
            retention_s,
            "1 to RETENTION_SECONDS (seconds: a window cannot outlast the job it replays)",
        )?;
        let keyless = match read.text("KEYLESS").as_deref() {
            None | Some("refuse") => Keyless::Refuse,
            Some("coalesce") => Keyless::Coalesce,
            Some("window") => Keyless::Window { window_ms: window_s * 1000 },
            Some(_) => return Err(read.error("KEYLESS", "refuse, coalesce or window")),
        };
        let job_logs = match read.text("JOB_LOGS").as_deref() {
            None | Some("off") => JobLogs::Off,
            Some("json") => JobLogs::Json,
            Some(_) => return Err(read.error("JOB_LOGS", "json or off")),
        };
        Ok(Self {
            keyless,
            job_logs,
            providers,
            breaker,
            outbox_delay_ms,
            alerts,
            max_body_bytes: read.number(
                "MAX_BODY_BYTES",
                defaults::MAX_BODY_BYTES,
                1,
                16 * 1024 * 1024,
                "1 to 16777216 (bytes)",
            )?,
            coalesce_wait_ms: read.number(
                "COALESCE_WAIT_MS",
                defaults::COALESCE_WAIT_MS,
                0,
                MAX_WAIT_MS,
                "0 to 120000 (ms)",
            )?,
            upstream_timeout_ms,
            retry_after_cap_ms: read.number(
                "RETRY_AFTER_CAP_MS",
                defaults::RETRY_AFTER_CAP_MS,
                0,
                HOUR_MS,
                "0 to 3600000 (ms)",
            )?,
            backoff,
            policy,
            result_cache,
        })
    }
}

struct Reader<'a> {
    var: &'a dyn Fn(&str) -> Option<String>,
}

impl Reader<'_> {
    /// The trimmed value; an empty one counts as unset.
    fn text(&self, name: &str) -> Option<String> {
        (self.var)(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
    }

    fn number(
        &self,
        name: &'static str,
        default: u64,
        min: u64,
        max: u64,
        expected: &'static str,
    ) -> Result<u64, SettingsError> {
        let Some(text) = self.text(name) else { return Ok(default) };
        // Digits only: no sign, no exponent, and no wrap-around (a value
        // past u64 fails to parse instead of becoming something small).
        let value = text.bytes().all(|b| b.is_ascii_digit()).then(|| text.parse::<u64>().ok()).flatten();
        value.filter(|v| (min..=max).contains(v)).ok_or(SettingsError { name, expected })
    }

    fn error(&self, name: &'static str, expected: &'static str) -> SettingsError {
        SettingsError { name, expected }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// `vars` exactly as given.
    fn parse_exactly(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        Settings::parse(&|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned()))
    }

    /// `vars` on the demo upstream unless they set UPSTREAM themselves (an
    /// unset UPSTREAM is an error of its own: see the next test).
    fn parse(vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        // find() takes the first entry: a case's own UPSTREAM wins.
        parse_exactly(&[vars, &[("UPSTREAM", "demo")]].concat())
    }

    #[test]
    fn no_upstream_is_an_error_not_the_demo() {
        for unset in [&[][..], &[("UPSTREAM", " ")][..]] {
            let error = parse_exactly(unset).unwrap_err();
            assert_eq!(error.name, "UPSTREAM");
            assert_eq!(
                error.to_string(),
                "UPSTREAM must be set: \"demo\" (development) or the provider's http(s) base URL, or set PROVIDERS"
            );
        }
        let providers = r#"[{"name": "a", "kind": "openai", "base_url": "https://a.example/v1"}]"#;
        assert_eq!(parse_exactly(&[("PROVIDERS", providers)]).unwrap().providers.get(0).name, "a", "PROVIDERS alone");
    }

    #[test]
    fn defaults_when_nothing_but_the_upstream_is_set() {
        let s = parse(&[]).unwrap();
        assert_eq!(s.providers, Providers::single(None));
        assert_eq!(s.breaker, BreakerPolicy { failures: 5, cooldown_ms: 30_000 });
        assert_eq!(s.max_body_bytes, 1_048_576);
        assert_eq!(s.coalesce_wait_ms, 30_000);
        assert_eq!(s.upstream_timeout_ms, 30_000);
        assert_eq!(s.policy.max_attempts(), 4);
        assert_eq!(s.policy.attempt_lease_ms(), 40_000);
        assert_eq!(s.policy.unknown_lease_ms(), 60_000);
        assert_eq!(s.policy.retention_ms(), 86_400_000);
        assert_eq!(s.policy.unknown_policy(), UnknownPolicy::RetryAfterLease);
        assert_eq!(s.retry_after_cap_ms, 60_000);
        assert_eq!(s.backoff, Backoff::new(250, 10_000, Jitter::Full).unwrap());
        assert_eq!(s.result_cache, ResultCache::Retries);
        assert_eq!(s.keyless, Keyless::Refuse);
    }

    #[test]
    fn keyless_modes_and_their_window() {
        assert_eq!(parse(&[("KEYLESS", "refuse")]).unwrap().keyless, Keyless::Refuse);
        assert_eq!(parse(&[("KEYLESS", "coalesce")]).unwrap().keyless, Keyless::Coalesce);
        assert_eq!(parse(&[("KEYLESS", " window ")]).unwrap().keyless, Keyless::Window { window_ms: 60_000 });
        let short = parse(&[("KEYLESS", "window"), ("KEYLESS_WINDOW_SECONDS", "2")]).unwrap();
        assert_eq!(short.keyless, Keyless::Window { window_ms: 2_000 });
        // The window is checked whatever the mode, and named when wrong.
        for bad in ["0", "-1", "1.5", "60s", "86401"] {
            let error = parse(&[("KEYLESS", "window"), ("KEYLESS_WINDOW_SECONDS", bad)]).unwrap_err();
            assert_eq!(error.name, "KEYLESS_WINDOW_SECONDS", "{bad}");
        }
        assert_eq!(parse(&[("KEYLESS_WINDOW_SECONDS", "0")]).unwrap_err().name, "KEYLESS_WINDOW_SECONDS");
        // No longer than the retention of the job it replays.
        let vars = [("KEYLESS", "window"), ("RETENTION_SECONDS", "3600"), ("KEYLESS_WINDOW_SECONDS", "3601")];
        assert_eq!(parse(&vars).unwrap_err().name, "KEYLESS_WINDOW_SECONDS");
        let vars = [("KEYLESS", "window"), ("RETENTION_SECONDS", "3600"), ("KEYLESS_WINDOW_SECONDS", "3600")];
        assert_eq!(parse(&vars).unwrap().keyless, Keyless::Window { window_ms: 3_600_000 });
        for bad in ["yes", "Window", "on", "off"] {
            let error = parse(&[("KEYLESS", bad)]).unwrap_err();
            assert_eq!(error.name, "KEYLESS", "{bad}");
            assert_eq!(error.to_string(), "KEYLESS must be refuse, coalesce or window");
        }
    }

    #[test]
    fn job_logs_are_off_unless_asked_for() {
        assert_eq!(parse(&[]).unwrap().job_logs, JobLogs::Off);
        assert_eq!(parse(&[("JOB_LOGS", "off")]).unwrap().job_logs, JobLogs::Off);
        assert_eq!(parse(&[("JOB_LOGS", " json ")]).unwrap().job_logs, JobLogs::Json);
        for bad in ["JSON", "on", "true", "text"] {
            let error = parse(&[("JOB_LOGS", bad)]).unwrap_err();
            assert_eq!(error.name, "JOB_LOGS", "{bad}");
            assert_eq!(error.to_string(), "JOB_LOGS must be json or off");
        }
    }

    #[test]
    fn values_are_read() {
        let s = parse(&[
            ("UPSTREAM", "https://api.example/v1/"),
            ("MAX_ATTEMPTS", "7"),
            ("UNKNOWN_POLICY", "block"),
            ("RESULT_CACHE", "off"),
            ("COALESCE_WAIT_MS", " 0 "),
        ])
        .unwrap();
        assert_eq!(s.providers, Providers::single(Some("https://api.example/v1")));
        assert_eq!(s.policy.max_attempts(), 7);
        assert_eq!(s.policy.unknown_policy(), UnknownPolicy::Block);
        assert_eq!(s.result_cache, ResultCache::Off);
        assert_eq!(s.coalesce_wait_ms, 0);
    }

    #[test]
    fn out_of_range_numbers_are_errors_not_wrapped_values() {
        let err = |name, value| parse(&[(name, value)]).unwrap_err();
        // 2^32 + 1 used to become 1 attempt.
        assert_eq!(err("MAX_ATTEMPTS", "4294967297").name, "MAX_ATTEMPTS");
        assert_eq!(err("MAX_ATTEMPTS", "0").name, "MAX_ATTEMPTS");
        // Past u64: an error, never a small number.
        assert_eq!(err("UPSTREAM_TIMEOUT_MS", "18446744073709551616").name, "UPSTREAM_TIMEOUT_MS");
        // u64::MAX would overflow timeout + slack.
        assert_eq!(err("UPSTREAM_TIMEOUT_MS", "18446744073709551615").name, "UPSTREAM_TIMEOUT_MS");
        assert_eq!(err("RETENTION_SECONDS", "18446744073709551615").name, "RETENTION_SECONDS");
        assert_eq!(err("COALESCE_WAIT_MS", "120001").name, "COALESCE_WAIT_MS");
        assert_eq!(err("MAX_BODY_BYTES", "-1").name, "MAX_BODY_BYTES");
        assert_eq!(err("BACKOFF_BASE_MS", "1e3").name, "BACKOFF_BASE_MS");
        assert_eq!(parse(&[("BACKOFF_BASE_MS", "500"), ("BACKOFF_CAP_MS", "100")]).unwrap_err().name, "BACKOFF_CAP_MS");
        assert_eq!(
            parse(&[("RETENTION_SECONDS", "60"), ("UPSTREAM_TIMEOUT_MS", "60000")]).unwrap_err().name,
            "RETENTION_SECONDS"
        );
    }

    #[test]
    fn upstream_urls_carry_no_secret_and_name_their_host() {
        for bad in [
            "https://user:sk-123@api.example/v1",
            "https://api.example/v1?api-key=sk-123",
            "ftp://x",
            "https://",
            "https://a b",
        ] {
            assert_eq!(parse(&[("UPSTREAM", bad)]).unwrap_err().name, "UPSTREAM", "{bad}");
        }
        let s = parse(&[("UPSTREAM", "https://api.example:8443/v1")]).unwrap();
        assert_eq!(s.providers.get(0).name, "api.example:8443");
    }

    #[test]
    fn providers_replace_the_single_upstream() {
        let providers = r#"[{"name": "a", "kind": "openai", "base_url": "https://a.example/v1"}]"#;
        let s = parse(&[("PROVIDERS", providers), ("UPSTREAM", "https://ignored.example/v1")]).unwrap();
        assert_eq!(s.providers.get(0).name, "a");
        assert_eq!(parse(&[("ROUTES", "{}")]).unwrap_err().name, "ROUTES");
        assert_eq!(parse(&[("PROVIDERS", "[")]).unwrap_err().name, "PROVIDERS");
        assert_eq!(parse(&[("BREAKER_FAILURES", "0")]).unwrap().breaker.failures, 0);
        assert_eq!(parse(&[("BREAKER_COOLDOWN_MS", "0")]).unwrap_err().name, "BREAKER_COOLDOWN_MS");
    }

    #[test]
    fn errors_never_quote_the_value() {
        let secret = "sk-live-0123456789abcdef";
        for name in [
            "UPSTREAM",
            "MAX_ATTEMPTS",
            "UNKNOWN_POLICY",
            "RESULT_CACHE",
            "MAX_BODY_BYTES",
            "PROVIDERS",
            "KEYLESS",
            "KEYLESS_WINDOW_SECONDS",
            "JOB_LOGS",
        ] {
            let error = parse(&[(name, secret)]).unwrap_err();
            assert_eq!(error.name, name);
            assert!(!error.to_string().contains(secret), "{error}");
        }
    }
}
