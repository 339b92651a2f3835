//! The HTTP vocabulary shared by the edge and the client: header names
//! ([`header`]), the RFC 9457 problem types of every error the edge returns
//! ([`problem`]), and the `Prefer` header ([`prefer`]). The bottom layer:
//! it imports nothing else of the crate.

pub mod header;
pub mod prefer;
pub mod problem;

pub use header::parse_should_retry;
pub use prefer::{prefer_wait_seconds, prefers_async};
pub use problem::{PROBLEM_CONTENT_TYPE, Problem, ProblemType};
