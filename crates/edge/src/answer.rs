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

/// One upstream HTTP answer, body read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    /// The headers the retry rule reads (`Retry-After`, `retry-after-ms`,
    /// `x-should-retry`), by lower-case name.
    pub hints: Vec<(&'static str, String)>,
}

impl Reply {
    /// A JSON answer with no retry hints.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        Self { status, content_type: "application/json".into(), body, hints: Vec::new() }
    }

    /// The value of a hint header, by name (any case).
    pub fn header(&self, name: &str) -> Option<String> {
        header_of(&self.hints, name)
    }
}

/// The retry hint `name` among `hints` (a reply's, taken apart).
pub fn header_of(hints: &[(&'static str, String)], name: &str) -> Option<String> {
    hints.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
}

/// An answer being streamed.
pub struct Streaming {
    pub content_type: String,
    pub body: ByteChunks,
    /// Aborts the upstream call (none for the demo provider).
    pub abort: Option<AbortController>,
}

/// A response as stored, and as replayed byte for byte (core's: the
/// attempt machine keeps it).
pub use onejob_core::ledger::attempts::StoredResponse;
