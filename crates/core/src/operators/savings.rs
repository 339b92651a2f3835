//! What onejob saved: answers given without an upstream call (a replay from
//! KV or from the Ledger, a duplicate coalesced onto the running call, a
//! keyless request joining its job), each counted once with the tokens and
//! the estimated cost of the call it did not repeat.
//!
//! The edge counts answers per isolate into a [`Tally`] (one row per tenant,
//! model, [`AnswerKind`] and hour, [`bucket_of`]) and adds it to D1 in one
//! batch; the operator API reads them back summed ([`Sums`]) and [`Report::build`] puts
//! them next to what was spent (the jobs index) for the console.

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};

use crate::config::pricing::Prices;
use crate::job::Job;

/// The width of a time bucket: an hour.
pub const BUCKET_MS: u64 = 3_600_000;

/// How an answer was given without an upstream call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// The gateway replayed a finished result from KV (no Ledger reached).
    KvReplay,
    /// The Ledger replayed its stored result of a finished job.
    LedgerReplay,
    /// A duplicate that arrived while its job ran got the running call's answer.
    Coalesced,
    /// A request without a key joined the job its identical request made
    /// (`KEYLESS=window`/`coalesce`), finished or running.
    KeylessJoin,
}

impl AnswerKind {
    /// Every kind, in the order the API lists them.
    pub const ALL: [AnswerKind; 4] =
        [AnswerKind::KvReplay, AnswerKind::LedgerReplay, AnswerKind::Coalesced, AnswerKind::KeylessJoin];

    /// Its name in the `savings` table and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerKind::KvReplay => "kv_replay",
            AnswerKind::LedgerReplay => "ledger_replay",
            AnswerKind::Coalesced => "coalesced",
            AnswerKind::KeylessJoin => "keyless_join",
        }
    }

    /// The kind a stored name names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The kind of a Ledger's answer without a call: a keyless request
    /// joined, a keyed one was replayed (`coalesced` false) or waited.
    pub fn of_ledger_answer(keyless: bool, coalesced: bool) -> Self {
        match (keyless, coalesced) {
            (true, _) => AnswerKind::KeylessJoin,
            (false, true) => AnswerKind::Coalesced,
            (false, false) => AnswerKind::LedgerReplay,
        }
    }
}

/// What a job's calls used, as its record says: the model (as the Costs
/// view names it) and the tokens and estimated cost of every attempt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The model, as the request (or else its answer's attempt) named it.
    pub model: Option<String>,
    #[serde(default)]
    /// Tokens, prompt and completion.
    pub tokens: u64,
    #[serde(default)]
    /// Estimated US dollars.
    pub cost_usd: f64,
}

impl Spent {
    /// What `job`'s attempts used: every attempt was paid (a hedge's loser
    /// too), an attempt of a model without a price costs 0. The model is
    /// the one the request asked for (`requested`), else the one the
    /// answer's attempt called: the jobs index's rule, so savings and
    /// spend line up per model.
    pub fn of_job(job: &Job, requested: Option<&str>, prices: &Prices) -> Self {
        let shown = job.replayed_attempt().or(job.attempts().last());
        let tokens = job.attempts().iter().filter_map(|a| a.usage).map(|u| u.total_tokens).sum();
        let cost_usd = job
            .attempts()
            .iter()
            .filter_map(|a| Some(prices.cost_usd(a.model.as_deref(), a.usage.as_ref()?).unwrap_or(0.0)))
            .sum();
        let model = requested.or(shown.and_then(|a| a.model.as_deref())).map(str::to_owned);
        Self { model, tokens, cost_usd }
    }
}

/// The start of the bucket `at_ms` falls in.
pub fn bucket_of(at_ms: u64) -> u64 {
    at_ms - at_ms % BUCKET_MS
}

/// US dollars rounded to a billionth: sums of many small float costs
/// (added in whatever order SQLite adds them) read the same every time.
pub fn round_usd(usd: f64) -> f64 {
    (usd * 1e9).round() / 1e9
}

