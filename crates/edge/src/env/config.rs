//! The deployment's configuration, parsed once per isolate: the settings
//! (see [`onejob_core::settings`]) and the tenant directory. A malformed
//! value makes every request a 500 `gateway-misconfigured` whose body says
//! nothing more; what is wrong goes to the operator's log.

use std::cell::RefCell;
use std::rc::Rc;

use onejob_core::admin::AdminDirectory;
use onejob_core::effect::EffectTarget;
use onejob_core::job_type::JobTypes;
use onejob_core::pricing::Prices;
use onejob_core::providers::{ProviderKind, is_base_url};
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

/// Where dead-letter alerts go.
pub struct AlertWebhook {
    pub url: String,
    /// The signing key (optional for `ALERT_FORMAT=slack`: Slack's URL is the secret).
    pub secret: Option<String>,
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
    let settings = Settings::parse(&var).map_err(|e| e.to_string())?;
    let tenants = match var(binding::TENANTS) {
        Some(text) => TenantDirectory::from_json(&text).map_err(|e| e.to_string())?,
        None => TenantDirectory::default(),
    };
    let admins = match env.secret(binding::ADMIN_KEYS).ok().map(|s| s.to_string()).or_else(|| var(binding::ADMIN_KEYS))
    {
        Some(text) => AdminDirectory::from_json(&text).map_err(|e| e.to_string())?,
        None => AdminDirectory::default(),
    };
    let mut api_keys = Vec::new();
    for provider in settings.providers.list() {
        let key = provider.api_key_var.as_deref().and_then(|name| {
            env.secret(name).ok().map(|s| s.to_string()).or_else(|| var(name)).filter(|k| !k.trim().is_empty())
        });
        // A listed provider whose key secret is missing would answer every
        // call with a 401: refuse the deployment instead, by the secret's name.
        if key.is_none()
            && provider.kind != ProviderKind::Passthrough
            && let Some(name) = &provider.api_key_var
        {
            return Err(format!("the secret {name} (the API key of provider {}) is not set", provider.name));
        }
        api_keys.push(key);
    }
    let token_secrets = match secret_or_var(env, "TOKEN_SECRETS") {
        Some(text) => TokenSecrets::from_json(&text).map_err(|e| e.to_string())?,
        None => TokenSecrets::default(),
    };
    let demo_token_issuer = var("DEMO_TOKEN_ISSUER").as_deref() == Some("on");
    let quotas = match var("QUOTAS") {
        Some(text) => Quotas::from_json(&text).map_err(|e| e.to_string())?,
        None => Quotas::default(),
    };
    let prices = match var("PRICES") {
        Some(text) => Prices::bundled_with(&text).map_err(|e| e.to_string())?,
        None => Prices::bundled(),
    };
    let secret = |name: &str| {
        env.secret(name).ok().map(|s| s.to_string()).or_else(|| var(name)).filter(|s| !s.trim().is_empty())
    };
    let slack = settings.alerts.format == onejob_core::alert::AlertFormat::Slack;
    let alert_webhook = match (secret("ALERT_WEBHOOK_URL"), secret("ALERT_SECRET")) {
        (None, _) => None,
        (Some(url), _) if !is_base_url(&url) => {
            return Err("ALERT_WEBHOOK_URL must be an http(s) URL with no credentials, query or fragment".into());
        }
        (Some(url), Some(secret)) => Some(AlertWebhook { url, secret: Some(secret) }),
        (Some(url), None) if slack => Some(AlertWebhook { url, secret: None }),
        (Some(_), None) => {
            return Err("ALERT_WEBHOOK_URL is set but ALERT_SECRET (the key alerts are signed with) is not".into());
        }
    };
    // The headers usually hold the collector's API key: a secret (a plain
    // variable works too, for development).
    let telemetry = TelemetrySettings::parse(&secret)?;
    let job_types = job_types(&var, &secret)?;
    // An approval must end well before its job is deleted (the job's
    // retention runs from its creation, the approval from its answer).
    let retention_ms = settings.policy.retention_ms();
    if let Some(job_type) = job_types.iter().find(|t| t.longest_approval_ms() > retention_ms / 2) {
        return Err(format!(
            "job type {}: an approval_ttl_ms is longer than half of RETENTION_SECONDS ({} s)",
            job_type.name,
            retention_ms / 1000
        ));
    }
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
    for job_type in types.iter_mut() {
        for effect in &mut job_type.effects {
            let EffectTarget::Webhook { url, receipt_url, secret: secret_name, payload } = &effect.target else {
                continue;
            };
            let at = format!("effect {} of job type {}", effect.name, job_type.name);
            let receipt_url = receipt_url.as_deref().map(|u| resolve_env(u, var, secret)).filter(|u| !u.is_empty());
            let secret_name = secret_name.clone();
            // Resolved, the URLs may name the demo's inbox: core types it.
            let mut target =
                EffectTarget::webhook(resolve_env(url, var, secret), receipt_url, secret_name.clone(), payload.clone())
                    .map_err(|e| format!("{at}: {e}"))?;
            if let EffectTarget::Webhook { url, receipt_url, .. } = &target {
                if !is_effect_url(url) {
                    return Err(format!("the url of {at} is not set, or not an http(s) URL"));
                }
                if receipt_url.as_deref().is_some_and(|u| !is_effect_url(u)) {
                    return Err(format!("the receipt_url of {at} is not an http(s) URL"));
                }
            }
            if let Some(name) = secret_name {
                let value = secret(&name).ok_or_else(|| format!("the secret {name} (signing {at}) is not set"))?;
                if let EffectTarget::Webhook { secret, .. } = &mut target {
                    *secret = Some(value);
                }
            }
            effect.target = target;
        }
    }
    Ok(types)
}

