#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;

fn token(approve: bool) -> UserToken {
    UserToken {
        tenant: "acme".into(),
        user: "u1".into(),
        exp: 10,
        iat: None,
        nbf: None,
        models: Some(vec!["demo".into()]),
        paths: Some(vec!["/v1/*".into()]),
        approve,
    }
}

#[test]
fn every_path_has_its_route() {
    assert_eq!(Route::of("OPTIONS", "/v1/chat/completions"), Route::Preflight);
    assert_eq!(Route::of("OPTIONS", "/nowhere"), Route::Preflight);
    assert_eq!(Route::of("GET", "/v1/models"), Route::Models);
    assert_eq!(Route::of("POST", "/v1/models"), Route::Models);
    assert_eq!(Route::of("POST", "/v1/chat/completions"), Route::Proxy);
    assert_eq!(Route::of("POST", "/v1/"), Route::Proxy);
    assert_eq!(Route::of("POST", "/onejob/v1/run/triage"), Route::Run("triage"));
    assert_eq!(Route::of("POST", "/onejob/v1/run/"), Route::Run(""));
    assert_eq!(Route::of("GET", "/onejob/v1/jobs/k%2F1"), Route::Job("k%2F1", JobRoute::View));
    assert_eq!(Route::of("GET", "/onejob/v1/jobs/k/stream"), Route::Job("k", JobRoute::Stream));
    assert_eq!(Route::of("POST", "/onejob/v1/jobs/k/cancel"), Route::Job("k", JobRoute::Cancel));
    assert_eq!(Route::of("POST", "/onejob/v1/jobs/k/approve"), Route::Job("k", JobRoute::Approve));
    assert_eq!(Route::of("GET", "/onejob/v1/admin/jobs"), Route::Admin("jobs"));
    assert_eq!(Route::of("GET", "/onejob/v1/providers"), Route::Providers);
    assert_eq!(Route::of("POST", "/onejob/v1/providers/check"), Route::ProvidersCheck);
    assert_eq!(Route::of("GET", "/demo/token"), Route::DemoToken);
    assert_eq!(Route::of("GET", "/demo/tickets"), Route::DemoReadOut("tickets"));
    assert_eq!(Route::of("GET", "/demo/inbox"), Route::DemoReadOut("inbox"));
    assert_eq!(Route::of("GET", "/demo/other"), Route::NotFound);
    assert_eq!(Route::of("GET", "/onejob/problems/not-found"), Route::ProblemDoc("not-found"));
    for path in ["/", "/v1", "/onejob/v1/jobs", "/onejob/v1/providers/", "/index.html"] {
        assert_eq!(Route::of("GET", path), Route::NotFound, "{path}");
    }
}

#[test]
fn job_routes_by_suffix_and_their_methods() {
    assert_eq!(JobRoute::of("key"), ("key", JobRoute::View));
    // Only the last segment names the route.
    assert_eq!(JobRoute::of("a/stream/cancel"), ("a/stream", JobRoute::Cancel));
    assert_eq!(JobRoute::of("/stream"), ("", JobRoute::Stream));
    assert_eq!(JobRoute::View.method(), Method::Get);
    assert_eq!(JobRoute::Stream.method(), Method::Get);
    assert_eq!(JobRoute::Cancel.method(), Method::Post);
    assert_eq!(JobRoute::Approve.method(), Method::Post);
}

#[test]
fn a_wrong_method_is_a_405_with_allow() {
    assert_eq!(expect("GET", Method::Get), Ok(()));
    let refused = expect("PUT", Method::Post).unwrap_err();
    assert_eq!(refused.headers(), [("Allow", "POST, OPTIONS".to_owned())]);
    let problem = refused.problem();
    assert_eq!(problem.status(), 405);
    assert_eq!(problem.detail, "PUT is not allowed here; use POST");
    let plain = Refusal::from(missing_key());
    assert_eq!(plain.headers(), []);
    assert_eq!(plain.problem(), missing_key());
}

