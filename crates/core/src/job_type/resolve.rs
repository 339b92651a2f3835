//! What a deployment fills in of its job types: every webhook effect's
//! `env:NAME` URLs and secret name resolved (a missing one refuses the
//! deployment, by name), its URLs checked, and approvals that must end
//! well before their jobs are deleted.

use super::JobTypes;
use crate::effect::EffectTarget;

/// Reads a variable or a secret by name (`None`: unset).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

impl JobTypes {
    /// Resolves every webhook effect with the deployment's variables (`var`)
    /// and secrets (`secret`): `env:NAME` URLs (a URL that resolves to the
    /// demo's inbox becomes [`EffectTarget::Inbox`]), then its URLs checked
    /// as http(s) without credentials, then its secret's name as the
    /// secret's value. Refusals name the effect and its type.
    pub fn resolve_webhooks(&mut self, var: Lookup, secret: Lookup) -> Result<(), String> {
        for job_type in self.iter_mut() {
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

    /// The bundled triage type (`jobs/triage.json`).
    const TRIAGE: &str = include_str!("../../../../jobs/triage.json");

    /// The triage type's email effect, under `vars` (secrets: `MAIL_SECRET` only if given there).
    fn email(vars: &[(&str, &str)]) -> Result<EffectTarget, String> {
        let vars: BTreeMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let var = |name: &str| vars.get(name).filter(|_| name != "MAIL_SECRET").cloned();
        let secret = |name: &str| vars.get(name).filter(|_| name == "MAIL_SECRET").cloned();
        let mut types = JobTypes::from_definitions(&[("triage", TRIAGE)]).map_err(|e| e.to_string())?;
        types.resolve_webhooks(&var, &secret)?;
        let triage = types.get("triage").expect("triage is read");
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
        refused(
            &[("MAIL_URL", "https://u:p@mail.example/send"), SECRET],
            &format!("the url of {at} is not set, or not an http(s) URL"),
        );
        // As before: a named secret must be set, even for the inbox (which signs nothing).
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
