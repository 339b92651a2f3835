//! The telemetry settings, read as the OpenTelemetry specification names
//! its environment variables: where traces go (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! as it is, or `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`), the headers
//! sent with them (`OTEL_EXPORTER_OTLP_HEADERS`: `k=v,k2=v2`,
//! percent-decoded), the service's name, and onejob's bounds on an export.

/// Where and how spans are exported. `None` from [`TelemetrySettings::parse`]
/// when no endpoint is set: telemetry is off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySettings {
    /// The URL spans are POSTed to.
    pub traces_url: String,
    /// Headers sent with every export (an API key, often).
    pub headers: Vec<(String, String)>,
    /// `service.name` (`OTEL_SERVICE_NAME`, default `onejob`).
    pub service_name: String,
    /// `OTEL_CAPTURE_CONTENT=true`: prompts and completions go into the
    /// request spans (`gen_ai.input.messages`, `gen_ai.output.messages`),
    /// each cut to [`CAPTURED_BYTES`]. Off by default.
    pub capture_content: bool,
    /// An export that has not answered by then is abandoned
    /// (`OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` / `OTEL_EXPORTER_OTLP_TIMEOUT`,
    /// default [`DEFAULT_TIMEOUT_MS`], at most [`MAX_TIMEOUT_MS`]).
    pub timeout_ms: u64,
    /// Spans per export (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`, default 512).
    pub max_spans_per_export: usize,
    /// Bytes per export body (about: the envelope aside), [`MAX_EXPORT_BYTES`].
    pub max_export_bytes: usize,
    /// Spans waiting in an isolate for an export; more are dropped
    /// (`OTEL_BSP_MAX_QUEUE_SIZE`, default 2048).
    pub max_queued_spans: usize,
}

/// The default export timeout: short, since nothing waits for it but the
/// isolate's `waitUntil` budget.
pub const DEFAULT_TIMEOUT_MS: u64 = 2_000;
/// The longest export timeout allowed.
pub const MAX_TIMEOUT_MS: u64 = 10_000;
/// The cap on one export's body.
pub const MAX_EXPORT_BYTES: usize = 1 << 20;
/// A captured prompt or completion is cut to this many bytes.
pub const CAPTURED_BYTES: usize = 4096;

/// A traced request's body as its span may carry it: only where telemetry
/// captures content (`OTEL_CAPTURE_CONTENT=true`), as text.
pub fn captured_request(settings: Option<&TelemetrySettings>, body: &[u8]) -> Option<String> {
    settings.filter(|settings| settings.capture_content).map(|_| String::from_utf8_lossy(body).into_owned())
}

impl TelemetrySettings {
    /// The headers of one export: OTLP/HTTP's JSON content type, then the
    /// configured ones (`OTEL_EXPORTER_OTLP_HEADERS`), in order.
    pub fn export_headers(&self) -> impl Iterator<Item = (&str, &str)> {
        let configured = self.headers.iter().map(|(name, value)| (name.as_str(), value.as_str()));
        std::iter::once(("Content-Type", "application/json")).chain(configured)
    }

    /// Reads the settings through `var` (variables and secrets alike).
    /// `Ok(None)`: no endpoint, or `OTEL_SDK_DISABLED=true`.
    pub fn parse(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let set = |name: &str| var(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let traces_url = match (set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
            (Some(url), _) => url,
            (None, Some(base)) => format!("{}/v1/traces", base.trim_end_matches('/')),
            (None, None) => return Ok(None),
        };
        if !(traces_url.starts_with("http://") || traces_url.starts_with("https://")) {
            return Err("OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT) must be an http(s) URL".into());
        }
        let mut headers = Vec::new();
        for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            if let Some(text) = set(name) {
                // The signal's own headers add to (and replace) the general ones.
                for (key, value) in parse_headers(&text).map_err(|why| format!("{name}: {why}"))? {
                    headers.retain(|(k, _): &(String, String)| !k.eq_ignore_ascii_case(&key));
                    headers.push((key, value));
                }
            }
        }
        let number = |names: &[&str], default: u64, max: u64| -> Result<u64, String> {
            for name in names {
                if let Some(text) = set(name) {
                    let n: u64 = text.parse().map_err(|_| format!("{name} must be a whole number"))?;
                    return Ok(if n == 0 { default } else { n.min(max) });
                }
            }
            Ok(default)
        };
        let timeout_ms = number(
            &["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"],
            DEFAULT_TIMEOUT_MS,
            MAX_TIMEOUT_MS,
        )?;
        let max_spans_per_export = number(&["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"], 512, 4096)? as usize;
        let max_queued_spans = number(&["OTEL_BSP_MAX_QUEUE_SIZE"], 2048, 65_536)? as usize;
        let capture_content = match set("OTEL_CAPTURE_CONTENT").as_deref() {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(_) => return Err("OTEL_CAPTURE_CONTENT must be true or false".into()),
        };
        Ok(Some(Self {
            traces_url,
            headers,
            service_name: set("OTEL_SERVICE_NAME").unwrap_or_else(|| "onejob".into()),
            capture_content,
            timeout_ms,
            max_spans_per_export,
            max_export_bytes: MAX_EXPORT_BYTES,
            max_queued_spans: max_queued_spans.max(max_spans_per_export),
        }))
    }
}

