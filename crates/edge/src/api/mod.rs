//! The Worker ↔ Durable Object protocol.

pub mod client;
pub mod handoff;
pub mod health;
pub mod meter;