/// `env:NAME` as the value of the variable (or secret) NAME ("" if unset);
/// any other value as it is.
fn resolve_env(value: &str, var: &dyn Fn(&str) -> Option<String>, secret: &dyn Fn(&str) -> Option<String>) -> String {
    match value.strip_prefix("env:") {
        Some(name) => var(name).or_else(|| secret(name)).map(|v| v.trim().to_owned()).unwrap_or_default(),
        None => value.to_owned(),
    }
}

/// A webhook effect's URL: http(s) without credentials (the demo's inbox
/// is [`EffectTarget::Inbox`], not a URL).
fn is_effect_url(url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://")) && !url.contains('@')
}

/// A secret, or a plain variable of that name (development).
fn secret_or_var(env: &Env, name: &str) -> Option<String> {
    env.secret(name)
        .ok()
        .map(|s| s.to_string())
        .or_else(|| env.var(name).ok().map(|v| v.to_string()))
        .filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use onejob_core::effect::EffectTarget;

    use super::job_types;

    /// The bundled triage type's email effect, under `vars` (secrets: `MAIL_SECRET` only if given there).
    fn email(vars: &[(&str, &str)]) -> Result<EffectTarget, String> {
        let vars: BTreeMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let var = |name: &str| vars.get(name).filter(|_| name != "MAIL_SECRET").cloned();
        let secret = |name: &str| vars.get(name).filter(|_| name == "MAIL_SECRET").cloned();
        let types = job_types(&var, &secret)?;
        let triage = types.get("triage").expect("triage is bundled");
        Ok(triage.effects.iter().find(|e| e.name == "email").expect("triage mails").target.clone())
    }

    const SECRET: (&str, &str) = ("MAIL_SECRET", "mail-secret");

    #[test]
    fn make_devs_inbox_is_the_typed_target_once_resolved() {
        let dev = email(&[("MAIL_URL", "demo:inbox"), ("MAIL_RECEIPT_URL", "demo:inbox"), SECRET]).unwrap();
        assert!(matches!(dev, EffectTarget::Inbox { receipts: true, .. }), "{dev:?}");
        let no_receipts = email(&[("MAIL_URL", "demo:inbox"), SECRET]).unwrap();
        assert!(matches!(no_receipts, EffectTarget::Inbox { receipts: false, .. }), "{no_receipts:?}");
    }

    #[test]
    fn a_mail_api_stays_a_signed_webhook() {
        let api = email(&[
            ("MAIL_URL", "https://mail.example/send"),
            ("MAIL_RECEIPT_URL", "https://mail.example/receipts"),
            SECRET,
        ])
        .unwrap();
        let EffectTarget::Webhook { url, receipt_url, secret, .. } = api else { panic!("{api:?}") };
        assert_eq!(url, "https://mail.example/send");
        assert_eq!(receipt_url.as_deref(), Some("https://mail.example/receipts"));
        assert_eq!(secret.as_deref(), Some("mail-secret"), "the secret's name is resolved to its value");
    }

    #[test]
    fn refusals_name_the_effect() {
        let refused = |vars: &[(&str, &str)], expected: &str| {
            let error = email(vars).unwrap_err();
            assert!(error.contains(expected), "{error} should say {expected}");
        };
        let at = "effect email of job type triage";
        refused(
            &[("MAIL_URL", "demo:inbox"), ("MAIL_RECEIPT_URL", "https://mail.example/r"), SECRET],
            &format!("{at}: the url is the demo inbox"),
        );
        refused(
            &[("MAIL_URL", "https://mail.example/send"), ("MAIL_RECEIPT_URL", "demo:inbox"), SECRET],
            &format!("{at}: the receipt_url is the demo inbox"),
        );
        refused(&[SECRET], &format!("the url of {at} is not set"));
        refused(
            &[("MAIL_URL", "ftp://mail.example"), SECRET],
            &format!("the url of {at} is not set, or not an http(s) URL"),
        );
        refused(
            &[("MAIL_URL", "https://mail.example/send"), ("MAIL_RECEIPT_URL", "mail.example"), SECRET],
            &format!("the receipt_url of {at}"),
        );
        // As before: a named secret must be set, even for the inbox (which signs nothing).
        refused(
            &[("MAIL_URL", "demo:inbox"), ("MAIL_RECEIPT_URL", "demo:inbox")],
            &format!("the secret MAIL_SECRET (signing {at}) is not set"),
        );
    }
}
