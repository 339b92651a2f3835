//! Quotas: a budget of upstream tokens per day, per tenant and per user
//! (`QUOTAS`). Tokens are counted from each job's audit once (every attempt
//! that was paid, a hedge's loser included); a replay makes no attempt and
//! costs nothing. A new job is refused before its claim when a budget it
//! draws on is spent, until the next day (UTC).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::job::Attempt;
use crate::retry::reply::Usage;

/// Milliseconds in a quota day.
pub const DAY_MS: u64 = 86_400_000;

/// The budgets of one tenant (or of every tenant, `"*"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaLimits {
    /// Tokens per day for the whole tenant.
    #[serde(default)]
    pub tenant_tokens_per_day: Option<u64>,
    /// Tokens per day for each user (user tokens' `sub`).
    #[serde(default)]
    pub user_tokens_per_day: Option<u64>,
}

/// `QUOTAS`: limits by tenant id, `"*"` for any other.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quotas {
    by_tenant: HashMap<String, QuotaLimits>,
}

/// `QUOTAS` is malformed (never quoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotasError;

impl std::fmt::Display for QuotasError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QUOTAS must be a JSON object: tenant id or \"*\" → {\"tenant_tokens_per_day\"?: n, \"user_tokens_per_day\"?: n}")
    }
}

impl Quotas {
    /// `QUOTAS` as read (`None`: unset): unset is no quota.
    pub fn from_var(text: Option<&str>) -> Result<Self, QuotasError> {
        text.map_or_else(|| Ok(Self::default()), Self::from_json)
    }

    /// Parses `QUOTAS`.
    pub fn from_json(json: &str) -> Result<Self, QuotasError> {
        Ok(Self { by_tenant: serde_json::from_str(json).map_err(|_| QuotasError)? })
    }

    /// The limits `tenant` runs under.
    pub fn limits_for(&self, tenant: &str) -> QuotaLimits {
        self.by_tenant.get(tenant).or_else(|| self.by_tenant.get("*")).copied().unwrap_or_default()
    }

    /// Whether any quota is set.
    pub fn is_empty(&self) -> bool {
        self.by_tenant.is_empty()
    }
}

/// The quota day `now_ms` falls in.
pub fn day_of(now_ms: u64) -> u64 {
    now_ms / DAY_MS
}

/// Milliseconds until the next quota day.
pub fn until_next_day_ms(now_ms: u64) -> u64 {
    DAY_MS - now_ms % DAY_MS
}

/// One meter: the tokens counted on its day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
pub struct Meter {
    /// The day counted.
    pub day: u64,
    /// Tokens counted that day.
    pub used: u64,
    /// The last day a budget alert was due (at most one per day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerted_day: Option<u64>,
}

impl Meter {
    /// Tokens used on `now_ms`'s day.
    pub fn used_on(&self, now_ms: u64) -> u64 {
        if self.day == day_of(now_ms) { self.used } else { 0 }
    }

    /// Counts `tokens` on `now_ms`'s day.
    pub fn add(&mut self, tokens: u64, now_ms: u64) {
        let today = day_of(now_ms);
        if self.day != today {
            *self = Self { day: today, used: 0, alerted_day: self.alerted_day };
        }
        self.used = self.used.saturating_add(tokens);
    }

    /// Counts `tokens` on `now_ms`'s day; `true` when this count made the
    /// day's use reach `share_permille` thousandths of `limit` and no
    /// budget alert was due yet today (the meter remembers it: once per day).
    pub fn add_watching(&mut self, tokens: u64, now_ms: u64, limit: Option<u64>, share_permille: u32) -> bool {
        self.add(tokens, now_ms);
        let Some(limit) = limit.filter(|_| share_permille > 0) else { return false };
        let today = day_of(now_ms);
        // used / limit >= share / 1000, in integers.
        let passed = u128::from(self.used) * 1000 >= u128::from(limit) * u128::from(share_permille);
        if passed && self.alerted_day != Some(today) {
            self.alerted_day = Some(today);
            return true;
        }
        false
    }

