//! The old path of the wire contract, kept so the client and the edge
//! compile unchanged: prefer [`crate::wire`] (header names, problem types,
//! `Prefer`) and [`crate::view`] (the job view). Nothing in this crate
//! imports it.

pub use crate::view::JobView;
pub use crate::wire::{
    PROBLEM_CONTENT_TYPE, Problem, ProblemType, header, parse_should_retry, prefer_wait_seconds, prefers_async,
};
