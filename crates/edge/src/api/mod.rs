//! The Worker ↔ Durable Object protocol: the typed messages the stateless
//! front, the queue consumer and the Ledger send each other, and the clients
//! that send them, so no module needs another's code to talk to an object.
//!
//! - [`ledger`]: the one typed call to a job's `Ledger` ([`ledger::LedgerCall`]);
//! - [`handoff`]: what travels to and from the `Ledger` (a submission, a job
//!   query, an operator request, a queue message, a dead letter's facts);
//! - [`health`], [`meter`], [`cursor`]: the messages of `ProviderHealth`,
//!   `UsageMeter` and `QueueCursor`, and their clients;
//! - [`client`]: a call to a Durable Object by name.
//!
//! May import: `env` (binding names) and the core.

pub mod client;
pub mod cursor;
pub mod handoff;
pub mod health;
pub mod ledger;
pub mod meter;