/// One row of the `savings` table: answers of one kind, for one tenant and
/// model, in one bucket (`model` empty when the job named none).
#[derive(Debug, Clone, PartialEq)]
pub struct SavedRow {
    /// The tenant.
    pub tenant: String,
    /// The model, as the request (or else its answer's attempt) named it.
    pub model: String,
    /// An [`AnswerKind`]'s name.
    pub kind: String,
    /// The start of its bucket (ms since the epoch).
    pub bucket_ms: u64,
    /// Answers given without a call.
    pub answers: u64,
    /// Tokens, prompt and completion.
    pub tokens: u64,
    /// Estimated US dollars.
    pub cost_usd: f64,
}

/// A row's identity: tenant, model (empty for none), kind, bucket.
type RowKey = (String, String, AnswerKind, u64);

impl SavedRow {
    /// A row as D1 returns it (a JSON object; `None` if it is not one).
    pub fn from_json(row: &serde_json::Value) -> Option<Self> {
        Some(Self {
            tenant: row.get("tenant")?.as_str()?.to_owned(),
            model: row.get("model")?.as_str()?.to_owned(),
            kind: row.get("kind")?.as_str()?.to_owned(),
            bucket_ms: whole(row.get("bucket_ms")?)?,
            answers: whole(row.get("answers")?)?,
            tokens: whole(row.get("tokens")?)?,
            cost_usd: row.get("cost_usd")?.as_f64()?,
        })
    }
}

/// A count as SQLite hands it over: an integer, or a float that is one.
fn whole(value: &serde_json::Value) -> Option<u64> {
    value.as_u64().or_else(|| value.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0).map(|f| f as u64))
}

/// Answers counted in this isolate and not yet written, summed per row:
/// answers, tokens, cost.
#[derive(Debug, Default)]
pub struct Tally {
    rows: Vec<(RowKey, (u64, u64, f64))>,
}

impl Tally {
    /// Counts one answer of `kind` to `tenant`, given at `now_ms` without
    /// repeating the call that `spent` records.
    pub fn add(&mut self, tenant: &str, kind: AnswerKind, spent: &Spent, now_ms: u64) {
        let key = (tenant.to_owned(), spent.model.clone().unwrap_or_default(), kind, bucket_of(now_ms));
        let at = match self.rows.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                self.rows.push((key, (0, 0, 0.0)));
                self.rows.len() - 1
            }
        };
        let row = &mut self.rows[at].1;
        row.0 += 1;
        row.1 += spent.tokens;
        row.2 += spent.cost_usd;
    }

    /// Nothing counted since the last drain.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows counted so far (emptying the tally), to add to the table.
    pub fn drain(&mut self) -> Vec<SavedRow> {
        std::mem::take(&mut self.rows)
            .into_iter()
            .map(|((tenant, model, kind, bucket_ms), (answers, tokens, cost_usd))| SavedRow {
                tenant,
                model,
                kind: kind.as_str().to_owned(),
                bucket_ms,
                answers,
                tokens,
                cost_usd,
            })
            .collect()
    }
}

/// Spend from the jobs index: jobs made (by their creation's bucket), their
/// tokens and estimated cost, for one tenant and model.
#[derive(Debug, Clone, PartialEq)]
pub struct SpentRow {
    /// The tenant.
    pub tenant: String,
    /// The model, as the request (or else its answer's attempt) named it.
    pub model: Option<String>,
    /// The start of its bucket (ms since the epoch).
    pub bucket_ms: u64,
    /// Jobs made.
    pub jobs: u64,
    /// Tokens, prompt and completion.
    pub tokens: u64,
    /// Estimated US dollars.
    pub cost_usd: f64,
}

impl SpentRow {
    /// A row as D1 returns it (a JSON object; `None` if it is not one). A
    /// job of no model has a null one; SUMs of nothing are null.
    pub fn from_json(row: &serde_json::Value) -> Option<Self> {
        Some(Self {
            tenant: row.get("tenant")?.as_str()?.to_owned(),
            model: row.get("model").and_then(serde_json::Value::as_str).map(str::to_owned),
            bucket_ms: whole(row.get("bucket_ms")?)?,
            jobs: whole(row.get("jobs")?)?,
            tokens: row.get("tokens").and_then(whole).unwrap_or(0),
            cost_usd: row.get("cost_usd").and_then(serde_json::Value::as_f64).unwrap_or(0.0),
        })
    }
}

