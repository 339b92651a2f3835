//! What a deployment fills in of its job types: which settings each type
//! needs ([`Setting`]) and which of them the deployment lacks (a type
//! lacking one is turned off, alone: its runs are refused by name, every
//! other route works), then every webhook effect's `env:NAME` URLs and
//! secret name resolved, its URLs checked (a malformed one refuses the
//! deployment), and approvals that must end well before their jobs are
//! deleted.

use super::{JobType, JobTypes};
use crate::job_type::effect::{EffectSpec, EffectTarget};

/// Reads a variable or a secret by name (`None`: unset).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// One thing a job type needs of its deployment ([`JobType::needs`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Setting {
    /// The variable (or secret) a webhook effect's `env:NAME` URL names.
    Variable(String),
    /// The secret a webhook effect's signature uses (its `secret`).
    Secret(String),
    /// The D1 database binding a d1 effect writes to (its `database`).
    Database(String),
}

impl Setting {
    /// The name the deployment sets it under.
    pub fn name(&self) -> &str {
        match self {
            Setting::Variable(name) | Setting::Secret(name) | Setting::Database(name) => name,
        }
    }

    /// What kind of setting it is, as `make deploy-check` and the problem
    /// name it: `variable`, `secret` or `d1`.
    pub fn kind(&self) -> &'static str {
        match self {
            Setting::Variable(_) => "variable",
            Setting::Secret(_) => "secret",
            Setting::Database(_) => "d1",
        }
    }

    /// `the variable MAIL_URL`, `the secret MAIL_SECRET`, `the D1 database TICKETS`.
    pub fn described(&self) -> String {
        match self {
            Setting::Variable(name) => format!("the variable {name}"),
            Setting::Secret(name) => format!("the secret {name}"),
            Setting::Database(name) => format!("the D1 database {name}"),
        }
    }
}

/// What a deployment provides its job types.
pub struct Provided<'a> {
    /// A plain variable by name.
    pub var: Lookup<'a>,
    /// A credential by name: a secret or, in development, a plain variable
    /// of that name; a blank one is unset.
    pub secret: Lookup<'a>,
    /// Whether a D1 database is bound under this name.
    pub database: &'a dyn Fn(&str) -> bool,
}

/// What `effects` need, in their order, each once ([`JobType::needs`]).
pub(super) fn needs_of(effects: &[EffectSpec]) -> Vec<Setting> {
    let mut needs = Vec::new();
    for effect in effects {
        let of_effect = match &effect.target {
            EffectTarget::D1 { database, .. } => vec![Setting::Database(database.clone())],
            EffectTarget::Webhook { url, secret, .. } => {
                let url = url.strip_prefix("env:").map(|name| Setting::Variable(name.to_owned()));
                url.into_iter().chain(secret.clone().map(Setting::Secret)).collect()
            }
            EffectTarget::Inbox { .. } => vec![],
        };
        for setting in of_effect {
            if !needs.contains(&setting) {
                needs.push(setting);
            }
        }
    }
    needs
}

impl JobType {
    /// Which of its [`needs`](JobType::needs) the deployment lacks, in
    /// their order: an `env:` variable unset or blank (as a secret too), a
    /// secret unset or blank, a database not bound. Empty: it can run.
    pub fn missing(&self, provided: &Provided) -> Vec<Setting> {
        self.needs
            .iter()
            .filter(|setting| match setting {
                // As `env:NAME` resolves ([`resolve_env`]): the variable, else the secret.
                Setting::Variable(name) => {
                    (provided.var)(name).or_else(|| (provided.secret)(name)).is_none_or(|v| v.trim().is_empty())
                }
                Setting::Secret(name) => (provided.secret)(name).is_none_or(|value| value.trim().is_empty()),
                Setting::Database(name) => !(provided.database)(name),
            })
            .cloned()
            .collect()
    }
}

