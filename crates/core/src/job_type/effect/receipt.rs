//! What a destination's answers mean for an effect, decided here for the
//! edge, which only talks to D1 and to HTTP receivers: a receiver's answer
//! as a receipt (bounded), what a receipt URL's status or a stored row says
//! ([`Found`]), the receipt URL of a delivery id, and the SQL of a `d1`
//! effect's table (names checked as SQL names when its job type was read).

use serde_json::Value;

use super::{Found, Outcome, outcome_of_status};

/// How much of a receiver's answer an effect keeps as its receipt.
pub const MAX_RECEIPT_BYTES: usize = 4_096;

/// How long a webhook receiver (or a receipt URL) has to answer.
pub const WEBHOOK_TIMEOUT_MS: u64 = 10_000;

/// What a call to a receiver came to: its status and text, a failure to
/// reach it, or no answer within [`WEBHOOK_TIMEOUT_MS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// The receiver answered.
    Status(u16, String),
    /// The request could not be made or its answer read (the error's text).
    Failed(String),
    /// No answer in time.
    TimedOut,
}

impl Answered {
    /// What a call to a receiver came to: `None` when nothing came back
    /// within [`WEBHOOK_TIMEOUT_MS`], else its status and text, or why the
    /// request could not be made or its answer read.
    pub fn of<E: std::fmt::Display>(within: Option<Result<(u16, String), E>>) -> Answered {
        match within {
            Some(Ok((status, text))) => Answered::Status(status, text),
            Some(Err(error)) => Answered::Failed(error.to_string()),
            None => Answered::TimedOut,
        }
    }
}

/// A receiver's answer as a receipt: its JSON, or (too long, or not JSON)
/// the start of its text.
pub fn bounded(text: String) -> Value {
    if text.len() <= MAX_RECEIPT_BYTES
        && let Ok(json) = serde_json::from_str(&text)
    {
        return json;
    }
    Value::String(text.chars().take(MAX_RECEIPT_BYTES / 2).collect())
}

/// What a webhook's POST came to (see [`outcome_of_status`]); a failure or
/// a timeout may have arrived: unknown (the receipt, or an operator, tells).
pub fn outcome_of_post(answered: Answered) -> Outcome {
    match answered {
        Answered::Status(status, text) => outcome_of_status(status, bounded(text)),
        Answered::Failed(error) => Outcome::Unknown { detail: format!("the receiver could not be reached: {error}") },
        Answered::TimedOut => {
            Outcome::Unknown { detail: format!("the receiver did not answer in {WEBHOOK_TIMEOUT_MS} ms") }
        }
    }
}

/// What `GET {receipt_url}/{delivery id}` says: 2xx it arrived (its answer
/// the receipt), 404 or 410 it did not, anything else cannot tell.
pub fn found_of_receipt(answered: Answered) -> Found {
    match answered {
        Answered::Status(200..=299, text) => Found::Same(bounded(text)),
        Answered::Status(404 | 410, _) => Found::Absent,
        Answered::Status(status, _) => Found::CouldNotAsk { detail: format!("the receipt URL answered {status}") },
        Answered::Failed(error) => Found::CouldNotAsk { detail: error },
        Answered::TimedOut => Found::CouldNotAsk { detail: "the receipt URL did not answer".into() },
    }
}

/// The receipt URL of `delivery_id`: `{receipt_url}/{delivery id}`, the id
/// percent-encoded (it holds `:`), one `/` between them.
pub fn receipt_url(receipt_url: &str, delivery_id: &str) -> String {
    format!("{}/{}", receipt_url.trim_end_matches('/'), percent_encode(delivery_id))
}

/// Escapes everything but unreserved characters.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// What a lookup by delivery id found: a receipt (the same delivery), none,
/// or a failure to ask (`context` names what failed, as in "the database
/// call failed").
pub fn found_of_lookup<E: std::fmt::Display>(looked_up: Result<Option<Value>, E>, context: Option<&str>) -> Found {
    match looked_up {
        Ok(Some(receipt)) => Found::Same(receipt),
        Ok(None) => Found::Absent,
        Err(error) => match context {
            Some(context) => Found::CouldNotAsk { detail: format!("{context}: {error}") },
            None => Found::CouldNotAsk { detail: error.to_string() },
        },
    }
}

