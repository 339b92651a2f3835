//! What crosses the Worker ↔ Durable Object boundary: the worker's one
//! call to a job's Ledger, its payloads and their wire form.
//!
//! May import: everything above it in `lib.rs`.

pub mod ledger_call;
