//! Effects: what a job type writes or sends once its answer is in, each
//! exactly once, proven by a receipt.
//!
//! An effect is a small state machine kept beside its job:
//!
//! ```text
//! awaiting_approval ──approve──▶ ready ──claim──▶ claimed ──done──▶ done
//!        │ (expiry)               ▲  │               │
//!        ▼                        │  │               ├─transient, attempts left─▶ ready (after backoff)
//!     expired                     │  │               ├─permanent / attempts spent─▶ dead
//!                                 │  │               └─outcome unknown─▶ (stays claimed: reconcile)
//!              reconcile: absent ─┘  │
//!   claimed ──reconcile──▶ done (same fingerprint) · conflict (different) · unknown (no receipt source)
//! ```
//!
//! Every effect has a stable **delivery id**, `{storage id}:{effect name}`:
//! the destination keys its write by it (a `d1` row's primary key, a
//! webhook's `Idempotency-Key`), so a second delivery after a crash is
//! recognised there too. An effect is **claimed** (a version compare-and-swap
//! by the caller's store) before it is attempted. A claimed effect that was
//! not marked done (the runtime died between the write and the record) is
//! never simply performed again: the destination is asked first
//! ([`Effect::reconcile`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::identity::canonical;
use crate::identity::digest;
use crate::identity::random::RandomSource;
use crate::retry::backoff::{Backoff, Jitter};

pub mod receipt;

/// How an effect's attempts are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EffectRetry {
    /// Attempts in all (the first included).
    pub attempts: u32,
    /// Full-jitter backoff: the first retry waits up to this long…
    pub base_ms: u64,
    /// …and no retry waits longer than this.
    pub cap_ms: u64,
}

impl EffectRetry {
    /// A database write: quick retries (100 ms to 1 s).
    pub const DATABASE: Self = Self { attempts: 5, base_ms: 100, cap_ms: 1_000 };
    /// An HTTP receiver: slower ones (1 s to 10 s).
    pub const WEBHOOK: Self = Self { attempts: 5, base_ms: 1_000, cap_ms: 10_000 };

    fn delay_ms(&self, retry: u32, rng: &mut dyn RandomSource) -> u64 {
        Backoff::new(self.base_ms, self.cap_ms, Jitter::Full).map_or(self.base_ms, |b| b.delay_ms(retry, None, rng))
    }
}

/// Where an effect goes, as its job type defines it.
#[derive(Debug, Clone, PartialEq)]
pub enum EffectTarget {
    /// `INSERT … ON CONFLICT (source, delivery_id) DO NOTHING RETURNING *`
    /// into `table` of the D1 database bound as `database`.
    #[allow(missing_docs)] // the binding, the table, and each column's template
    D1 { database: String, table: String, columns: serde_json::Map<String, Value> },
    /// A signed POST of `payload` to `url` (`Idempotency-Key: <delivery id>`);
    /// `receipt_url`/`{delivery id}` answers whether it arrived.
    #[allow(missing_docs)] // `secret` names the secret its signature uses
    Webhook { url: String, receipt_url: Option<String>, secret: Option<String>, payload: Value },
    /// The demo's mail inbox: a webhook whose `url` is [`INBOX_URL`]. The
    /// mail is kept under its delivery id (as a mail API keys a send by its
    /// `Idempotency-Key`), unsigned. With `receipts` (its `receipt_url` is
    /// the inbox too) the inbox also answers whether a delivery arrived;
    /// without, it has no receipt source, like a webhook without a receipt URL.
    #[allow(missing_docs)] // the payload's template, and whether the inbox gives receipts
    Inbox { payload: Value, receipts: bool },
}

/// Where a destination is asked what it holds under a delivery id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptSource<'a> {
    /// A `d1` effect's row, in `table` of the database bound as `database`.
    #[allow(missing_docs)]
    Row { database: &'a str, table: &'a str },
    /// The demo's inbox (only when it gives receipts).
    Inbox,
    /// `GET {receipt_url}/{delivery id}` of a webhook.
    Url(&'a str),
    /// None: a webhook without a receipt URL, an inbox without receipts.
    None,
}

