#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::collections::HashMap;

use super::*;

/// Reads a deployment from `vars` (plain variables) and `secrets`.
fn read(vars: &[(&str, &str)], secrets: &[(&str, &str)], bundled: &[(&str, &str)]) -> Result<Deployment, String> {
    let vars: HashMap<String, String> = vars.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    let secrets: HashMap<String, String> = secrets.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    Deployment::read(&|name| vars.get(name).cloned(), &|name| secrets.get(name).cloned(), &|_| true, bundled)
}

/// One OpenAI provider whose key is the secret `PRIMARY_KEY`.
const HTTP_UPSTREAM: (&str, &str) = (
    "PROVIDERS",
    r#"[{"name": "primary", "kind": "openai", "base_url": "https://a.example/v1", "api_key": "PRIMARY_KEY"}]"#,
);
const SECRET: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn the_demo_alone_is_a_deployment_with_nothing_else_configured() {
    let deployment = read(&[("UPSTREAM", "demo")], &[], &[]).unwrap();
    assert!(!deployment.demo_token_issuer && deployment.alert_webhook.is_none() && deployment.telemetry.is_none());
    assert!(deployment.api_keys.iter().all(Option::is_none), "the demo's providers take no key");
    assert_eq!(deployment.api_key(0), None);
    // No provider at all is a misconfiguration, not the demo.
    assert!(read(&[], &[], &[]).err().unwrap().contains("UPSTREAM"));
}

#[test]
fn a_providers_key_is_a_secret_or_a_plain_variable_and_a_blank_one_is_unset() {
    let from_secret = read(&[HTTP_UPSTREAM], &[("PRIMARY_KEY", "sk-1")], &[]).unwrap();
    assert_eq!(from_secret.api_key(0), Some("sk-1"));
    let from_var = read(&[HTTP_UPSTREAM, ("PRIMARY_KEY", "sk-2")], &[], &[]).unwrap();
    assert_eq!(from_var.api_key(0), Some("sk-2"));
    // The secret wins over a variable of the same name.
    let both = read(&[HTTP_UPSTREAM, ("PRIMARY_KEY", "sk-var")], &[("PRIMARY_KEY", "sk-secret")], &[]);
    assert_eq!(both.unwrap().api_key(0), Some("sk-secret"));
    for blank in [&[][..], &[("PRIMARY_KEY", "  ")][..]] {
        let error = read(&[HTTP_UPSTREAM], blank, &[]).err().unwrap();
        assert!(error.contains("PRIMARY_KEY") && error.contains("not set"), "{error}");
    }
}

#[test]
fn the_demo_token_issuer_is_on_only_when_it_says_on() {
    for (value, on) in [("on", true), ("On", false), ("true", false), ("", false)] {
        let deployment = read(&[("UPSTREAM", "demo"), ("DEMO_TOKEN_ISSUER", value)], &[], &[]).unwrap();
        assert_eq!(deployment.demo_token_issuer, on, "{value:?}");
    }
}