/// What a `d1` effect's table holds under its delivery id: the row if its
/// `fingerprint` is the effect's, else a different payload (an absent or
/// unreadable fingerprint is the empty one).
pub fn found_of_row<E: std::fmt::Display>(looked_up: Result<Option<Value>, E>, fingerprint: &str) -> Found {
    match found_of_lookup(looked_up, Some("the database call failed")) {
        Found::Same(row) => match row.get("fingerprint").and_then(Value::as_str) {
            Some(stored) if stored == fingerprint => Found::Same(row),
            stored => Found::Different { stored_fingerprint: stored.unwrap_or_default().to_owned() },
        },
        other => other,
    }
}

/// What a `d1` insert came to: `Ok(Some(row))` written by this call (done),
/// `Ok(None)` a row already there (ask what it holds: `None` here), or a
/// failure, which may still have committed (unknown).
pub fn outcome_of_insert<E: std::fmt::Display>(inserted: Result<Option<Value>, E>) -> Option<Outcome> {
    match inserted {
        Ok(Some(row)) => Some(Outcome::Done(row)),
        Ok(None) => None,
        Err(error) => Some(Outcome::Unknown { detail: format!("the database call failed: {error}") }),
    }
}

/// What delivering to the demo's inbox came to.
pub fn outcome_of_inbox<E: std::fmt::Display>(delivered: Result<Value, E>) -> Outcome {
    match delivered {
        Ok(receipt) => Outcome::Done(receipt),
        Err(error) => Outcome::Unknown { detail: format!("the demo inbox failed: {error}") },
    }
}

/// An effect whose job type no longer defines it (its machine never
/// performs one; if asked to, nothing is sent).
pub fn no_longer_defined() -> Outcome {
    Outcome::Permanent { status: None, detail: "its job type no longer defines it".into() }
}

/// The columns a `d1` effect's payload writes: its object's keys (none for
/// another value).
pub fn payload_columns(payload: &Value) -> Vec<String> {
    payload.as_object().map(|row| row.keys().cloned().collect()).unwrap_or_default()
}

/// One parameter of a `d1` effect's insert, as D1 binds it.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlParam {
    /// `NULL` (a JSON `null`, or a column the payload lacks).
    Null,
    /// An integer (a JSON boolean: `0` or `1`, as SQLite keeps booleans).
    Int(i32),
    /// A number (D1 binds every JavaScript number as one).
    Number(f64),
    /// Text: a JSON string as it is, an object or a list as its JSON.
    Text(String),
}

/// The parameters of `columns` (see [`payload_columns`]) from a `d1`
/// effect's payload, in order (`?5` on, see [`sql::insert`]).
pub fn sql_params(payload: &Value, columns: &[String]) -> Vec<SqlParam> {
    columns
        .iter()
        .map(|column| match payload.get(column).unwrap_or(&Value::Null) {
            Value::Null => SqlParam::Null,
            Value::Bool(b) => SqlParam::Int(i32::from(*b)),
            Value::Number(n) => SqlParam::Number(n.as_f64().unwrap_or(0.0)),
            Value::String(s) => SqlParam::Text(s.clone()),
            other => SqlParam::Text(other.to_string()),
        })
        .collect()
}

/// The SQL of a `d1` effect's table. Table and column names come from the
/// job type, checked as SQL names when it was read
/// ([`crate::job_type::is_sql_name`]), never from a request; they are
/// quoted (a column may be called `from` or `order`).
pub mod sql {
    fn quoted(columns: &[String]) -> String {
        columns.iter().map(|c| format!(", \"{c}\"")).collect()
    }

