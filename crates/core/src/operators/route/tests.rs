#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::*;
use crate::wire::Problem;

const KEY: &str = "test-0123456789abcdef";

fn root() -> Admin {
    Admin { name: "ops".into(), scope: Scope::All }
}

fn acme() -> Admin {
    Admin { name: "acme-support".into(), scope: Scope::Tenant("acme".into()) }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect()
}

/// A route as parsed, or its refusal's problem.
type Parsed = Result<AdminRoute, Box<Problem>>;

/// A case of a refused path: the path, its query, the problem's type and detail.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], ProblemType, &'a str);

fn parse(admin: &Admin, method: &str, rest: &str, query: &[(&str, &str)], key: Option<&str>) -> Parsed {
    let query = pairs(query);
    AdminRoute::parse(admin, &AdminRequest { method, rest, query: &query, operator_key: key })
        .map_err(|r| Box::new(r.problem()))
}

fn job(tenant: &str, user: Option<&str>, key: &str) -> JobName {
    JobName { tenant: tenant.into(), user: user.map(str::to_owned), key: key.into() }
}

#[test]
fn paths_name_routes_and_their_methods() {
    let get = |rest: &str| parse(&root(), "GET", rest, &[], None);
    let post = |rest: &str| parse(&root(), "POST", rest, &[], Some(KEY));
    assert_eq!(get("dead-letters"), Ok(AdminRoute::DeadLetters(DeadLettersQuery::default())));
    assert!(matches!(get("jobs"), Ok(AdminRoute::Jobs(_))));
    assert_eq!(get("costs"), Ok(AdminRoute::Costs(CostsQuery::default())));
    assert_eq!(get("savings"), Ok(AdminRoute::Savings(CostsQuery::default())));
    assert_eq!(post("dead-letters/replay"), Ok(AdminRoute::Replay { request: KEY.into() }));
    assert_eq!(post("jobs/resolve"), Ok(AdminRoute::Resolve { request: KEY.into() }));
    assert_eq!(get(&format!("jobs/acme/{KEY}")), Ok(AdminRoute::JobView(job("acme", None, KEY))));
    assert_eq!(post(&format!("jobs/acme/{KEY}/approve")), Ok(AdminRoute::Approve(job("acme", None, KEY))));
    assert_eq!(post(&format!("jobs/acme/{KEY}/enqueue")), Ok(AdminRoute::Enqueue(job("acme", None, KEY))));
    assert_eq!(
        post(&format!("jobs/ac%6De/{KEY}/effects/send%20mail/mark_done")),
        Ok(AdminRoute::Effect {
            request: KEY.into(),
            job: job("acme", None, KEY),
            effect: "send mail".into(),
            action: EffectAction::MarkDone
        })
    );
    assert_eq!(EffectAction::Resend.as_str(), "resend");
    assert_eq!(EffectAction::MarkDone.as_str(), "mark_done");
    for rest in ["", "nope", "jobs/", "jobs/a", "jobs/a/b/c", "jobs/a/b/effects/e/delete", "dead-letters/x"] {
        let problem = get(rest).unwrap_err();
        assert_eq!((problem.status(), problem.detail.as_str()), (404, "no such admin route"), "{rest}");
    }
    // The method is checked before anything else of the route.
    let refused = AdminRoute::parse(
        &acme(),
        &AdminRequest { method: "POST", rest: "jobs", query: &pairs(&[("limit", "x")]), operator_key: None },
    )
    .unwrap_err();
    assert_eq!(refused.headers(), [("Allow", "GET, OPTIONS".to_owned())]);
    assert_eq!(parse(&root(), "GET", "jobs/resolve", &[], Some(KEY)).unwrap_err().status(), 405);
}