/// How a job type (or the variable its `env:NAME` names) spells the demo's
/// mail inbox as a webhook effect's `url` and `receipt_url`.
pub const INBOX_URL: &str = "demo:inbox";

impl EffectTarget {
    /// Where to ask what this destination holds under a delivery id.
    pub fn receipt_source(&self) -> ReceiptSource<'_> {
        match self {
            EffectTarget::D1 { database, table, .. } => ReceiptSource::Row { database, table },
            EffectTarget::Inbox { receipts: true, .. } => ReceiptSource::Inbox,
            EffectTarget::Webhook { receipt_url: Some(url), .. } => ReceiptSource::Url(url),
            EffectTarget::Webhook { receipt_url: None, .. } | EffectTarget::Inbox { receipts: false, .. } => {
                ReceiptSource::None
            }
        }
    }

    /// A webhook effect's target from its URLs as they stand (as written,
    /// or once the deployment resolved them): [`EffectTarget::Inbox`] when
    /// `url` is [`INBOX_URL`], else [`EffectTarget::Webhook`]. The inbox is
    /// never mixed with a real receiver: a `receipt_url` other than the
    /// inbox for an inbox `url`, or the inbox as the `receipt_url` of
    /// another `url`, is refused (each would ask one place about mail sent
    /// to another). An empty `receipt_url` is none.
    pub fn webhook(
        url: String,
        receipt_url: Option<String>,
        secret: Option<String>,
        payload: Value,
    ) -> Result<Self, String> {
        let receipt_url = receipt_url.filter(|u| !u.is_empty());
        let receipts_from_inbox = receipt_url.as_deref() == Some(INBOX_URL);
        match (url == INBOX_URL, receipt_url) {
            (true, None) => Ok(Self::Inbox { payload, receipts: false }),
            (true, Some(_)) if receipts_from_inbox => Ok(Self::Inbox { payload, receipts: true }),
            (true, Some(_)) => {
                Err(format!("the url is the demo inbox ({INBOX_URL}): its receipt_url is too, or unset"))
            }
            (false, Some(_)) if receipts_from_inbox => {
                Err(format!("the receipt_url is the demo inbox ({INBOX_URL}), and the url is not"))
            }
            (false, receipt_url) => Ok(Self::Webhook { url, receipt_url, secret, payload }),
        }
    }
}

/// One effect of a job type.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectSpec {
    /// Unique within the type; part of the delivery id.
    pub name: String,
    /// Runs only once someone approves it, before `approval_ttl_ms` passes.
    pub approve: bool,
    /// How long the approval may wait.
    pub approval_ttl_ms: u64,
    /// How its attempts are retried.
    pub retry: EffectRetry,
    /// Where it goes.
    pub target: EffectTarget,
}

/// `d1` or `webhook`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectKind {
    /// The kind: a D1 row.
    D1,
    /// The kind: an HTTP POST.
    Webhook,
}

/// Where an effect stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectState {
    /// Waits for an approval (until `approval.expires_ms`).
    AwaitingApproval,
    /// To be attempted (at `not_before_ms`).
    Ready,
    /// An attempt is out, or was out when the runtime stopped: reconcile
    /// before anything else.
    Claimed,
    /// Done; `receipt` proves it.
    Done,
    /// Failed for good (a permanent error, or every attempt spent).
    Dead,
    /// It may or may not have happened and nothing can tell: an operator decides.
    Unknown,
    /// The destination holds a different payload under this delivery id:
    /// never overwritten; an operator decides.
    Conflict,
    /// Its approval came too late (or never): it did not run.
    Expired,
}