    /// `CREATE TABLE IF NOT EXISTS`, keyed by (source, delivery_id).
    pub fn create(table: &str, columns: &[String]) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS \"{table}\" (source TEXT NOT NULL, delivery_id TEXT NOT NULL, \
             fingerprint TEXT NOT NULL, written_ms INTEGER NOT NULL{}, PRIMARY KEY (source, delivery_id))",
            quoted(columns)
        )
    }

    /// The insert that never overwrites: `?1` source, `?2` delivery id,
    /// `?3` fingerprint, `?4` written_ms, then the columns from `?5`.
    pub fn insert(table: &str, columns: &[String]) -> String {
        let marks: String = (0..columns.len()).map(|i| format!(", ?{}", i + 5)).collect();
        format!(
            "INSERT INTO \"{table}\" (source, delivery_id, fingerprint, written_ms{}) VALUES (?1, ?2, ?3, ?4{marks}) \
             ON CONFLICT (source, delivery_id) DO NOTHING RETURNING *",
            quoted(columns)
        )
    }

    /// The row under (`?1` source, `?2` delivery id).
    pub fn select(table: &str) -> String {
        format!("SELECT * FROM \"{table}\" WHERE source = ?1 AND delivery_id = ?2")
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use serde_json::json;

    use super::*;

    #[test]
    fn a_receipt_is_the_answers_json_or_the_start_of_its_text() {
        assert_eq!(bounded(r#"{"id":7}"#.into()), json!({"id": 7}));
        assert_eq!(bounded("accepted".into()), json!("accepted"));
        let long = format!("\"{}\"", "x".repeat(MAX_RECEIPT_BYTES));
        let kept = bounded(long);
        assert_eq!(kept.as_str().map(str::len), Some(MAX_RECEIPT_BYTES / 2));
    }

    #[test]
    fn a_posts_answer_is_judged_by_status_and_a_failure_or_timeout_is_unknown() {
        assert_eq!(
            outcome_of_post(Answered::Status(201, r#"{"ok":true}"#.into())),
            Outcome::Done(json!({"status": 201, "body": {"ok": true}}))
        );
        assert!(matches!(outcome_of_post(Answered::Status(503, String::new())), Outcome::Transient { .. }));
        assert!(matches!(outcome_of_post(Answered::Status(400, String::new())), Outcome::Permanent { .. }));
        assert_eq!(
            outcome_of_post(Answered::Failed("refused".into())),
            Outcome::Unknown { detail: "the receiver could not be reached: refused".into() }
        );
        assert_eq!(
            outcome_of_post(Answered::TimedOut),
            Outcome::Unknown { detail: "the receiver did not answer in 10000 ms".into() }
        );
    }

    #[test]
    fn a_call_that_came_back_is_its_status_or_its_failure_and_one_that_did_not_timed_out() {
        assert_eq!(Answered::of::<String>(Some(Ok((201, "ok".into())))), Answered::Status(201, "ok".into()));
        assert_eq!(Answered::of(Some(Err::<(u16, String), _>("refused"))), Answered::Failed("refused".into()));
        assert_eq!(Answered::of::<String>(None), Answered::TimedOut);
    }

    #[test]
    fn a_receipt_urls_status_says_whether_it_arrived() {
        assert_eq!(found_of_receipt(Answered::Status(200, "{}".into())), Found::Same(json!({})));
        assert_eq!(found_of_receipt(Answered::Status(404, String::new())), Found::Absent);
        assert_eq!(found_of_receipt(Answered::Status(410, String::new())), Found::Absent);
        assert_eq!(
            found_of_receipt(Answered::Status(500, String::new())),
            Found::CouldNotAsk { detail: "the receipt URL answered 500".into() }
        );
        assert_eq!(found_of_receipt(Answered::Failed("dns".into())), Found::CouldNotAsk { detail: "dns".into() });
        assert_eq!(
            found_of_receipt(Answered::TimedOut),
            Found::CouldNotAsk { detail: "the receipt URL did not answer".into() }
        );
    }

    #[test]
    fn a_receipt_url_joins_once_and_escapes_the_delivery_id() {
        assert_eq!(receipt_url("https://r.example/receipts/", "t:k:mail"), "https://r.example/receipts/t%3Ak%3Amail");
        assert_eq!(receipt_url("https://r.example/r", "a-b_c.d~e f"), "https://r.example/r/a-b_c.d~e%20f");
    }

    #[test]
    fn a_stored_row_is_the_same_delivery_only_with_the_same_fingerprint() {
        let row = json!({"fingerprint": "abc", "to": "x"});
        assert_eq!(found_of_row(Ok::<_, String>(Some(row.clone())), "abc"), Found::Same(row.clone()));
        assert_eq!(
            found_of_row(Ok::<_, String>(Some(row)), "def"),
            Found::Different { stored_fingerprint: "abc".into() }
        );
        assert_eq!(
            found_of_row(Ok::<_, String>(Some(json!({}))), "def"),
            Found::Different { stored_fingerprint: String::new() }
        );
        assert_eq!(found_of_row(Ok::<_, String>(None), "abc"), Found::Absent);
        assert_eq!(
            found_of_row(Err("D1 down"), "abc"),
            Found::CouldNotAsk { detail: "the database call failed: D1 down".into() }
        );
        assert_eq!(found_of_lookup(Err("no table"), None), Found::CouldNotAsk { detail: "no table".into() });
    }

    #[test]
    fn an_insert_is_done_already_there_or_unknown() {
        assert_eq!(outcome_of_insert(Ok::<_, String>(Some(json!({"a": 1})))), Some(Outcome::Done(json!({"a": 1}))));
        assert_eq!(outcome_of_insert(Ok::<_, String>(None)), None);
        assert_eq!(
            outcome_of_insert(Err("timeout")),
            Some(Outcome::Unknown { detail: "the database call failed: timeout".into() })
        );
        assert_eq!(outcome_of_inbox(Ok::<_, String>(json!(1))), Outcome::Done(json!(1)));
        assert_eq!(
            outcome_of_inbox(Err::<Value, _>("full")),
            Outcome::Unknown { detail: "the demo inbox failed: full".into() }
        );
        assert!(matches!(no_longer_defined(), Outcome::Permanent { status: None, .. }));
    }

    #[test]
    fn a_d1_effects_sql_quotes_its_names_and_numbers_its_parameters() {
        let columns = payload_columns(&json!({"from": "a", "order": 2}));
        assert_eq!(columns, ["from", "order"]);
        assert!(payload_columns(&json!([1])).is_empty());
        assert_eq!(
            sql::create("mail", &columns),
            "CREATE TABLE IF NOT EXISTS \"mail\" (source TEXT NOT NULL, delivery_id TEXT NOT NULL, fingerprint TEXT \
             NOT NULL, written_ms INTEGER NOT NULL, \"from\", \"order\", PRIMARY KEY (source, delivery_id))"
        );
        assert_eq!(
            sql::insert("mail", &columns),
            "INSERT INTO \"mail\" (source, delivery_id, fingerprint, written_ms, \"from\", \"order\") VALUES (?1, ?2, \
             ?3, ?4, ?5, ?6) ON CONFLICT (source, delivery_id) DO NOTHING RETURNING *"
        );
        assert_eq!(sql::select("mail"), "SELECT * FROM \"mail\" WHERE source = ?1 AND delivery_id = ?2");
    }

    #[test]
    fn a_payloads_values_are_bound_as_d1_keeps_them() {
        use super::{SqlParam, payload_columns, sql_params};
        let payload = serde_json::json!({
            "id": "t-1", "count": 3, "ratio": 0.5, "urgent": true, "done": false, "note": null,
            "tags": ["a", "b"], "meta": {"k": 1},
        });
        let columns = payload_columns(&payload);
        let params: Vec<(String, SqlParam)> = columns.iter().cloned().zip(sql_params(&payload, &columns)).collect();
        let param = |name: &str| params.iter().find(|(c, _)| c == name).map(|(_, p)| p.clone()).unwrap();
        assert_eq!(param("id"), SqlParam::Text("t-1".into()));
        assert_eq!(param("count"), SqlParam::Number(3.0));
        assert_eq!(param("ratio"), SqlParam::Number(0.5));
        assert_eq!((param("urgent"), param("done")), (SqlParam::Int(1), SqlParam::Int(0)));
        assert_eq!(param("note"), SqlParam::Null);
        assert_eq!(param("tags"), SqlParam::Text(r#"["a","b"]"#.into()));
        assert_eq!(param("meta"), SqlParam::Text(r#"{"k":1}"#.into()));
        // A column the payload lacks is NULL.
        assert_eq!(sql_params(&payload, &["absent".to_owned()]), vec![SqlParam::Null]);
    }
}