#[test]
fn token_secrets_are_a_credential_read_from_a_secret_or_a_variable() {
    let text = format!(r#"{{"dev":"{SECRET}"}}"#);
    for (vars, secrets) in
        [(vec![("TOKEN_SECRETS", text.as_str())], vec![]), (vec![], vec![("TOKEN_SECRETS", text.as_str())])]
    {
        let vars = [&[("UPSTREAM", "demo")][..], &vars].concat();
        let deployment = read(&vars, &secrets, &[]).unwrap();
        assert_eq!(deployment.token_secrets.secret_of("dev"), Some(SECRET));
    }
    // Blank is unset: no secret, not a malformed one.
    let blank = read(&[("UPSTREAM", "demo")], &[("TOKEN_SECRETS", " ")], &[]).unwrap();
    assert_eq!(blank.token_secrets.secret_of("dev"), None);
}

#[test]
fn what_is_wrong_is_named_and_its_value_never_quoted() {
    let cases: [(&str, &str); 4] = [
        ("TENANTS", "{not json sk-secret-1"),
        ("QUOTAS", "{not json sk-secret-1"),
        ("PRICES", "{not json sk-secret-1"),
        ("JOB_TYPES", "{not json sk-secret-1"),
    ];
    for (name, bad) in cases {
        let error = read(&[("UPSTREAM", "demo"), (name, bad)], &[], &[]).err().unwrap();
        assert!(!error.contains("sk-secret-1"), "{name}: {error}");
    }
    let error = read(&[("UPSTREAM", "demo")], &[("ADMIN_KEYS", "sk-secret-1")], &[]).err().unwrap();
    assert!(!error.contains("sk-secret-1"), "{error}");
}

#[test]
fn job_types_are_the_bundled_ones_then_job_types_which_adds_or_replaces_by_name() {
    let definition = |model: &str| {
        serde_json::json!({
            "model": model,
            "input": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
            "prompt": {"system": "Summarise.", "user": "{{input.text}}"},
            "output": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}},
        })
        .to_string()
    };
    let bundled_def = definition("demo");
    let bundled = [("summarise", bundled_def.as_str())];
    let only_bundled = read(&[("UPSTREAM", "demo")], &[], &bundled).unwrap();
    assert_eq!(only_bundled.job_types.get("summarise").map(|t| t.model.as_str()), Some("demo"));
    let replaced = format!(r#"{{"summarise":{},"extra":{}}}"#, definition("demo-slow"), definition("demo"));
    let merged = read(&[("UPSTREAM", "demo"), ("JOB_TYPES", &replaced)], &[], &bundled).unwrap();
    assert_eq!(merged.job_types.get("summarise").map(|t| t.model.as_str()), Some("demo-slow"));
    assert!(merged.job_types.get("extra").is_some());
    // A blank JOB_TYPES adds nothing.
    let blank = read(&[("UPSTREAM", "demo"), ("JOB_TYPES", " ")], &[], &bundled).unwrap();
    assert!(blank.job_types.get("extra").is_none() && blank.job_types.get("summarise").is_some());
}

#[test]
fn a_bundled_type_lacking_its_settings_is_off_and_the_deployment_runs() {
    // Issue 34: the demo's triage type bundled into a deployment without
    // MAIL_URL and MAIL_SECRET once refused the whole deployment (every
    // route answered 500 gateway-misconfigured).
    let triage = include_str!("../../../../jobs/triage.json");
    let deployment = read(&[("UPSTREAM", "demo")], &[], &[("triage", triage)]).unwrap();
    assert!(deployment.job_types.get("triage").is_none());
    assert_eq!(
        deployment.job_types.disabled("triage").map(|lacks| lacks.iter().map(|s| s.name()).collect::<Vec<_>>()),
        Some(vec!["MAIL_URL", "MAIL_SECRET"])
    );
    assert_eq!(
        deployment.warnings(),
        [
            "job type triage is not configured in this deployment: it needs the variable MAIL_URL and the secret MAIL_SECRET, which are not set"
        ]
    );
    // Set (the secret as a secret, or a plain variable in development): it runs, and nothing is said.
    let set = read(
        &[("UPSTREAM", "demo"), ("MAIL_URL", "https://mail.example/send")],
        &[("MAIL_SECRET", "s")],
        &[("triage", triage)],
    );
    let set = set.unwrap();
    assert!(set.job_types.get("triage").is_some() && set.warnings().is_empty());
    // A malformed value is still the deployment's refusal, by name.
    let malformed = read(
        &[("UPSTREAM", "demo"), ("MAIL_URL", "ftp://mail.example")],
        &[("MAIL_SECRET", "s")],
        &[("triage", triage)],
    );
    assert!(malformed.err().unwrap().contains("the url of effect email of job type triage"));
    // No bundled type: nothing to turn off.
    assert!(read(&[("UPSTREAM", "demo")], &[], &[]).unwrap().warnings().is_empty());
}

#[test]
fn a_d1_effects_database_must_be_bound() {
    let triage = include_str!("../../../../jobs/triage.json");
    let vars: HashMap<&str, &str> =
        [("UPSTREAM", "demo"), ("MAIL_URL", "https://mail.example/send"), ("MAIL_SECRET", "s")].into();
    let var = |name: &str| vars.get(name).map(|v| (*v).to_owned());
    let unbound = Deployment::read(&var, &|_| None, &|_| false, &[("triage", triage)]).unwrap();
    assert_eq!(
        unbound.warnings(),
        ["job type triage is not configured in this deployment: it needs the D1 database TICKETS, which is not set"]
    );
    let bound = Deployment::read(&var, &|_| None, &|name| name == "TICKETS", &[("triage", triage)]).unwrap();
    assert!(bound.job_types.get("triage").is_some());
}
