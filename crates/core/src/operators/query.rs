//! The query strings of the operator API's lists (`jobs`, `dead-letters`,
//! `costs`, `savings`), read strictly: a filter that cannot be read is a
//! `400` naming the parameter, never a filter silently dropped (`since_ms=abc`
//! must not report all time). An empty value means "no filter", as an HTML form
//! sends it; a parameter the list does not take, or one given twice, is
//! refused.

use crate::identity::key::IdempotencyKey;
use crate::job::JobState;
use crate::ledger::dead_letter::EFFECT_CLASS;
use crate::retry::classify::ErrorClass;

/// Rows per page of the jobs list when the query names no `limit`.
pub const DEFAULT_LIMIT: u32 = 50;
/// The most rows one page of the jobs list holds.
pub const MAX_LIMIT: u32 = 200;
/// The class a dead letter names when its last attempt left none.
pub const UNKNOWN_CLASS: &str = "unknown";
/// The classes a dead letter may name besides an [`ErrorClass`].
const DEAD_LETTER_CLASSES: [&str; 3] = [UNKNOWN_CLASS, EFFECT_CLASS, crate::ledger::background::outbox::UNDELIVERED];
/// The longest text filter (a tenant, a user, a model), in bytes.
const MAX_TEXT: usize = 256;

/// A query parameter that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// The parameter's name, as the query spells it.
    pub param: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "query parameter {}: {}", self.param, self.why)
    }
}

impl std::error::Error for QueryError {}

/// `GET admin/jobs`'s filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobsQuery {
    /// Only this tenant's jobs.
    pub tenant: Option<String>,
    /// Only this user's jobs.
    pub user: Option<String>,
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this model.
    pub model: Option<String>,
    /// Only jobs whose last error is of this class (its name).
    pub error_class: Option<String>,
    /// Created at or after (ms since the epoch).
    pub since_ms: Option<u64>,
    /// Created before (ms since the epoch).
    pub until_ms: Option<u64>,
    /// After this row of the previous page: its `created_ms` and key.
    pub cursor: Option<(u64, String)>,
    /// Rows per page, 1 to [`MAX_LIMIT`].
    pub limit: u32,
}

/// `GET admin/dead-letters`'s filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeadLettersQuery {
    /// Only this tenant's dead letters.
    pub tenant: Option<String>,
    /// Only dead letters of this error class (its name).
    pub error_class: Option<String>,
}

/// `GET admin/costs`'s filters, and `GET admin/savings`'s (the same two).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostsQuery {
    /// Jobs created at or after (ms since the epoch); 0: every job retained.
    pub since_ms: u64,
    /// Only this tenant's jobs.
    pub tenant: Option<String>,
}

impl JobsQuery {
    /// Reads the decoded `pairs` of a query string.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, QueryError> {
        let q = Params::new(
            pairs,
            &["tenant", "user", "state", "model", "error_class", "since_ms", "until_ms", "cursor", "limit"],
        )?;
        let state = q
            .get("state")
            .map(|name| JobState::from_name(name).ok_or_else(|| error("state", "not a job state")))
            .transpose()?;
        let limit = match q.number("limit")? {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=u64::from(MAX_LIMIT)).contains(&n) => n as u32,
            Some(_) => return Err(error("limit", "must be 1 to 200")),
        };
        Ok(Self {
            tenant: q.text("tenant")?,
            user: q.text("user")?,
            state,
            model: q.text("model")?,
            error_class: q.error_class()?,
            since_ms: q.number("since_ms")?,
            until_ms: q.number("until_ms")?,
            cursor: q.get("cursor").map(parse_cursor).transpose()?,
            limit,
        })
    }
}

impl DeadLettersQuery {
    /// Reads the decoded `pairs` of a query string.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, QueryError> {
        let q = Params::new(pairs, &["tenant", "error_class"])?;
        Ok(Self { tenant: q.text("tenant")?, error_class: q.error_class()? })
    }
}

impl CostsQuery {
    /// Reads the decoded `pairs` of a query string.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, QueryError> {
        let q = Params::new(pairs, &["since_ms", "tenant"])?;
        Ok(Self { since_ms: q.number("since_ms")?.unwrap_or(0), tenant: q.text("tenant")? })
    }
}

/// The cursor a page of the jobs list hands out: `created_ms:key`.
pub fn cursor_of(created_ms: u64, key: &str) -> String {
    format!("{created_ms}:{key}")
}

