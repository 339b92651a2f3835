//! A deployment's configuration as its variables and secrets make it: the
//! settings ([`crate::config::settings`]), the tenant directory, the admins, the
//! user-token secrets, prices, quotas, the demo's token issuer, each
//! provider's API key, the alert webhook, telemetry and job types (the
//! bundled ones, then `JOB_TYPES`), each checked. What is wrong is
//! refused as text for the operator's log, which never quotes a value; a
//! job type lacking a setting it needs is not wrong, only off (its runs are
//! refused by name, [`Deployment::warnings`] says why). The edge reads it
//! once per isolate (its `env::config`).

use crate::config::admin::AdminDirectory;
use crate::config::alert::AlertWebhook;
use crate::config::pricing::Prices;
use crate::config::quota::{QuotaLimits, Quotas};
use crate::config::settings::Settings;
use crate::config::tenant::TenantDirectory;
use crate::config::token::TokenSecrets;
use crate::job_type::resolve::disabled_detail;
use crate::job_type::{JobTypes, Provided};
use crate::telemetry::config::TelemetrySettings;

/// A variable's value by name (`None`: unset).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Everything a deployment's variables configure.
pub struct Deployment {
    /// The settings.
    pub settings: Settings,
    /// Bearer key digests → tenants (`TENANTS`).
    pub tenants: TenantDirectory,
    /// Who may use the operator API (`ADMIN_KEYS`: `/onejob/v1/admin/…`,
    /// provider checks).
    pub admins: AdminDirectory,
    /// Each tenant's user-token secret (`TOKEN_SECRETS`).
    pub token_secrets: TokenSecrets,
    /// The bundled price table with `PRICES` merged over it, for the
    /// console's spend estimates.
    pub prices: Prices,
    /// `QUOTAS`: token budgets per day, per tenant and per user.
    pub quotas: Quotas,
    /// `DEMO_TOKEN_ISSUER=on` (exactly): the worker mints user tokens for
    /// the demo page at `/demo/token` (development only: it hands a token
    /// to anyone).
    pub demo_token_issuer: bool,
    /// Each provider's API key (by its index in the settings' providers),
    /// sent only to that provider.
    pub api_keys: Vec<Option<String>>,
    /// `ALERT_WEBHOOK_URL` and the `ALERT_SECRET` its alerts are signed with.
    pub alert_webhook: Option<AlertWebhook>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` and the rest: where spans go (`None`:
    /// telemetry is off, and the request path does nothing for it).
    pub telemetry: Option<TelemetrySettings>,
    /// Job types (`POST /onejob/v1/run/{type}`): the bundled ones, then
    /// `JOB_TYPES` (which adds or replaces by name), with every `env:` URL
    /// and secret name resolved; those lacking a setting they need are off
    /// ([`JobTypes::disabled`]).
    pub job_types: JobTypes,
}

impl Deployment {
    /// Reads the deployment from its plain variables (`var`), its secrets
    /// (`secret`), whether a D1 database is bound under a name
    /// (`database`, for job types' d1 effects) and the bundled job types
    /// (`(name, definition)`). A credential (an API key, `TOKEN_SECRETS`,
    /// `ALERT_*`, telemetry's headers, a job type's `env:` names) is a
    /// secret or, in development, a plain variable of that name, and a
    /// blank one is unset; `ADMIN_KEYS` too, as it is written (its own
    /// reader refuses a blank one). The first thing wrong, as text that
    /// names what but quotes no value. A job type lacking a setting it
    /// needs is turned off, not a refusal ([`JobTypes::resolve`]).
    pub fn read(
        var: Lookup,
        secret: Lookup,
        database: &dyn Fn(&str) -> bool,
        bundled: &[(&str, &str)],
    ) -> Result<Self, String> {
        let secret_or_var = |name: &str| secret(name).or_else(|| var(name));
        let credential = |name: &str| secret_or_var(name).filter(|value| !value.trim().is_empty());
        let settings = Settings::parse(var).map_err(|e| e.to_string())?;
        let tenants = TenantDirectory::from_var(var("TENANTS").as_deref()).map_err(|e| e.to_string())?;
        let admins = AdminDirectory::from_var(secret_or_var("ADMIN_KEYS").as_deref()).map_err(|e| e.to_string())?;
        let api_keys = settings
            .providers
            .list()
            .iter()
            .map(|provider| {
                let key = provider.api_key_var.as_deref().and_then(&credential);
                provider.check_key(key.as_deref()).map(|()| key)
            })
            .collect::<Result<Vec<_>, String>>()?;
        let token_secrets =
            TokenSecrets::from_var(credential("TOKEN_SECRETS").as_deref()).map_err(|e| e.to_string())?;
        let quotas = Quotas::from_var(var("QUOTAS").as_deref()).map_err(|e| e.to_string())?;
        let prices = Prices::from_var(var("PRICES").as_deref()).map_err(|e| e.to_string())?;
        let alert_webhook = AlertWebhook::configure(
            credential("ALERT_WEBHOOK_URL"),
            credential("ALERT_SECRET"),
            settings.alerts.format,
        )?;
        // The headers usually hold the collector's API key: a credential.
        let telemetry = TelemetrySettings::parse(&credential)?;
        let mut job_types = JobTypes::from_definitions(bundled).map_err(|e| e.to_string())?;
        if let Some(text) = var("JOB_TYPES").filter(|text| !text.trim().is_empty()) {
            job_types.merge(JobTypes::from_json(&text).map_err(|e| e.to_string())?);
        }
        job_types.resolve(&Provided { var, secret: &credential, database })?;
        job_types.check_approvals(settings.policy.retention_ms())?;
        Ok(Deployment {
            demo_token_issuer: var("DEMO_TOKEN_ISSUER").as_deref() == Some("on"),
            settings,
            tenants,
            admins,
            token_secrets,
            prices,
            quotas,
            api_keys,
            alert_webhook,
            telemetry,
            job_types,
        })
    }

    /// What the operator's log says of a deployment that runs: each job
    /// type it turned off, and the settings that type lacks (by name only).
    pub fn warnings(&self) -> Vec<String> {
        self.job_types.iter_disabled().map(|(name, missing)| disabled_detail(name, missing)).collect()
    }

    /// The token budgets of `tenant`'s jobs.
    pub fn settings_quota_limits(&self, tenant: &str) -> QuotaLimits {
        self.quotas.limits_for(tenant)
    }

    /// The API key of the provider at `index`.
    pub fn api_key(&self, index: usize) -> Option<&str> {
        self.api_keys.get(index).and_then(Option::as_deref)
    }
}

#[cfg(test)]
mod tests;
