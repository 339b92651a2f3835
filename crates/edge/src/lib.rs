//! Cloudflare Worker of onejob. The gateway arrives with the edge issue; this
//! crate already builds for wasm32 so the tool chain is proven end to end.
use worker::*;

#[event(fetch)]
async fn fetch(_req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    Response::error("onejob edge: not implemented yet", 501)
}