fn parse_cursor(cursor: &str) -> Result<(u64, String), QueryError> {
    let bad = || error("cursor", "must be a next_cursor this list handed out");
    let (ms, key) = cursor.split_once(':').ok_or_else(bad)?;
    let ms = whole_number(ms).ok_or_else(bad)?;
    IdempotencyKey::parse(key).map_err(|_| bad())?;
    Ok((ms, key.to_owned()))
}

fn error(param: &str, why: &'static str) -> QueryError {
    QueryError { param: param.to_owned(), why }
}

/// Digits only (no sign, no spaces), within a u64.
fn whole_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The non-empty parameters of a query, each named at most once and each
/// one the list takes.
struct Params<'a> {
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Params<'a> {
    fn new(pairs: &'a [(String, String)], allowed: &[&str]) -> Result<Self, QueryError> {
        let mut kept: Vec<(&str, &str)> = Vec::new();
        for (name, value) in pairs {
            if !allowed.contains(&name.as_str()) {
                return Err(QueryError { param: shorten(name), why: "this list takes no such parameter" });
            }
            if kept.iter().any(|(seen, _)| seen == name) {
                return Err(QueryError { param: name.clone(), why: "given more than once" });
            }
            if !value.is_empty() {
                kept.push((name, value));
            }
        }
        Ok(Self { pairs: kept })
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    fn text(&self, name: &str) -> Result<Option<String>, QueryError> {
        match self.get(name) {
            Some(v) if v.len() > MAX_TEXT => Err(error(name, "is longer than 256 bytes")),
            Some(v) if v.chars().any(char::is_control) => Err(error(name, "holds control characters")),
            v => Ok(v.map(str::to_owned)),
        }
    }

    fn number(&self, name: &str) -> Result<Option<u64>, QueryError> {
        self.get(name)
            .map(|v| whole_number(v).ok_or_else(|| error(name, "must be a whole number of milliseconds or rows")))
            .transpose()
    }

    /// An [`ErrorClass`]'s name, or one only dead letters name (`unknown`:
    /// the last attempt left no class; `effect`; `undelivered`).
    fn error_class(&self) -> Result<Option<String>, QueryError> {
        self.get("error_class")
            .map(|name| match DEAD_LETTER_CLASSES.contains(&name) || ErrorClass::from_name(name).is_some() {
                true => Ok(name.to_owned()),
                false => Err(error("error_class", "not an error class")),
            })
            .transpose()
    }
}

/// A page of the jobs list as `GET jobs` answers it: its jobs, newest
/// first, and the cursor of the next page.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct JobsPage {
    /// The page's jobs.
    pub jobs: Vec<IndexedJob>,
    /// The cursor of the next page ([`cursor_of`] its last job), if any.
    pub next_cursor: Option<String>,
}

impl JobsPage {
    /// The page of `rows`, read with `limit`: a full page may have more
    /// after it, from its last job on; a shorter one is the last.
    pub fn of(rows: Vec<IndexedJob>, limit: u32) -> Self {
        let full = rows.len() == limit as usize;
        let next_cursor = rows.last().filter(|_| full).map(|last| cursor_of(last.created_ms, &last.key));
        JobsPage { jobs: rows, next_cursor }
    }
}

/// A parameter's name as an error may quote it: at most 64 characters.
fn shorten(name: &str) -> String {
    name.chars().take(64).collect()
}

/// One job as the jobs list shows it, read from its row in the operators'
/// index: a job without a user (stored as `''`) has `"user": null`, and
/// the `background` flag (stored as `0`/`1`) is a boolean. (Read from a
/// row, written as the list's JSON: the two forms differ.)
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IndexedJob {
    /// The job's tenant.
    pub tenant: String,
    /// Its user, if a user token's.
    #[serde(default, deserialize_with = "empty_is_none")]
    pub user: Option<String>,
    /// Its key (the column `job_key`).
    #[serde(rename = "key", alias = "job_key")]
    pub key: String,
    /// Its state.
    pub state: String,
    /// The model asked for.
    pub model: Option<String>,
    /// The provider that answered last.
    pub provider: Option<String>,
    /// Its last error's class.
    pub error_class: Option<String>,
    /// How many attempts it made.
    pub attempts: u32,
    /// Tokens it used.
    pub tokens: u64,
    /// Its estimated cost.
    pub cost_usd: f64,
    /// Whether it runs in the background (the column holds `1`).
    #[serde(deserialize_with = "one_is_true")]
    pub background: bool,
    /// When it was created.
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
}