    /// Whether a new job may start under `limit` (`None`: no limit).
    pub fn allows(&self, limit: Option<u64>, now_ms: u64) -> bool {
        limit.is_none_or(|limit| self.used_on(now_ms) < limit)
    }
}

/// A meter a job draws on: its `UsageMeter` object's name, its limit, and
/// for a user's meter the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterRef {
    /// The object's name: `tenant\u{1f}{tenant}` or `user\u{1f}{tenant}\u{1f}{user}`.
    pub name: String,
    /// Tokens allowed per day (`None`: no limit).
    pub limit: Option<u64>,
    /// The user, for a user's meter.
    pub user: Option<String>,
}

/// The meters a job of `tenant` (and `user`) draws on, the tenant's first.
pub fn meters(tenant: &str, user: Option<&str>, limits: QuotaLimits) -> Vec<MeterRef> {
    let mut meters =
        vec![MeterRef { name: format!("tenant\u{1f}{tenant}"), limit: limits.tenant_tokens_per_day, user: None }];
    if let Some(user) = user {
        meters.push(MeterRef {
            name: format!("user\u{1f}{tenant}\u{1f}{user}"),
            limit: limits.user_tokens_per_day,
            user: Some(user.to_owned()),
        });
    }
    meters
}

/// `POST /check` to a meter: may a job start under this limit?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Tokens allowed per day.
    pub limit: Option<u64>,
}

/// `POST /add` to a meter: tokens a job used; with the meter's limit and the
/// share of it that calls for a budget alert (answered `{"alert": true,
/// "used": n}` once per day, when a count reaches it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Add {
    /// Tokens used.
    pub tokens: u64,
    /// Tokens allowed per day.
    #[serde(default)]
    pub limit: Option<u64>,
    /// The share that calls for a budget alert, in thousandths (0: none).
    #[serde(default)]
    pub share_permille: u32,
}

/// A meter's answer: `{"allowed", "used"}` to a check, `{"alert", "used"}`
/// to an add.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MeterAnswer {
    /// A check: whether a new job may start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    /// An add: a budget alert is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<bool>,
    /// Tokens used today.
    #[serde(default)]
    pub used: Option<u64>,
}

impl MeterAnswer {
    /// Whether the meter refused a new job (only an explicit `false`: a
    /// meter that cannot say lets it start).
    pub fn refuses(&self) -> bool {
        self.allowed == Some(false)
    }
}

impl Meter {
    /// Answers a check at `now_ms`.
    pub fn check(&self, check: Check, now_ms: u64) -> MeterAnswer {
        MeterAnswer { allowed: Some(self.allows(check.limit, now_ms)), alert: None, used: Some(self.used_on(now_ms)) }
    }

    /// Counts an add at `now_ms` and answers it.
    pub fn count(&mut self, add: Add, now_ms: u64) -> MeterAnswer {
        let alert = self.add_watching(add.tokens, now_ms, add.limit, add.share_permille);
        MeterAnswer { allowed: None, alert: Some(alert), used: Some(self.used_on(now_ms)) }
    }
}

/// A request to a `UsageMeter`, read from its path and body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeterCall {
    /// `POST /check`.
    Check(Check),
    /// `POST /add`.
    Add(Add),
}

impl MeterCall {
    /// The call at `path` with `body`: `Ok(None)` for a path the meter does
    /// not serve (a `404`), an error for a body that is not the call's.
    pub fn decode(path: &str, body: &[u8]) -> Result<Option<MeterCall>, serde_json::Error> {
        Ok(match path {
            "/check" => Some(MeterCall::Check(serde_json::from_slice(body)?)),
            "/add" => Some(MeterCall::Add(serde_json::from_slice(body)?)),
            _ => None,
        })
    }

    /// Whether performing it changes the meter, to be stored: an add.
    pub fn writes(&self) -> bool {
        matches!(self, MeterCall::Add(_))
    }
}

