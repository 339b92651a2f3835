//! A span as onejob exports it, and its encoding as OTLP/HTTP JSON
//! (`ExportTraceServiceRequest`: ids in hex, 64-bit numbers as strings,
//! enums as numbers), cut into batches under a cap on spans and bytes.

use serde_json::{Value as Json, json};

use super::trace::{SpanId, TraceId};

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `stringValue`.
    Str(String),
    /// `intValue`.
    Int(i64),
    /// `boolValue`.
    Bool(bool),
    /// `doubleValue`.
    Double(f64),
}

impl From<&str> for Value {
    fn from(text: &str) -> Self {
        Self::Str(text.to_owned())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Self {
        Self::Str(text)
    }
}

impl From<bool> for Value {
    fn from(flag: bool) -> Self {
        Self::Bool(flag)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Self {
        Self::Int(i64::try_from(n).unwrap_or(i64::MAX))
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Self {
        Self::Int(i64::from(n))
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Self {
        Self::Int(i64::from(n))
    }
}

/// OTLP's `SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// Work inside onejob (an effect written to D1).
    Internal = 1,
    /// The job request a caller made.
    Server = 2,
    /// A call onejob made (an attempt to a provider, a webhook effect).
    Client = 3,
}

/// OTLP's `Status.code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusCode {
    /// Nothing said.
    Unset = 0,
    /// It did what it was asked.
    Ok = 1,
    /// It failed.
    Error = 2,
}

/// One span.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Its trace.
    pub trace_id: TraceId,
    /// Its id.
    pub span_id: SpanId,
    /// Its parent (none for a trace's root).
    pub parent: Option<SpanId>,
    /// The caller's `tracestate` (on the request span).
    pub tracestate: Option<String>,
    /// What it is (`POST /v1/chat/completions`, `chat gpt-4o`, …).
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// Its start, in nanoseconds since the Unix epoch.
    pub start_ns: u64,
    /// Its end, in nanoseconds since the Unix epoch.
    pub end_ns: u64,
    /// Its attributes, by name, in order.
    pub attributes: Vec<(&'static str, Value)>,
    /// How it ended.
    pub status: StatusCode,
    /// Why it failed (with [`StatusCode::Error`]).
    pub status_message: Option<String>,
}

impl Span {
    /// The attribute named `name`, if set.
    pub fn attribute(&self, name: &str) -> Option<&Value> {
        self.attributes.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// Sets `name` to `value` (an unset `Option` sets nothing).
    pub fn set(&mut self, name: &'static str, value: impl Into<Value>) {
        self.attributes.push((name, value.into()));
    }

    /// Sets `name` to `value` when there is one.
    pub fn set_some<V: Into<Value>>(&mut self, name: &'static str, value: Option<V>) {
        if let Some(value) = value {
            self.set(name, value);
        }
    }

    /// The span as an OTLP JSON `Span`.
    pub fn to_otlp(&self) -> Json {
        let mut span = json!({
            "traceId": self.trace_id.to_hex(),
            "spanId": self.span_id.to_hex(),
            "name": self.name,
            "kind": self.kind as u8,
            "startTimeUnixNano": self.start_ns.to_string(),
            "endTimeUnixNano": self.end_ns.max(self.start_ns).to_string(),
            "attributes": attributes(&self.attributes),
            "status": { "code": self.status as u8 },
        });
        if let Some(parent) = self.parent {
            span["parentSpanId"] = Json::from(parent.to_hex());
        }
        if let Some(state) = &self.tracestate {
            span["traceState"] = Json::from(state.as_str());
        }
        if let Some(message) = &self.status_message {
            span["status"]["message"] = Json::from(message.as_str());
        }
        span
    }
}

fn attributes(list: &[(&str, Value)]) -> Json {
    Json::Array(list.iter().map(|(key, value)| json!({ "key": key, "value": any_value(value) })).collect())
}

fn any_value(value: &Value) -> Json {
    match value {
        Value::Str(text) => json!({ "stringValue": text }),
        // int64 is a string in OTLP JSON.
        Value::Int(n) => json!({ "intValue": n.to_string() }),
        Value::Bool(flag) => json!({ "boolValue": flag }),
        Value::Double(x) if x.is_finite() => json!({ "doubleValue": x }),
        Value::Double(_) => json!({ "stringValue": "NaN" }),
    }
}

/// Who exports: the resource's attributes and the instrumentation scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// `service.name` (`OTEL_SERVICE_NAME`, default `onejob`).
    pub service_name: String,
    /// `service.version`: onejob's version.
    pub service_version: String,
}

/// Cuts `spans` into OTLP/HTTP JSON bodies of at most `max_spans` spans
/// and about `max_bytes` bytes each (the envelope's few hundred bytes
/// aside); a span larger than `max_bytes` alone is dropped. The spans of
/// one request stay in order.
pub fn encode_batches(resource: &Resource, spans: &[Span], max_spans: usize, max_bytes: usize) -> Vec<String> {
    let envelope = |encoded: &[String]| {
        let resource_attributes = attributes(&[
            ("service.name", Value::from(resource.service_name.as_str())),
            ("service.version", Value::from(resource.service_version.as_str())),
            ("telemetry.sdk.name", Value::from("onejob")),
            ("telemetry.sdk.language", Value::from("rust")),
        ]);
        let head = json!({
            "resource": { "attributes": resource_attributes },
            "scope": { "name": "onejob", "version": resource.service_version },
        });
        // The spans are already JSON: spliced in, not parsed again.
        let resource_json = head["resource"].to_string();
        let scope_json = head["scope"].to_string();
        format!(
            r#"{{"resourceSpans":[{{"resource":{resource_json},"scopeSpans":[{{"scope":{scope_json},"spans":[{}]}}]}}]}}"#,
            encoded.join(",")
        )
    };
    let mut bodies = Vec::new();
    let mut batch: Vec<String> = Vec::new();
    let mut bytes = 0;
    for span in spans {
        let encoded = span.to_otlp().to_string();
        if encoded.len() > max_bytes {
            continue;
        }
        if !batch.is_empty() && (batch.len() >= max_spans.max(1) || bytes + encoded.len() + 1 > max_bytes) {
            bodies.push(envelope(&batch));
            batch.clear();
            bytes = 0;
        }
        bytes += encoded.len() + 1;
        batch.push(encoded);
    }
    if !batch.is_empty() {
        bodies.push(envelope(&batch));
    }
    bodies
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn span(n: u8) -> Span {
        Span {
            trace_id: TraceId([1; 16]),
            span_id: SpanId([n; 8]),
            parent: (n > 1).then_some(SpanId([1; 8])),
            tracestate: None,
            name: format!("span {n}"),
            kind: SpanKind::Client,
            start_ns: 1_000_000,
            end_ns: 3_000_000,
            attributes: vec![("onejob.attempt", Value::from(u32::from(n))), ("gen_ai.request.model", "m".into())],
            status: StatusCode::Error,
            status_message: Some("unavailable".into()),
        }
    }

    #[test]
    fn a_span_is_otlp_json() {
        let json = span(2).to_otlp();
        assert_eq!(json["traceId"], "01010101010101010101010101010101");
        assert_eq!(json["spanId"], "0202020202020202");
        assert_eq!(json["parentSpanId"], "0101010101010101");
        assert_eq!(json["kind"], 3);
        assert_eq!(json["startTimeUnixNano"], "1000000");
        assert_eq!(json["attributes"][0], json!({ "key": "onejob.attempt", "value": { "intValue": "2" } }));
        assert_eq!(json["attributes"][1]["value"]["stringValue"], "m");
        assert_eq!(json["status"], json!({ "code": 2, "message": "unavailable" }));
        assert!(span(1).to_otlp().get("parentSpanId").is_none());
    }

    #[test]
    fn batches_are_capped_by_spans_and_bytes() {
        let resource = Resource { service_name: "svc".into(), service_version: "1.0".into() };
        let spans: Vec<Span> = (1..=5).map(span).collect();
        let bodies = encode_batches(&resource, &spans, 2, 1 << 20);
        assert_eq!(bodies.len(), 3);
        let first: Json = serde_json::from_str(&bodies[0]).unwrap();
        let scope = &first["resourceSpans"][0]["scopeSpans"][0];
        assert_eq!(scope["spans"].as_array().unwrap().len(), 2);
        assert_eq!(scope["scope"]["name"], "onejob");
        assert_eq!(first["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"], "svc");
        let one = span(2).to_otlp().to_string().len();
        let by_bytes = encode_batches(&resource, &spans, 100, one * 2 + 2);
        assert_eq!(by_bytes.len(), 3, "two spans per body by size");
        assert!(encode_batches(&resource, &spans, 100, 10).is_empty(), "a span over the cap alone is dropped");
    }
}
