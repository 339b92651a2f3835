//! Fault injection for the tests, compiled only with the cargo feature
//! `faults` (`make build-edge-test`, the worker the edge tests run). The
//! production build (`make build-edge`, what `make dev`, `make package` and
//! `wrangler deploy` use) has the no-op functions below instead: it never
//! reads the knobs, and their names are not in its wasm
//! (tests/package/faults.test.mjs checks both builds).
//!
//! The knobs, read with the rest of the configuration:
//! - `QUEUE_SEND_FAULTS=N`: the first N queue sends of each isolate fail on
//!   purpose, to show that the outbox recovers them;
//! - `QUEUE_SEND_DELAY_MS=N`: every queue send waits N ms before it is
//!   made, as a loaded queue answers slowly (the alarm rings meanwhile);
//! - `EFFECT_HANG_AFTER=name`: once the effect of that name has been
//!   performed, the Ledger waits ten minutes before recording it, so a test
//!   can kill the runtime between the two.

#[cfg(feature = "faults")]
use std::cell::Cell;

#[cfg(feature = "faults")]
use crate::error::EdgeError;

/// The knobs of this isolate (none in a production build).
#[derive(Debug, Default)]
pub struct Faults {
    /// `QUEUE_SEND_FAULTS`: how many queue sends fail on purpose.
    #[cfg(feature = "faults")]
    queue_sends: u32,
    /// Queue sends failed on purpose so far.
    #[cfg(feature = "faults")]
    queue_sends_spent: Cell<u32>,
    /// `QUEUE_SEND_DELAY_MS`: how long each queue send waits first.
    #[cfg(feature = "faults")]
    queue_send_delay_ms: u64,
    /// `EFFECT_HANG_AFTER`: the effect after which the Ledger hangs.
    #[cfg(feature = "faults")]
    effect_hang_after: Option<String>,
}

/// `EFFECT_HANG_AFTER`: how long the Ledger waits between performing the
/// named effect and recording it (a test kills the runtime meanwhile).
#[cfg(feature = "faults")]
const HANG_MS: u64 = 600_000;

#[cfg(feature = "faults")]
impl Faults {
    /// The knobs, from the worker's variables.
    pub fn read(var: &dyn Fn(&str) -> Option<String>) -> Faults {
        Faults {
            queue_sends: var("QUEUE_SEND_FAULTS").and_then(|v| v.trim().parse().ok()).unwrap_or(0),
            queue_sends_spent: Cell::new(0),
            queue_send_delay_ms: var("QUEUE_SEND_DELAY_MS").and_then(|v| v.trim().parse().ok()).unwrap_or(0),
            effect_hang_after: var("EFFECT_HANG_AFTER").filter(|v| !v.trim().is_empty()),
        }
    }

    /// Before a queue send: an error while `QUEUE_SEND_FAULTS` sends are left to fail.
    pub fn queue_send(&self) -> worker::Result<()> {
        let spent = self.queue_sends_spent.get();
        if spent < self.queue_sends {
            self.queue_sends_spent.set(spent + 1);
            return Err(EdgeError::Injected("queue send failed (QUEUE_SEND_FAULTS)").into());
        }
        Ok(())
    }

    /// Before a queue send: waits `QUEUE_SEND_DELAY_MS`.
    pub async fn queue_send_delay(&self) {
        if self.queue_send_delay_ms > 0 {
            worker::Delay::from(std::time::Duration::from_millis(self.queue_send_delay_ms)).await;
        }
    }

    /// Whether the Ledger hangs after performing the effect `name`.
    fn hangs_after(&self, name: &str) -> bool {
        self.effect_hang_after.as_deref() == Some(name)
    }

    /// After the effect `name` was performed, before it is recorded: hangs
    /// ten minutes if it is `EFFECT_HANG_AFTER`'s.
    pub async fn after_effect(&self, name: &str) {
        if self.hangs_after(name) {
            worker::console_log!("ledger: EFFECT_HANG_AFTER: effect {name} performed, not recorded");
            worker::Delay::from(std::time::Duration::from_millis(HANG_MS)).await;
        }
    }
}

#[cfg(not(feature = "faults"))]
impl Faults {
    /// A production build reads no knob.
    #[inline(always)]
    pub fn read(_var: &dyn Fn(&str) -> Option<String>) -> Faults {
        Faults {}
    }

    /// A production build's queue sends never fail on purpose.
    #[inline(always)]
    pub fn queue_send(&self) -> worker::Result<()> {
        Ok(())
    }

    /// A production build's queue sends never wait on purpose.
    #[inline(always)]
    pub async fn queue_send_delay(&self) {}

    /// A production build records an effect as soon as it is performed.
    #[inline(always)]
    pub async fn after_effect(&self, _name: &str) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
    }

    #[cfg(feature = "faults")]
    #[test]
    fn the_first_queue_sends_fail_as_many_as_asked() {
        let faults = Faults::read(&vars(&[("QUEUE_SEND_FAULTS", " 2 ")]));
        assert!(faults.queue_send().is_err());
        assert!(faults.queue_send().is_err());
        assert!(faults.queue_send().is_ok(), "the third send goes through");
        assert!(faults.queue_send().is_ok());
        assert!(Faults::read(&vars(&[("QUEUE_SEND_FAULTS", "x")])).queue_send().is_ok(), "not a number: none");
    }

    #[cfg(feature = "faults")]
    #[test]
    fn a_queue_send_waits_as_long_as_asked() {
        assert_eq!(Faults::read(&vars(&[("QUEUE_SEND_DELAY_MS", " 250 ")])).queue_send_delay_ms, 250);
        assert_eq!(
            Faults::read(&vars(&[("QUEUE_SEND_DELAY_MS", "soon")])).queue_send_delay_ms,
            0,
            "not a number: none"
        );
        assert_eq!(Faults::read(&vars(&[])).queue_send_delay_ms, 0);
    }

    #[cfg(feature = "faults")]
    #[test]
    fn the_ledger_hangs_only_after_the_named_effect() {
        let faults = Faults::read(&vars(&[("EFFECT_HANG_AFTER", "email")]));
        assert!(faults.hangs_after("email"));
        assert!(!faults.hangs_after("record"));
        assert!(!Faults::read(&vars(&[("EFFECT_HANG_AFTER", " ")])).hangs_after(" "), "blank: none");
    }

    #[cfg(not(feature = "faults"))]
    #[test]
    fn a_production_build_ignores_the_knobs() {
        let faults = Faults::read(&vars(&[("QUEUE_SEND_FAULTS", "3"), ("EFFECT_HANG_AFTER", "email")]));
        assert!(faults.queue_send().is_ok());
    }
}
