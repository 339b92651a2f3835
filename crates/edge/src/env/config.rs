//! The deployment's configuration, parsed once per isolate: the core reads
//! it from the variables and secrets this module hands it
//! ([`onejob_core::deployment`]). A malformed value makes every request a
//! 500 `gateway-misconfigured` whose body says nothing more; what is wrong
//! goes to the operator's log. A job type lacking a setting it needs is
//! only off (the core decides which, [`Deployment::warnings`] says so in
//! the log once per isolate); every other route works.

use std::cell::RefCell;
use std::ops::Deref;
use std::rc::Rc;

pub use onejob_core::config::alert::AlertWebhook;
use onejob_core::deployment::Deployment;
use onejob_core::front::{self, Refusal};
use worker::Env;

use crate::env::faults::Faults;

/// Everything read from the environment: the deployment, as the core reads
/// it from the variables and secrets ([`Deployment::read`]), and the tests'
/// fault injection. Its fields read as the deployment's (`config.settings`).
pub struct Config {
    /// The settings, credentials' directories, job types, … .
    pub deployment: Deployment,
    /// The tests' fault injection (nothing unless built with `faults`).
    pub faults: Faults,
}

impl Deref for Config {
    type Target = Deployment;

    fn deref(&self) -> &Deployment {
        &self.deployment
    }
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
    if let Ok(config) = &parsed {
        for warning in config.warnings() {
            worker::console_warn!("onejob: {warning}");
        }
    }
    CONFIG.with(|c| *c.borrow_mut() = Some(parsed.clone()));
    parsed
}

/// [`load`], its failure as the core's refusal to answer with (a `500`
/// naming nothing of the configuration, [`front::misconfigured`]).
pub fn loaded(env: &Env) -> Result<Rc<Config>, Refusal> {
    load(env).map_err(|Misconfigured| front::misconfigured())
}

fn parse(env: &Env) -> Result<Config, String> {
    let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
    let secret = |name: &str| env.secret(name).ok().map(|s| s.to_string());
    let database = |name: &str| env.d1(name).is_ok();
    let deployment = Deployment::read(&var, &secret, &database, bundled::BUNDLED_JOB_TYPES)?;
    Ok(Config { deployment, faults: Faults::read(&var) })
}

mod bundled {
    include!(concat!(env!("OUT_DIR"), "/job_types.rs"));
}