/// Why a job type is off, in words: `job type triage is not configured in
/// this deployment: it needs the variable MAIL_URL and the secret
/// MAIL_SECRET`. Only the settings' names: never a value, nor anything
/// else of the configuration.
pub fn disabled_detail(name: &str, missing: &[Setting]) -> String {
    let described: Vec<String> = missing.iter().map(Setting::described).collect();
    let list = match described.as_slice() {
        [] => "a setting".to_owned(),
        [one] => one.clone(),
        [first @ .., last] => format!("{} and {last}", first.join(", ")),
    };
    let verb = if missing.len() > 1 { "are" } else { "is" };
    format!("job type {name} is not configured in this deployment: it needs {list}, which {verb} not set")
}

impl JobTypes {
    /// Fills in the deployment: a type lacking a setting it needs
    /// ([`JobType::missing`]) is turned off (it stays known by name, with
    /// what it lacks: [`JobTypes::disabled`]); every other type's webhooks
    /// are resolved (their `env:` URLs and secrets: a malformed value
    /// still refuses the deployment).
    pub fn resolve(&mut self, provided: &Provided) -> Result<(), String> {
        for job_type in self.iter_mut() {
            job_type.lacks = job_type.missing(provided);
        }
        self.resolve_webhooks(provided.var, provided.secret)
    }

