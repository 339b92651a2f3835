//! The demo's own routes, for the demo page: `GET /demo/token` (a user
//! token for anyone) and `GET /demo/tickets`, `GET /demo/inbox` (what the
//! triage job type wrote and mailed). They answer only where the demo is on
//! (`DEMO_TOKEN_ISSUER=on`); elsewhere they are `404`, as any unknown route.

use onejob_core::demo;
use onejob_core::front;
use serde_json::{Value, json};
use worker::{Env, Request, Response, Result};

use crate::demo::inbox;
use crate::env::clock::now_ms;
use crate::env::{binding, config};
use crate::http;

/// `GET /demo/tickets` and `/demo/inbox` (see [`rows`]), only where the
/// demo is on (`DEMO_TOKEN_ISSUER=on`).
pub async fn read_out(req: &Request, env: &Env, what: &str) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    match front::demo_route(config.demo_token_issuer, req.method().as_ref()) {
        Ok(()) => rows(env, what).await,
        Err(refused) => http::refuse(&refused),
    }
}

/// `GET /demo/tickets` and `GET /demo/inbox`: the triage job type's rows
/// and the mails it sent, for the demo page (only with `DEMO_TOKEN_ISSUER=on`).
async fn rows(env: &Env, what: &str) -> Result<Response> {
    let rows: Vec<Value> = match what {
        "tickets" => {
            let db = env.d1(binding::TICKETS)?;
            let query = "SELECT * FROM ticket_triage ORDER BY written_ms DESC LIMIT 200";
            match db.prepare(query).all().await {
                Ok(result) => result.results::<Value>()?,
                // No ticket was triaged yet: the table does not exist.
                Err(_) => Vec::new(),
            }
        }
        _ => {
            let db = inbox::database(env).await?;
            let query = "SELECT delivery_id, payload, received_ms FROM demo_inbox ORDER BY received_ms DESC LIMIT 200";
            db.prepare(query).all().await?.results::<Value>()?.into_iter().map(demo::inbox_row).collect()
        }
    };
    http::with_cors(Response::from_json(&json!({ "rows": rows }))?)
}

/// `GET /demo/token?user=<id>`: a one-hour user token of the `dev` tenant
/// for the demo page (only with `DEMO_TOKEN_ISSUER=on`: it hands a token to
/// anyone, as a real app's backend would hand one to its signed-in users).
pub fn token(req: Request, env: &Env) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    let url = req.url()?;
    let user = url.query_pairs().find(|(n, _)| n == "user").map(|(_, v)| v.into_owned());
    let answer = front::demo_route(config.demo_token_issuer, req.method().as_ref())
        .and_then(|()| front::demo_token(user.as_deref(), &config.token_secrets, now_ms() / 1000));
    match answer {
        Ok(body) => http::with_cors(Response::from_json(&body)?),
        Err(refused) => http::refuse(&refused),
    }
}
