#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;
use crate::identity::fingerprint::Body;

/// A valid submission of a user's chat request.
fn submission() -> Submission {
    Submission {
        tenant: "dev".into(),
        user: Some("alice".into()),
        key: IdempotencyKey::parse("test-0123456789abcdef").unwrap(),
        fingerprint: Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap(),
        target: "/v1/chat/completions".into(),
        content_type: "application/json".into(),
        wait_ms: 30_000,
        provider_headers: Vec::new(),
        background: false,
        run: None,
        keyless: None,
        generation: 0,
        trace: None,
    }
}

/// A hand-off whose header is `header` (JSON), followed by `body`.
fn hand_off(header: &Value, body: &[u8]) -> Vec<u8> {
    let header = serde_json::to_vec(header).unwrap();
    let mut bytes = (header.len() as u32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(body);
    bytes
}

#[test]
fn a_submission_travels_with_its_typed_key_and_fingerprint() {
    let sent = submission();
    let (read, body) = decode(encode(&sent, b"{\"model\":\"m\"}")).unwrap();
    assert_eq!(
        (read.key, read.fingerprint, body),
        (sent.key.clone(), sent.fingerprint.clone(), b"{\"model\":\"m\"}".to_vec())
    );
    assert_eq!(read.user.as_deref(), Some("alice"));
    // The provider's key is derived from the typed key: never empty.
    assert!(sent.storage_id().upstream_key().len() > "onejob-".len());
    assert_eq!(sent.upstream_key(), sent.storage_id().upstream_key());
    assert!(read.keyless.is_none() && read.generation == 0);
}

#[test]
fn a_keyless_submission_travels_with_its_mode_and_generation() {
    let mut sent = submission();
    sent.keyless = Some(Keyless::Window { window_ms: 2_000 });
    sent.generation = 3;
    let (read, _) = decode(encode(&sent, b"{}")).unwrap();
    assert_eq!(read.keyless, sent.keyless);
    assert_eq!(read.generation, 3);
    assert_ne!(read.upstream_key(), read.storage_id().upstream_key(), "a renewed job's provider key is its own");
}

#[test]
fn a_submission_with_a_malformed_key_or_fingerprint_is_not_read() {
    let good = serde_json::to_value(submission()).unwrap();
    for (field, bad) in [("key", "short"), ("key", ""), ("fingerprint", "abc"), ("fingerprint", "")] {
        let mut header = good.clone();
        header[field] = Value::from(bad);
        assert!(decode(hand_off(&header, b"{}")).is_none(), "{field}: {bad:?}");
    }
    assert!(decode(hand_off(&good, b"{}")).is_some());
    assert!(decode(vec![0, 0]).is_none());
}

#[test]
fn a_model_is_read_from_an_object_only() {
    assert_eq!(model_of(br#" {"model":"gpt-x","messages":[]}"#).as_deref(), Some("gpt-x"));
    assert_eq!(model_of(br#"["gpt-x"]"#), None);
    assert_eq!(model_of(br#"{"messages":[]}"#), None);
    assert_eq!(model_of(b"not json"), None);
}

fn operator() -> OperatorRequest {
    OperatorRequest {
        key: "test-0123456789abcdef".into(),
        by: "admin:ops".into(),
        request: "r-1".into(),
        action: Some("retry".into()),
        status: None,
        body: None,
        effect: None,
    }
}

/// Every call, one of each, with its URL (the names the Ledger has always read).
fn every_call() -> Vec<(LedgerCall, &'static str)> {
    let query = JobQuery { key: "test-0123456789abcdef".into(), from: Some(3), ids: true };
    vec![
        (LedgerCall::Submit { submission: submission(), body: b"{\"model\":\"m\"}".to_vec() }, "submit"),
        (LedgerCall::View(query.clone()), "view"),
        (LedgerCall::Stream(query.clone()), "stream"),
        (LedgerCall::Cancel(query), "cancel"),
        (LedgerCall::Deliver, "deliver"),
        (LedgerCall::FollowUp, "effects"),
        (LedgerCall::Facts, "facts"),
        (LedgerCall::AdminView, "admin-view"),
        (LedgerCall::Enqueue(operator()), "enqueue"),
        (LedgerCall::Replay(operator()), "replay"),
        (LedgerCall::Resolve(operator()), "resolve"),
        (LedgerCall::Approve(operator()), "approve"),
        (LedgerCall::Effect(operator()), "effect"),
    ]
}

#[test]
fn every_call_goes_to_its_url_and_reads_back_as_itself() {
    for (call, name) in every_call() {
        let (url, body) = call.encode();
        assert_eq!(url, format!("https://ledger/{name}"));
        let read = LedgerCall::decode(url.strip_prefix("https://ledger").unwrap(), body.clone()).unwrap();
        assert_eq!(read.encode(), (url, body), "{name} changed on the way");
    }
}

#[test]
fn a_call_without_a_payload_has_an_empty_body_and_one_with_one_its_json() {
    for (call, name) in every_call() {
        let (_, body) = call.encode();
        match name {
            "deliver" | "effects" | "facts" | "admin-view" => assert!(body.is_empty(), "{name}"),
            "submit" => assert_eq!(&body[..4], &(body.len() as u32 - 4 - 13).to_be_bytes()),
            _ => assert_eq!(serde_json::from_slice::<Value>(&body).unwrap()["key"], "test-0123456789abcdef"),
        }
    }
}

#[test]
fn a_payload_as_the_ledger_has_always_read_it_is_read() {
    // The JSON of the payload alone, fields in any order, optional ones left out.
    let stream = LedgerCall::decode("/stream", br#"{"ids":true,"key":"k","from":7}"#.to_vec()).unwrap();
    assert!(matches!(stream, LedgerCall::Stream(JobQuery { from: Some(7), ids: true, .. })));
    let view = LedgerCall::decode("/view", br#"{"key":"k"}"#.to_vec()).unwrap();
    assert!(matches!(view, LedgerCall::View(JobQuery { from: None, ids: false, .. })));
    let resolve = LedgerCall::decode(
        "/resolve",
        br#"{"key":"k","by":"a","request":"r","action":"succeeded","status":200,"body":{"ok":1}}"#.to_vec(),
    )
    .unwrap();
    let LedgerCall::Resolve(request) = resolve else { panic!("not a resolve") };
    assert_eq!((request.status, request.body), (Some(200), Some(serde_json::json!({"ok": 1}))));
    assert!(matches!(LedgerCall::decode("/deliver", Vec::new()), Ok(LedgerCall::Deliver)));
    assert!(matches!(LedgerCall::decode("effects", Vec::new()), Ok(LedgerCall::FollowUp)));
}

#[test]
fn only_calls_that_may_change_the_job_are_indexed_after() {
    let mutating: Vec<&str> = every_call().iter().filter(|(c, _)| c.mutates()).map(|(_, name)| *name).collect();
    assert_eq!(mutating, ["submit", "deliver", "effects", "replay", "resolve", "approve", "effect"]);
}

#[test]
fn an_unknown_or_malformed_call_is_refused() {
    let refused = |path: &str, body: &[u8]| LedgerCall::decode(path, body.to_vec()).unwrap_err();
    assert_eq!(refused("/nope", b""), Malformed("unknown or malformed ledger call"));
    assert_eq!(refused("/view", b"[]"), Malformed("unknown or malformed ledger call"));
    assert_eq!(refused("/view", b""), Malformed("unknown or malformed ledger call"));
    assert_eq!(refused("/view", b"{"), Malformed("malformed ledger call"));
    assert_eq!(refused("/resolve", b"{}"), Malformed("unknown or malformed ledger call"));
    assert_eq!(refused("/submit", b"\0\0"), Malformed("malformed submission"));
    // A payload serde's own tag would name is not a way in.
    assert_eq!(refused("/deliver", br#"{"key":"k"}"#), Malformed("unknown or malformed ledger call"));
}

#[test]
fn a_replay_reply_reads_back_as_written_and_as_the_effects_runner_writes_it() {
    for reply in [ReplayReply::replayed(), ReplayReply::not_replayed("already replayed by this request")] {
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(serde_json::from_str::<ReplayReply>(&text).unwrap(), reply);
    }
    assert_eq!(serde_json::to_string(&ReplayReply::replayed()).unwrap(), r#"{"replayed":true}"#);
    let effects: ReplayReply = serde_json::from_str(r#"{"replayed":true,"effects":["notify"]}"#).unwrap();
    assert_eq!(effects.effects.as_deref(), Some(&["notify".to_owned()][..]));
}

fn caller(token: Option<bool>) -> Caller {
    let token = token.map(|approve| crate::config::token::UserToken {
        tenant: "acme".into(),
        user: "u1".into(),
        exp: 10,
        iat: None,
        nbf: None,
        models: None,
        paths: None,
        approve,
    });
    Caller { tenant: "acme".into(), user: token.as_ref().map(|t| t.user.clone()), token }
}

fn key() -> IdempotencyKey {
    IdempotencyKey::parse("test-0123456789abcdef").unwrap()
}

#[test]
fn a_job_route_is_its_call_with_the_parameters_it_reads() {
    let tenant = caller(None);
    let view = LedgerCall::of_job_route(JobRoute::View, &tenant, &key(), Some("1"), Some("4")).unwrap();
    assert!(matches!(view, LedgerCall::View(JobQuery { from: None, ids: false, .. })));
    let cancel = LedgerCall::of_job_route(JobRoute::Cancel, &tenant, &key(), None, None).unwrap();
    assert!(matches!(cancel, LedgerCall::Cancel(JobQuery { from: None, ids: false, .. })));
    // A stream reads its offset (0 when none) and whether events carry ids.
    let stream = LedgerCall::of_job_route(JobRoute::Stream, &tenant, &key(), Some("true"), Some(" 4 ")).unwrap();
    assert!(matches!(stream, LedgerCall::Stream(JobQuery { from: Some(4), ids: true, .. })));
    let stream = LedgerCall::of_job_route(JobRoute::Stream, &tenant, &key(), Some("yes"), None).unwrap();
    assert!(matches!(stream, LedgerCall::Stream(JobQuery { from: Some(0), ids: false, .. })));
    let bad = LedgerCall::of_job_route(JobRoute::Stream, &tenant, &key(), None, Some("-1")).unwrap_err();
    assert_eq!(bad.problem().status(), 400);
}

#[test]
fn an_approval_is_by_the_tenant_or_a_user_whose_token_may_approve() {
    let approver = |caller: &Caller| match LedgerCall::of_job_route(JobRoute::Approve, caller, &key(), None, None) {
        Ok(LedgerCall::Approve(request)) => Ok((request.by, request.key, request.request)),
        Ok(other) => panic!("not an approval: {other:?}"),
        Err(refused) => Err(refused.problem().status()),
    };
    assert_eq!(approver(&caller(None)), Ok(("tenant:acme".into(), key().to_string(), String::new())));
    assert_eq!(approver(&caller(Some(true))), Ok(("user:u1".into(), key().to_string(), String::new())));
    assert_eq!(approver(&caller(Some(false))), Err(403));
}

fn admin() -> Admin {
    Admin { name: "admin:ops".into(), scope: crate::config::admin::Scope::All }
}

fn job() -> JobName {
    JobName { tenant: "acme".into(), user: Some("u1".into()), key: "test-0123456789abcdef".into() }
}

#[test]
fn an_operator_request_names_the_job_the_admin_and_its_own_key() {
    let request = OperatorRequest::of(&admin(), &job(), "r-7");
    assert_eq!(
        (request.key.as_str(), request.by.as_str(), request.request.as_str()),
        (job().key.as_str(), "admin:ops", "r-7")
    );
    assert!(request.action.is_none() && request.status.is_none() && request.body.is_none() && request.effect.is_none());
}

#[test]
fn a_resolve_carries_its_action_and_the_response_to_keep() {
    let body: ResolveBody = serde_json::from_value(serde_json::json!({
        "tenant": "acme", "user": "u1", "key": "test-0123456789abcdef",
        "action": "succeeded", "response": { "status": 200, "body": { "ok": true } }
    }))
    .unwrap();
    let (named, call) = LedgerCall::resolve(&admin(), "r-1", body);
    assert_eq!(named, job());
    let LedgerCall::Resolve(request) = call else { panic!("not a resolve") };
    assert_eq!(request.action.as_deref(), Some("succeeded"));
    assert_eq!((request.status, request.body), (Some(200), Some(serde_json::json!({ "ok": true }))));
    assert_eq!((request.by.as_str(), request.request.as_str()), ("admin:ops", "r-1"));
    // A retry carries no response.
    let body: ResolveBody =
        serde_json::from_value(serde_json::json!({ "tenant": "acme", "key": "k", "action": "retry" })).unwrap();
    let (named, call) = LedgerCall::resolve(&admin(), "r-2", body);
    assert_eq!(named.user, None);
    let LedgerCall::Resolve(request) = call else { panic!("not a resolve") };
    assert_eq!((request.action.as_deref(), request.status, request.body), (Some("retry"), None, None));
}

#[test]
fn an_effect_action_names_the_effect_and_what_to_do() {
    for (action, spelled) in [(EffectAction::Resend, "resend"), (EffectAction::MarkDone, "mark_done")] {
        let LedgerCall::Effect(request) = LedgerCall::effect(&admin(), &job(), "r-3", "notify".into(), action) else {
            panic!("not an effect call")
        };
        assert_eq!((request.action.as_deref(), request.effect.as_deref()), (Some(spelled), Some("notify")));
        assert_eq!(request.request, "r-3");
    }
}

#[test]
fn a_submission_reads_its_wait_its_mode_and_the_provider_headers_from_the_request() {
    let fingerprint = submission().fingerprint;
    let new = |headers: &[(&str, &str)]| {
        let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned());
        let target = "/v1/messages".to_owned();
        Submission::new(caller(Some(true)), &key(), &fingerprint, target, "application/json".into(), 30_000, &header)
    };
    let plain = new(&[]);
    assert_eq!((plain.tenant.as_str(), plain.user.as_deref()), ("acme", Some("u1")));
    assert_eq!((plain.wait_ms, plain.background), (30_000, false));
    assert!(plain.provider_headers.is_empty() && plain.run.is_none() && plain.keyless.is_none());
    assert_eq!((plain.generation, plain.trace.is_none()), (0, true));
    let waits = new(&[("Prefer", "wait=5")]);
    assert_eq!((waits.wait_ms, waits.background), (5_000, false));
    let capped = new(&[("Prefer", "wait=100000")]);
    assert_eq!(capped.wait_ms, crate::config::settings::MAX_WAIT_MS);
    let background = new(&[("Prefer", "respond-async")]);
    assert_eq!((background.wait_ms, background.background), (30_000, true));
    let headers = new(&[("anthropic-version", "2023-06-01"), ("authorization", "Bearer x"), ("openai-beta", "b")]);
    assert_eq!(
        headers.provider_headers,
        vec![("anthropic-version".to_owned(), "2023-06-01".to_owned()), ("openai-beta".to_owned(), "b".to_owned())]
    );
}

#[test]
fn the_queue_consumer_asks_a_ledger_by_the_call_of_the_same_name() {
    use crate::ledger::background::consumer::Ask;
    assert!(matches!(LedgerCall::from(Ask::Deliver), LedgerCall::Deliver));
    assert!(matches!(LedgerCall::from(Ask::Facts), LedgerCall::Facts));
    assert!(!LedgerCall::from(Ask::Facts).mutates(), "reading the facts changes nothing");
}

/// A job type's run as a job keeps it: the type it runs, the subject it holds.
mod kept_run {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use serde_json::json;

    use crate::api::ledger_call::*;
    use crate::job_type::JobTypes;

    /// A type `triage` run once per `ticket_id`, and a type `summary` with no subject.
    fn job_types() -> JobTypes {
        let output = json!({"type": "object"});
        let prompt = json!({"system": "s", "user": "u"});
        let input = json!({"type": "object", "properties": {"ticket_id": {}}});
        let triage =
            json!({"model": "demo", "once_per": "ticket_id", "input": input, "prompt": prompt, "output": output});
        let summary = json!({"model": "demo", "input": input, "prompt": prompt, "output": output});
        JobTypes::from_json(&json!({"triage": triage, "summary": summary}).to_string()).expect("job types")
    }

    fn run(job_type: &str) -> RunOf {
        RunOf { job_type: job_type.into(), input: json!({"ticket_id": "T-7"}) }
    }

    #[test]
    fn a_kept_run_names_its_type_while_the_deployment_defines_it() {
        let types = job_types();
        assert_eq!(job_type_of(&types, Some(&run("triage"))).map(|t| t.name.as_str()), Some("triage"));
        assert!(job_type_of(&types, Some(&run("gone"))).is_none(), "a type gone from the deployment");
        assert!(job_type_of(&types, None).is_none(), "not a job type's job");
    }

    #[test]
    fn only_a_job_types_job_holds_a_subject() {
        let types = job_types();
        let triage = run("triage");
        let held = subject_of(&types, Some(&triage)).expect("a subject");
        assert_eq!((held.type_name, held.subject.as_str()), ("triage", "T-7"));
        assert!(subject_of(&types, None).is_none(), "not a job type's job");
        assert!(subject_of(&types, Some(&run("summary"))).is_none(), "the type names none");
    }
}
