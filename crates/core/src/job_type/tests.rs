#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use serde_json::{Value, json};

use super::*;
use crate::job_type::effect::EffectTarget;
use crate::wire::ProblemType;

pub(crate) fn triage() -> Value {
    json!({
        "triage": {
            "model": "demo",
            "once_per": "ticket_id",
            "input": {
                "type": "object",
                "required": ["ticket_id", "text", "customer_email"],
                "additionalProperties": false,
                "properties": {
                    "ticket_id": {"type": "string", "minLength": 1, "maxLength": 64},
                    "text": {"type": "string", "minLength": 1, "maxLength": 4000},
                    "customer_email": {"type": "string", "minLength": 3}
                }
            },
            "prompt": {
                "system": "Classify the support ticket as JSON: category, priority, summary.",
                "user": "Ticket {{input.ticket_id}}: {{ input.text }}"
            },
            "output": {
                "type": "object",
                "required": ["category", "priority", "summary"],
                "properties": {
                    "category": {"enum": ["billing", "bug", "account", "other"]},
                    "priority": {"enum": ["low", "normal", "high", "urgent"]},
                    "summary": {"type": "string"}
                }
            },
            "effects": [
                {"name": "record", "kind": "d1", "database": "TICKETS", "table": "ticket_triage",
                 "columns": {"ticket_id": "{{input.ticket_id}}", "category": "{{output.category}}", "priority": "{{output.priority}}"}},
                {"name": "email", "kind": "webhook", "url": "env:MAIL_URL", "receipt_url": "env:MAIL_RECEIPT_URL",
                 "secret": "MAIL_SECRET",
                 "payload": {"to": "{{input.customer_email}}", "subject": "Ticket {{input.ticket_id}}: {{output.category}}"}}
            ]
        }
    })
}

fn types_with(edit: impl FnOnce(&mut Value)) -> Result<JobTypes, JobTypeError> {
    let mut definition = triage();
    edit(&mut definition["triage"]);
    JobTypes::from_json(&definition.to_string())
}

#[test]
fn a_type_is_read_with_its_effects_and_defaults() {
    let types = types_with(|_| {}).unwrap();
    let triage = types.get("triage").unwrap();
    assert_eq!(triage.once_per.as_deref(), Some("ticket_id"));
    assert_eq!(triage.effects.len(), 2);
    assert_eq!(triage.effects[0].retry, crate::job_type::effect::EffectRetry::DATABASE);
    assert_eq!(triage.effects[1].retry, crate::job_type::effect::EffectRetry::WEBHOOK);
    assert!(matches!(&triage.effects[1].target, EffectTarget::Webhook { receipt_url: Some(_), .. }));
    assert!(!triage.effects[0].approve);
}

#[test]
fn input_violations_are_all_listed() {
    let types = types_with(|_| {}).unwrap();
    let triage = types.get("triage").unwrap();
    assert!(triage.check_input(&json!({"ticket_id": "T-1", "text": "hi", "customer_email": "a@b.c"})).is_empty());
    let found = triage.check_input(&json!({"ticket_id": "", "extra": true}));
    let found: Vec<&str> = found.iter().map(|v| v.0.as_str()).collect();
    assert_eq!(
        found,
        ["$: lacks \"text\"", "$: lacks \"customer_email\"", "$: has no \"extra\" allowed", "$.ticket_id: too short"]
    );
    assert_eq!(triage.check_input(&json!([1])).len(), 1, "not an object: one violation");
}