/// Answers without a call, per kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ByKind {
    /// Every kind.
    pub total: u64,
    /// Replayed from KV.
    pub kv_replay: u64,
    /// Replayed by the Ledger.
    pub ledger_replay: u64,
    /// Coalesced onto a running call.
    pub coalesced: u64,
    /// Keyless requests that joined a job.
    pub keyless_join: u64,
}

impl ByKind {
    fn add(&mut self, kind: AnswerKind, n: u64) {
        self.total += n;
        *match kind {
            AnswerKind::KvReplay => &mut self.kv_replay,
            AnswerKind::LedgerReplay => &mut self.ledger_replay,
            AnswerKind::Coalesced => &mut self.coalesced,
            AnswerKind::KeylessJoin => &mut self.keyless_join,
        } += n;
    }
}

/// Saved next to spent, for one tenant, one model, one bucket or all.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Answers given without an upstream call, per kind.
    pub answered_without_call: ByKind,
    /// One per answer without a call: each would have been a call.
    pub upstream_calls_avoided: u64,
    /// The tokens of the calls not repeated.
    pub tokens_saved: u64,
    /// Their estimated cost, in US dollars.
    pub cost_saved_usd: f64,
    /// What was spent: jobs made (each at least one call), their tokens and cost.
    pub jobs: u64,
    /// Tokens, prompt and completion.
    pub tokens: u64,
    /// Estimated US dollars.
    pub cost_usd: f64,
}

impl Figures {
    fn save(&mut self, kind: AnswerKind, row: &SavedRow) {
        self.answered_without_call.add(kind, row.answers);
        self.upstream_calls_avoided += row.answers;
        self.tokens_saved += row.tokens;
        self.cost_saved_usd += row.cost_usd;
    }

    fn spend(&mut self, row: &SpentRow) {
        self.jobs += row.jobs;
        self.tokens += row.tokens;
        self.cost_usd += row.cost_usd;
    }

    fn rounded(mut self) -> Self {
        self.cost_saved_usd = round_usd(self.cost_saved_usd);
        self.cost_usd = round_usd(self.cost_usd);
        self
    }
}

/// One tenant's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantFigures {
    /// The tenant.
    pub tenant: String,
    /// Its figures (beside the name, in JSON).
    pub figures: Figures,
}

/// One model's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFigures {
    /// The model, as the request (or else its answer's attempt) named it.
    pub model: Option<String>,
    /// Its figures (beside the name, in JSON).
    pub figures: Figures,
}

/// One bucket's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketFigures {
    /// The start of its bucket (ms since the epoch).
    pub bucket_ms: u64,
    /// Its figures (beside the name, in JSON).
    pub figures: Figures,
}

/// `figures` as a JSON object with `name` first (what `#[serde(flatten)]`
/// would write, without its buffering code in the worker's wasm).
fn serialize_named<S: Serializer, N: Serialize>(
    serializer: S,
    field: &'static str,
    name: &N,
    figures: &Figures,
) -> Result<S::Ok, S::Error> {
    let mut out = serializer.serialize_struct("Figures", 8)?;
    out.serialize_field(field, name)?;
    out.serialize_field("answered_without_call", &figures.answered_without_call)?;
    out.serialize_field("upstream_calls_avoided", &figures.upstream_calls_avoided)?;
    out.serialize_field("tokens_saved", &figures.tokens_saved)?;
    out.serialize_field("cost_saved_usd", &figures.cost_saved_usd)?;
    out.serialize_field("jobs", &figures.jobs)?;
    out.serialize_field("tokens", &figures.tokens)?;
    out.serialize_field("cost_usd", &figures.cost_usd)?;
    out.end()
}

impl Serialize for TenantFigures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_named(serializer, "tenant", &self.tenant, &self.figures)
    }
}

impl Serialize for ModelFigures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_named(serializer, "model", &self.model, &self.figures)
    }
}

impl Serialize for BucketFigures {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize_named(serializer, "bucket_ms", &self.bucket_ms, &self.figures)
    }
}

/// The figures under `key` in `rows`, added if missing. A report has a
/// handful of tenants, models and hours: a scan, not a map, keeps the
/// worker's wasm small.
fn figures_of<K: PartialEq>(rows: &mut Vec<(K, Figures)>, key: K) -> &mut Figures {
    let at = match rows.iter().position(|(k, _)| *k == key) {
        Some(at) => at,
        None => {
            rows.push((key, Figures::default()));
            rows.len() - 1
        }
    };
    &mut rows[at].1
}

