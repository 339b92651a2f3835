//! The one call the Worker makes to a job's `Ledger`: a typed enum, so a
//! route is named once, its payload travels with it, and the Ledger's entry
//! decodes one value instead of matching URL strings. The call, its wire
//! form (a `POST https://ledger/<name>` whose body is the payload) and the
//! replay's reply are the core's ([`onejob_core::api::ledger_call`]).

pub use onejob_core::api::ledger_call::{LedgerCall, Malformed, ReplayReply};
