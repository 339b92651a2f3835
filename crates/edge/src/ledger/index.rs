//! The operators' index of the job, written after the answer when the job
//! changed, and the quota metering of its new tokens before it.

use std::cell::Cell;
use std::rc::Rc;

use onejob_core::config::quota;
use worker::Env;

use crate::api::meter;
use crate::env::config::{self, Config};
use crate::ledger::store::Store;
use crate::ops;

use super::Ledger;

impl Ledger {
    /// Updates the operators' index after the response, if the job changed
    /// since this object last did.
    pub(super) fn index_in_background(&self) {
        let store = self.store();
        // One integer read on every replay; the job itself only when it changed.
        let Ok(Some(version)) = store.job_version() else { return };
        if version == self.indexed_version.get() {
            return;
        }
        self.indexed_version.set(version);
        let (env, metering) = (self.env.clone(), Rc::clone(&self.metering));
        self.state.wait_until(async move { index_now(&env, &store, &metering).await });
    }
}

/// Writes the job's row in the operators' index (errors are logged: the
/// index is for looking, the Ledger stays the authority), after counting
/// the job's new tokens against its quotas.
pub(super) async fn index_now(env: &Env, store: &Store, metering: &Cell<bool>) {
    let Ok(config) = config::load(env) else { return };
    if !config.quotas.is_empty() {
        meter_new_tokens(env, &config, store, metering).await;
    }
    let (Ok(Some(meta)), Ok(Some(job))) = (store.load_meta(), store.load_job()) else { return };
    if let Err(error) = ops::index_job(env, &config, &meta, &job).await {
        worker::console_warn!("ledger: indexing the job failed: {error}");
    }
}

/// Counts the job's tokens not counted yet against its tenant's and user's
/// quotas: added, then marked as counted, so a failed add leaves them to
/// the next index of the job instead of losing them. One count at a time
/// per object (`metering`): a count that finds one running leaves its
/// tokens to it, and the running one looks again before it stops.
pub(super) async fn meter_new_tokens(env: &Env, config: &Config, store: &Store, metering: &Cell<bool>) {
    if metering.replace(true) {
        return;
    }
    while let (Ok(Some(mut meta)), Ok(Some(job))) = (store.load_meta(), store.load_job()) {
        let Some(new) = quota::unmetered(job.attempts(), meta.metered) else { break };
        let limits = config.settings_quota_limits(&meta.tenant);
        let share = config.settings.alerts.quota_share_permille;
        match meter::add(env, &meta.tenant, meta.user.as_deref(), new, limits, share).await {
            Ok(due) => {
                // A quota passed its alert share with this count (once a day).
                for alert in &due {
                    ops::budget_alert(env, config, alert).await;
                }
            }
            Err(error) => {
                worker::console_warn!("ledger: counting tokens against quotas failed (counted later): {error}");
                break;
            }
        }
        // A keyless job replaced meanwhile by a new one under its key: the
        // meta row is the new job's now, whose tokens start uncounted.
        if !matches!(store.load_job(), Ok(Some(now)) if now.generation() == job.generation()) {
            break;
        }
        meta.metered += new;
        if let Err(error) = store.update_meta(&meta) {
            worker::console_warn!("ledger: marking tokens as counted failed: {error}");
            break;
        }
    }
    metering.set(false);
}
