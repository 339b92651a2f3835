//! The deployment's configuration, parsed once per isolate: the settings
//! (see [`onejob_core::settings`]) and the tenant directory. A malformed
//! value makes every request a 500 `gateway-misconfigured` whose body says
//! nothing more; what is wrong goes to the operator's log.

use std::cell::RefCell;
use std::rc::Rc;

use onejob_core::settings::Settings;
use onejob_core::tenant::TenantDirectory;
use worker::Env;

/// Binding and secret names (`wrangler.toml`).
pub mod binding {
    /// The `Ledger` Durable Object namespace.
    pub const LEDGER: &str = "LEDGER";
    /// The KV namespace of finished results.
    pub const RESULTS: &str = "RESULTS";
    /// The provider's API key (a secret).
    pub const UPSTREAM_API_KEY: &str = "UPSTREAM_API_KEY";
    /// The tenant directory: key digest → tenant id.
    pub const TENANTS: &str = "TENANTS";
}

/// Everything read from the environment.
pub struct Config {
    pub settings: Settings,
    pub tenants: TenantDirectory,
    /// The provider's key, sent only upstream.
    pub api_key: Option<String>,
}

/// The deployment's configuration is unusable (the detail is logged).
#[derive(Debug, Clone, Copy)]
pub struct Misconfigured;

thread_local! {
    /// Variables cannot change within an isolate: a new deployment gets new
    /// isolates. So the first request parses, and the rest reuse it.
    static CONFIG: RefCell<Option<Result<Rc<Config>, Misconfigured>>> = const { RefCell::new(None) };
}

/// The configuration of this isolate, parsed on first use.
pub fn load(env: &Env) -> Result<Rc<Config>, Misconfigured> {
    if let Some(parsed) = CONFIG.with(|c| c.borrow().clone()) {
        return parsed;
    }
    let parsed = parse(env).map(Rc::new).map_err(|detail| {
        worker::console_error!("onejob: gateway misconfigured: {detail}");
        Misconfigured
    });
    CONFIG.with(|c| *c.borrow_mut() = Some(parsed.clone()));
    parsed
}

fn parse(env: &Env) -> Result<Config, String> {
    let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
    let settings = Settings::parse(&var).map_err(|e| e.to_string())?;
    let tenants = match var(binding::TENANTS) {
        Some(text) => TenantDirectory::from_json(&text).map_err(|e| e.to_string())?,
        None => TenantDirectory::default(),
    };
    let api_key = env.secret(binding::UPSTREAM_API_KEY).ok().map(|s| s.to_string());
    Ok(Config { settings, tenants, api_key })
}
