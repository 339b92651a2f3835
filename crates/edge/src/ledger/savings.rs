//! Answers the Ledger gives without an upstream call (a replay of its
//! stored result, a duplicate handed the running call's answer, a keyless
//! request joining its job), counted in the operators' savings after the
//! answer ([`crate::ops::count_saved`]); a replay also writes the KV
//! entry whose replays the gateway counts, with what the job's calls used.

use onejob_core::config::result_cache::Replayed;
use onejob_core::job::Job;
use onejob_core::operators::savings::{AnswerKind, Spent};
use onejob_core::upstream::sse;
use worker::Env;

use crate::api::handoff::Submission;
use crate::cache;
use crate::env::clock::now_ms;
use crate::env::config::{self, Config};
use crate::http::JobResult;
use crate::ledger::store::Store;
use crate::ops;

use super::Ledger;

impl Ledger {
    /// Counts this answer to `submission`, given without a call: replayed
    /// from storage, or handed over from the running call (`coalesced`).
    /// Everything, the job's figures too, is read after the answer.
    pub(super) fn count_saved(&self, submission: &Submission, coalesced: bool) {
        let kind = AnswerKind::of_ledger_answer(submission.keyless.is_some(), coalesced);
        let (env, store, tenant) = (self.env.clone(), self.store(), submission.tenant.clone());
        self.state.wait_until(async move {
            let spent = store.load_job().ok().flatten().and_then(|job| spent_on(&env, &store, &job));
            ops::count_saved(env, tenant, kind, spent.unwrap_or_default()).await;
        });
    }

    /// After a finished job's replay to `submission`, in one task: what the
    /// job's calls used is worked out once, from the job in hand, then
    /// counted as saved and, on the job's first replay from this object
    /// (per version; see [`ResultCache::caches_replay`]), written to KV with
    /// the result (a read-through cache for the next replays; the Ledger
    /// stays the authority).
    ///
    /// [`ResultCache::caches_replay`]: onejob_core::config::result_cache::ResultCache::caches_replay
    /// `cache`: the core's say ([`Plan::Replay`]): a background submission's
    /// replay is only counted.
    ///
    /// [`Plan::Replay`]: onejob_core::ledger::request::submit::Plan::Replay
    pub(super) fn after_replay(
        &self,
        config: &Config,
        submission: &Submission,
        job: &Job,
        result: &JobResult,
        cache: bool,
    ) {
        let replayed = Replayed {
            finished: result.state.is_terminal(),
            job_type: submission.run.is_some(),
            keyless: submission.keyless.is_some(),
            streamed: result.content_type.starts_with(sse::MEDIA_TYPE),
        };
        let cached = (cache
            && config.settings.result_cache.caches_replay(replayed)
            && self.cached_version.replace(Some(job.version())) != Some(job.version()))
        .then(|| {
            let ttl_s = job.expires_ms().saturating_sub(now_ms()) / 1000;
            (submission.storage_id().to_string(), result.clone(), ttl_s)
        });
        let kind = AnswerKind::of_ledger_answer(submission.keyless.is_some(), false);
        let (env, store, tenant, job) = (self.env.clone(), self.store(), submission.tenant.clone(), job.clone());
        self.state.wait_until(async move {
            let spent = spent_on(&env, &store, &job);
            if let Some((storage_id, result, ttl_s)) = cached {
                let fingerprint = job.fingerprint().to_string();
                cache::store(&env, &storage_id, &fingerprint, &result, ttl_s, spent.clone()).await;
            }
            ops::count_saved(env, tenant, kind, spent.unwrap_or_default()).await;
        });
    }
}

/// What `job`'s calls used, with the model its request named (nothing
/// while they have not reported: a duplicate that follows a live stream
/// counts its call with no tokens).
fn spent_on(env: &Env, store: &Store, job: &Job) -> Option<Spent> {
    let config = config::load(env).ok()?;
    let meta = store.load_meta().ok().flatten();
    Some(Spent::of_job(job, meta.as_ref().and_then(|m| m.model.as_deref()), &config.prices))
}