    /// Resolves every webhook effect with the deployment's variables (`var`)
    /// and secrets (`secret`): `env:NAME` URLs (a URL that resolves to the
    /// demo's inbox becomes [`EffectTarget::Inbox`]), then its URLs checked
    /// as http(s) without credentials, then its secret's name as the
    /// secret's value. Refusals name the effect and its type. (Through
    /// [`JobTypes::resolve`], a type lacking a setting is off before this.)
    fn resolve_webhooks(&mut self, var: Lookup, secret: Lookup) -> Result<(), String> {
        for job_type in self.iter_mut().filter(|job_type| job_type.lacks.is_empty()) {
            for effect in &mut job_type.effects {
                let EffectTarget::Webhook { url, receipt_url, secret: secret_name, payload } = &effect.target else {
                    continue;
                };
                let at = format!("effect {} of job type {}", effect.name, job_type.name);
                let receipt_url = receipt_url.as_deref().map(|u| resolve_env(u, var, secret)).filter(|u| !u.is_empty());
                let secret_name = secret_name.clone();
                let mut target = EffectTarget::webhook(
                    resolve_env(url, var, secret),
                    receipt_url,
                    secret_name.clone(),
                    payload.clone(),
                )
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
        Ok(())
    }

    /// An approval must end well before its job is deleted (the job's
    /// retention runs from its creation, the approval from its answer): no
    /// longer than half of `retention_ms`.
    pub fn check_approvals(&self, retention_ms: u64) -> Result<(), String> {
        match self.iter().find(|t| t.longest_approval_ms() > retention_ms / 2) {
            Some(job_type) => Err(format!(
                "job type {}: an approval_ttl_ms is longer than half of RETENTION_SECONDS ({} s)",
                job_type.name,
                retention_ms / 1000
            )),
            None => Ok(()),
        }
    }
}

/// `env:NAME` as the value of the variable (or secret) NAME, trimmed (""
/// if unset); any other value as it is.
pub fn resolve_env(value: &str, var: Lookup, secret: Lookup) -> String {
    match value.strip_prefix("env:") {
        Some(name) => var(name).or_else(|| secret(name)).map(|v| v.trim().to_owned()).unwrap_or_default(),
        None => value.to_owned(),
    }
}

/// A webhook effect's URL: http(s) without credentials (the demo's inbox
/// is [`EffectTarget::Inbox`], not a URL).
pub fn is_effect_url(url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://")) && !url.contains('@')
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use std::collections::BTreeMap;

    use super::*;

    /// The demo's triage type (`jobs/triage.json`).
    const TRIAGE: &str = include_str!("../../../../jobs/triage.json");

    /// A deployment: its variables (`MAIL_SECRET` among them is a secret,
    /// and a blank one unset, as `Deployment::read` hands it over) and its
    /// D1 databases.
    struct Env {
        vars: BTreeMap<String, String>,
        databases: Vec<&'static str>,
    }

    impl Env {
        fn new(vars: &[(&str, &str)], databases: &[&'static str]) -> Self {
            let vars = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
            Env { vars, databases: databases.to_vec() }
        }

        fn var(&self, name: &str) -> Option<String> {
            self.vars.get(name).filter(|_| name != "MAIL_SECRET").cloned()
        }

        fn secret(&self, name: &str) -> Option<String> {
            self.vars.get(name).filter(|v| name == "MAIL_SECRET" && !v.trim().is_empty()).cloned()
        }

        /// [`JobTypes::resolve`] in this deployment.
        fn resolve(&self, types: &mut JobTypes) -> Result<(), String> {
            let database = |name: &str| self.databases.contains(&name);
            types.resolve(&Provided { var: &|n| self.var(n), secret: &|n| self.secret(n), database: &database })
        }
    }

    /// The triage type resolved under `vars` (and its TICKETS database).
    fn triage(vars: &[(&str, &str)]) -> Result<JobTypes, String> {
        let mut types = JobTypes::from_definitions(&[("triage", TRIAGE)]).map_err(|e| e.to_string())?;
        Env::new(vars, &["TICKETS"]).resolve(&mut types)?;
        Ok(types)
    }

    /// The triage type's email effect, under `vars`.
    fn email(vars: &[(&str, &str)]) -> Result<EffectTarget, String> {
        let types = triage(vars)?;
        let triage = types.get("triage").expect("triage runs");
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
            ("MAIL_URL", " https://mail.example/send "),
            ("MAIL_RECEIPT_URL", "https://mail.example/receipts"),
            SECRET,
        ])
        .unwrap();
        let EffectTarget::Webhook { url, receipt_url, secret, .. } = api else { panic!("{api:?}") };
        assert_eq!(url, "https://mail.example/send", "a resolved value is trimmed");
        assert_eq!(receipt_url.as_deref(), Some("https://mail.example/receipts"));
        assert_eq!(secret.as_deref(), Some("mail-secret"), "the secret's name is resolved to its value");
    }

    #[test]
    fn a_type_needs_its_effects_settings_each_once_and_not_its_receipt_url() {
        let types = JobTypes::from_definitions(&[("triage", TRIAGE)]).unwrap();
        let needs = types.get("triage").unwrap().needs();
        assert_eq!(
            needs,
            [
                Setting::Database("TICKETS".into()),
                Setting::Variable("MAIL_URL".into()),
                Setting::Secret("MAIL_SECRET".into())
            ]
        );
        assert_eq!(
            needs.iter().map(|s| (s.kind(), s.name())).collect::<Vec<_>>(),
            [("d1", "TICKETS"), ("variable", "MAIL_URL"), ("secret", "MAIL_SECRET")]
        );
        // Two webhooks signed with one secret need it once; a literal URL, a
        // webhook without a secret and the demo inbox need nothing.
        let mut definition = super::super::tests::triage();
        definition["triage"]["effects"] = serde_json::json!([
            {"name": "a", "kind": "webhook", "url": "env:HOOK_URL", "secret": "HOOK_SECRET", "payload": {}},
            {"name": "b", "kind": "webhook", "url": "https://hooks.example/b", "secret": "HOOK_SECRET", "payload": {}},
            {"name": "c", "kind": "webhook", "url": "https://hooks.example/c", "payload": {}},
            {"name": "d", "kind": "webhook", "url": "demo:inbox", "payload": {}}
        ]);
        let types = JobTypes::from_json(&definition.to_string()).unwrap();
        let needs = types.get("triage").unwrap().needs();
        assert_eq!(needs, [Setting::Variable("HOOK_URL".into()), Setting::Secret("HOOK_SECRET".into())]);
        definition["triage"]["effects"] = serde_json::json!([]);
        assert_eq!(JobTypes::from_json(&definition.to_string()).unwrap().get("triage").unwrap().needs(), []);
    }

    #[test]
    fn a_type_lacking_a_setting_is_off_alone_and_names_what_it_lacks() {
        // What a production deployment of the demo's type looked like: no
        // MAIL_URL, no MAIL_SECRET (issue 34). Each unset, or blank, turns it off.
        let mail_url = Setting::Variable("MAIL_URL".into());
        let mail_secret = Setting::Secret("MAIL_SECRET".into());
        for (vars, lacks) in [
            (&[][..], vec![mail_url.clone(), mail_secret.clone()]),
            (&[("MAIL_URL", " "), ("MAIL_SECRET", "  ")][..], vec![mail_url.clone(), mail_secret.clone()]),
            (&[SECRET][..], vec![mail_url.clone()]),
            (&[("MAIL_URL", "https://mail.example/send")][..], vec![mail_secret.clone()]),
            // The receipts URL is optional: without it, still off for MAIL_URL alone.
            (&[("MAIL_RECEIPT_URL", "https://mail.example/r"), SECRET][..], vec![mail_url.clone()]),
        ] {
            let types = triage(vars).unwrap_or_else(|e| panic!("{vars:?}: not the deployment's refusal: {e}"));
            assert!(types.get("triage").is_none(), "{vars:?}: triage does not run");
            assert_eq!(types.disabled("triage"), Some(&lacks[..]), "{vars:?}");
            assert_eq!(types.iter_disabled().map(|(name, _)| name).collect::<Vec<_>>(), ["triage"]);
        }
        // A missing database binding too.
        let mut types = JobTypes::from_definitions(&[("triage", TRIAGE)]).unwrap();
        Env::new(&[("MAIL_URL", "https://mail.example/send"), SECRET], &[]).resolve(&mut types).unwrap();
        assert_eq!(types.disabled("triage"), Some(&[Setting::Database("TICKETS".into())][..]));
        // With everything set it runs, and nothing is off.
        let types = triage(&[("MAIL_URL", "https://mail.example/send"), SECRET]).unwrap();
        assert!(types.get("triage").is_some() && types.disabled("triage").is_none());
        assert_eq!(types.iter_disabled().count(), 0);
        // Only the type that lacks something is off.
        let mut definition = super::super::tests::triage();
        definition["plain"] = definition["triage"].clone();
        definition["plain"]["effects"] = serde_json::json!([]);
        let mut both = JobTypes::from_json(&definition.to_string()).unwrap();
        Env::new(&[], &["TICKETS"]).resolve(&mut both).unwrap();
        assert!(both.get("plain").is_some() && both.get("triage").is_none());
        assert_eq!(both.disabled("plain"), None);
        assert_eq!(both.disabled("nope"), None, "an unknown type is not a disabled one");
    }

    #[test]
    fn why_a_type_is_off_names_its_settings_and_no_value() {
        let lacks = [Setting::Variable("MAIL_URL".into()), Setting::Secret("MAIL_SECRET".into())];
        assert_eq!(
            disabled_detail("triage", &lacks),
            "job type triage is not configured in this deployment: it needs the variable MAIL_URL and the secret MAIL_SECRET, which are not set"
        );
        assert_eq!(
            disabled_detail("triage", &lacks[1..]),
            "job type triage is not configured in this deployment: it needs the secret MAIL_SECRET, which is not set"
        );
        let three = [lacks[0].clone(), lacks[1].clone(), Setting::Database("TICKETS".into())];
        assert!(
            disabled_detail("triage", &three).contains(
                "the variable MAIL_URL, the secret MAIL_SECRET and the D1 database TICKETS, which are not set"
            )
        );
    }

    #[test]
    fn a_type_replaced_by_name_takes_its_replacements_state() {
        // JOB_TYPES replaces a bundled type by name, a disabled one too.
        let mut bundled = triage(&[]).unwrap();
        assert!(bundled.disabled("triage").is_some());
        let mut replacement = super::super::tests::triage();
        replacement["triage"]["effects"] = serde_json::json!([]);
        bundled.merge(JobTypes::from_json(&replacement.to_string()).unwrap());
        assert!(bundled.get("triage").is_some() && bundled.disabled("triage").is_none());
        let mut running = JobTypes::from_definitions(&[("triage", TRIAGE)]).unwrap();
        running.merge(triage(&[]).unwrap());
        assert!(running.get("triage").is_none() && running.disabled("triage").is_some());
    }

    #[test]
    fn malformed_values_still_refuse_the_deployment_by_the_effects_name() {
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
        refused(
            &[("MAIL_URL", "ftp://mail.example"), SECRET],
            &format!("the url of {at} is not set, or not an http(s) URL"),
        );
        refused(
            &[("MAIL_URL", "https://mail.example/send"), ("MAIL_RECEIPT_URL", "mail.example"), SECRET],
            &format!("the receipt_url of {at}"),
        );
        refused(
            &[("MAIL_URL", "https://u:p@mail.example/send"), SECRET],
            &format!("the url of {at} is not set, or not an http(s) URL"),
        );
    }

    #[test]
    fn resolving_webhooks_alone_still_refuses_what_is_unset() {
        // The guard behind `resolve`: a type that reached it lacking its URL
        // or secret is refused by name, never run unsigned or nowhere.
        let refused = |vars: &[(&str, &str)], expected: &str| {
            let env = Env::new(vars, &[]);
            let mut types = JobTypes::from_definitions(&[("triage", TRIAGE)]).unwrap();
            let error = types.resolve_webhooks(&|n| env.var(n), &|n| env.secret(n)).unwrap_err();
            assert!(error.contains(expected), "{error} should say {expected}");
        };
        let at = "effect email of job type triage";
        refused(&[SECRET], &format!("the url of {at} is not set"));
        // A named secret must be set, even for the inbox (which signs nothing).
        refused(
            &[("MAIL_URL", "demo:inbox"), ("MAIL_RECEIPT_URL", "demo:inbox")],
            &format!("the secret MAIL_SECRET (signing {at}) is not set"),
        );
    }

    #[test]
    fn env_values_resolve_from_a_variable_then_a_secret() {
        let var = |name: &str| (name == "A").then(|| " from-var ".to_owned());
        let secret = |name: &str| (name != "C").then(|| "from-secret".to_owned());
        assert_eq!(resolve_env("env:A", &var, &secret), "from-var");
        assert_eq!(resolve_env("env:B", &var, &secret), "from-secret");
        assert_eq!(resolve_env("env:C", &var, &secret), "");
        assert_eq!(resolve_env("https://x.example", &var, &secret), "https://x.example");
    }

    #[test]
    fn an_approval_longer_than_half_the_retention_is_refused() {
        let mut definition = super::super::tests::triage();
        definition["triage"]["effects"][1]["approve"] = serde_json::json!(true);
        definition["triage"]["effects"][1]["approval_ttl_ms"] = serde_json::json!(7_200_000);
        let types = JobTypes::from_json(&definition.to_string()).unwrap();
        assert_eq!(types.check_approvals(14_400_000), Ok(()));
        assert_eq!(
            types.check_approvals(14_398_000),
            Err("job type triage: an approval_ttl_ms is longer than half of RETENTION_SECONDS (14398 s)".into())
        );
        // No approval: any retention.
        assert_eq!(JobTypes::from_definitions(&[("triage", TRIAGE)]).unwrap().check_approvals(0), Ok(()));
    }
}