#[test]
fn percent_escapes_are_decoded_and_broken_ones_kept() {
    assert_eq!(percent_decode("a%2Fb%20c"), "a/b c");
    assert_eq!(percent_decode("%41%4a%4A"), "AJJ");
    assert_eq!(percent_decode("100%"), "100%");
    assert_eq!(percent_decode("%4"), "%4");
    assert_eq!(percent_decode("%zz%41"), "%zzA");
    assert_eq!(percent_decode("%%41"), "%A");
    assert_eq!(percent_decode("%FF"), "\u{FFFD}");
    assert_eq!(percent_decode(""), "");
}

#[test]
fn keys_sent_derived_or_missing() {
    let key = key_of(Some("test-0123456789abcdef"), false).unwrap().unwrap();
    assert_eq!(key.as_str(), "test-0123456789abcdef");
    assert_eq!(key_of(None, true), Ok(None));
    assert_eq!(key_of(None, false), Err(missing_key().into()));
    assert_eq!(missing_key().status(), 400);
    let bad = key_of(Some("short"), true).unwrap_err().problem();
    assert_eq!(bad.kind, ProblemType::InvalidIdempotencyKey);
    assert_eq!(job_key("test%2D0123456789abcdef").unwrap().as_str(), "test-0123456789abcdef");
    assert_eq!(job_key("short").unwrap_err().problem().kind, ProblemType::InvalidIdempotencyKey);
    assert!(check_keyless(None).is_ok());
    assert!(check_keyless(Some("wait=5")).is_ok());
    assert_eq!(
        check_keyless(Some("respond-async, wait=5")).unwrap_err().problem().kind,
        ProblemType::MissingIdempotencyKey
    );
}

#[test]
fn targets_keep_the_query_and_stay_under_the_base_url() {
    assert_eq!(proxy_target("/v1/chat/completions", None).unwrap(), "/v1/chat/completions");
    assert_eq!(proxy_target("/v1/chat/completions", Some("a=1")).unwrap(), "/v1/chat/completions?a=1");
    let refused = proxy_target("/v1/../admin", None).unwrap_err().problem();
    assert_eq!(refused.kind, ProblemType::InvalidQuery);
    assert!(refused.detail.starts_with("path: "));
    assert_eq!(run_target("triage", None), (false, "/onejob/v1/run/triage".to_owned()));
    assert_eq!(run_target("triage", Some("application/json")), (false, "/onejob/v1/run/triage".to_owned()));
    assert_eq!(run_target("triage", Some("text/event-stream")), (true, "/onejob/v1/run/triage?stream".to_owned()));
    assert_eq!(run_route("triage"), "/onejob/v1/run/triage");
}

