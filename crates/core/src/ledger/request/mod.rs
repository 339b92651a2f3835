//! A keyed request to the Ledger: what it is admitted to do, what a
//! submission does and in which order ([`submit_machine`]), the drive (one run of attempts as a
//! machine), the order of a run under the drive lock ([`run_machine`]) and what an attempt's answer means.

pub mod admission;
pub mod attempts;
pub mod drive;
pub mod run_machine;
pub mod submit;
pub mod submit_machine;