impl EffectState {
    /// The state's name on the wire (`awaiting_approval`, `done`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AwaitingApproval => "awaiting_approval",
            Self::Ready => "ready",
            Self::Claimed => "claimed",
            Self::Done => "done",
            Self::Dead => "dead",
            Self::Unknown => "unknown",
            Self::Conflict => "conflict",
            Self::Expired => "expired",
        }
    }

    /// An operator must look at it (a dead letter).
    pub fn needs_operator(self) -> bool {
        matches!(self, Self::Dead | Self::Unknown | Self::Conflict)
    }
}

/// An effect's approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// When the approval lapses.
    pub expires_ms: u64,
    /// Who approved it.
    pub approved_by: Option<String>,
    /// When it was approved.
    pub approved_ms: Option<u64>,
}

/// How one attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptEnd {
    /// It happened.
    Done,
    /// Failed; retried if attempts are left.
    Transient,
    /// Failed for good (a 4xx other than 408/429, a refused payload).
    Permanent,
    /// No answer: reconciled before anything else.
    Unknown,
    /// The reconciliation found it never arrived.
    NotDelivered,
}

/// One attempt at an effect, for the audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectAttempt {
    /// 1 for the first.
    pub number: u32,
    /// When it was claimed.
    pub started_ms: u64,
    /// When it ended (none while out).
    pub ended_ms: Option<u64>,
    /// How it ended.
    pub end: Option<AttemptEnd>,
    /// The receiver's status (webhooks).
    pub status: Option<u16>,
    /// Why it failed.
    pub detail: Option<String>,
}

/// Something that happened to an effect besides its attempts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectEvent {
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// `approved`, `expired`, `reconciled_done`, `reconciled_absent`,
    /// `conflict`, `unknown`, `resent`, `marked_done`.
    pub what: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Who did it (operators and approvers).
    pub by: Option<String>,
}

/// What an attempt (or a reconciliation) found out.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It happened: the receipt (the row, or the receiver's answer).
    Done(Value),
    /// It did not happen; worth trying again.
    #[allow(missing_docs)]
    Transient { status: Option<u16>, detail: String },
    /// It did not happen and never will as it is.
    #[allow(missing_docs)]
    Permanent { status: Option<u16>, detail: String },
    /// No answer (a timeout, a lost connection): it may have happened.
    #[allow(missing_docs)]
    Unknown { detail: String },
}

/// What the destination says about a claimed effect's delivery id.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// A record with the same payload fingerprint: it happened.
    Same(Value),
    /// A record with another fingerprint.
    #[allow(missing_docs)]
    Different { stored_fingerprint: String },
    /// No record: it never arrived.
    Absent,
    /// The destination cannot say (a webhook without a receipt URL).
    NoReceiptSource,
    /// Asking failed; ask again later.
    #[allow(missing_docs)]
    CouldNotAsk { detail: String },
}

/// What to do next with an effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Claim it and attempt it now.
    Perform,
    /// Ask the destination about the claimed delivery first.
    Reconcile,
    /// Look again at this time.
    WaitUntil(u64),
    /// Nothing (settled, or waiting for a person).
    Nothing,
}

/// Why an operator's or approver's action does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffectError {
    /// The effect does not wait for an approval.
    NotAwaitingApproval,
    /// The approval's time ran out; the effect will not run.
    ApprovalExpired,
    /// Only a dead, unknown or conflicting effect can be resent or marked done.
    NotSettleable,
}

impl std::fmt::Display for EffectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotAwaitingApproval => "no effect of this job waits for an approval",
            Self::ApprovalExpired => "the approval came after its expiry; the effect will not run",
            Self::NotSettleable => "only a dead, unknown or conflicting effect can be resent or marked done",
        })
    }
}

impl EffectError {
    /// The problem an API answers it with.
    pub fn problem_type(self) -> crate::wire::ProblemType {
        use crate::wire::ProblemType;
        match self {
            Self::NotAwaitingApproval => ProblemType::NotAwaitingApproval,
            Self::ApprovalExpired => ProblemType::ApprovalExpired,
            Self::NotSettleable => ProblemType::NotResolvable,
        }
    }
}

