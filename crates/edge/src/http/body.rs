//! Request bodies, read the one way every route reads them: a JSON media
//! type (else `415`), at most the deployment's `MAX_BODY_BYTES` counted on
//! the bytes actually read — a chunked body has no `Content-Length` to trust
//! — (else `413`), and JSON through core's strict reader (duplicate names,
//! lone surrogates, numbers beyond a double, nesting past its limit: `400`)
//! before serde sees it.

use futures_util::StreamExt;
use onejob_core::canonical::canonicalize;
use onejob_core::protocol::{Problem, ProblemType};
use serde::de::DeserializeOwned;
use worker::{Request, Response, Result};

use crate::http;

/// A request refused while its body was read: the response to send.
pub type Refused = Response;

/// Whether `content_type` is JSON (`application/json` or `application/*+json`).
pub fn is_json(content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    media == "application/json" || (media.starts_with("application/") && media.ends_with("+json"))
}

/// The request's content type, `application/json` when it names none (the
/// official SDKs and `curl --json` name it; a bare body is taken as JSON),
/// or the `415` refusal of any other.
pub fn json_content_type(req: &Request) -> Result<std::result::Result<String, Refused>> {
    let content_type = req.headers().get("Content-Type")?.unwrap_or_else(|| "application/json".into());
    if !is_json(&content_type) {
        return http::problem_of(ProblemType::UnsupportedMediaType, "the body must be application/json").map(Err);
    }
    Ok(Ok(content_type))
}

/// The body's bytes, or the `413` refusal once more than `limit` bytes are
/// declared or arrive (reading stops there: nothing past the limit is buffered).
pub async fn read_bounded(req: &mut Request, limit: u64) -> Result<std::result::Result<Vec<u8>, Refused>> {
    let too_large = || {
        http::problem(
            &Problem::new(ProblemType::PayloadTooLarge, format!("the body is larger than {limit} bytes"))
                .with_max_bytes(limit),
        )
    };
    let declared = req.headers().get("Content-Length")?.and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit) {
        return too_large().map(Err);
    }
    // A declared length within the limit is all the runtime delivers (it
    // frames the body by it): read it in one go, with one copy. Only a body
    // without one (chunked) is counted as it arrives.
    if declared.is_some() {
        return Ok(Ok(req.bytes().await?));
    }
    let mut body = Vec::new();
    // A request without a body has no stream.
    let Ok(mut chunks) = req.stream() else { return Ok(Ok(body)) };
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if (body.len() + chunk.len()) as u64 > limit {
            return too_large().map(Err);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Ok(body))
}

/// A JSON body of type `T`: checked as [`json_content_type`] and
/// [`read_bounded`] check it, then read strictly; `shape` tells a caller
/// whose JSON is valid but not a `T` what to send.
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
    parse_strict(&bytes, shape)
        .map_or_else(|detail| http::problem_of(ProblemType::InvalidJson, detail).map(Err), |v| Ok(Ok(v)))
}

/// `bytes` as a `T`, if they are strict JSON (core's reader) of that shape;
/// else what is wrong, for the caller.
pub fn parse_strict<T: DeserializeOwned>(bytes: &[u8], shape: &str) -> std::result::Result<T, String> {
    // The canonical form has no duplicates, no lone surrogates and only
    // numbers a double holds: serde reads exactly what core accepted.
    let canonical = canonicalize(bytes).map_err(|error| format!("the body is not valid JSON: {error}"))?;
    serde_json::from_str(&canonical).map_err(|_| format!("the body is JSON but not what this route takes: {shape}"))
}
