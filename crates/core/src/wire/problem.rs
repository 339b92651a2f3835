//! Problem details (RFC 9457): the type, status and title of every error
//! the edge returns, and the JSON body that carries them.

use serde::Serialize;

/// The media type of every error body.
pub const PROBLEM_CONTENT_TYPE: &str = "application/problem+json";

/// Declares [`ProblemType`] and [`ProblemType::ALL`] from one list, so no
/// variant can be missing from `ALL`.
macro_rules! problem_types {
    ($($(#[$doc:meta])* $variant:ident,)*) => {
        /// Every kind of error the edge returns, each with a stable `type` URI.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ProblemType {
            $($(#[$doc])* $variant,)*
        }

        impl ProblemType {
            /// Every variant, for documentation and tests.
            pub const ALL: &'static [ProblemType] = &[$(Self::$variant),*];
        }
    };
}

problem_types! {
    /// 400: a keyed route was called without `Idempotency-Key`.
    MissingIdempotencyKey,
    /// 400: the key is too short, too long, or has invisible characters.
    InvalidIdempotencyKey,
    /// 400: the body is not valid JSON (or is JSON that RFC 8785 refuses).
    InvalidJson,
    /// 400: a query parameter (or the header standing for it) is malformed.
    InvalidQuery,
    /// 401: no credential, or one that names no tenant.
    Unauthorized,
    /// 403: the credential is valid but does not reach this.
    Forbidden,
    /// 404: the tenant has no job with this key.
    JobNotFound,
    /// 404: no such route.
    NotFound,
    /// 405: the route does not take this method.
    MethodNotAllowed,
    /// 409: a duplicate arrived while the first request is still running
    /// and the wait limit passed.
    RequestInProgress,
    /// 409: the last attempt's outcome is unknown; no new attempt before its lease ends.
    OutcomeUnknown,
    /// 409: only a job whose answer is streaming can be cancelled.
    NotCancellable,
    /// 409: the last attempt's outcome is unknown and the deployment never
    /// retries one (`UNKNOWN_POLICY=block`): only an operator can settle it,
    /// so retrying is useless.
    OutcomeBlocked,
    /// 413: the body is larger than the limit.
    PayloadTooLarge,
    /// 415: the body's media type is not accepted on this route.
    UnsupportedMediaType,
    /// 422: the key was used before with a different request.
    KeyReused,
    /// 502: the upstream failed and onejob gave up (the job is dead).
    UpstreamFailed,
    /// 504: the upstream did not answer in time; its outcome is unknown.
    UpstreamTimeout,
    /// 500: onejob itself failed.
    Internal,
    /// 500: the deployment's configuration is malformed. The details go to
    /// the operator's log, never into the response.
    Misconfigured,
    /// 400: no route serves the request's model (with the request's API).
    NoRoute,
    /// 409: the operation needs a background job (`Prefer: respond-async`).
    NotBackground,
    /// 429: a token budget (tenant or user) is spent until the next day.
    QuotaExceeded,
    /// 409: only a dead job can be replayed.
    NotReplayable,
    /// 409: only an unknown job can be resolved.
    NotResolvable,
    /// 503: every provider of the route has an open circuit breaker.
    NoHealthyProvider,
    /// 502: the provider's answer did not meet the route's output contract.
    OutputContract,
    /// 400: a job type's input does not meet its schema (`violations` lists where).
    InvalidInput,
    /// 404: no job type has this name.
    UnknownJobType,
    /// 503: the deployment has this job type but lacks a setting it needs
    /// (the detail names the type and the settings); its other routes work.
    JobTypeNotConfigured,
    /// 409: the job type runs once per subject, and this one already has a
    /// job under another key (`job_key`).
    AlreadyRun,
    /// 409: the approval came after its expiry; the effect will not run.
    ApprovalExpired,
    /// 409: no effect of this job waits for an approval.
    NotAwaitingApproval,
}

impl ProblemType {
    /// The last segment of the type URI.
    pub fn slug(self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "missing-idempotency-key",
            Self::InvalidIdempotencyKey => "invalid-idempotency-key",
            Self::InvalidJson => "invalid-json",
            Self::InvalidQuery => "invalid-query",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::JobNotFound => "job-not-found",
            Self::NotFound => "not-found",
            Self::MethodNotAllowed => "method-not-allowed",
            Self::RequestInProgress => "request-in-progress",
            Self::OutcomeUnknown => "outcome-unknown",
            Self::OutcomeBlocked => "outcome-blocked",
            Self::NotCancellable => "not-cancellable",
            Self::PayloadTooLarge => "payload-too-large",
            Self::UnsupportedMediaType => "unsupported-media-type",
            Self::KeyReused => "idempotency-key-reused",
            Self::UpstreamFailed => "upstream-failed",
            Self::UpstreamTimeout => "upstream-timeout",
            Self::Internal => "internal",
            Self::Misconfigured => "gateway-misconfigured",
            Self::NoRoute => "no-route",
            Self::NotBackground => "not-background",
            Self::QuotaExceeded => "quota-exceeded",
            Self::NotReplayable => "not-replayable",
            Self::NotResolvable => "not-resolvable",
            Self::NoHealthyProvider => "no-healthy-provider",
            Self::OutputContract => "output-contract",
            Self::InvalidInput => "invalid-input",
            Self::UnknownJobType => "unknown-job-type",
            Self::JobTypeNotConfigured => "job-type-not-configured",
            Self::AlreadyRun => "already-run",
            Self::ApprovalExpired => "approval-expired",
            Self::NotAwaitingApproval => "not-awaiting-approval",
        }
    }

    /// The stable `type` URI. Relative (RFC 9457 §3.1.1 allows it), so it
    /// resolves against the gateway that sent it, which documents it there.
    pub fn type_uri(self) -> String {
        format!("/onejob/problems/{}", self.slug())
    }

    /// The HTTP status code.
    pub fn status(self) -> u16 {
        match self {
            Self::MissingIdempotencyKey
            | Self::InvalidIdempotencyKey
            | Self::InvalidJson
            | Self::InvalidQuery
            | Self::NoRoute
            | Self::InvalidInput => 400,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::JobNotFound | Self::NotFound | Self::UnknownJobType => 404,
            Self::MethodNotAllowed => 405,
            Self::RequestInProgress
            | Self::OutcomeUnknown
            | Self::OutcomeBlocked
            | Self::NotCancellable
            | Self::NotBackground
            | Self::NotReplayable
            | Self::NotResolvable
            | Self::AlreadyRun
            | Self::ApprovalExpired
            | Self::NotAwaitingApproval => 409,
            Self::PayloadTooLarge => 413,
            Self::QuotaExceeded => 429,
            Self::UnsupportedMediaType => 415,
            Self::KeyReused => 422,
            Self::UpstreamFailed | Self::OutputContract => 502,
            Self::NoHealthyProvider | Self::JobTypeNotConfigured => 503,
            Self::UpstreamTimeout => 504,
            Self::Internal | Self::Misconfigured => 500,
        }
    }

    /// The short, fixed human title.
    pub fn title(self) -> &'static str {
        match self {
            Self::MissingIdempotencyKey => "Idempotency-Key header is required",
            Self::InvalidIdempotencyKey => "Idempotency-Key header is malformed",
            Self::InvalidJson => "Request body is not valid JSON",
            Self::InvalidQuery => "A query parameter is malformed",
            Self::Unauthorized => "Missing or invalid credential",
            Self::Forbidden => "The credential does not reach this",
            Self::JobNotFound => "No job with this key",
            Self::NotFound => "No such route",
            Self::MethodNotAllowed => "Method not allowed",
            Self::RequestInProgress => "A request with this key is still in progress",
            Self::OutcomeUnknown => "The outcome of the last attempt is unknown",
            Self::OutcomeBlocked => "The outcome of the last attempt is unknown and will not be retried",
            Self::NotCancellable => "Only a streaming answer can be cancelled",
            Self::PayloadTooLarge => "Request body is too large",
            Self::UnsupportedMediaType => "Unsupported media type",
            Self::KeyReused => "Idempotency-Key was used with a different request",
            Self::UpstreamFailed => "The upstream provider failed",
            Self::UpstreamTimeout => "The upstream provider did not answer in time",
            Self::Internal => "Internal error",
            Self::Misconfigured => "Gateway misconfigured",
            Self::NoRoute => "No route serves this model",
            Self::NotBackground => "This is not a background job",
            Self::QuotaExceeded => "The token budget for today is spent",
            Self::NotReplayable => "Only a dead job can be replayed",
            Self::NotResolvable => "Only a job whose outcome is unknown can be resolved",
            Self::NoHealthyProvider => "No provider of this route is healthy",
            Self::OutputContract => "The answer did not meet the route's output contract",
            Self::InvalidInput => "The input does not meet the job type's schema",
            Self::UnknownJobType => "No job type has this name",
            Self::JobTypeNotConfigured => "This job type is not configured in this deployment",
            Self::AlreadyRun => "This subject already has a job of this type",
            Self::ApprovalExpired => "The approval came too late",
            Self::NotAwaitingApproval => "Nothing of this job waits for an approval",
        }
    }

    /// Whether a client should retry the same request with the same key
    /// (sent as `x-should-retry`).
    pub fn should_retry(self) -> bool {
        matches!(
            self,
            Self::RequestInProgress
                | Self::OutcomeUnknown
                | Self::UpstreamTimeout
                | Self::Internal
                | Self::NoHealthyProvider
        )
    }

    /// The variant whose slug or type URI this is.
    pub fn from_type_uri(uri: &str) -> Option<Self> {
        let slug = uri.rsplit('/').next()?;
        Self::ALL.iter().copied().find(|p| p.slug() == slug)
    }
}

/// An RFC 9457 problem details object, with onejob's extension members as
/// typed fields (each is written only when set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What kind of problem: gives `type`, `title` and `status`.
    pub kind: ProblemType,
    /// What went wrong with this request, for a human.
    pub detail: String,
    /// The idempotency key the problem is about.
    pub key: Option<String>,
    /// How long to wait before retrying with the same key.
    pub retry_after_ms: Option<u64>,
    /// The request body limit, on a 413.
    pub max_bytes: Option<u64>,
    /// Where an input breaks its schema, on a 400 `invalid-input`.
    pub violations: Vec<String>,
    /// The job that already holds the subject, on a 409 `already-run`.
    pub job_key: Option<String>,
}

