//! What one seed sets up: the deployment (providers, their temper, routes
//! with or without a hedge), the job policy, the tenant's retry budget, the
//! jobs and their callers, and how often the world crashes. All drawn from
//! the seed's generator.

use std::sync::OnceLock;

use onejob_core::identity::fingerprint::{Body, Fingerprint};
use onejob_core::job::{JobPolicy, UnknownPolicy};
use onejob_core::retry::backoff::budget::BudgetConfig;
use onejob_core::retry::backoff::{Backoff, Jitter};
use onejob_core::upstream::providers::Providers;

use crate::rng::Rng;

/// The clock's start (virtual milliseconds since the epoch).
pub const T0: u64 = 1_700_000_000_000;

/// How long jobs are kept (the default: 24 h), far longer than any lease
/// or the outbox's resends of a message the queue lost now and then.
pub const RETENTION_MS: u64 = 24 * 3_600_000;

/// The outbox's base delay (the `OUTBOX_DELAY_MS` default).
pub const OUTBOX_DELAY_MS: u64 = 5_000;

/// Jobs at most per seed.
pub const MAX_JOBS: usize = 3;

/// What a provider may answer one call with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// A 200 with a completion, in well under a second.
    Good,
    /// A 200 with a completion, slowly (a hedge may win meanwhile).
    SlowGood,
    /// 503, no `Retry-After`.
    Busy,
    /// 503 with `Retry-After` in seconds.
    BusyRetryAfter,
    /// 429 with `retry-after-ms`.
    RateLimited,
    /// 500 (retried once per drive).
    ServerError,
    /// 400 (final).
    BadRequest,
    /// 401 (final; a background job's dead letter at once).
    Unauthorized,
    /// A 200 cut by the content filter (final).
    ContentFilter,
    /// The connection failed before the request was sent.
    Connect,
    /// Timed out before the request was sent.
    TimeoutBeforeSend,
    /// Timed out after the request left: unknown.
    TimeoutAfterSend,
    /// The connection dropped after the request left: unknown.
    Dropped,
    /// The answer streams (asked for, or not: then it cannot be judged).
    Streams,
}

/// Every reply, in the order of a profile's weights.
pub const REPLIES: [Reply; 14] = [
    Reply::Good,
    Reply::SlowGood,
    Reply::Busy,
    Reply::BusyRetryAfter,
    Reply::RateLimited,
    Reply::ServerError,
    Reply::BadRequest,
    Reply::Unauthorized,
    Reply::ContentFilter,
    Reply::Connect,
    Reply::TimeoutBeforeSend,
    Reply::TimeoutAfterSend,
    Reply::Dropped,
    Reply::Streams,
];

/// A provider's temper: the weight of each reply of [`REPLIES`].
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    /// Its name in traces.
    pub name: &'static str,
    /// Weights, per [`REPLIES`].
    pub weights: [u32; 14],
}

/// The tempers a provider is drawn with.
pub const PROFILES: [Profile; 5] = [
    //                                     good slow busy ra  429 500 400 401 cf conn tob toa drop stream
    Profile { name: "healthy", weights: [800, 60, 30, 20, 20, 10, 5, 2, 3, 20, 5, 10, 10, 5] },
    Profile { name: "flaky", weights: [350, 50, 200, 120, 120, 50, 5, 2, 3, 60, 20, 10, 10, 0] },
    Profile { name: "refusing", weights: [300, 20, 40, 20, 20, 10, 250, 150, 60, 10, 5, 5, 5, 5] },
    Profile { name: "slow", weights: [200, 400, 40, 20, 20, 10, 5, 2, 3, 20, 40, 120, 80, 0] },
    Profile { name: "chaos", weights: [100, 100, 70, 70, 70, 70, 70, 70, 70, 70, 70, 70, 70, 30] },
];

/// One foreground caller (or a background job's submitter) and its retries.
#[derive(Debug, Clone)]
pub struct CallerSpec {
    /// When it first sends (after [`T0`]).
    pub at_ms: u64,
    /// `Prefer: wait=N` (0: never wait for another request).
    pub wait_ms: u64,
    /// Requests it sends at most (its SDK's retries included).
    pub tries: u32,
    /// It sends another payload under the same key (a 422 is due).
    pub other_payload: bool,
    /// A `Prefer: respond-async` submitter to a foreground job: accepted
    /// (kept to adopt if a drive runs the job), and the job adopted when it
    /// is left unfinished.
    pub background: bool,
}

/// One job (one idempotency key of the tenant).
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The model its requests name (its route).
    pub model: String,
    /// `Prefer: respond-async`: run by the queue.
    pub background: bool,
    /// The request asks for a streamed answer.
    pub stream: bool,
    /// Its callers (submitters, for a background job).
    pub callers: Vec<CallerSpec>,
}

