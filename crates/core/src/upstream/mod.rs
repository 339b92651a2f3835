//! The providers: named upstreams and their routes, a route's output
//! contract, streamed answers cut into events, and a provider's answer as
//! it arrives.
//!
//! May import: `identity`, `wire`, `retry`.

pub mod arrival;
pub mod contract;
pub mod providers;
pub mod sse;