/// The savings report: totals, per tenant and per model (most saved first),
/// and per bucket (oldest first, only buckets with something in them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The start of its bucket (ms since the epoch).
    pub bucket_ms: u64,
    /// Every tenant and model.
    pub totals: Figures,
    /// Per tenant, most saved first.
    pub by_tenant: Vec<TenantFigures>,
    /// Per model, most saved first.
    pub by_model: Vec<ModelFigures>,
    /// Per bucket, oldest first.
    pub series: Vec<BucketFigures>,
}

/// The rows a report is made of, summed by the database: per tenant, model
/// (and kind) over the whole period, and per bucket (and kind) over every
/// tenant and model, so a month of hours of many tenants stays a few rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sums {
    /// Saved per tenant, model and kind (`bucket_ms` ignored).
    pub saved_by_name: Vec<SavedRow>,
    /// Spent per tenant and model (`bucket_ms` ignored).
    pub spent_by_name: Vec<SpentRow>,
    /// Saved per bucket and kind (`tenant` and `model` ignored).
    pub saved_by_bucket: Vec<SavedRow>,
    /// Spent per bucket (`tenant` and `model` ignored).
    pub spent_by_bucket: Vec<SpentRow>,
}

impl Report {
    /// Puts the sums together (rows of an unknown kind are skipped: a
    /// newer isolate's, during a deploy).
    pub fn build(sums: &Sums) -> Self {
        let mut totals = Figures::default();
        let mut tenants: Vec<(&str, Figures)> = Vec::new();
        let mut models: Vec<(Option<&str>, Figures)> = Vec::new();
        let mut buckets: Vec<(u64, Figures)> = Vec::new();
        for row in &sums.saved_by_name {
            let Some(kind) = AnswerKind::from_name(&row.kind) else { continue };
            let model = Some(row.model.as_str()).filter(|m| !m.is_empty());
            totals.save(kind, row);
            figures_of(&mut tenants, row.tenant.as_str()).save(kind, row);
            figures_of(&mut models, model).save(kind, row);
        }
        for row in &sums.spent_by_name {
            totals.spend(row);
            figures_of(&mut tenants, row.tenant.as_str()).spend(row);
            figures_of(&mut models, row.model.as_deref()).spend(row);
        }
        for row in &sums.saved_by_bucket {
            let Some(kind) = AnswerKind::from_name(&row.kind) else { continue };
            figures_of(&mut buckets, bucket_of(row.bucket_ms)).save(kind, row);
        }
        for row in &sums.spent_by_bucket {
            figures_of(&mut buckets, bucket_of(row.bucket_ms)).spend(row);
        }
        // Most saved first, then by name: the same order whatever order the rows came in.
        let most_saved = |a: &Figures, b: &Figures| {
            b.cost_saved_usd.total_cmp(&a.cost_saved_usd).then(b.upstream_calls_avoided.cmp(&a.upstream_calls_avoided))
        };
        tenants.sort_unstable_by(|(a, fa), (b, fb)| most_saved(fa, fb).then(a.cmp(b)));
        models.sort_unstable_by(|(a, fa), (b, fb)| most_saved(fa, fb).then(a.cmp(b)));
        buckets.sort_unstable_by_key(|(bucket_ms, _)| *bucket_ms);
        let by_tenant = tenants
            .into_iter()
            .map(|(tenant, figures)| TenantFigures { tenant: tenant.to_owned(), figures: figures.rounded() })
            .collect();
        let by_model = models
            .into_iter()
            .map(|(model, figures)| ModelFigures { model: model.map(str::to_owned), figures: figures.rounded() })
            .collect();
        let series = buckets
            .into_iter()
            .map(|(bucket_ms, figures)| BucketFigures { bucket_ms, figures: figures.rounded() })
            .collect();
        Self { bucket_ms: BUCKET_MS, totals: totals.rounded(), by_tenant, by_model, series }
    }
}

