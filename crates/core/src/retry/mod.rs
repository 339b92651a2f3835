//! What an outcome means and when to go again: an LLM reply's hints, which
//! outcomes are retried (or unknown), a breaker per provider, and the
//! jittered backoff with its budget and `Retry-After`.
//!
//! May import: `identity`, `wire`.

pub mod backoff;
pub mod breaker;
pub mod classify;
pub mod reply;
