//! What "the same request" is: its canonical form and fingerprint, the
//! idempotency key and the tenant-scoped ids built from it, the key of a
//! request that has none, the randomness a caller supplies, and the
//! client's key rules.
//!
//! May import: `wire`.

pub mod canonical;
pub(crate) mod digest;
pub mod fingerprint;
pub mod intent;
pub mod key;
pub mod keyless;
pub mod random;
