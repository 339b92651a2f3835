//! The demo's own routes, for the demo page: `GET /demo/token` (a user
//! token for anyone) and `GET /demo/tickets`, `GET /demo/inbox` (what the
//! triage job type wrote and mailed). They answer only where the demo is on
//! (`DEMO_TOKEN_ISSUER=on`); elsewhere they are `404`, as any unknown route.

use onejob_core::demo;
use onejob_core::protocol::ProblemType;
use onejob_core::token;
use serde_json::{Value, json};
use worker::{Env, Method, Request, Response, Result};

use crate::demo::inbox;
use crate::env::{binding, config};
use crate::http::{self, problem_of};

/// `GET /demo/tickets` and `/demo/inbox` (see [`rows`]), only where the
/// demo is on (`DEMO_TOKEN_ISSUER=on`).
pub async fn read_out(req: &Request, env: &Env, what: &str) -> Result<Response> {
    let Ok(config) = config::load(env) else { return http::misconfigured() };
    if !config.demo_token_issuer {
        return problem_of(ProblemType::NotFound, "no such route");
    }
    if req.method() != Method::Get {
        return http::method_not_allowed(&req.method(), &Method::Get);
    }
    rows(env, what).await
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
    if !config.demo_token_issuer {
        return problem_of(ProblemType::NotFound, "no such route");
    }
    if req.method() != Method::Get {
        return http::method_not_allowed(&req.method(), &Method::Get);
    }
    let url = req.url()?;
    let user = url.query_pairs().find(|(n, _)| n == "user").map(|(_, v)| v.into_owned());
    let Some(user) = demo::token_user(user.as_deref()) else {
        return problem_of(ProblemType::InvalidQuery, "user must be 1 to 64 of A-Z a-z 0-9 - _");
    };
    let Some(secret) = config.token_secrets.secret_of(demo::TOKEN_TENANT) else {
        return problem_of(ProblemType::NotFound, "the dev tenant has no token secret");
    };
    let claims = demo::token_claims(user, crate::env::clock::now_ms() / 1000);
    let body = json!({ "token": token::mint(&claims, secret), "expires_s": claims.exp });
    http::with_cors(Response::from_json(&body)?)
}
