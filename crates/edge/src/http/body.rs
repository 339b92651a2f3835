//! Request bodies, read the one way every route reads them. What a body
//! may be is the core's ([`onejob_core::front::body`]: a JSON media type,
//! else `415`; at most the deployment's `MAX_BODY_BYTES`, declared or
//! counted on the bytes actually read — a chunked body has no
//! `Content-Length` to trust — else `413`; JSON through core's strict
//! reader, else `400`); this reads the headers and the bytes as it says.

use futures_util::StreamExt;
use onejob_core::front::body::{BodyHead, BodyRead, PostHead};
use onejob_core::front::{self};
use onejob_core::protocol::header;
use serde::de::DeserializeOwned;
use worker::{Request, Result};

use crate::http::Step;

/// The headers a body's checks read, as the request sent them.
pub struct SentHead {
    method: String,
    idempotency_key: Option<String>,
    content_type: Option<String>,
    content_length: Option<String>,
}

impl SentHead {
    /// Reads the method, `Idempotency-Key`, `Content-Type` and `Content-Length`.
    pub fn of(req: &Request) -> Result<Self> {
        let headers = req.headers();
        Ok(Self {
            method: req.method().as_ref().to_owned(),
            idempotency_key: headers.get(header::IDEMPOTENCY_KEY)?,
            content_type: headers.get("Content-Type")?,
            content_length: headers.get("Content-Length")?,
        })
    }

    /// The body's head, for [`BodyRead::of`].
    pub fn body(&self) -> BodyHead<'_> {
        BodyHead { content_type: self.content_type.as_deref(), content_length: self.content_length.as_deref() }
    }

    /// The keyed POST's head, for [`front::body::keyed_post`].
    pub fn post(&self) -> PostHead<'_> {
        PostHead { method: &self.method, idempotency_key: self.idempotency_key.as_deref(), body: self.body() }
    }
}

/// The body's bytes as `plan` says: whole, or counted chunk by chunk and
/// refused (`413`) at the chunk that passes the limit, nothing past it buffered.
pub async fn read(req: &mut Request, plan: &BodyRead) -> Step<Vec<u8>> {
    // A declared length within the limit is all the runtime delivers: read
    // it in one go, with one copy.
    if plan.whole() {
        return Ok(req.bytes().await?);
    }
    let mut body = Vec::new();
    // A request without a body has no stream.
    let Ok(mut chunks) = req.stream() else { return Ok(body) };
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        plan.take(body.len(), chunk.len())?;
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A JSON body of type `T`: its head checked ([`BodyRead::of`]), its bytes
/// read ([`read`]) and read strictly ([`front::parse_strict`]); `shape`
/// tells a caller whose JSON is valid but not a `T` what to send.
pub async fn read_json<T: DeserializeOwned>(req: &mut Request, limit: u64, shape: &str) -> Step<T> {
    let plan = BodyRead::of(&SentHead::of(req)?.body(), limit)?;
    let bytes = read(req, &plan).await?;
    Ok(front::parse_strict(&bytes, shape)?)
}