impl Meter {
    /// Performs `call` at `now_ms` ([`Meter::check`] or [`Meter::count`]).
    pub fn answer(&mut self, call: MeterCall, now_ms: u64) -> MeterAnswer {
        match call {
            MeterCall::Check(check) => self.check(check, now_ms),
            MeterCall::Add(add) => self.count(add, now_ms),
        }
    }
}

/// The job's tokens not yet counted against its quotas: every paid
/// attempt's total (a hedge's loser included) past the `metered` already
/// counted; `None` when there are none.
pub fn unmetered(attempts: &[Attempt], metered: u64) -> Option<u64> {
    unmetered_of(attempts.iter().map(|a| a.usage), metered)
}

fn unmetered_of(usages: impl IntoIterator<Item = Option<Usage>>, metered: u64) -> Option<u64> {
    let tokens: u64 = usages.into_iter().flatten().map(|u| u.total_tokens).sum();
    tokens.checked_sub(metered).filter(|&new| new > 0)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn unset_quotas_is_no_quota_and_a_value_is_read_as_json() {
        assert_eq!(Quotas::from_var(None).ok(), Some(Quotas::default()));
        assert_eq!(Quotas::from_var(Some("{}")).ok(), Quotas::from_json("{}").ok());
        assert!(Quotas::from_var(Some("not json")).is_err());
    }

    #[test]
    fn a_job_draws_on_its_tenants_meter_and_its_users() {
        let limits = QuotaLimits { tenant_tokens_per_day: Some(100), user_tokens_per_day: Some(10) };
        let both = meters("acme", Some("u1"), limits);
        assert_eq!(both[0], MeterRef { name: "tenant\u{1f}acme".into(), limit: Some(100), user: None });
        assert_eq!(
            both[1],
            MeterRef { name: "user\u{1f}acme\u{1f}u1".into(), limit: Some(10), user: Some("u1".into()) }
        );
        assert_eq!(meters("acme", None, limits).len(), 1);
    }

    #[test]
    fn a_meter_call_is_read_from_its_path_and_only_an_add_is_stored() {
        let check = MeterCall::decode("/check", br#"{"limit":10}"#).unwrap();
        assert_eq!(check, Some(MeterCall::Check(Check { limit: Some(10) })));
        let add = MeterCall::decode("/add", br#"{"tokens":4}"#).unwrap();
        assert_eq!(add, Some(MeterCall::Add(Add { tokens: 4, limit: None, share_permille: 0 })));
        assert!(add.is_some_and(|call| call.writes()) && !check.is_some_and(|call| call.writes()));
        assert_eq!(MeterCall::decode("/reset", b"{}").unwrap(), None);
        assert!(MeterCall::decode("/add", b"{}").is_err(), "an add names its tokens");
        assert!(MeterCall::decode("/check", b"not json").is_err());
    }

    #[test]
    fn a_meter_performs_a_call_as_a_check_or_a_count() {
        let mut meter = Meter::default();
        let added = meter.answer(MeterCall::Add(Add { tokens: 7, limit: Some(10), share_permille: 0 }), 1_000);
        assert_eq!(added, Meter::default().count(Add { tokens: 7, limit: Some(10), share_permille: 0 }, 1_000));
        assert_eq!(meter.used_on(1_000), 7);
        let checked = meter.answer(MeterCall::Check(Check { limit: Some(7) }), 1_000);
        assert_eq!(checked, meter.check(Check { limit: Some(7) }, 1_000));
        assert!(checked.refuses());
    }

    #[test]
    fn a_meter_answers_checks_and_adds_in_its_wire_form() {
        let now = 5 * DAY_MS + 1;
        let mut meter = Meter::default();
        let checked = meter.check(Check { limit: Some(10) }, now);
        assert_eq!(serde_json::to_value(checked).unwrap(), serde_json::json!({"allowed": true, "used": 0}));
        assert!(!checked.refuses());
        let added = meter.count(Add { tokens: 9, limit: Some(10), share_permille: 800 }, now);
        assert_eq!(serde_json::to_value(added).unwrap(), serde_json::json!({"alert": true, "used": 9}));
        let again = meter.count(Add { tokens: 1, limit: Some(10), share_permille: 800 }, now);
        assert_eq!(again.alert, Some(false), "once per day");
        assert!(meter.check(Check { limit: Some(10) }, now).refuses());
        assert!(!meter.check(Check { limit: None }, now).refuses());
        let unreadable: MeterAnswer = serde_json::from_str("{}").unwrap();
        assert!(!unreadable.refuses());
        let add: Add = serde_json::from_str(r#"{"tokens": 3}"#).unwrap();
        assert_eq!(add, Add { tokens: 3, limit: None, share_permille: 0 });
    }

    #[test]
    fn only_tokens_not_counted_yet_are_metered() {
        let usage = |total_tokens| Some(Usage { prompt_tokens: 0, completion_tokens: total_tokens, total_tokens });
        let attempts = [usage(10), None, usage(5)];
        assert_eq!(unmetered_of(attempts, 0), Some(15));
        assert_eq!(unmetered_of(attempts, 10), Some(5));
        assert_eq!(unmetered_of(attempts, 15), None);
        assert_eq!(unmetered_of(attempts, 20), None);
        assert_eq!(unmetered(&[], 0), None);
    }

    #[test]
    fn limits_by_tenant_with_a_default() {
        let q = Quotas::from_json(r#"{"*": {"user_tokens_per_day": 100}, "acme": {"tenant_tokens_per_day": 5000}}"#)
            .unwrap();
        assert_eq!(q.limits_for("acme"), QuotaLimits { tenant_tokens_per_day: Some(5000), user_tokens_per_day: None });
        assert_eq!(q.limits_for("globex").user_tokens_per_day, Some(100));
        assert_eq!(Quotas::from_json(r#"{"*": {"tokens": 1}}"#), Err(QuotasError));
    }

    #[test]
    fn a_meter_counts_per_day_and_refuses_once_spent() {
        let t0 = 10 * DAY_MS + 1_000;
        let mut meter = Meter::default();
        assert!(meter.allows(Some(50), t0));
        meter.add(30, t0);
        assert!(meter.allows(Some(50), t0));
        meter.add(30, t0 + 5);
        assert!(!meter.allows(Some(50), t0 + 10));
        assert!(meter.allows(None, t0 + 10));
        // The next day starts at zero.
        assert_eq!(until_next_day_ms(t0), DAY_MS - 1_000);
        assert!(meter.allows(Some(50), t0 + DAY_MS));
        meter.add(10, t0 + DAY_MS);
        assert_eq!(meter.used_on(t0 + DAY_MS), 10);
    }

    #[test]
    fn a_budget_alert_is_due_once_a_day_when_the_share_is_passed() {
        let t0 = 10 * DAY_MS + 1_000;
        let mut meter = Meter::default();
        assert!(!meter.add_watching(70, t0, Some(100), 800));
        assert!(meter.add_watching(10, t0, Some(100), 800), "80 of 100 is the share");
        assert!(!meter.add_watching(30, t0, Some(100), 800), "once a day");
        assert!(!meter.add_watching(50, t0 + DAY_MS, Some(100), 800), "a new day, under the share");
        assert!(meter.add_watching(30, t0 + DAY_MS, Some(100), 800), "passed again the next day");
        assert!(!Meter::default().add_watching(1000, t0, None, 800), "no limit, no alert");
        assert!(!Meter::default().add_watching(1000, t0, Some(10), 0), "share 0: off");
        let stored: Meter = serde_json::from_str(r#"{"day":3,"used":5}"#).unwrap();
        assert_eq!(stored.alerted_day, None, "a meter stored before alerts reads back");
    }
}
