//! The Ledger's one alarm, for three purposes: retention (delete everything
//! when the job expires), while a stream runs its watchdog (settle a stream
//! whose pump is gone), and a background job's outbox (send its message
//! again if it may not exist). The alarm handler sets the next one.

use std::time::Duration;

use onejob_core::job::Job;
use onejob_core::ledger::background::outbox::Outbox;
use worker::{ScheduledTime, State};

use onejob_core::ledger::background::wake::{self, WATCHDOG_MS};

/// When the job's retention ends.
pub fn retention(job: &Job) -> ScheduledTime {
    ScheduledTime::new(js_sys::Date::new(&(job.expires_ms() as f64).into()))
}

/// The job's next due time ([`wake::next_ms`]).
pub fn next(job: &Job, outbox: &Outbox, outbox_delay_ms: u64, effects_due: Option<u64>) -> ScheduledTime {
    let due = wake::next_ms(job, outbox, outbox_delay_ms, effects_due, crate::env::clock::now_ms());
    ScheduledTime::new(js_sys::Date::new(&(due as f64).into()))
}

/// The watchdog's next look.
pub fn watchdog() -> ScheduledTime {
    ScheduledTime::from(Duration::from_millis(WATCHDOG_MS))
}

/// Sets the alarm.
pub async fn set(state: &State, at: ScheduledTime) -> worker::Result<()> {
    state.storage().set_alarm(at).await
}

/// Sets the alarm without delaying anything (a failure is logged).
pub fn set_in_background(state: &State, at: ScheduledTime) {
    let storage = state.storage();
    state.wait_until(async move {
        if let Err(error) = storage.set_alarm(at).await {
            worker::console_error!("ledger: setting an alarm failed: {error}");
        }
    });
}