/// `k=v,k2=v2` as the specification writes headers: keys and values
/// percent-decoded, surrounding spaces trimmed, empty members skipped.
pub fn parse_headers(text: &str) -> Result<Vec<(String, String)>, &'static str> {
    let mut headers = Vec::new();
    for member in text.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let (key, value) = member.split_once('=').ok_or("each header is key=value")?;
        let key = percent_decode(key.trim()).ok_or("a header name has a bad %-escape")?;
        let value = percent_decode(value.trim()).ok_or("a header value has a bad %-escape")?;
        let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if key.is_empty() || !key.bytes().all(token) {
            return Err("a header name is not a valid HTTP header name");
        }
        if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err("a header value holds a line break");
        }
        headers.push((key, value));
    }
    Ok(headers)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use std::collections::HashMap;

    use super::*;

    fn parse(vars: &[(&str, &str)]) -> Result<Option<TelemetrySettings>, String> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        TelemetrySettings::parse(&|name| vars.get(name).cloned())
    }

    #[test]
    fn a_request_body_is_captured_only_when_content_is() {
        let mut settings = parse(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:4318")]).unwrap().unwrap();
        assert_eq!(captured_request(None, b"{}"), None);
        assert_eq!(captured_request(Some(&settings), b"{}"), None);
        settings.capture_content = true;
        assert_eq!(captured_request(Some(&settings), b"{\"a\":1}").as_deref(), Some("{\"a\":1}"));
    }

    #[test]
    fn an_export_is_json_with_the_configured_headers_after() {
        let settings = parse(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k1,x-team=t"),
        ])
        .unwrap()
        .unwrap();
        let headers: Vec<_> = settings.export_headers().collect();
        assert_eq!(headers, vec![("Content-Type", "application/json"), ("x-api-key", "k1"), ("x-team", "t")]);
    }

    #[test]
    fn off_without_an_endpoint() {
        assert_eq!(parse(&[]).unwrap(), None);
        assert_eq!(parse(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "  ")]).unwrap(), None);
        let disabled = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"), ("OTEL_SDK_DISABLED", "true")];
        assert_eq!(parse(&disabled).unwrap(), None);
    }

    #[test]
    fn the_endpoint_gets_the_signals_path_and_the_traces_endpoint_is_taken_as_is() {
        let base = parse(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:4318/")]).unwrap().unwrap();
        assert_eq!(base.traces_url, "https://otel.example:4318/v1/traces");
        assert_eq!(base.service_name, "onejob");
        assert!(!base.capture_content);
        assert_eq!(base.timeout_ms, DEFAULT_TIMEOUT_MS);
        let own = parse(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://ignored"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://otel.example/custom/path"),
            ("OTEL_SERVICE_NAME", "gateway"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
            ("OTEL_CAPTURE_CONTENT", "TRUE"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(own.traces_url, "https://otel.example/custom/path");
        assert_eq!(own.service_name, "gateway");
        assert_eq!(own.timeout_ms, MAX_TIMEOUT_MS);
        assert!(own.capture_content);
        assert!(parse(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "otel.example")]).is_err());
        assert!(parse(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"), ("OTEL_CAPTURE_CONTENT", "yes")]).is_err());
    }

    #[test]
    fn headers_are_key_value_pairs_percent_decoded() {
        assert_eq!(
            parse_headers("api-key=secret%20value, x-tenant = a%2Cb ,,").unwrap(),
            vec![("api-key".into(), "secret value".into()), ("x-tenant".into(), "a,b".into())]
        );
        assert!(parse_headers("novalue").is_err());
        assert!(parse_headers("bad name=v").is_err());
        assert!(parse_headers("k=%zz").is_err());
        assert!(parse_headers("k=a%0d%0aInjected: 1").is_err());
        let both = parse(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1,b=2"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "B=3"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(both.headers, vec![("a".into(), "1".into()), ("B".into(), "3".into())]);
    }
}
