//! What a provider answered, as every provider (the demo one and HTTP
//! upstreams) reports it to the driver: a [`Reply`] read whole, or an
//! answer [`Streaming`]; and a response as the Ledger keeps it
//! ([`StoredResponse`]). A leaf: it imports nothing of the crate (only the
//! core), so the providers, the driver, the pump and the response helpers
//! share these types without importing each other.

use std::pin::Pin;

use futures_util::Stream;
use worker::AbortController;

/// The bytes of an answer that streams, as they arrive.
pub type ByteChunks = Pin<Box<dyn Stream<Item = worker::Result<Vec<u8>>>>>;

/// One upstream answer, body read whole (core's: how one is read, and
/// one too large to keep, are its rules).
pub use onejob_core::upstream::arrival::{Reply, header_of};

/// An answer being streamed.
pub struct Streaming {
    pub content_type: String,
    pub body: ByteChunks,
    /// Aborts the upstream call (none for the demo provider).
    pub abort: Option<AbortController>,
}

/// A response as stored, and as replayed byte for byte (core's: the
/// attempt machine keeps it).
pub use onejob_core::ledger::request::attempts::StoredResponse;
