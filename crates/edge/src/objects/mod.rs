//! The Durable Objects other than the Ledger, each a thin shell around a
//! core machine: [`health::ProviderHealth`] (a circuit breaker per provider,
//! [`onejob_core::breaker`]), [`meter::UsageMeter`] (token quotas per
//! tenant and user, [`onejob_core::quota`]) and [`cursor::QueueCursor`]
//! (how far the jobs queue's consumer has got,
//! [`onejob_core::background::progress`]). Their messages and clients are
//! in [`crate::api`]: nothing imports this folder but `lib.rs`, which exports
//! the objects.
//!
//! May import: `api` (their messages), `env`, `http` and the core.

pub mod cursor;
pub mod health;
pub mod meter;