/// An approval of a job: given to each of its `effects` that waits for one
/// (the caller writes those whose version changed, errors included: a lapsed
/// approval expires its effect). `Ok(true)` when it lets some effect run,
/// `Ok(false)` when they were approved before; an error when no effect
/// waits for one, or every approval came too late.
pub fn approve_all(effects: &mut [Effect], by: &str, now_ms: u64) -> Result<bool, EffectError> {
    let (mut approved, mut approved_before, mut expired) = (false, false, false);
    for effect in effects.iter_mut() {
        match effect.approve(by, now_ms) {
            Ok(true) => approved = true,
            Ok(false) => approved_before = true,
            Err(EffectError::ApprovalExpired) => expired = true,
            Err(_) => {}
        }
    }
    match (approved || approved_before, expired) {
        (true, _) => Ok(approved),
        (false, true) => Err(EffectError::ApprovalExpired),
        (false, false) => Err(EffectError::NotAwaitingApproval),
    }
}

/// The stored record of one effect of one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    /// The effect's name in its job type.
    pub name: String,
    /// `d1` or `webhook`.
    pub kind: EffectKind,
    /// `{storage id}:{effect name}`: how the destination knows a repeat.
    pub delivery_id: String,
    /// What is written or sent (a row's columns, or a webhook's body).
    pub payload: Value,
    /// SHA-256 of the payload's canonical JSON: what reconciliation compares.
    pub fingerprint: String,
    /// Where it stands.
    pub state: EffectState,
    /// Bumped by every change (the store's compare-and-swap).
    pub version: u64,
    /// Attempts allowed (operator grants included).
    pub max_attempts: u32,
    /// No attempt or reconciliation before this time.
    pub not_before_ms: u64,
    /// Every attempt, oldest first.
    pub attempts: Vec<EffectAttempt>,
    /// Set when the effect waits for (or had) an approval.
    pub approval: Option<Approval>,
    /// The proof it happened: the row written, or the receiver's answer.
    pub receipt: Option<Value>,
    /// Marked done by a reconciliation, not by its own attempt.
    pub reconciled: bool,
    /// Approvals, reconciliations and operator actions, oldest first.
    pub events: Vec<EffectEvent>,
    /// It came to need an operator and its dead letter is not recorded
    /// yet: set in the write that made it so, cleared by the write after
    /// the letter (a crash between the two sends the letter after the
    /// restart, not never).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dead_letter_due: bool,
}

impl Effect {
    /// The effect `spec` of a job stored as `storage_id` whose input and
    /// answer are `input` and `output`.
    pub fn plan(spec: &EffectSpec, storage_id: &str, input: &Value, output: &Value, now_ms: u64) -> Self {
        let (kind, payload) = match &spec.target {
            // The row is its columns' templates, rendered.
            EffectTarget::D1 { columns, .. } => {
                (EffectKind::D1, crate::job_type::template::render(&Value::Object(columns.clone()), input, output))
            }
            // The inbox stands for a mail API: a webhook, on the wire too.
            EffectTarget::Webhook { payload, .. } | EffectTarget::Inbox { payload, .. } => {
                (EffectKind::Webhook, crate::job_type::template::render(payload, input, output))
            }
        };
        let approval = spec.approve.then(|| Approval {
            expires_ms: now_ms.saturating_add(spec.approval_ttl_ms),
            approved_by: None,
            approved_ms: None,
        });
        Self {
            name: spec.name.clone(),
            kind,
            delivery_id: format!("{storage_id}:{}", spec.name),
            fingerprint: fingerprint_of(&payload),
            payload,
            state: if spec.approve { EffectState::AwaitingApproval } else { EffectState::Ready },
            version: 1,
            max_attempts: spec.retry.attempts,
            not_before_ms: now_ms,
            attempts: Vec::new(),
            approval,
            receipt: None,
            reconciled: false,
            events: Vec::new(),
            dead_letter_due: false,
        }
    }

