//! Operators and approvers on one job: a settlement, a caller's cancel, a
//! poll's wait ([`settle`]), and what the Ledger performs for an operator's
//! or approver's request, in order ([`plan`]).

pub mod plan;
pub mod settle;
