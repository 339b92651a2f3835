//! A keyless job replaced by a new one under its derived key
//! ([`onejob_core::ledger::request::admission::Admission::Renew`]): once the ended job's
//! replay window has passed (`KEYLESS=coalesce`: at once), the next
//! identical request starts a new job instead of replaying it.
//!
//! What keeps the two apart:
//! - everything the ended job kept (its record, responses, stream events,
//!   meta) is deleted in the same synchronous step that admits the request,
//!   so nothing of it can be replayed as the new job's answer;
//! - the new job's version starts past the ended one's ([`Job::renew`]), so
//!   a write still made for the ended job (a hedge's loser audited late)
//!   fails its compare-and-swap instead of landing on the new job;
//! - the new job's provider key is its own (its generation, see
//!   [`crate::api::handoff::Submission::upstream_key`]);
//! - a request that joined the ended job already holds its answer (a
//!   waiter is handed it in memory, a replay reads it whole before it
//!   answers, a stream's follower gets its events through its channel), and
//!   while the drive that ended it still hands it out, admission replays
//!   rather than renews.

use onejob_core::job::Job;
use worker::Result;

use crate::ledger::store::Store;

use super::{Ledger, alarms};

impl Ledger {
    /// Replaces the ended job with `renewed`, the new job the core made of
    /// it ([`onejob_core::ledger::request::submit::Decision::renewed`]; not stored
    /// yet: its first claim writes it): the ended job's rows are deleted and
    /// the alarm set to the new job's retention. Nothing awaits here.
    pub(super) fn replace_ended(&self, store: &Store, renewed: &Job) -> Result<()> {
        store.clear_job()?;
        alarms::set_in_background(&self.state, alarms::retention(renewed));
        Ok(())
    }
}