    /// What to do next, as of `now_ms`.
    pub fn step(&self, now_ms: u64) -> Step {
        match self.state {
            EffectState::AwaitingApproval => match &self.approval {
                Some(approval) if approval.expires_ms > now_ms => Step::WaitUntil(approval.expires_ms),
                _ => Step::Nothing,
            },
            EffectState::Ready if self.not_before_ms <= now_ms => Step::Perform,
            EffectState::Ready => Step::WaitUntil(self.not_before_ms),
            EffectState::Claimed if self.not_before_ms <= now_ms => Step::Reconcile,
            EffectState::Claimed => Step::WaitUntil(self.not_before_ms),
            _ => Step::Nothing,
        }
    }

    /// An approval whose time ran out becomes `expired`. True if it changed.
    pub fn expire(&mut self, now_ms: u64) -> bool {
        let due = self.state == EffectState::AwaitingApproval
            && self.approval.as_ref().is_none_or(|a| a.expires_ms <= now_ms);
        if due {
            self.state = EffectState::Expired;
            self.note("expired", None, now_ms);
            self.bump();
        }
        due
    }

    /// Approves it: `Ok(true)` if this approval lets it run, `Ok(false)` if
    /// it was approved before (approving twice runs it once).
    pub fn approve(&mut self, by: &str, now_ms: u64) -> Result<bool, EffectError> {
        self.expire(now_ms);
        match (self.state, &mut self.approval) {
            (EffectState::AwaitingApproval, Some(approval)) => {
                approval.approved_by = Some(by.to_owned());
                approval.approved_ms = Some(now_ms);
                self.state = EffectState::Ready;
                self.not_before_ms = now_ms;
                self.note("approved", Some(by), now_ms);
                self.bump();
                Ok(true)
            }
            (EffectState::Expired, _) => Err(EffectError::ApprovalExpired),
            (_, Some(approval)) if approval.approved_ms.is_some() => Ok(false),
            _ => Err(EffectError::NotAwaitingApproval),
        }
    }

    /// Claims the next attempt if one is due: its number. The caller writes
    /// the claim (compare-and-swap on the version it read) before attempting.
    pub fn claim(&mut self, now_ms: u64) -> Option<u32> {
        if self.step(now_ms) != Step::Perform || self.attempts.len() as u32 >= self.max_attempts {
            return None;
        }
        let number = self.attempts.len() as u32 + 1;
        self.attempts.push(EffectAttempt {
            number,
            started_ms: now_ms,
            ended_ms: None,
            end: None,
            status: None,
            detail: None,
        });
        self.state = EffectState::Claimed;
        self.bump();
        Some(number)
    }