#[test]
fn lists_are_read_strictly_then_scoped() {
    // An admin of every tenant asks about any tenant, or all of them.
    assert_eq!(
        parse(&root(), "GET", "costs", &[("tenant", "other"), ("since_ms", "5")], None),
        Ok(AdminRoute::Costs(CostsQuery { since_ms: 5, tenant: Some("other".into()) }))
    );
    // A scoped admin's lists are its tenant's, asked for or not.
    assert_eq!(
        parse(&acme(), "GET", "dead-letters", &[], None),
        Ok(AdminRoute::DeadLetters(DeadLettersQuery { tenant: Some("acme".into()), error_class: None }))
    );
    let Ok(AdminRoute::Jobs(jobs)) = parse(&acme(), "GET", "jobs", &[("tenant", "acme")], None) else { panic!() };
    assert_eq!(jobs.tenant.as_deref(), Some("acme"));
    let forbidden = parse(&acme(), "GET", "savings", &[("tenant", "other")], None).unwrap_err();
    assert_eq!((forbidden.status(), forbidden.detail.as_str()), (403, OUT_OF_REACH));
    // A filter that cannot be read is a 400 before the scope is looked at.
    let invalid = parse(&acme(), "GET", "jobs", &[("tenant", "other"), ("limit", "0")], None).unwrap_err();
    assert_eq!(
        (invalid.kind, invalid.detail.as_str()),
        (ProblemType::InvalidQuery, "query parameter limit: must be 1 to 200")
    );
    assert_eq!(scoped_tenant(&root(), None).unwrap(), None);
}

#[test]
fn keyed_routes_need_a_well_formed_key_first() {
    for rest in ["dead-letters/replay", "jobs/resolve", "jobs/other/short/effects/e/resend"] {
        for key in [None, Some("short")] {
            let problem = parse(&acme(), "POST", rest, &[], key).unwrap_err();
            assert_eq!(problem.kind, ProblemType::MissingIdempotencyKey, "{rest}");
        }
    }
}

#[test]
fn a_path_names_a_job_this_admin_reaches() {
    let view = |admin: &Admin, rest: &str, query: &[(&str, &str)]| parse(admin, "GET", rest, query, None);
    assert_eq!(
        view(&acme(), &format!("jobs/acme/{KEY}"), &[("user", "u%201")]),
        Ok(AdminRoute::JobView(job("acme", Some("u%201"), KEY)))
    );
    let cases: [Case; 6] = [
        ("jobs/other/test-0123456789abcdef", &[], ProblemType::Forbidden, OUT_OF_REACH),
        ("jobs//test-0123456789abcdef", &[], ProblemType::InvalidQuery, "tenant must be 1 to 256 bytes of text"),
        (
            "jobs/acme/test-0123456789abcdef",
            &[("user", "")],
            ProblemType::InvalidQuery,
            "user must be 1 to 256 bytes of text",
        ),
        (
            "jobs/acme/test-0123456789abcdef",
            &[("user", "a"), ("user", "b")],
            ProblemType::InvalidQuery,
            "query parameter user: given more than once",
        ),
        ("jobs/acme/a%0Ab/approve", &[], ProblemType::InvalidIdempotencyKey, ""),
        ("jobs/acme/a/b/enqueue", &[], ProblemType::NotFound, "use /onejob/v1/admin/jobs/{tenant}/{key}"),
    ];
    for (rest, query, kind, detail) in cases {
        let method = if rest.ends_with("approve") || rest.ends_with("enqueue") { "POST" } else { "GET" };
        let problem = parse(&acme(), method, rest, query, None).unwrap_err();
        assert_eq!(problem.kind, kind, "{rest}");
        if !detail.is_empty() {
            assert_eq!(problem.detail, detail, "{rest}");
        }
    }
    let long = "t".repeat(257);
    assert!(check_job_names(Some(&long), None, None).is_err());
    assert!(check_job_names(Some("a\u{7}"), None, None).is_err());
    assert!(check_job_names(None, None, None).is_ok());
}

