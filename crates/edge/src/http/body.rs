//! Request bodies, read the one way every route reads them: a JSON media
//! type (else `415`), at most the deployment's `MAX_BODY_BYTES` counted on
//! the bytes actually read — a chunked body has no `Content-Length` to trust
//! — (else `413`), and JSON through core's strict reader (duplicate names,
//! lone surrogates, numbers beyond a double, nesting past its limit: `400`)
//! before serde sees it.

use futures_util::StreamExt;
use onejob_core::front::{self, Refusal};
use serde::de::DeserializeOwned;
use worker::{Request, Response, Result};

use crate::http;

/// A request refused while its body was read: the response to send.
pub type Refused = Response;

/// The core's refusal as the response to send.
fn refused<T>(refusal: &Refusal) -> Result<std::result::Result<T, Refused>> {
    http::refuse(refusal).map(Err)
}

/// The request's content type ([`front::json_content_type`]: JSON, or none),
/// or the `415` refusal of any other.
pub fn json_content_type(req: &Request) -> Result<std::result::Result<String, Refused>> {
    match front::json_content_type(req.headers().get("Content-Type")?.as_deref()) {
        Ok(content_type) => Ok(Ok(content_type)),
        Err(refusal) => refused(&refusal),
    }
}

/// The body's bytes, or the `413` refusal once more than `limit` bytes are
/// declared or arrive (reading stops there: nothing past the limit is buffered).
pub async fn read_bounded(req: &mut Request, limit: u64) -> Result<std::result::Result<Vec<u8>, Refused>> {
    let declared = match front::declared_length(req.headers().get("Content-Length")?.as_deref(), limit) {
        Ok(declared) => declared,
        Err(refusal) => return refused(&refusal),
    };
    // A declared length within the limit is all the runtime delivers: read
    // it in one go, with one copy.
    if declared.is_some() {
        return Ok(Ok(req.bytes().await?));
    }
    let mut body = Vec::new();
    // A request without a body has no stream.
    let Ok(mut chunks) = req.stream() else { return Ok(Ok(body)) };
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if let Err(refusal) = front::within_limit(body.len(), chunk.len(), limit) {
            return refused(&refusal);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Ok(body))
}

/// A JSON body of type `T`: checked as [`json_content_type`] and
/// [`read_bounded`] check it, then read strictly ([`front::parse_strict`]);
/// `shape` tells a caller whose JSON is valid but not a `T` what to send.
pub async fn read_json<T: DeserializeOwned>(
    req: &mut Request,
    limit: u64,
    shape: &str,
) -> Result<std::result::Result<T, Refused>> {
    if let Err(refused) = json_content_type(req)? {
        return Ok(Err(refused));
    }
    let bytes = match read_bounded(req, limit).await? {
        Ok(bytes) => bytes,
        Err(refused) => return Ok(Err(refused)),
    };
    match front::parse_strict(&bytes, shape) {
        Ok(value) => Ok(Ok(value)),
        Err(refusal) => refused(&refusal),
    }
}
