//! The Worker ↔ Durable Object protocol.

pub mod client;
pub mod handoff;