#[test]
fn a_taken_subject_names_its_holder_s_key_only_to_the_holder_s_own_user() {
    let types = types_with(|_| {}).unwrap();
    let triage = types.get("triage").unwrap();
    let own = triage.subject_taken("triage", "T-7", "k-new", ("alice", "k-old"), Some("alice"));
    assert_eq!(own.kind, ProblemType::AlreadyRun);
    assert_eq!(own.detail, r#"ticket_id "T-7" already has a triage job; it is not run again"#);
    assert_eq!((own.key.as_deref(), own.job_key.as_deref()), (Some("k-new"), Some("k-old")));
    let other = triage.subject_taken("triage", "T-7", "k-new", ("alice", "k-old"), Some("bob"));
    assert_eq!((other.key.as_deref(), other.job_key), (Some("k-new"), None), "bob may not read alice's job");
    // Tenant keys (no user) share the empty user.
    let tenant = triage.subject_taken("triage", "T-7", "k-new", ("", "k-old"), None);
    assert_eq!(tenant.job_key.as_deref(), Some("k-old"));
    assert_eq!(triage.subject_taken("triage", "T-7", "k", ("", "k-old"), Some("bob")).job_key, None);
}

#[test]
fn the_request_is_rendered_from_the_input_only() {
    let types = types_with(|_| {}).unwrap();
    let triage = types.get("triage").unwrap();
    let input = json!({"ticket_id": "T-7", "text": "charged twice", "customer_email": "a@b.c"});
    let body: Value = serde_json::from_slice(&triage.render_request(&input, false)).unwrap();
    assert_eq!(body["model"], "demo");
    assert_eq!(body["messages"][1]["content"], "Ticket T-7: charged twice");
    assert_eq!(body["response_format"]["type"], "json_object");
    assert_eq!(triage.subject_of(&input).as_deref(), Some("T-7"));
    let streamed: Value = serde_json::from_slice(&triage.render_request(&input, true)).unwrap();
    assert_eq!(streamed["stream"], true);
    assert_eq!(streamed["stream_options"]["include_usage"], true);
}

#[test]
fn the_output_must_meet_the_contract() {
    let types = types_with(|_| {}).unwrap();
    let triage = types.get("triage").unwrap();
    let reply = |content: &str| {
        json!({"choices": [{"message": {"role": "assistant", "content": content}}]}).to_string().into_bytes()
    };
    let good = triage.output_of(&reply(r#"{"category":"billing","priority":"high","summary":"s"}"#)).unwrap();
    assert_eq!(good["category"], "billing");
    assert!(triage.output_of(&reply(r#"{"category":"refunds","priority":"high","summary":"s"}"#)).is_err());
    assert!(triage.output_of(&reply("category: billing")).is_err());
    // A streamed answer, as stored: its events.
    let chunk = |text: &str| format!("data: {}\n\n", json!({"choices": [{"delta": {"content": text}}]}));
    let stream = format!(
        "{}{}{}data: [DONE]\n\n",
        chunk("{\"category\":\"bug\","),
        chunk("\"priority\":\"low\","),
        chunk("\"summary\":\"x\"}")
    );
    assert_eq!(triage.output_of(stream.as_bytes()).unwrap()["category"], "bug");
}

#[test]
fn bad_definitions_are_refused_by_name() {
    let refused = |edit: fn(&mut Value), expected: &str| {
        let error = types_with(edit).unwrap_err().0;
        assert!(error.contains(expected), "{error} should say {expected}");
    };
    refused(|t| t["prompt"]["user"] = json!("{{input.nope}}"), "names no declared property");
    refused(|t| t["prompt"]["user"] = json!("{{output.category}}"), "names no declared property");
    refused(|t| t["prompt"]["user"] = json!("Ticket {{input.ticket_id}} {{input.text"), "is not closed");
    refused(|t| t["prompt"]["user"] = json!("{{ticket_id}}"), "names no field");
    refused(|t| t["once_per"] = json!("customer"), "once_per");
    refused(|t| t["effects"][0]["table"] = json!("t; DROP TABLE x"), "SQL name");
    refused(|t| t["effects"][0]["columns"] = json!({"source": "x"}), "onejob writes");
    refused(|t| t["effects"][1]["name"] = json!("record"), "two effects");
    refused(|t| t["effects"][1]["kind"] = json!("email"), "kind is d1 or webhook");
    refused(|t| t["effects"][1]["attempts"] = json!(0), "attempts is 1 to 20");
    refused(|t| t["effects"][1]["approval_ttl_ms"] = json!(5), "without approve");
    refused(|t| t["output"] = json!({"type": "object", "pattern": "x"}), "output");
    refused(|t| t["input"] = json!({"type": "string"}), "input is an object");
    refused(|t| t["surprise"] = json!(1), "unknown field");
    assert!(JobTypes::from_json(r#"{"Bad Name": {}}"#).is_err());
    assert!(JobTypes::from_json("[]").is_err());
}

#[test]
fn a_later_definition_replaces_one_by_name() {
    let mut types = types_with(|_| {}).unwrap();
    let other = types_with(|t| t["model"] = json!("other")).unwrap();
    types.merge(other);
    assert_eq!(types.get("triage").unwrap().model, "other");
    assert_eq!(types.iter().count(), 1);
}

#[test]
fn the_demo_inbox_is_read_as_its_own_target() {
    let email = |url: &str, receipt_url: Option<&str>| {
        let (url, receipt_url) = (url.to_owned(), receipt_url.map(str::to_owned));
        types_with(move |t| {
            let effect = t["effects"][1].as_object_mut().unwrap();
            effect.insert("url".into(), json!(url));
            match receipt_url {
                Some(receipt_url) => effect.insert("receipt_url".into(), json!(receipt_url)),
                None => effect.remove("receipt_url"),
            };
        })
        .map(|types| types.get("triage").unwrap().effects[1].target.clone())
    };
    let payload = triage()["triage"]["effects"][1]["payload"].clone();
    assert_eq!(
        email("demo:inbox", Some("demo:inbox")),
        Ok(EffectTarget::Inbox { payload: payload.clone(), receipts: true }),
        "the spelling of the config, read into the variant"
    );
    assert_eq!(email("demo:inbox", None), Ok(EffectTarget::Inbox { payload, receipts: false }));
    // Only the exact spelling is the inbox; anything else is a URL for the
    // deployment to check (and refuse: it is not http(s)).
    assert!(matches!(email("DEMO:INBOX", None), Ok(EffectTarget::Webhook { url, .. }) if url == "DEMO:INBOX"));
    assert!(matches!(
        email("env:MAIL_URL", Some("env:MAIL_RECEIPT_URL")),
        Ok(EffectTarget::Webhook { url, receipt_url: Some(receipt), secret: Some(secret), .. })
            if url == "env:MAIL_URL" && receipt == "env:MAIL_RECEIPT_URL" && secret == "MAIL_SECRET"
    ));
    // The inbox is not mixed with a real receiver.
    let mixed = email("demo:inbox", Some("https://mail.example/receipts")).unwrap_err().0;
    assert!(mixed.contains("effect email: the url is the demo inbox"), "{mixed}");
    let mixed = email("https://mail.example/send", Some("demo:inbox")).unwrap_err().0;
    assert!(mixed.contains("effect email: the receipt_url is the demo inbox"), "{mixed}");
}

#[test]
fn a_subject_is_this_jobs_own_only_while_it_holds_it_without_an_answer() {
    let hold = SubjectHold { key: "k1", user: "", answered: false };
    assert!(!hold.refuses("k1", ""), "a retry after a crash");
    assert!(hold.refuses("k2", ""), "another job");
    assert!(hold.refuses("k1", "u1"), "another user's job under the same key");
    assert!(SubjectHold { answered: true, ..hold }.refuses("k1", ""), "answered: taken for good");
}
