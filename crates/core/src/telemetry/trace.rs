//! W3C Trace Context (`traceparent`, `tracestate`): parsing a caller's,
//! formatting ours, and the ids of a request's spans. The request span's
//! ids come from the randomness passed in; its children's are derived from
//! it (the attempt that calls a provider sends the same span id the
//! exported attempt span carries, without either side storing it).

use serde::{Deserialize, Serialize};

use crate::identity::digest::Sha256;
use crate::identity::random::RandomSource;

/// A trace id: 16 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceId(pub [u8; 16]);

/// A span id: 8 bytes, never all zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(pub [u8; 8]);

impl TraceId {
    /// 32 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

impl SpanId {
    /// 16 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// Lower-case hex only (the spec refuses upper case).
fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let bytes = text.as_bytes();
    if bytes.len() != N * 2 {
        return None;
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in bytes.chunks(2).enumerate() {
        out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// A parsed `traceparent`: the trace, the caller's span, its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace.
    pub trace_id: TraceId,
    /// The span that sent it (our parent, or ours when we send it).
    pub span_id: SpanId,
    /// The trace flags (bit 0: sampled).
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header (version `00`, or a later version's
    /// first four fields as the spec asks). `None` for anything invalid:
    /// all-zero ids, upper-case hex, version `ff`, a bad length.
    pub fn parse(header: &str) -> Option<Self> {
        let header = header.trim();
        let mut parts = header.split('-');
        let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let version = unhex::<1>(version)?[0];
        if version == 0xff {
            return None;
        }
        // Version 00 has exactly four fields; a later one may add more (after a '-').
        let rest = parts.next();
        if version == 0 && rest.is_some() {
            return None;
        }
        let trace_id = unhex::<16>(trace)?;
        let span_id = unhex::<8>(span)?;
        let flags = unhex::<1>(flags)?[0];
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(Self { trace_id: TraceId(trace_id), span_id: SpanId(span_id), flags })
    }

    /// The header: `00-{trace}-{span}-{flags}`.
    pub fn to_header(&self) -> String {
        format!("00-{}-{}-{:02x}", self.trace_id.to_hex(), self.span_id.to_hex(), self.flags)
    }

    /// The caller asked for this trace to be recorded (flag bit 0).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

/// A `tracestate` worth passing on: at most 512 characters and 32
/// list members of printable ASCII (what the spec allows a vendor to
/// truncate to); `None` otherwise (dropped, as the spec allows).
pub fn valid_tracestate(header: &str) -> Option<String> {
    let header = header.trim();
    if header.is_empty() || header.len() > 512 || !header.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return None;
    }
    let members: Vec<&str> = header.split(',').map(str::trim).filter(|m| !m.is_empty()).collect();
    let well_formed = members.iter().all(|m| m.split_once('=').is_some_and(|(k, v)| !k.is_empty() && !v.is_empty()));
    (members.len() <= 32 && well_formed).then(|| members.join(","))
}

/// What travels with a job's submission to the Ledger so the upstream call
/// carries a `traceparent` of its attempt's span: the request span's own
/// `traceparent`, and the caller's `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Propagation {
    /// The request span's `traceparent`.
    pub traceparent: String,
    /// The caller's `tracestate`, passed on as it came (when valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl Propagation {
    /// The `traceparent` an attempt sends upstream: the trace of the
    /// request, the attempt span's id. `None` if ours does not parse.
    pub fn for_attempt(&self, attempt: u32) -> Option<String> {
        let parent = TraceParent::parse(&self.traceparent)?;
        Some(TraceParent { span_id: child_span_id(&parent, b"attempt", attempt), ..parent }.to_header())
    }

    /// The headers an attempt's call carries: its `traceparent` and the
    /// caller's `tracestate` (none if ours does not parse).
    pub fn headers_for_attempt(&self, attempt: u32) -> Vec<(String, String)> {
        let Some(traceparent) = self.for_attempt(attempt) else { return Vec::new() };
        let state = self.tracestate.clone().map(|state| ("tracestate".to_owned(), state));
        std::iter::once(("traceparent".to_owned(), traceparent)).chain(state).collect()
    }
}

/// The trace of one job request: its trace, its own span, its parent (the
/// caller's span), the flags and the caller's `tracestate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTrace {
    /// The trace (the caller's, or a new one).
    pub trace_id: TraceId,
    /// The request span's id (drawn).
    pub span_id: SpanId,
    /// The caller's span, if it sent a `traceparent`.
    pub parent: Option<SpanId>,
    /// The trace flags (the caller's, or sampled).
    pub flags: u8,
    /// The caller's `tracestate`.
    pub tracestate: Option<String>,
}

impl RequestTrace {
    /// The trace of a request that sent `traceparent` (a child of its span)
    /// or none (a new trace, sampled); ids drawn from `random`.
    pub fn start(traceparent: Option<&str>, tracestate: Option<&str>, random: &mut dyn RandomSource) -> Self {
        let span_id = SpanId(nonzero(random));
        match traceparent.and_then(TraceParent::parse) {
            Some(parent) => Self {
                trace_id: parent.trace_id,
                span_id,
                parent: Some(parent.span_id),
                flags: parent.flags,
                tracestate: tracestate.and_then(valid_tracestate),
            },
            None => Self { trace_id: TraceId(nonzero(random)), span_id, parent: None, flags: 1, tracestate: None },
        }
    }

    /// Whether this request's spans are recorded: a caller's unsampled
    /// trace is propagated, never exported (the spec's default sampler,
    /// parent-based always-on).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The request span as a `traceparent` (what the answer carries).
    pub fn traceparent(&self) -> String {
        self.own().to_header()
    }