#[test]
fn fingerprints_refuse_what_is_not_json() {
    let a = fingerprint("/v1/x", br#"{"a":1,"b":2}"#, "body").unwrap();
    let b = fingerprint("/v1/x", br#"{"b":2.0,"a":1}"#, "body").unwrap();
    assert_eq!(a, b);
    assert_ne!(a, fingerprint("/v1/x?stream", br#"{"a":1,"b":2}"#, "body").unwrap());
    let refused = fingerprint("/v1/x", b"{not json", "input").unwrap_err().problem();
    assert_eq!(refused.kind, ProblemType::InvalidJson);
    assert!(refused.detail.starts_with("the input is not valid JSON: "));
}

#[test]
fn tokens_reach_what_they_name() {
    assert!(token_allows(None, "/anything", None).is_ok());
    let t = token(false);
    assert!(token_allows(Some(&t), "/v1/chat/completions", Some("demo")).is_ok());
    assert_eq!(
        token_allows(Some(&t), "/v1/chat/completions", Some("gpt")).unwrap_err().problem().kind,
        ProblemType::Forbidden
    );
    assert_eq!(
        token_allows(Some(&t), "/onejob/v1/run/x", Some("demo")).unwrap_err().problem().kind,
        ProblemType::Forbidden
    );
}

#[test]
fn a_token_lists_only_its_models() {
    let listed = |ids: &[&str]| -> Vec<ListedModel> {
        ids.iter().map(|id| ListedModel { id: (*id).to_owned(), owned_by: "p".to_owned() }).collect()
    };
    let ids = |models: Vec<ListedModel>| models.into_iter().map(|m| m.id).collect::<Vec<_>>();
    assert_eq!(ids(models_for(None, listed(&["demo", "gpt"])).unwrap()), ["demo", "gpt"]);
    assert_eq!(ids(models_for(Some(&token(false)), listed(&["demo", "gpt"])).unwrap()), ["demo"]);
    let any_model = UserToken { models: None, ..token(false) };
    assert_eq!(ids(models_for(Some(&any_model), listed(&["demo", "gpt"])).unwrap()), ["demo", "gpt"]);
    let no_models_path = UserToken { paths: Some(vec!["/v1/chat/*".into()]), ..token(false) };
    assert_eq!(
        models_for(Some(&no_models_path), listed(&["demo"])).unwrap_err().problem().kind,
        ProblemType::Forbidden
    );
}

#[test]
fn invalid_input_lists_every_violation() {
    let key = IdempotencyKey::parse("test-0123456789abcdef").unwrap();
    assert!(check_input("triage", &key, Vec::new()).is_ok());
    let problem =
        check_input("triage", &key, vec![Violation("a".into()), Violation("b".into())]).unwrap_err().problem();
    assert_eq!(problem.kind, ProblemType::InvalidInput);
    assert_eq!(problem.key.as_deref(), Some("test-0123456789abcdef"));
    assert_eq!(problem.violations, ["a", "b"]);
    assert_eq!(problem.detail, "the input does not meet the triage job type's schema");
}

#[test]
fn prefer_wait_is_capped_and_defaults() {
    assert_eq!(wait_ms(None, 1234), 1234);
    assert_eq!(wait_ms(Some("respond-async"), 1234), 1234);
    assert_eq!(wait_ms(Some("wait=3"), 1234), 3000);
    assert_eq!(wait_ms(Some("wait=0"), 1234), 0);
    assert_eq!(wait_ms(Some("wait=100000"), 1234), MAX_WAIT_MS);
    assert_eq!(wait_ms(Some(&format!("wait={}", u64::MAX)), 1234), MAX_WAIT_MS);
}

#[test]
fn job_routes_user_position_and_approver() {
    assert_eq!(job_user(false, None, Some("u2".into())).as_deref(), Some("u2"));
    assert_eq!(job_user(false, None, None), None);
    assert_eq!(job_user(true, Some("u1"), Some("u2".into())).as_deref(), Some("u1"));
    assert_eq!(stream_from(None), Ok(0));
    assert_eq!(stream_from(Some(" 7 ")), Ok(7));
    assert_eq!(stream_from(Some("-1")).unwrap_err().problem().kind, ProblemType::InvalidQuery);
    assert_eq!(stream_from(Some("x")).unwrap_err().problem().kind, ProblemType::InvalidQuery);
    assert!(stream_ids(Some("1")) && stream_ids(Some("true")));
    assert!(!stream_ids(None) && !stream_ids(Some("yes")) && !stream_ids(Some("0")));
    assert_eq!(approver(None, "acme", None).as_deref(), Ok("tenant:acme"));
    assert_eq!(approver(Some(&token(true)), "acme", Some("u1")).as_deref(), Ok("user:u1"));
    assert_eq!(approver(Some(&token(false)), "acme", Some("u1")).unwrap_err().problem().kind, ProblemType::Forbidden);
}

#[test]
fn problem_types_document_themselves() {
    let doc = problem_doc(ProblemType::NotFound.slug()).unwrap();
    assert!(doc.starts_with(ProblemType::NotFound.title()));
    assert!(doc.contains("HTTP status: 404\nRetry with the same key: no\n"));
    assert!(doc.ends_with(&format!("Type URI: {}\n", ProblemType::NotFound.type_uri())));
    assert_eq!(problem_doc("no-such-type").unwrap_err().problem().kind, ProblemType::NotFound);
}

#[test]
fn bodies_are_json_within_the_limit_and_read_strictly() {
    for json in ["application/json", "Application/JSON; charset=utf-8", "application/problem+json"] {
        assert!(is_json(json), "{json}");
    }
    for other in ["text/plain", "application/jsonx", "json", "", "text/x+json"] {
        assert!(!is_json(other), "{other}");
    }
    assert_eq!(json_content_type(None).unwrap(), "application/json");
    assert_eq!(json_content_type(Some("application/json; charset=utf-8")).unwrap(), "application/json; charset=utf-8");
    assert_eq!(json_content_type(Some("text/plain")).unwrap_err().problem().status(), 415);
    assert_eq!(declared_length(None, 10), Ok(None));
    assert_eq!(declared_length(Some("10"), 10), Ok(Some(10)));
    assert_eq!(declared_length(Some("junk"), 10), Ok(None));
    let over = declared_length(Some("11"), 10).unwrap_err().problem();
    assert_eq!(
        (over.status(), over.max_bytes, over.detail.as_str()),
        (413, Some(10), "the body is larger than 10 bytes")
    );
    assert!(within_limit(4, 6, 10).is_ok());
    assert_eq!(within_limit(4, 7, 10), Err(too_large(10)));
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Shape {
        a: u32,
    }
    assert_eq!(parse_strict::<Shape>(br#"{"a": 1}"#, "{a}"), Ok(Shape { a: 1 }));
    let duplicate = parse_strict::<Shape>(br#"{"a": 1, "a": 2}"#, "{a}").unwrap_err().problem();
    assert_eq!(duplicate.kind, ProblemType::InvalidJson);
    assert!(duplicate.detail.starts_with("the body is not valid JSON: "));
    let wrong = parse_strict::<Shape>(br#"{"a": "x"}"#, "{a}").unwrap_err().problem();
    assert_eq!(wrong.detail, "the body is JSON but not what this route takes: {a}");
    assert!(parse_strict::<Shape>(b"1e400", "{a}").is_err());
}

#[test]
fn a_proxied_request_is_one_job_keyed_or_derived() {
    let tenant = Caller { tenant: "acme".into(), user: None, token: None };
    let request = ProxyRequest {
        path: "/v1/chat/completions",
        query: Some("a=1"),
        body: br#"{"model": "demo"}"#,
        model: Some("demo"),
        prefer: None,
        cache_control: None,
    };
    let window = Keyless::Window { window_ms: 60_000 };
    let sent = IdempotencyKey::parse("test-0123456789abcdef").unwrap();
    let keyed = proxy_job(&tenant, window, Some(sent.clone()), &request).unwrap();
    assert_eq!((keyed.target.as_str(), &keyed.key, keyed.keyless), ("/v1/chat/completions?a=1", &sent, None));
    assert_eq!(keyed.fingerprint, fingerprint("/v1/chat/completions?a=1", br#"{"model": "demo"}"#, "body").unwrap());
    let derived = proxy_job(&tenant, window, None, &request).unwrap();
    assert!(crate::identity::keyless::is_derived(&derived.key));
    assert_eq!(derived.keyless, Some(window));
    // The same caller's identical request is the same job; another user's is not.
    assert_eq!(proxy_job(&tenant, window, None, &request).unwrap().key, derived.key);
    let user = Caller { user: Some("u1".into()), ..tenant.clone() };
    assert_ne!(proxy_job(&user, window, None, &request).unwrap().key, derived.key);
    let no_cache = ProxyRequest { cache_control: Some("no-cache"), ..request };
    assert_eq!(proxy_job(&tenant, window, None, &no_cache).unwrap().keyless, Some(Keyless::Coalesce));
    let background = ProxyRequest { prefer: Some("respond-async"), ..request };
    let refused = proxy_job(&tenant, window, None, &background).unwrap_err().problem();
    assert_eq!(refused.kind, ProblemType::MissingIdempotencyKey);
    assert!(proxy_job(&tenant, window, Some(sent.clone()), &background).is_ok());
    // Checked in order: the target, the body, the token.
    let outside = ProxyRequest { path: "/v1/../x", body: b"{bad", ..request };
    assert!(proxy_job(&tenant, window, None, &outside).unwrap_err().problem().detail.starts_with("path: "));
    let bad_body = ProxyRequest { body: b"{bad", ..request };
    assert_eq!(proxy_job(&tenant, window, None, &bad_body).unwrap_err().problem().kind, ProblemType::InvalidJson);
    let scoped = Caller { token: Some(UserToken { models: Some(vec!["other".into()]), ..token(false) }), ..tenant };
    assert_eq!(proxy_job(&scoped, window, Some(sent), &request).unwrap_err().problem().kind, ProblemType::Forbidden);
}

mod credentials {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::config::tenant::key_digest;

    const SECRET: &str = "a-token-secret-of-at-least-32-bytes!!";

    fn tenants() -> TenantDirectory {
        TenantDirectory::from_json(&format!(r#"{{"{}": "acme"}}"#, key_digest("acme-key"))).unwrap()
    }

    fn admins() -> AdminDirectory {
        let json = format!(
            r#"{{"{}": {{"name": "ops", "tenant": "*"}}, "{}": {{"name": "acme-ops", "tenant": "acme"}}}}"#,
            key_digest("root-admin"),
            key_digest("acme-admin")
        );
        AdminDirectory::from_json(&json).unwrap()
    }

    fn secrets() -> TokenSecrets {
        TokenSecrets::from_json(&format!(r#"{{"acme": "{SECRET}"}}"#)).unwrap()
    }

    fn bearer(value: &str) -> String {
        format!("Bearer {value}")
    }

    fn with<'a>(authorization: Option<&'a str>, api_key: Option<&'a str>) -> Credentials<'a> {
        Credentials { authorization, api_key }
    }

    #[test]
    fn a_tenant_key_by_bearer_or_x_api_key() {
        let auth = bearer("acme-key");
        assert_eq!(with(Some(&auth), None).tenant(&tenants()), Ok("acme".to_owned()));
        assert_eq!(with(None, Some(" acme-key ")).tenant(&tenants()), Ok("acme".to_owned()));
        // The bearer comes first.
        let other = bearer("other");
        assert_eq!(with(Some(&other), Some("acme-key")).tenant(&tenants()), Err("the key names no tenant"));
        assert!(with(None, None).tenant(&tenants()).unwrap_err().starts_with("send Authorization"));
        let caller = with(Some(&auth), None).caller(&tenants(), &secrets(), 0).unwrap();
        assert_eq!(caller, Caller { tenant: "acme".into(), user: None, token: None });
        let refused = with(None, None).caller(&tenants(), &secrets(), 0).unwrap_err();
        assert_eq!(refused.problem().status(), 401);
        assert_eq!(refused.headers(), [("WWW-Authenticate", "Bearer".to_owned())]);
    }

    #[test]
    fn a_user_token_is_verified_and_scoped() {
        let claims = UserToken { tenant: "acme".into(), user: "u1".into(), exp: 1_000, ..token(false) };
        let auth = bearer(&token::mint(&claims, SECRET));
        let caller = with(Some(&auth), None).caller(&tenants(), &secrets(), 500).unwrap();
        assert_eq!((caller.tenant.as_str(), caller.user.as_deref()), ("acme", Some("u1")));
        assert_eq!(caller.token.as_ref(), Some(&claims));
        let expired = with(Some(&auth), None).caller(&tenants(), &secrets(), 5_000).unwrap_err();
        assert_eq!(expired.problem().status(), 401);
        assert_eq!(expired.headers().len(), 1);
        let forged = bearer(&token::mint(&claims, "another-secret-of-at-least-32-bytes!!"));
        assert_eq!(with(Some(&forged), None).caller(&tenants(), &secrets(), 500).unwrap_err().problem().status(), 401);
        let over_scoped = token_refusal(TokenError::ModelNotAllowed);
        assert_eq!((over_scoped.problem().status(), over_scoped.headers().len()), (403, 0));
    }

    #[test]
    fn admins_by_bearer_and_their_reach() {
        let root = bearer("root-admin");
        let acme = bearer("acme-admin");
        assert_eq!(with(Some(&root), None).admin(&admins()).unwrap().name, "ops");
        let refused = |c: Credentials| c.admin(&admins()).unwrap_err().problem();
        assert_eq!(refused(with(None, Some("root-admin"))).detail, "send Authorization: Bearer <admin key>");
        assert_eq!(refused(with(Some(&bearer("acme-key")), None)).detail, "the key names no admin (see ADMIN_KEYS)");
        assert_eq!(refused(with(Some(&bearer("acme-key")), None)).status(), 401);
        assert!(with(Some(&root), None).deployment_admin(&admins()).is_ok());
        assert_eq!(with(Some(&acme), None).deployment_admin(&admins()).unwrap_err().problem().status(), 403);
        assert_eq!(with(None, None).deployment_admin(&admins()).unwrap_err().problem().status(), 401);
        let tenant_key = bearer("acme-key");
        assert!(with(Some(&tenant_key), None).tenant_or_admin(&tenants(), &admins()).is_ok());
        assert!(with(Some(&acme), None).tenant_or_admin(&tenants(), &admins()).is_ok());
        let neither = with(Some(&bearer("nobody")), None).tenant_or_admin(&tenants(), &admins()).unwrap_err();
        assert_eq!(
            (neither.problem().detail.as_str(), neither.headers().len()),
            ("the key names no admin (see ADMIN_KEYS)", 0)
        );
    }
}

#[test]
fn the_demo_routes_answer_only_a_get_where_the_demo_is_on() {
    assert_eq!(demo_route(true, "GET"), Ok(()));
    let off = demo_route(false, "GET").unwrap_err();
    assert_eq!((off.problem().status(), off.problem().detail), (404, "no such route".to_owned()));
    // Off is off whatever the method: a 404, never a 405 that would show the route.
    assert_eq!(demo_route(false, "POST").unwrap_err().problem().status(), 404);
    let post = demo_route(true, "POST").unwrap_err();
    assert_eq!(post.problem().status(), 405);
    assert_eq!(post.headers(), vec![("Allow", "GET, OPTIONS".to_owned())]);
}

#[test]
fn a_demo_token_is_a_verified_token_of_the_demo_tenant_for_a_well_formed_user() {
    let secrets = TokenSecrets::from_var(Some(r#"{"dev":"0123456789abcdef0123456789abcdef"}"#)).unwrap();
    let body = demo_token(Some("alice-1"), &secrets, 1_000).unwrap();
    assert_eq!(body["expires_s"], 1_000 + crate::demo::TOKEN_TTL_S);
    let read = token::verify(body["token"].as_str().unwrap(), &secrets, 1_001).unwrap();
    assert_eq!((read.tenant.as_str(), read.user.as_str()), ("dev", "alice-1"));
    for user in [None, Some(""), Some("a b"), Some(&*"x".repeat(65))] {
        assert_eq!(demo_token(user, &secrets, 1_000).unwrap_err().problem().status(), 400, "{user:?}");
    }
    let none = TokenSecrets::from_var(None).unwrap();
    let refused = demo_token(Some("alice"), &none, 1_000).unwrap_err().problem();
    assert_eq!((refused.status(), refused.detail), (404, "the dev tenant has no token secret".to_owned()));
}

fn summarise() -> JobTypes {
    let definition = serde_json::json!({
        "summarise": {
            "model": "demo",
            "input": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
            "prompt": {"system": "Summarise.", "user": "{{input.text}}"},
            "output": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}},
        }
    });
    JobTypes::from_json(&definition.to_string()).unwrap()
}

#[test]
fn a_run_names_a_job_type_the_deployment_has() {
    let types = summarise();
    assert_eq!(job_type(&types, "summarise").unwrap().model, "demo");
    let unknown = job_type(&types, "nope").unwrap_err().problem();
    assert_eq!(unknown.kind, ProblemType::UnknownJobType);
}

#[test]
fn a_run_of_a_type_the_deployment_turned_off_names_the_type_and_what_it_lacks() {
    // The demo's triage, in a deployment without MAIL_URL and MAIL_SECRET.
    let mut types = JobTypes::from_definitions(&[("triage", include_str!("../../../../jobs/triage.json"))]).unwrap();
    let provided = crate::job_type::Provided { var: &|_| None, secret: &|_| None, database: &|name| name == "TICKETS" };
    types.resolve(&provided).unwrap();
    let off = job_type(&types, "triage").unwrap_err().problem();
    assert_eq!((off.kind, off.status()), (ProblemType::JobTypeNotConfigured, 503));
    assert_eq!(
        off.detail,
        "job type triage is not configured in this deployment: it needs the variable MAIL_URL and the secret MAIL_SECRET, which are not set"
    );
    assert!(!off.kind.should_retry(), "asking again cannot help until the operator sets them");
    assert_eq!(job_type(&types, "nope").unwrap_err().problem().kind, ProblemType::UnknownJobType);
}

#[test]
fn a_runs_job_is_its_types_route_and_input_streamed_or_not() {
    let types = summarise();
    let summarise = job_type(&types, "summarise").unwrap();
    let key = IdempotencyKey::parse("run-0123456789abcdef").unwrap();
    let input = br#"{ "text": "hello" }"#;
    let run = run_job(summarise, None, &key, input, None).unwrap();
    assert!(!run.stream);
    assert_eq!(run.input, serde_json::json!({"text": "hello"}));
    assert_eq!(run.fingerprint, Fingerprint::of_url("POST", "/onejob/v1/run/summarise", Body::Json(input)).unwrap());
    let body: Value = serde_json::from_slice(&run.body).unwrap();
    assert_eq!(body["model"], "demo");
    // Streamed is another intent: another fingerprint, a streamed request.
    let streamed = run_job(summarise, None, &key, input, Some("text/event-stream")).unwrap();
    assert!(streamed.stream);
    assert_ne!(streamed.fingerprint, run.fingerprint);
    assert_eq!(serde_json::from_slice::<Value>(&streamed.body).unwrap()["stream"], true);
}

#[test]
fn a_run_is_refused_for_a_token_that_does_not_reach_it_bad_json_or_an_input_off_its_schema() {
    let types = summarise();
    let summarise = job_type(&types, "summarise").unwrap();
    let key = IdempotencyKey::parse("run-0123456789abcdef").unwrap();
    // This token reaches only /v1/*.
    let forbidden = run_job(summarise, Some(&token(false)), &key, br#"{"text":"x"}"#, None).unwrap_err().problem();
    assert_eq!(forbidden.status(), 403);
    let not_json = run_job(summarise, None, &key, b"{", None).unwrap_err().problem();
    assert_eq!(not_json.kind, ProblemType::InvalidJson);
    let off_schema = run_job(summarise, None, &key, br#"{"text": 3}"#, None).unwrap_err().problem();
    assert_eq!((off_schema.kind, off_schema.status()), (ProblemType::InvalidInput, 400));
}

#[test]
fn an_unreadable_configuration_is_a_500_that_names_nothing_of_it() {
    let problem = misconfigured().problem();
    assert_eq!(problem.kind, ProblemType::Misconfigured);
    assert_eq!(problem.status(), 500);
    assert!(problem.detail.contains("the operator has the details in the log"));
}
