//! The deployment's configuration, parsed once per isolate: the settings
//! (see [`onejob_core::settings`]) and the tenant directory. A malformed
//! value makes every request a 500 `gateway-misconfigured` whose body says
//! nothing more; what is wrong goes to the operator's log.

use std::cell::RefCell;
use std::rc::Rc;

use onejob_core::admin::AdminDirectory;
pub use onejob_core::alert::AlertWebhook;
use onejob_core::job_type::JobTypes;
use onejob_core::pricing::Prices;
use onejob_core::quota::Quotas;
use onejob_core::settings::Settings;
use onejob_core::telemetry::config::TelemetrySettings;
use onejob_core::tenant::TenantDirectory;
use onejob_core::token::TokenSecrets;
use worker::Env;

use crate::env::binding;
use crate::env::faults::Faults;

/// Everything read from the environment.
pub struct Config {
    pub settings: Settings,
    pub tenants: TenantDirectory,
    /// Who may use the operator API (`/onejob/v1/admin/…`, provider checks).
    pub admins: AdminDirectory,
    /// Each tenant's user-token secret (`TOKEN_SECRETS`).
    pub token_secrets: TokenSecrets,
    /// The bundled price table with `PRICES` merged over it, for the
    /// console's spend estimates.
    pub prices: Prices,
    /// `QUOTAS`: token budgets per day, per tenant and per user.
    pub quotas: Quotas,
    /// `DEMO_TOKEN_ISSUER=on`: the worker mints user tokens for the demo
    /// page at `/demo/token` (development only: it hands a token to anyone).
    pub demo_token_issuer: bool,
    /// Each provider's API key (by its index in the settings' providers),
    /// sent only to that provider.
    pub api_keys: Vec<Option<String>>,
    /// `ALERT_WEBHOOK_URL` and the `ALERT_SECRET` its alerts are signed with.
    pub alert_webhook: Option<AlertWebhook>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and the rest: where spans go (`None`:
    /// telemetry is off, and the request path does nothing for it).
    pub telemetry: Option<TelemetrySettings>,
    /// Job types (`POST /onejob/v1/run/{type}`): the bundled `jobs/*.json`,
    /// then `JOB_TYPES` (which adds or replaces by name), with every `env:`
    /// URL and secret name resolved.
    pub job_types: JobTypes,
    /// The tests' fault injection (nothing unless built with `faults`).
    pub faults: Faults,
}

impl Config {
    /// The token budgets of `tenant`'s jobs.
    pub fn settings_quota_limits(&self, tenant: &str) -> onejob_core::quota::QuotaLimits {
        self.quotas.limits_for(tenant)
    }

    /// The API key of the provider at `index`.
    pub fn api_key(&self, index: usize) -> Option<&str> {
        self.api_keys.get(index).and_then(Option::as_deref)
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
    CONFIG.with(|c| *c.borrow_mut() = Some(parsed.clone()));
    parsed
}

fn parse(env: &Env) -> Result<Config, String> {
    let var = |name: &str| env.var(name).ok().map(|v| v.to_string());
    // A secret, or a plain variable of that name (development); blank is unset.
    let secret = |name: &str| {
        env.secret(name).ok().map(|s| s.to_string()).or_else(|| var(name)).filter(|s| !s.trim().is_empty())
    };
    let settings = Settings::parse(&var).map_err(|e| e.to_string())?;
    let tenants = TenantDirectory::from_var(var(binding::TENANTS).as_deref()).map_err(|e| e.to_string())?;
    let admin_keys = env.secret(binding::ADMIN_KEYS).ok().map(|s| s.to_string()).or_else(|| var(binding::ADMIN_KEYS));
    let admins = AdminDirectory::from_var(admin_keys.as_deref()).map_err(|e| e.to_string())?;
    let mut api_keys = Vec::new();
    for provider in settings.providers.list() {
        let key = provider.api_key_var.as_deref().and_then(secret);
        provider.check_key(key.as_deref())?;
        api_keys.push(key);
    }
    let token_secrets = TokenSecrets::from_var(secret("TOKEN_SECRETS").as_deref()).map_err(|e| e.to_string())?;
    let demo_token_issuer = var("DEMO_TOKEN_ISSUER").as_deref() == Some("on");
    let quotas = Quotas::from_var(var("QUOTAS").as_deref()).map_err(|e| e.to_string())?;
    let prices = Prices::from_var(var("PRICES").as_deref()).map_err(|e| e.to_string())?;
    let alert_webhook =
        AlertWebhook::configure(secret("ALERT_WEBHOOK_URL"), secret("ALERT_SECRET"), settings.alerts.format)?;
    // The headers usually hold the collector's API key: a secret (a plain
    // variable works too, for development).
    let telemetry = TelemetrySettings::parse(&secret)?;
    let job_types = job_types(&var, &secret)?;
    job_types.check_approvals(settings.policy.retention_ms())?;
    Ok(Config {
        job_types,
        faults: Faults::read(&var),
        settings,
        tenants,
        admins,
        token_secrets,
        prices,
        quotas,
        demo_token_issuer,
        api_keys,
        alert_webhook,
        telemetry,
    })
}

mod bundled {
    include!(concat!(env!("OUT_DIR"), "/job_types.rs"));
}

/// The bundled job types and `JOB_TYPES`, with their webhooks' `env:NAME`
/// URLs and secret names resolved (a missing one refuses the deployment,
/// by name).
fn job_types(
    var: &dyn Fn(&str) -> Option<String>,
    secret: &dyn Fn(&str) -> Option<String>,
) -> Result<JobTypes, String> {
    let mut types = JobTypes::from_definitions(bundled::BUNDLED_JOB_TYPES).map_err(|e| e.to_string())?;
    if let Some(text) = var("JOB_TYPES").filter(|t| !t.trim().is_empty()) {
        types.merge(JobTypes::from_json(&text).map_err(|e| e.to_string())?);
    }
    types.resolve_webhooks(var, secret)?;
    Ok(types)
}
