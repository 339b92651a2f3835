//! The worker's clock, read in one place (the core takes time as an argument).

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}
