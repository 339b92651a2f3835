//! Answers the Ledger gives without an upstream call (a replay of its
//! stored result, a duplicate handed the running call's answer, a keyless
//! request joining its job), counted in the operators' savings after the
//! answer ([`crate::ops::count_saved`]), and what a job's calls used, for
//! the KV entry whose replays the gateway counts.

use onejob_core::savings::{AnswerKind, Spent};
use worker::Env;

use crate::api::handoff::Submission;
use crate::env::config;
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
            let spent = spent_in(&env, &store).unwrap_or_default();
            ops::count_saved(env, tenant, kind, spent).await;
        });
    }
}

/// What the stored job's calls used (nothing while they have not reported:
/// a duplicate that follows a live stream counts its call with no tokens).
pub(super) fn spent_in(env: &Env, store: &Store) -> Option<Spent> {
    let config = config::load(env).ok()?;
    let job = store.load_job().ok()??;
    let meta = store.load_meta().ok().flatten();
    Some(Spent::of_job(&job, meta.as_ref().and_then(|m| m.model.as_deref()), &config.prices))
}
