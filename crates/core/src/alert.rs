//! When dead letters become an alert: more than a threshold of one cause
//! within a window, or any dead letter of a cause that always needs a human
//! (`auth`: a revoked or wrong provider key fails every job until someone
//! fixes it). One alert per cause per window; its delivery id is the same on
//! every retry, so the receiver can dedup.

/// When to alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertPolicy {
    /// Alert when a cause has more than this many dead letters in a window.
    pub threshold: u32,
    /// The window, in milliseconds.
    pub window_ms: u64,
}

/// Causes that alert at their first dead letter (by their audit name):
/// `auth` ([`crate::classify::ErrorClass::Auth`]).
pub fn alerts_at_once(error_class: &str) -> bool {
    // A revoked key stops every job; an effect that did not happen (a mail
    // not sent, a row not written) is a promise broken to one customer.
    error_class == "auth" || error_class == "effect"
}

/// Whether `count` dead letters of `error_class` in the current window call
/// for an alert.
pub fn should_alert(policy: AlertPolicy, error_class: &str, count: u32) -> bool {
    alerts_at_once(error_class) || count > policy.threshold
}

/// The window `now_ms` falls in (its number since the epoch).
pub fn window_of(policy: AlertPolicy, now_ms: u64) -> u64 {
    now_ms / policy.window_ms.max(1)
}

/// The alert's delivery id: one per cause and window, the same on retries.
pub fn delivery_id(error_class: &str, window: u64) -> String {
    format!("onejob-alert-{error_class}-{window}")
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const POLICY: AlertPolicy = AlertPolicy { threshold: 10, window_ms: 900_000 };

    #[test]
    fn threshold_or_a_cause_that_needs_a_human() {
        assert!(!should_alert(POLICY, "unavailable", 10));
        assert!(should_alert(POLICY, "unavailable", 11));
        assert!(should_alert(POLICY, "auth", 1));
    }

    #[test]
    fn one_delivery_id_per_cause_and_window() {
        let w = window_of(POLICY, 1_800_000);
        assert_eq!(w, 2);
        assert_eq!(window_of(POLICY, 2_699_999), 2);
        assert_eq!(delivery_id("unavailable", w), "onejob-alert-unavailable-2");
        assert_ne!(delivery_id("unavailable", w), delivery_id("auth", w));
    }
}
