//! The demo's own routes, for the demo page: `GET /demo/token` (a user
//! token for anyone) and `GET /demo/tickets`, `GET /demo/inbox` (what the
//! triage job type wrote and mailed). They answer only where the demo is on
//! (`DEMO_TOKEN_ISSUER=on`); elsewhere they are `404`, as any unknown route.

use onejob_core::demo::ReadOut;
use onejob_core::front;
use serde_json::Value;
use worker::{Env, Request, Response, Result};

use crate::demo::inbox;
use crate::env::clock::now_ms;
use crate::env::{binding, config};
use crate::http::{self, Step, Stop};

/// `GET /demo/tickets` and `/demo/inbox` (`what`, see [`ReadOut`]), only
/// where the demo is on (`DEMO_TOKEN_ISSUER=on`).
pub async fn read_out(req: &Request, env: &Env, what: &str) -> Result<Response> {
    rows(req, env, ReadOut::of(what)).await.or_else(Stop::respond)
}

/// The triage job type's rows or the mails it sent, as the core reads
/// them out ([`ReadOut::answer`]).
async fn rows(req: &Request, env: &Env, what: ReadOut) -> Step<Response> {
    let config = config::loaded(env)?;
    front::demo_route(config.demo_token_issuer, req.method().as_ref())?;
    let db = if what.makes_its_table() { inbox::database(env).await? } else { env.d1(binding::TICKETS)? };
    let read = async { db.prepare(what.query()).all().await?.results::<Value>() };
    http::json(&what.answer(read.await)?)
}

/// `GET /demo/token?user=<id>`: a one-hour user token of the `dev` tenant
/// for the demo page (only with `DEMO_TOKEN_ISSUER=on`: it hands a token to
/// anyone, as a real app's backend would hand one to its signed-in users).
pub fn token(req: Request, env: &Env) -> Result<Response> {
    minted(&req, env).or_else(Stop::respond)
}

fn minted(req: &Request, env: &Env) -> Step<Response> {
    let config = config::loaded(env)?;
    let url = req.url()?;
    let user = url.query_pairs().find(|(n, _)| n == "user").map(|(_, v)| v.into_owned());
    front::demo_route(config.demo_token_issuer, req.method().as_ref())?;
    http::json(&front::demo_token(user.as_deref(), &config.token_secrets, now_ms() / 1000)?)
}