    /// Records how the claimed attempt `number` ended. A transient failure
    /// with attempts left is retried after a full-jitter backoff; an
    /// unknown one stays claimed, to be reconciled after `reconcile_after_ms`.
    pub fn finish(
        &mut self,
        number: u32,
        outcome: Outcome,
        retry: EffectRetry,
        now_ms: u64,
        rng: &mut dyn RandomSource,
    ) {
        if self.state != EffectState::Claimed || self.attempts.last().map(|a| a.number) != Some(number) {
            return; // a stale report (another claim took over)
        }
        let spent = self.attempts.len() as u32 >= self.max_attempts;
        let (end, status, detail) = match &outcome {
            Outcome::Done(_) => (AttemptEnd::Done, None, None),
            Outcome::Transient { status, detail } => (AttemptEnd::Transient, *status, Some(detail.clone())),
            Outcome::Permanent { status, detail } => (AttemptEnd::Permanent, *status, Some(detail.clone())),
            Outcome::Unknown { detail } => (AttemptEnd::Unknown, None, Some(detail.clone())),
        };
        if let Some(attempt) = self.attempts.last_mut() {
            attempt.ended_ms = Some(now_ms);
            attempt.end = Some(end);
            attempt.status = status;
            attempt.detail = detail;
        }
        match outcome {
            Outcome::Done(receipt) => {
                self.state = EffectState::Done;
                self.receipt = Some(receipt);
            }
            Outcome::Transient { .. } if !spent => {
                self.state = EffectState::Ready;
                self.not_before_ms = now_ms + retry.delay_ms(self.attempts.len() as u32 - 1, rng);
            }
            Outcome::Transient { .. } | Outcome::Permanent { .. } => self.state = EffectState::Dead,
            Outcome::Unknown { .. } => {
                // Ask the destination only after the longest retry wait
                // (a request that timed out may still be landing there),
                // never send again blindly.
                self.not_before_ms = now_ms + retry.cap_ms + retry.delay_ms(0, rng);
            }
        }
        self.dead_letter_due = self.state.needs_operator();
        self.bump();
    }

    /// Settles a claimed effect with what its destination says about its
    /// delivery id. `Absent` makes it `ready` again (the claimed attempt
    /// never arrived); attempts spent → `dead`.
    pub fn reconcile(&mut self, found: Found, retry: EffectRetry, now_ms: u64, rng: &mut dyn RandomSource) {
        if self.state != EffectState::Claimed {
            return;
        }
        let mut end_open_attempt = |end: AttemptEnd, detail: &str| {
            if let Some(attempt) =
                self.attempts.last_mut().filter(|a| a.end.is_none() || a.end == Some(AttemptEnd::Unknown))
            {
                attempt.ended_ms.get_or_insert(now_ms);
                attempt.end = Some(end);
                attempt.detail = Some(detail.to_owned());
            }
        };
        match found {
            Found::Same(receipt) => {
                end_open_attempt(AttemptEnd::Done, "reconciled: the destination has it");
                self.state = EffectState::Done;
                self.receipt = Some(receipt);
                self.reconciled = true;
                self.note("reconciled_done", None, now_ms);
            }
            Found::Different { stored_fingerprint } => {
                end_open_attempt(AttemptEnd::Permanent, "reconciled: the destination holds another payload");
                self.state = EffectState::Conflict;
                self.receipt = Some(serde_json::json!({ "stored_fingerprint": stored_fingerprint }));
                self.note("conflict", None, now_ms);
            }
            Found::Absent => {
                end_open_attempt(AttemptEnd::NotDelivered, "reconciled: it never arrived");
                self.note("reconciled_absent", None, now_ms);
                if self.attempts.len() as u32 >= self.max_attempts {
                    self.state = EffectState::Dead;
                } else {
                    self.state = EffectState::Ready;
                    self.not_before_ms = now_ms;
                }
            }
            Found::NoReceiptSource => {
                end_open_attempt(AttemptEnd::Unknown, "no receipt source: it may or may not have arrived");
                self.state = EffectState::Unknown;
                self.note("unknown", None, now_ms);
            }
            Found::CouldNotAsk { .. } => {
                self.not_before_ms = now_ms + retry.delay_ms(self.attempts.len() as u32, rng);
            }
        }
        self.dead_letter_due = self.state.needs_operator();
        self.bump();
    }

    /// Its dead letter is recorded: the write that says so.
    pub fn dead_letter_sent(&mut self) {
        self.dead_letter_due = false;
        self.bump();
    }

    /// An operator sends a dead or unknown effect again, with a fresh
    /// allowance of `retry.attempts`. `Ok(false)`: it is already on its way.
    pub fn resend(&mut self, by: &str, retry: EffectRetry, now_ms: u64) -> Result<bool, EffectError> {
        match self.state {
            EffectState::Dead | EffectState::Unknown => {
                self.max_attempts = self.attempts.len() as u32 + retry.attempts;
                self.state = EffectState::Ready;
                self.not_before_ms = now_ms;
                self.note("resent", Some(by), now_ms);
                self.dead_letter_due = false;
                self.bump();
                Ok(true)
            }
            EffectState::Ready | EffectState::Claimed | EffectState::Done => Ok(false),
            _ => Err(EffectError::NotSettleable),
        }
    }