#[test]
fn replay_bodies_select_one_job_or_a_cause() {
    let body = |tenant: Option<&str>, key: Option<&str>, class: Option<&str>| ReplayBody {
        tenant: tenant.map(str::to_owned),
        user: None,
        key: key.map(str::to_owned),
        error_class: class.map(str::to_owned),
    };
    assert_eq!(
        body(Some("acme"), Some(KEY), None).selection(&acme()),
        Ok(ReplaySelection::One(job("acme", None, KEY)))
    );
    let refusal = |b: ReplayBody, admin: &Admin| b.selection(admin).unwrap_err().problem();
    assert_eq!(refusal(body(None, Some(KEY), None), &root()).detail, "a key needs its tenant");
    assert_eq!(refusal(body(Some("other"), Some(KEY), None), &acme()).kind, ProblemType::Forbidden);
    assert_eq!(refusal(body(None, Some(KEY), Some("auth")), &root()).kind, ProblemType::InvalidJson);
    assert_eq!(refusal(body(None, None, None), &root()).detail, "send either a tenant and key, or an error_class");
    assert_eq!(
        body(None, None, Some("auth")).selection(&acme()),
        Ok(ReplaySelection::Cause { tenant: Some("acme".into()), error_class: "auth".into() })
    );
    assert_eq!(
        body(None, None, Some("auth")).selection(&root()),
        Ok(ReplaySelection::Cause { tenant: None, error_class: "auth".into() })
    );
    assert_eq!(refusal(body(Some("other"), None, Some("auth")), &acme()).kind, ProblemType::Forbidden);
    assert!(body(Some(""), None, Some("auth")).check_names().is_err());
    assert!(body(Some("acme"), Some("short"), None).check_names().is_err());
    let parsed: ReplayBody = serde_json::from_str(r#"{"error_class": "auth", "extra": 1}"#).unwrap();
    assert_eq!(parsed.error_class.as_deref(), Some("auth"));
}

#[test]
fn resolve_bodies_are_checked_and_a_2xx_settles() {
    let body: ResolveBody =
        serde_json::from_str(&format!(r#"{{"tenant": "acme", "key": "{KEY}", "action": "succeeded"}}"#)).unwrap();
    assert!(body.check(&acme()).is_ok());
    assert_eq!(body.job(), job("acme", None, KEY));
    let other = ResolveBody { tenant: "other".into(), ..body.clone() };
    assert_eq!(other.check(&acme()).unwrap_err().problem().kind, ProblemType::Forbidden);
    assert!(other.check(&root()).is_ok());
    let bad_key = ResolveBody { key: "short".into(), ..body };
    assert_eq!(bad_key.check(&root()).unwrap_err().problem().kind, ProblemType::InvalidIdempotencyKey);
    assert!(settled(200) && settled(299));
    assert!(!settled(199) && !settled(300) && !settled(409));
}

#[test]
fn a_replay_report_says_what_was_replayed_and_why_not() {
    let mut report = ReplayReport::default();
    let a = job("acme", Some("u"), "k1");
    assert!(report.in_scope(&acme(), &a));
    assert!(report.record(&a, 200, r#"{"replayed": true, "effects": ["mail"]}"#));
    assert!(!report.record(&job("acme", None, "k2"), 200, r#"{"replayed": false, "reason": "not dead"}"#));
    assert!(!report.record(&job("acme", None, "k3"), 404, r#"{"type": "x", "detail": "no such job"}"#));
    assert!(!report.record(&job("acme", None, "k4"), 500, "not json"));
    assert!(!report.in_scope(&acme(), &job("other", None, "k5")));
    assert_eq!(
        report.to_json(),
        concat!(
            r#"{"replayed":[{"key":"k1","tenant":"acme","user":"u"}],"skipped":["#,
            r#"{"key":"k2","reason":"not dead","tenant":"acme"},"#,
            r#"{"key":"k3","reason":"no such job","tenant":"acme"},"#,
            r#"{"key":"k4","reason":null,"tenant":"acme"},"#,
            r#"{"key":"k5","reason":"out of this admin's scope","tenant":"other"}]}"#
        )
    );
    // The same bytes the edge's json! built (serde_json's maps are sorted).
    let built = serde_json::json!({
        "replayed": [serde_json::json!({ "tenant": "acme", "user": "u", "key": "k1" })],
        "skipped": [
            serde_json::json!({ "tenant": "acme", "key": "k2", "reason": "not dead" }),
            serde_json::json!({ "tenant": "acme", "key": "k3", "reason": "no such job" }),
            serde_json::json!({ "tenant": "acme", "key": "k4", "reason": null }),
            serde_json::json!({ "tenant": "other", "key": "k5", "reason": "out of this admin's scope" }),
        ],
    });
    assert_eq!(report.to_json(), built.to_string());
}

#[test]
fn keyed_answers_are_kept_by_who_asked() {
    assert_eq!(request_id(&root(), KEY), format!("ops\u{1f}*\u{1f}{KEY}"));
    assert_eq!(request_id(&acme(), KEY), format!("acme-support\u{1f}tenant:acme\u{1f}{KEY}"));
    let same_name = Admin { name: "ops".into(), scope: Scope::Tenant("acme".into()) };
    assert_ne!(request_id(&root(), KEY), request_id(&same_name, KEY));
    assert!(keeps(200) && keeps(409) && keeps(499));
    assert!(!keeps(500) && !keeps(503));
    let kept = serde_json::to_string(&(409u16, "{\"a\":1}")).unwrap();
    assert_eq!(kept_answer(&kept), (409, "{\"a\":1}".to_owned()));
    assert_eq!(kept_answer("{\"legacy\":true}"), (200, "{\"legacy\":true}".to_owned()));
    assert_eq!(content_type(200), "application/json");
    assert_eq!(content_type(399), "application/json");
    assert_eq!(content_type(400), "application/problem+json");
}

#[test]
fn the_prices_note_names_the_table_and_the_overrides() {
    let prices = Prices::bundled_with(r#"{"my-model": {"input_per_mtok": 1, "output_per_mtok": 2}}"#).unwrap();
    let note = prices_note(&prices);
    assert_eq!(note["bundled_as_of"], BUNDLED_AS_OF);
    assert_eq!(note["overridden"], serde_json::json!(["my-model"]));
    assert_eq!(prices_note(&Prices::bundled())["overridden"], serde_json::json!([]));
}

#[test]
fn a_refusal_met_while_performing_a_keyed_request_is_its_answer() {
    let refusal = refused(ProblemType::Forbidden, OUT_OF_REACH);
    let (status, body) = refused_answer(&refusal);
    assert_eq!(status, 403);
    assert_eq!(body, refusal.problem().to_json());
    assert!(keeps(status), "kept as any other answer");
    let selection = ReplayBody { tenant: Some("other".into()), user: None, key: Some(KEY.into()), error_class: None }
        .selection(&acme())
        .unwrap_err();
    assert_eq!(refused_answer(&selection).0, 403);
}

#[test]
fn an_answer_carries_its_content_type_and_a_kept_one_given_again_says_so() {
    assert_eq!(answer_headers(200, false), vec![("Content-Type", "application/json")]);
    assert_eq!(answer_headers(404, false), vec![("Content-Type", "application/problem+json")]);
    assert_eq!(
        answer_headers(409, true),
        vec![("Content-Type", "application/problem+json"), ("Idempotent-Replayed", "true")]
    );
    assert_eq!(DEAD_LETTERS_LISTED, 500);
}

#[test]
fn an_admin_request_is_read_from_the_head() {
    let head = Head {
        method: "POST".into(),
        params: pairs(&[("user", "u1")]),
        headers: pairs(&[("idempotency-key", "operator-request-0001")]),
        ..Head::default()
    };
    let request = AdminRequest::of(&head, "jobs/resolve");
    assert_eq!(
        (request.method, request.rest, request.operator_key),
        ("POST", "jobs/resolve", Some("operator-request-0001"))
    );
    assert_eq!(request.query, &pairs(&[("user", "u1")])[..]);
    assert_eq!(
        AdminRoute::parse(&root(), &request),
        Ok(AdminRoute::Resolve { request: "operator-request-0001".into() })
    );
}

#[test]
fn an_admin_answer_is_kept_replayed_and_headed_by_its_status() {
    let list = AdminAnswer::json(&serde_json::json!({ "jobs": [] })).unwrap();
    assert_eq!(list, AdminAnswer::new(200, "{\"jobs\":[]}".into()));
    assert_eq!(list.headers(), vec![("Content-Type", "application/json")]);
    // Kept, then given again as it was, marked replayed.
    let conflict = AdminAnswer::new(409, "{\"a\":1}".into());
    assert!(conflict.keeps());
    let again = AdminAnswer::kept(&conflict.kept_form());
    assert_eq!((again.status, again.body.as_str(), again.replayed), (409, "{\"a\":1}", true));
    assert_eq!(again.headers(), vec![("Content-Type", "application/problem+json"), ("Idempotent-Replayed", "true")]);
    assert!(!AdminAnswer::new(503, String::new()).keeps());
    // A resolve's answer settles the job when it is a 2xx.
    assert!(AdminAnswer::new(204, String::new()).settled() && !conflict.settled());
    // A refusal met while performing is an answer like any other.
    let refused = AdminAnswer::refused(&refused(ProblemType::Forbidden, "no"));
    assert_eq!((refused.status, refused.replayed), (403, false));
    assert!(refused.keeps());
}
