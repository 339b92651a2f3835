//! The Durable Objects other than the Ledger.

pub mod health;
pub mod meter;