    /// An operator records that a dead, unknown or conflicting effect did
    /// happen (they checked the destination).
    pub fn mark_done(&mut self, by: &str, now_ms: u64) -> Result<bool, EffectError> {
        match self.state {
            EffectState::Done => Ok(false),
            state if state.needs_operator() => {
                self.state = EffectState::Done;
                self.receipt = Some(serde_json::json!({ "marked_done_by": by }));
                self.note("marked_done", Some(by), now_ms);
                self.dead_letter_due = false;
                self.bump();
                Ok(true)
            }
            _ => Err(EffectError::NotSettleable),
        }
    }

    fn note(&mut self, what: &str, by: Option<&str>, at_ms: u64) {
        self.events.push(EffectEvent { at_ms, what: what.to_owned(), by: by.map(str::to_owned) });
    }

    fn bump(&mut self) {
        self.version += 1;
    }
}

/// SHA-256 (hex) of `payload`'s canonical JSON (RFC 8785).
pub fn fingerprint_of(payload: &Value) -> String {
    let text = canonical::canonicalize(payload.to_string().as_bytes()).unwrap_or_else(|_| payload.to_string());
    digest::sha256_hex(text.as_bytes())
}

/// How a webhook receiver's status is judged: 2xx done; 408, 429 and 5xx
/// transient; 409 (the key is being processed) unknown; any other 4xx
/// permanent (it would refuse again).
pub fn outcome_of_status(status: u16, body: Value) -> Outcome {
    let detail = || format!("the receiver answered {status}");
    match status {
        200..=299 => Outcome::Done(serde_json::json!({ "status": status, "body": body })),
        408 | 429 | 500..=599 => Outcome::Transient { status: Some(status), detail: detail() },
        // A receiver's "this key is being processed": it may well arrive.
        409 => Outcome::Unknown { detail: detail() },
        _ => Outcome::Permanent { status: Some(status), detail: detail() },
    }
}

/// Where a job's effects stand together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectsState {
    /// Some effect is still to happen.
    Running,
    /// Nothing runs until someone approves.
    AwaitingApproval,
    /// Every effect is done.
    Completed,
    /// The answer is in, but some effect did not happen (dead, unknown,
    /// conflicting or expired).
    PartialSuccess,
}

/// Where a job's stored `effects` stand together, when its type declares
/// `declared` of them: running while none is planned yet (the answer is in,
/// its effects are being stored); a type without effects: completed. (Effects
/// a later deploy added or removed do not count: the stored ones are the plan.)
pub fn effects_state(effects: &[Effect], declared: usize) -> EffectsState {
    let unplanned = effects.is_empty() && declared > 0;
    if unplanned || effects.iter().any(|e| matches!(e.state, EffectState::Ready | EffectState::Claimed)) {
        EffectsState::Running
    } else if effects.iter().any(|e| e.state == EffectState::AwaitingApproval) {
        EffectsState::AwaitingApproval
    } else if effects.iter().all(|e| e.state == EffectState::Done) {
        EffectsState::Completed
    } else {
        EffectsState::PartialSuccess
    }
}

/// When `effects` next need a look (the earliest wait), if ever.
pub fn next_wake_ms(effects: &[Effect], now_ms: u64) -> Option<u64> {
    effects
        .iter()
        .filter_map(|e| match e.step(now_ms) {
            Step::WaitUntil(at) => Some(at),
            Step::Perform | Step::Reconcile => Some(now_ms),
            Step::Nothing => None,
        })
        .min()
}

#[cfg(test)]
mod tests;
