//! A deployment's settings and credentials: tenants, admin keys, user
//! tokens and their signatures, quotas, prices, the result cache, alerts.
//!
//! May import: `identity`, `wire`, `retry`, `upstream`, `job_type`, `job`.

pub mod admin;
pub mod alert;
pub mod pricing;
pub mod quota;
pub mod result_cache;
pub mod settings;
pub mod signature;
pub mod tenant;
pub mod token;