fn empty_is_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let user: Option<String> = serde::Deserialize::deserialize(d)?;
    Ok(user.filter(|user| !user.is_empty()))
}

fn one_is_true<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(<u8 as serde::Deserialize>::deserialize(d)? == 1)
}

/// The groupings of `GET admin/costs`: each list's name in the answer and
/// the column of `jobs_index` it groups by.
pub const COSTS_GROUPS: [(&str, &str); 2] = [("by_tenant", "tenant"), ("by_model", "model")];

/// `GET admin/costs`'s answer: per grouping of [`COSTS_GROUPS`], its rows as
/// the index read them (each grouped value under `name`, renamed to its
/// column: `{"tenant": …}` or `{"model": …}`), `since_ms`, and what the
/// spend is counted with (`prices`, `admin_route::prices_note`).
pub fn costs_answer(
    since_ms: u64,
    grouped: Vec<Vec<serde_json::Value>>,
    prices: serde_json::Value,
) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    for ((list, column), rows) in COSTS_GROUPS.iter().zip(grouped) {
        let rows: Vec<serde_json::Value> = rows.into_iter().map(|row| renamed(row, "name", column)).collect();
        out.insert((*list).into(), serde_json::Value::from(rows));
    }
    out.insert("since_ms".into(), serde_json::Value::from(since_ms));
    out.insert("prices".into(), prices);
    serde_json::Value::Object(out)
}