    /// What the submission carries to the Ledger.
    pub fn propagation(&self) -> Propagation {
        Propagation { traceparent: self.traceparent(), tracestate: self.tracestate.clone() }
    }

    /// The id of the span of attempt `number` (the upstream call's parent).
    pub fn attempt_span_id(&self, number: u32) -> SpanId {
        child_span_id(&self.own(), b"attempt", number)
    }

    /// The id of the span of the `index`th effect of the job.
    pub fn effect_span_id(&self, index: u32) -> SpanId {
        child_span_id(&self.own(), b"effect", index)
    }

    fn own(&self) -> TraceParent {
        TraceParent { trace_id: self.trace_id, span_id: self.span_id, flags: self.flags }
    }
}

/// A child span's id: the first 8 bytes of SHA-256 over the parent's
/// trace and span ids, the kind of child and its number (never all zero).
fn child_span_id(parent: &TraceParent, kind: &[u8], number: u32) -> SpanId {
    let mut hash = Sha256::new();
    hash.update(b"onejob/span/v1\0");
    hash.update(&parent.trace_id.0);
    hash.update(&parent.span_id.0);
    hash.update(kind);
    hash.update(&number.to_be_bytes());
    let digest = hash.finalize();
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    SpanId(id)
}

fn nonzero<const N: usize>(random: &mut dyn RandomSource) -> [u8; N] {
    let mut bytes = [0u8; N];
    random.fill_bytes(&mut bytes);
    if bytes.iter().all(|b| *b == 0) {
        bytes[N - 1] = 1;
    }
    bytes
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::random::SplitMix64;

    const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn parses_and_formats_the_specs_example() {
        let parsed = TraceParent::parse(CALLER).unwrap();
        assert_eq!(parsed.trace_id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parsed.span_id.to_hex(), "00f067aa0ba902b7");
        assert!(parsed.sampled());
        assert_eq!(parsed.to_header(), CALLER);
    }

    #[test]
    fn refuses_what_the_spec_refuses() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
        // A later version may carry more fields: its first four are read.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-more";
        assert!(!TraceParent::parse(later).unwrap().sampled());
    }

    #[test]
    fn a_request_is_a_child_of_its_caller_or_a_new_trace() {
        let mut random = SplitMix64::new(7);
        let child = RequestTrace::start(Some(CALLER), Some("vendor=x, other=y"), &mut random);
        assert_eq!(child.trace_id.to_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(child.parent.unwrap().to_hex(), "00f067aa0ba902b7");
        assert_ne!(child.span_id.to_hex(), "00f067aa0ba902b7");
        assert_eq!(child.tracestate.as_deref(), Some("vendor=x,other=y"));
        assert!(child.traceparent().starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        let fresh = RequestTrace::start(Some("garbage"), Some("vendor=x"), &mut random);
        assert_eq!(fresh.parent, None);
        assert_eq!(fresh.tracestate, None, "no tracestate without its traceparent");
        assert!(fresh.sampled());
        let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let quiet = RequestTrace::start(Some(unsampled), None, &mut random);
        assert!(!quiet.sampled(), "a caller's unsampled trace is propagated, not recorded");
        assert!(quiet.traceparent().ends_with("-00"));
        let again = RequestTrace::start(None, None, &mut SplitMix64::new(7));
        let first = RequestTrace::start(None, None, &mut SplitMix64::new(7));
        assert_eq!(again, first, "ids come from the randomness passed in");
    }

    #[test]
    fn an_attempts_upstream_traceparent_names_its_exported_span() {
        let trace = RequestTrace::start(Some(CALLER), None, &mut SplitMix64::new(1));
        let propagation = trace.propagation();
        let sent = TraceParent::parse(&propagation.for_attempt(2).unwrap()).unwrap();
        assert_eq!(sent.trace_id, trace.trace_id);
        assert_eq!(sent.span_id, trace.attempt_span_id(2));
        assert_ne!(trace.attempt_span_id(1), trace.attempt_span_id(2));
        assert_ne!(trace.attempt_span_id(1), trace.effect_span_id(1));
        assert_eq!(Propagation { traceparent: "nope".into(), tracestate: None }.for_attempt(1), None);
    }

    #[test]
    fn an_attempt_carries_its_traceparent_and_the_callers_tracestate() {
        let trace = RequestTrace::start(Some(CALLER), Some("vendor=1"), &mut SplitMix64::new(1));
        let propagation = trace.propagation();
        let headers = propagation.headers_for_attempt(3);
        assert_eq!(
            headers,
            vec![
                ("traceparent".to_owned(), propagation.for_attempt(3).unwrap()),
                ("tracestate".to_owned(), "vendor=1".to_owned()),
            ]
        );
        let bare = Propagation { traceparent: propagation.traceparent.clone(), tracestate: None };
        assert_eq!(bare.headers_for_attempt(3).len(), 1, "no tracestate: only the traceparent");
        let broken = Propagation { traceparent: "nope".into(), tracestate: Some("vendor=1".into()) };
        assert_eq!(broken.headers_for_attempt(3), vec![], "nothing without a traceparent");
    }

    #[test]
    fn tracestate_is_bounded() {
        assert_eq!(valid_tracestate("a=1").as_deref(), Some("a=1"));
        assert_eq!(valid_tracestate(&format!("a={}", "x".repeat(600))), None);
        assert_eq!(valid_tracestate("novalue"), None);
        let many = (0..33).map(|i| format!("k{i}=v")).collect::<Vec<_>>().join(",");
        assert_eq!(valid_tracestate(&many), None);
    }
}