/// The JSON form of a [`Problem`] (RFC 9457 members first).
#[derive(Serialize)]
struct ProblemJson<'a> {
    #[serde(rename = "type")]
    type_uri: String,
    title: &'static str,
    status: u16,
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_bytes: Option<u64>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    violations: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    job_key: Option<&'a str>,
}

impl Problem {
    /// A problem of `kind` with a request-specific `detail`.
    pub fn new(kind: ProblemType, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            key: None,
            retry_after_ms: None,
            max_bytes: None,
            violations: Vec::new(),
            job_key: None,
        }
    }

    /// The problem is about this idempotency key.
    pub fn with_key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    /// The client should retry after `ms` milliseconds.
    pub fn with_retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// The body limit a 413 refers to.
    pub fn with_max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = Some(bytes);
        self
    }

    /// Where the input breaks its schema.
    pub fn with_violations(mut self, violations: Vec<String>) -> Self {
        self.violations = violations;
        self
    }

    /// The job that already holds the subject.
    pub fn with_job_key(mut self, key: &str) -> Self {
        self.job_key = Some(key.to_owned());
        self
    }

    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        self.kind.status()
    }

    /// The problem as JSON text.
    pub fn to_json(&self) -> String {
        let json = ProblemJson {
            type_uri: self.kind.type_uri(),
            title: self.kind.title(),
            status: self.kind.status(),
            detail: &self.detail,
            key: self.key.as_deref(),
            retry_after_ms: self.retry_after_ms,
            max_bytes: self.max_bytes,
            violations: &self.violations,
            job_key: self.job_key.as_deref(),
        };
        // Strings and integers always serialise.
        serde_json::to_string(&json).unwrap_or_else(|_| String::from("{}"))
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    #[test]
    fn every_problem_type_is_distinct_and_round_trips() {
        let mut slugs: Vec<&str> = ProblemType::ALL.iter().map(|p| p.slug()).collect();
        slugs.sort();
        slugs.dedup();
        assert_eq!(slugs.len(), ProblemType::ALL.len());
        for &p in ProblemType::ALL {
            assert_eq!(ProblemType::from_type_uri(&p.type_uri()), Some(p));
            assert!((400..600).contains(&p.status()));
            assert!(!p.title().is_empty());
        }
    }

    #[test]
    fn contract_statuses() {
        assert_eq!(ProblemType::MissingIdempotencyKey.status(), 400);
        assert_eq!(ProblemType::KeyReused.status(), 422);
        assert_eq!(ProblemType::RequestInProgress.status(), 409);
        assert_eq!(ProblemType::PayloadTooLarge.status(), 413);
        assert!(!ProblemType::KeyReused.should_retry());
        assert!(ProblemType::RequestInProgress.should_retry());
    }

    #[test]
    fn problem_serialises_as_rfc9457() {
        let p = Problem::new(ProblemType::KeyReused, "key abc was first used for another body").with_key("abc");
        let v: serde_json::Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(v["type"], "/onejob/problems/idempotency-key-reused");
        assert_eq!(v["title"], "Idempotency-Key was used with a different request");
        assert_eq!(v["status"], 422);
        assert_eq!(v["key"], "abc");
        assert_eq!(v.as_object().unwrap().len(), 5, "unset extensions are left out: {v}");
        let waiting = Problem::new(ProblemType::RequestInProgress, "wait").with_retry_after_ms(1500);
        let v: serde_json::Value = serde_json::from_str(&waiting.to_json()).unwrap();
        assert_eq!(v["retry_after_ms"], 1500);
        assert!(v.get("key").is_none());
    }
}
