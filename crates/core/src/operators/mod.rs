//! The operators' side: the operator API's routes and list filters, dead
//! letters and their alert, what answers given without a call saved, and a
//! providers check.
//!
//! May import: everything above it in `lib.rs` (`ledger` included).

pub mod dead_letters;
pub mod provider_check;
pub mod query;
pub mod route;
pub mod savings;