/// `GET admin/savings`'s answer: the report, counted from the start of
/// `since_ms`'s bucket (which `since_ms` says, so the console shows what
/// was counted), with what the spend is counted with
/// ([`crate::operators::route::prices_note`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SavingsAnswer<'a> {
    /// The report.
    #[serde(flatten)]
    pub report: &'a Report,
    /// The start of the bucket of the `since_ms` asked for.
    pub since_ms: u64,
    /// The prices' note.
    pub prices: serde_json::Value,
}

impl Report {
    /// The answer to a request for the savings since `since_ms`.
    pub fn answer(&self, since_ms: u64, prices: &Prices) -> SavingsAnswer<'_> {
        SavingsAnswer {
            report: self,
            since_ms: bucket_of(since_ms),
            prices: crate::operators::route::prices_note(prices),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::{Body, Fingerprint};
    use crate::job::{AttemptReport, JobPolicy, UnknownPolicy};
    use crate::retry::classify::ErrorClass;
    use crate::retry::reply::Usage;

    const T0: u64 = 1_700_000_000_000;

    fn prices() -> Prices {
        Prices::bundled_with(r#"{"gpt-test": {"input_per_mtok": 1000, "output_per_mtok": 2000}}"#).unwrap()
    }

    fn report(status: u16, prompt: u64, completion: u64) -> AttemptReport {
        AttemptReport {
            status: Some(status),
            usage: Some(Usage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: prompt + completion,
            }),
            error_class: Some(if status == 200 { ErrorClass::None } else { ErrorClass::Unavailable }),
        }
    }

    /// A job whose attempts called `models` in turn: each failed but the last.
    fn job_of(models: &[&str]) -> Job {
        let fp = Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap();
        let policy = JobPolicy::new(4, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
        let mut job = Job::new(fp, T0, policy);
        for (i, model) in models.iter().enumerate() {
            let now = T0 + 10 * i as u64;
            let ticket = job.claim(job.version(), now, "fake", Some(model)).unwrap();
            if i + 1 == models.len() {
                job.complete(ticket, now + 1, report(200, 10, 5)).unwrap();
            } else {
                job.fail(ticket, now + 1, report(503, 10, 0)).unwrap();
            }
        }
        job
    }

    #[test]
    fn a_job_spent_what_every_attempt_used() {
        let spent = Spent::of_job(&job_of(&["gpt-test"]), Some("gpt-test"), &prices());
        // 10 prompt tokens at $1000/Mtok, 5 completion tokens at $2000/Mtok.
        assert_eq!(spent, Spent { model: Some("gpt-test".into()), tokens: 15, cost_usd: 0.02 });
        // A failed first attempt was paid too; an unpriced model costs nothing.
        let spent = Spent::of_job(&job_of(&["gpt-test", "unpriced"]), None, &prices());
        assert_eq!(spent.tokens, 25);
        assert_eq!(round_usd(spent.cost_usd), 0.01);
        assert_eq!(spent.model.as_deref(), Some("unpriced"), "the answer's attempt names the model");
    }

    #[test]
    fn kinds_have_stable_names() {
        for kind in AnswerKind::ALL {
            assert_eq!(AnswerKind::from_name(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(AnswerKind::from_name("other"), None);
        assert_eq!(AnswerKind::of_ledger_answer(true, false), AnswerKind::KeylessJoin);
        assert_eq!(AnswerKind::of_ledger_answer(true, true), AnswerKind::KeylessJoin);
        assert_eq!(AnswerKind::of_ledger_answer(false, true), AnswerKind::Coalesced);
        assert_eq!(AnswerKind::of_ledger_answer(false, false), AnswerKind::LedgerReplay);
    }

    #[test]
    fn buckets_are_hours() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(BUCKET_MS - 1), 0);
        assert_eq!(bucket_of(BUCKET_MS), BUCKET_MS);
        assert_eq!(bucket_of(T0) % BUCKET_MS, 0);
        assert!(T0 - bucket_of(T0) < BUCKET_MS);
    }

    #[test]
    fn the_tally_sums_answers_per_tenant_model_kind_and_hour() {
        let mut tally = Tally::default();
        let spent = Spent { model: Some("m".into()), tokens: 15, cost_usd: 0.02 };
        for _ in 0..3 {
            tally.add("a", AnswerKind::KvReplay, &spent, T0);
        }
        tally.add("a", AnswerKind::Coalesced, &spent, T0);
        tally.add("b", AnswerKind::KvReplay, &spent, T0);
        tally.add("a", AnswerKind::KvReplay, &spent, T0 + BUCKET_MS);
        tally.add("a", AnswerKind::KvReplay, &Spent::default(), T0);
        let rows = tally.drain();
        assert!(tally.is_empty());
        assert_eq!(rows.len(), 5);
        let find = |tenant: &str, model: &str, kind: &str, bucket| {
            rows.iter()
                .find(|r| r.tenant == tenant && r.model == model && r.kind == kind && r.bucket_ms == bucket)
                .map(|r| (r.answers, r.tokens, round_usd(r.cost_usd)))
        };
        assert_eq!(find("a", "m", "kv_replay", bucket_of(T0)), Some((3, 45, 0.06)));
        assert_eq!(find("a", "m", "coalesced", bucket_of(T0)), Some((1, 15, 0.02)));
        assert_eq!(find("b", "m", "kv_replay", bucket_of(T0)), Some((1, 15, 0.02)));
        assert_eq!(find("a", "m", "kv_replay", bucket_of(T0 + BUCKET_MS)), Some((1, 15, 0.02)));
        assert_eq!(find("a", "", "kv_replay", bucket_of(T0)), Some((1, 0, 0.0)), "no model: its own row");
    }

    #[test]
    fn the_report_puts_saved_next_to_spent() {
        let h0 = bucket_of(T0);
        let h1 = h0 + BUCKET_MS;
        let saved = |tenant: &str, model: &str, kind: &str, bucket_ms, answers: u64| SavedRow {
            tenant: tenant.into(),
            model: model.into(),
            kind: kind.into(),
            bucket_ms,
            answers,
            tokens: 15 * answers,
            cost_usd: 0.02 * answers as f64,
        };
        let spent = |tenant: &str, model: &str, bucket_ms, jobs: u64| SpentRow {
            tenant: tenant.into(),
            model: Some(model.into()),
            bucket_ms,
            jobs,
            tokens: 15 * jobs,
            cost_usd: 0.02 * jobs as f64,
        };
        // Rows not summed yet are summed as the database's sums would be.
        let sums = |saved: &[SavedRow], spent: &[SpentRow]| Sums {
            saved_by_name: saved.to_vec(),
            spent_by_name: spent.to_vec(),
            saved_by_bucket: saved.to_vec(),
            spent_by_bucket: spent.to_vec(),
        };
        let mut saved_rows = vec![
            saved("a", "m", "kv_replay", h0, 3),
            saved("a", "m", "ledger_replay", h1, 2),
            saved("a", "m", "coalesced", h1, 4),
            saved("b", "n", "keyless_join", h1, 1),
            saved("b", "n", "from_the_future", h1, 9),
        ];
        let mut spent_rows = vec![spent("a", "m", h0, 2), spent("b", "n", h1, 1), spent("c", "m", h1, 1)];
        let report = Report::build(&sums(&saved_rows, &spent_rows));
        // Whatever order the rows come in (SQLite promises none), the same report.
        saved_rows.reverse();
        spent_rows.reverse();
        assert_eq!(Report::build(&sums(&saved_rows, &spent_rows)), report);
        // The series comes from the per-bucket sums only, the rest from the per-name ones.
        let by_name_only = Sums { saved_by_bucket: vec![], spent_by_bucket: vec![], ..sums(&saved_rows, &spent_rows) };
        let named = Report::build(&by_name_only);
        assert!(named.series.is_empty());
        assert_eq!((named.totals.clone(), named.by_tenant.clone()), (report.totals.clone(), report.by_tenant.clone()));
        let totals = &report.totals;
        assert_eq!(
            totals.answered_without_call,
            ByKind { total: 10, kv_replay: 3, ledger_replay: 2, coalesced: 4, keyless_join: 1 }
        );
        assert_eq!(totals.upstream_calls_avoided, 10);
        assert_eq!((totals.tokens_saved, totals.cost_saved_usd), (150, 0.2));
        assert_eq!((totals.jobs, totals.tokens, totals.cost_usd), (4, 60, 0.08));
        // Most saved first; a tenant that only spent is listed too.
        let tenants: Vec<(&str, u64, u64)> = report
            .by_tenant
            .iter()
            .map(|t| (t.tenant.as_str(), t.figures.upstream_calls_avoided, t.figures.jobs))
            .collect();
        assert_eq!(tenants, [("a", 9, 2), ("b", 1, 1), ("c", 0, 1)]);
        let models: Vec<(Option<&str>, u64, f64)> = report
            .by_model
            .iter()
            .map(|m| (m.model.as_deref(), m.figures.upstream_calls_avoided, m.figures.cost_usd))
            .collect();
        assert_eq!(models, [(Some("m"), 9, 0.06), (Some("n"), 1, 0.02)]);
        let series: Vec<(u64, u64, f64, u64)> = report
            .series
            .iter()
            .map(|b| (b.bucket_ms, b.figures.upstream_calls_avoided, b.figures.cost_saved_usd, b.figures.jobs))
            .collect();
        assert_eq!(series, [(h0, 3, 0.06, 2), (h1, 7, 0.14, 2)]);
        // As JSON: the figures sit beside the name.
        let json = serde_json::to_value(&report.by_tenant[0]).unwrap();
        assert_eq!(json["tenant"], "a");
        assert_eq!(json["answered_without_call"]["coalesced"], 4);
        assert_eq!(json["cost_saved_usd"], 0.18);
        assert_eq!(serde_json::to_value(&report).unwrap()["bucket_ms"], BUCKET_MS);
        // A named row holds the same fields as the totals, and its name.
        let mut named = serde_json::to_value(&report.by_model[1]).unwrap();
        assert_eq!(named.as_object_mut().unwrap().remove("model").unwrap(), "n");
        assert_eq!(named, serde_json::to_value(&report.by_model[1].figures).unwrap());
        let bucket = serde_json::to_value(&report.series[0]).unwrap();
        assert_eq!(bucket["bucket_ms"], h0);
        assert_eq!(bucket["jobs"], 2);
    }

    #[test]
    fn rows_are_read_as_d1_returns_them() {
        let saved = serde_json::json!({"tenant": "a", "model": "", "kind": "coalesced", "bucket_ms": 3_600_000.0,
            "answers": 2, "tokens": 30, "cost_usd": 0.04});
        assert_eq!(
            SavedRow::from_json(&saved),
            Some(SavedRow {
                tenant: "a".into(),
                model: String::new(),
                kind: "coalesced".into(),
                bucket_ms: BUCKET_MS,
                answers: 2,
                tokens: 30,
                cost_usd: 0.04
            })
        );
        assert_eq!(SavedRow::from_json(&serde_json::json!({"tenant": "a"})), None);
        assert_eq!(
            SavedRow::from_json(&serde_json::json!({"tenant": "a", "model": "", "kind": "k", "bucket_ms": 1.5,
            "answers": 1, "tokens": 1, "cost_usd": 0})),
            None,
            "not a whole number"
        );
        let spent = serde_json::json!({"tenant": "a", "model": null, "bucket_ms": 0, "jobs": 1, "tokens": null, "cost_usd": null});
        assert_eq!(
            SpentRow::from_json(&spent),
            Some(SpentRow { tenant: "a".into(), model: None, bucket_ms: 0, jobs: 1, tokens: 0, cost_usd: 0.0 })
        );
    }

    #[test]
    fn an_empty_report_is_all_zeros() {
        let report = Report::build(&Sums::default());
        assert_eq!(report.totals, Figures::default());
        assert!(report.by_tenant.is_empty() && report.by_model.is_empty() && report.series.is_empty());
    }

    #[test]
    fn the_savings_answer_says_it_counts_from_the_start_of_since_s_bucket() {
        let report = Report::build(&Sums::default());
        let answer = serde_json::to_value(report.answer(T0 + 5, &prices())).unwrap();
        assert_eq!(answer["since_ms"], bucket_of(T0 + 5));
        assert_eq!(answer["bucket_ms"], serde_json::to_value(&report).unwrap()["bucket_ms"]);
        assert!(answer["totals"].is_object(), "the report's members, flattened");
        assert_eq!(answer["prices"], crate::operators::route::prices_note(&prices()));
    }
}
