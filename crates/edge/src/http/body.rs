//! Request bodies, read the one way every route reads them. What a body
//! may be is the core's ([`onejob_core::front::body`]: a JSON media type,
//! else `415`; at most the deployment's `MAX_BODY_BYTES`, declared or
//! counted on the bytes actually read — a chunked body has no
//! `Content-Length` to trust — else `413`; JSON through core's strict
//! reader, else `400`); this reads the headers and the bytes as it says.

use futures_util::StreamExt;
use onejob_core::front::body::BodyRead;
use onejob_core::front::head::Head;
use onejob_core::front::{self};
use serde::de::DeserializeOwned;
use worker::{Request, Result};

use crate::http::Step;

/// The request's head, read in one go: its method, URL path and query
/// (raw and decoded) and headers, which the core reads by name ([`Head`]).
pub fn head(req: &Request) -> Result<Head> {
    let url = req.url()?;
    Ok(Head {
        method: req.method().as_ref().to_owned(),
        path: url.path().to_owned(),
        query: url.query().map(str::to_owned),
        params: url.query_pairs().map(|(name, value)| (name.into_owned(), value.into_owned())).collect(),
        headers: req.headers().entries().collect(),
    })
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
    let plan = BodyRead::of(&head(req)?.body(), limit)?;
    let bytes = read(req, &plan).await?;
    Ok(front::parse_strict(&bytes, shape)?)
}
