//! The stateless front.

pub mod admin;
mod auth;
mod check;
pub mod gateway;
pub mod providers;
