//! The Durable Objects other than the Ledger, each a thin shell around a
//! core machine: [`health::ProviderHealth`] (a circuit breaker per provider,
//! [`onejob_core::retry::breaker`]), [`meter::UsageMeter`] (token quotas per
//! tenant and user, [`onejob_core::config::quota`]) and [`cursor::QueueCursor`]
//! (how far the jobs queue's consumer has got,
//! [`onejob_core::ledger::background::progress`]). Their messages and clients are
//! in [`crate::api`]: nothing imports this folder but `lib.rs`, which exports
//! the objects.
//!
//! May import: `api` (their messages), `env`, `http` and the core.

pub mod cursor;
pub mod health;
pub mod meter;
