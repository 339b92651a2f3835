//! The worker's environment.

pub mod binding;
pub mod budgets;
pub mod clock;
pub mod config;
pub mod faults;
pub mod random;