/// Everything one seed runs with.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The deployment's providers and routes (`m0`, `m1`, `m2`).
    pub providers: Providers,
    /// Each provider's temper.
    pub profiles: Vec<Profile>,
    /// The jobs' policy.
    pub policy: JobPolicy,
    /// The backoff between attempts.
    pub backoff: Backoff,
    /// The tenant's retry budget.
    pub budget: BudgetConfig,
    /// Its capacity (what the budget may never exceed).
    pub budget_capacity: u32,
    /// How long a call may take before it times out (after send: unknown).
    pub call_timeout_ms: u64,
    /// Chance per step (and a quarter of it per command) that an object crashes.
    pub crash_per_mille: u32,
    /// The jobs.
    pub jobs: Vec<JobSpec>,
}

/// The fingerprint of job `job`'s request (`other`: the other payload sent
/// under its key), computed once per process.
pub fn fingerprint(job: usize, other: bool) -> &'static Fingerprint {
    static ALL: OnceLock<Vec<Fingerprint>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        (0..MAX_JOBS * 2)
            .map(|i| {
                let body = format!(r#"{{"model":"m{}","messages":[{{"role":"user","content":"q{i}"}}]}}"#, i / 2);
                Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(body.as_bytes()))
                    .expect("a JSON body")
            })
            .collect()
    });
    &all[job * 2 + usize::from(other)]
}

impl Scenario {
    /// The scenario of a seed, drawn from its generator.
    pub fn draw(rng: &mut Rng) -> Self {
        let provider_count = [1, 2, 2, 3, 3][rng.below(5) as usize];
        let profiles: Vec<Profile> =
            (0..provider_count).map(|_| PROFILES[rng.below(PROFILES.len() as u64) as usize]).collect();
        let job_count = rng.range(1, MAX_JOBS as u64) as usize;
        let list: Vec<String> = (0..provider_count).map(|p| format!(r#"{{"name":"p{p}","kind":"demo"}}"#)).collect();
        let mut routes = Vec::new();
        for job in 0..job_count {
            // 1 to 3 steps, in a drawn order, a provider at most once.
            let mut order: Vec<usize> = (0..provider_count).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            order.truncate(if rng.chance(700) { provider_count } else { rng.range(1, provider_count as u64) as usize });
            let steps: Vec<String> = order.iter().map(|p| format!(r#"{{"provider":"p{p}"}}"#)).collect();
            let hedge =
                if rng.chance(500) { format!(r#","hedge_after_ms":{}"#, rng.range(50, 2_000)) } else { String::new() };
            // An output contract: an answer without the key is a 502 the
            // next provider may do better than.
            let contract = if rng.chance(150) { r#","contract":{"required_keys":["answer"]}"# } else { "" };
            routes.push(format!(r#""m{job}":{{"providers":[{}]{hedge}{contract}}}"#, steps.join(",")));
        }
        let providers = Providers::parse(&format!("[{}]", list.join(",")), Some(&format!("{{{}}}", routes.join(","))))
            .expect("the drawn providers and routes");

        let max_attempts = [1, 2, 2, 3, 3, 4, 4, 4][rng.below(8) as usize];
        let attempt_lease_ms = rng.range(2_000, 60_000);
        let unknown_lease_ms = rng.range(1_000, 60_000);
        let unknown_policy = if rng.chance(200) { UnknownPolicy::Block } else { UnknownPolicy::RetryAfterLease };
        let policy = JobPolicy::new(max_attempts, attempt_lease_ms, unknown_lease_ms, RETENTION_MS, unknown_policy)
            .expect("a valid policy");
        let base = rng.range(50, 500);
        let backoff = Backoff::new(base, base.max(rng.range(1_000, 8_000)), Jitter::Full).expect("a valid backoff");
        let budget_capacity = [10, 15, 20, 40, 500][rng.below(5) as usize];
        let budget = BudgetConfig::new(budget_capacity, 5, 10, 1).expect("a valid budget");
        let call_timeout_ms = rng.range(3_000, 40_000);
        let crash_per_mille = [0, 5, 15, 30, 50][rng.below(5) as usize];

        let jobs = (0..job_count)
            .map(|job| {
                let background = rng.chance(250);
                let stream = !background && rng.chance(120);
                let callers = (0..rng.range(1, 5))
                    .map(|i| CallerSpec {
                        at_ms: if i == 0 { rng.range(0, 500) } else { rng.range(0, 8_000) },
                        wait_ms: if rng.chance(250) { 0 } else { rng.range(500, 30_000) },
                        tries: rng.range(1, 4) as u32,
                        other_payload: i > 0 && rng.chance(80),
                        background: i > 0 && !background && !stream && rng.chance(80),
                    })
                    .collect();
                JobSpec { model: format!("m{job}"), background, stream, callers }
            })
            .collect();
        Self { providers, profiles, policy, backoff, budget, budget_capacity, call_timeout_ms, crash_per_mille, jobs }
    }
}
