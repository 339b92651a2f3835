//! The typed payloads between the stateless gateway and a `Ledger` (the
//! call that carries them: [`crate::api::ledger::LedgerCall`]), so neither
//! side reads the other's headers and the gateway does not depend on the
//! Ledger's code. They and their wire form are the core's
//! ([`onejob_core::api::ledger_call`]); a dead letter's facts are the Ledger
//! machine's ([`onejob_core::ledger::dead_letter`]).

pub use onejob_core::api::ledger_call::{JobMessage, JobMeta, JobQuery, OperatorRequest, RunOf, Submission, model_of};
pub use onejob_core::ledger::dead_letter::DeadFacts;