/// `row` with its member `from` named `to` (a row without it, as it is).
fn renamed(mut row: serde_json::Value, from: &str, to: &str) -> serde_json::Value {
    if let Some(object) = row.as_object_mut()
        && let Some(value) = object.remove(from)
    {
        object.insert(to.into(), value);
    }
    row
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn well_formed_filters_are_read_and_empty_ones_are_absent() {
        let q = JobsQuery::parse(&pairs(&[
            ("tenant", "acme"),
            ("user", ""),
            ("state", "dead"),
            ("error_class", "rate_limited"),
            ("since_ms", "1000"),
            ("until_ms", "2000"),
            ("cursor", "1500:test-0123456789abcdef"),
            ("limit", "200"),
        ]))
        .unwrap();
        assert_eq!(q.tenant.as_deref(), Some("acme"));
        assert_eq!(q.user, None);
        assert_eq!(q.state, Some(JobState::Dead));
        assert_eq!(q.error_class.as_deref(), Some("rate_limited"));
        assert_eq!((q.since_ms, q.until_ms, q.limit), (Some(1000), Some(2000), 200));
        assert_eq!(q.cursor, Some((1500, "test-0123456789abcdef".to_owned())));
        assert_eq!(JobsQuery::parse(&[]).unwrap().limit, DEFAULT_LIMIT);
        assert_eq!(CostsQuery::parse(&pairs(&[("since_ms", "5")])).unwrap().since_ms, 5);
        assert_eq!(CostsQuery::parse(&[]).unwrap().since_ms, 0);
        let cursor = cursor_of(7, "test-0123456789abcdef");
        assert_eq!(JobsQuery::parse(&pairs(&[("cursor", &cursor)])).unwrap().cursor.unwrap().0, 7);
    }

    #[test]
    fn malformed_filters_are_refused_naming_the_parameter() {
        let refused = |list: &[(&str, &str)]| JobsQuery::parse(&pairs(list)).unwrap_err().param;
        assert_eq!(refused(&[("since_ms", "abc")]), "since_ms");
        assert_eq!(refused(&[("since_ms", "-1")]), "since_ms");
        assert_eq!(refused(&[("until_ms", "1e3")]), "until_ms");
        assert_eq!(refused(&[("until_ms", "99999999999999999999999")]), "until_ms");
        assert_eq!(refused(&[("limit", "0")]), "limit");
        assert_eq!(refused(&[("limit", "201")]), "limit");
        assert_eq!(refused(&[("limit", "ten")]), "limit");
        assert_eq!(refused(&[("cursor", "garbage")]), "cursor");
        assert_eq!(refused(&[("cursor", "12:short")]), "cursor");
        assert_eq!(refused(&[("cursor", "x:test-0123456789abcdef")]), "cursor");
        assert_eq!(refused(&[("state", "finished")]), "state");
        assert_eq!(refused(&[("error_class", "nope")]), "error_class");
        assert_eq!(refused(&[("tenant", &"t".repeat(300))]), "tenant");
        assert_eq!(refused(&[("sinc_ms", "1")]), "sinc_ms");
        assert_eq!(refused(&[("limit", "5"), ("limit", "6")]), "limit");
        let costs = CostsQuery::parse(&pairs(&[("since_ms", "abc")])).unwrap_err();
        assert_eq!(costs.to_string(), "query parameter since_ms: must be a whole number of milliseconds or rows");
        assert_eq!(DeadLettersQuery::parse(&pairs(&[("error_class", "x")])).unwrap_err().param, "error_class");
        for class in ["unknown", "effect", "undelivered", "auth"] {
            let query = DeadLettersQuery::parse(&pairs(&[("error_class", class)])).unwrap();
            assert_eq!(query.error_class.as_deref(), Some(class));
        }
        assert_eq!(DeadLettersQuery::parse(&pairs(&[("limit", "1")])).unwrap_err().param, "limit");
    }

    #[test]
    fn a_full_page_of_jobs_has_the_cursor_of_its_last_and_a_shorter_one_none() {
        let job = |key: &str, created_ms: u64| {
            serde_json::from_value::<IndexedJob>(serde_json::json!({
                "tenant": "acme", "user": null, "job_key": key, "state": "completed", "model": null,
                "provider": null, "error_class": null, "attempts": 1, "tokens": 0, "cost_usd": 0.0,
                "background": 0, "created_ms": created_ms, "updated_ms": created_ms,
            }))
            .unwrap()
        };
        let rows = vec![job("key-b-0123456789ab", 20), job("key-a-0123456789ab", 10)];
        let full = JobsPage::of(rows.clone(), 2);
        assert_eq!(full.next_cursor.as_deref(), Some("10:key-a-0123456789ab"));
        assert_eq!(
            JobsQuery::parse(&pairs(&[("cursor", "10:key-a-0123456789ab")])).unwrap().cursor.map(|c| c.0),
            Some(10)
        );
        assert_eq!(JobsPage::of(rows.clone(), 3).next_cursor, None);
        assert_eq!(JobsPage::of(Vec::new(), 0).next_cursor, None);
        let answer = serde_json::to_value(JobsPage::of(rows, 3)).unwrap();
        assert_eq!(answer["next_cursor"], serde_json::Value::Null);
        assert_eq!(answer["jobs"][0]["key"], "key-b-0123456789ab");
    }

    #[test]
    fn a_row_of_the_index_is_listed_with_a_null_user_and_a_boolean_flag() {
        let row = |user: serde_json::Value, background: u8| {
            serde_json::from_value::<IndexedJob>(serde_json::json!({
                "tenant": "acme", "user": user, "job_key": "test-0123456789abcdef", "state": "completed",
                "model": "m", "provider": null, "error_class": null, "attempts": 2, "tokens": 30,
                "cost_usd": 0.5, "background": background, "created_ms": 1, "updated_ms": 2,
            }))
            .unwrap()
        };
        let listed = serde_json::to_value(row("".into(), 1)).unwrap();
        assert_eq!(
            listed,
            serde_json::json!({
                "tenant": "acme", "user": null, "key": "test-0123456789abcdef", "state": "completed",
                "model": "m", "provider": null, "error_class": null, "attempts": 2, "tokens": 30,
                "cost_usd": 0.5, "background": true, "created_ms": 1, "updated_ms": 2,
            })
        );
        let user = row("u1".into(), 0);
        assert_eq!((user.user.as_deref(), user.background), (Some("u1"), false));
        assert_eq!(row(serde_json::Value::Null, 1).user, None);
    }

    #[test]
    fn the_costs_answer_names_each_grouping_by_its_column() {
        use serde_json::json;
        let by_tenant = vec![json!({"name": "acme", "jobs": 2, "tokens": 30, "cost_usd": 0.5})];
        let by_model = vec![json!({"name": "gpt", "jobs": 1, "tokens": 10, "cost_usd": 0.1}), json!(null)];
        let answer = costs_answer(7, vec![by_tenant, by_model], json!({"overridden": []}));
        assert_eq!(
            answer,
            json!({
                "by_tenant": [{"tenant": "acme", "jobs": 2, "tokens": 30, "cost_usd": 0.5}],
                "by_model": [{"model": "gpt", "jobs": 1, "tokens": 10, "cost_usd": 0.1}, null],
                "since_ms": 7,
                "prices": {"overridden": []},
            })
        );
    }
}
