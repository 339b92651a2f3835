//! A submission to the Ledger, sans-IO: what a request for a job does, and
//! in which order, from what the shell read to the answer.
//!
//! The shell reads the job (stored, or being created by a drive here) and
//! who drives it, settles it by time, and asks [`decide`]; from there to the
//! claim nothing awaits. The [`Decision`] says whether an ended keyless job
//! is replaced first ([`Decision::renewed`]) and what the request does
//! ([`Plan`]):
//!
//! | admission | foreground | background (`Prefer: respond-async`) |
//! |---|---|---|
//! | a new job for a model no route serves | [`Plan::Refuse`] `400 no-route`, nothing written | the same |
//! | refused (422, 409…) | [`Plan::Refuse`] | 422 only; any other: as below |
//! | replay | [`Plan::Replay`] (KV may cache it) | [`Plan::Replay`] (not cached) |
//! | wait | [`Plan::FollowStream`] when the drive streams here, else [`Plan::Wait`] | [`Plan::Accept`] |
//! | run (renewed: a new job replacing the ended one) | [`Plan::Run`] | [`Plan::Accept`] when driven here, else [`Plan::Adopt`] |
//!
//! Before a run's claim ([`before_claim`]): the tenant's and user's token
//! budgets (a refusal's waiters are not told to retry), then, for a new job
//! of a job type, its subject (`once_per`) and its request kept. After the
//! drive's result ([`after_result`]): a background submission that came in
//! meanwhile adopts the unfinished job, and the answer says when to ask
//! again only while the job is unfinished. An adoption ([`adopt`]) creates
//! the job if there is none and makes it a background job once, with one
//! message ([`AdoptStep`]).

use crate::config::quota::{self, QuotaLimits};
use crate::identity::fingerprint::Fingerprint;
use crate::identity::keyless::Keyless;
use crate::job::{Job, JobPolicy, JobState};
use crate::ledger::background::outbox::{self, Outbox};
use crate::ledger::request::admission::{self, Admission, Arrival};
use crate::wire::{Problem, ProblemType};

/// What the shell read before deciding (nothing has awaited since).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Read {
    /// The job as stored, settled by time (see [`Job::expire`]).
    pub stored: Option<Job>,
    /// The job a drive here is creating and has not written yet.
    pub creating: Option<Job>,
    /// Someone drives the job here: a request, a delivery, a stream's pump.
    pub driving: bool,
    /// The running attempt streams here: its live stream can be followed.
    pub streaming: bool,
}

/// The request being decided.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Its key, fingerprint and how long it may wait.
    pub arrival: Arrival<'a>,
    /// Its mode when its key was derived (`KEYLESS`); `None`: a client's key.
    pub keyless: Option<Keyless>,
    /// `Prefer: respond-async`: a background job, answered `202`.
    pub background: bool,
}

/// What the request does (see the module's table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Answer with this problem about a job in `state`; nothing is written.
    Refuse {
        /// The refusal.
        problem: Problem,
        /// The job's state as the answer reports it (pending when there is none).
        state: JobState,
    },
    /// Replay the finished job's stored result (counted as saved).
    Replay {
        /// The finished job.
        job: Job,
        /// Whether the replay may be written to the KV cache (a
        /// foreground one; the cache's own settings decide then).
        cache: bool,
    },
    /// A duplicate of a job that streams here: follow the stream from its
    /// first event (counted as saved).
    FollowStream,
    /// A duplicate of a job driven here: wait for the drive's result, up to
    /// the request's `wait_ms`.
    Wait,
    /// Claim the job and drive it.
    Run(Run),
    /// A background submission of a job driven here: `202` with the job as
    /// it stands; the drive's end adopts it when it does not finish the job.
    Accept {
        /// The job (the one being created, if it is new).
        job: Job,
        /// Keep the submission to adopt after the drive (it is not a
        /// background job yet).
        adopt_later: bool,
    },
    /// A background submission nobody drives: make the job a background
    /// job ([`adopt`]), then `202`.
    Adopt {
        /// A new job: its subject is claimed first (`once_per`), and a
        /// refusal answers instead.
        subject_first: bool,
    },
}

/// A run's job and what its drive starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The job to claim: as stored, new, or a keyless job's renewal.
    pub job: Job,
    /// Whether it is stored already (a new or renewed one is written by its claim).
    pub stored: bool,
    /// A new job: set its retention alarm (a renewal's is set by [`Decision::renewed`]).
    pub created: bool,
}

impl Run {
    /// The job a drive here is creating, shared while it is not stored yet
    /// (a duplicate that comes meanwhile waits for it instead of creating
    /// another); `None` for a stored one.
    pub fn creating(&self) -> Option<Job> {
        (!self.stored).then(|| self.job.clone())
    }
}

/// The decision about a submission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// A keyless request after its ended job's replay window: the ended
    /// job's rows are cleared and this new job's retention alarm set, before
    /// anything else (still without an await).
    pub renewed: Option<Job>,
    /// What the request does.
    pub plan: Plan,
}

/// Decides a submission from what the shell `read` at `now_ms`. `no_route`
/// is asked only for a new job (a finished job of a model no route serves
/// any more is still replayed): the refusal, if no route serves it.
pub fn decide(
    read: Read,
    request: Request<'_>,
    now_ms: u64,
    policy: JobPolicy,
    no_route: impl FnOnce() -> Option<Problem>,
) -> Decision {
    let Read { stored, creating, driving, streaming } = read;
    let is_stored = stored.is_some();
    let job = stored.or(creating);
    let admitted = match request.keyless {
        Some(keyless) => admission::admit_keyless(job.as_ref(), request.arrival, now_ms, driving, keyless),
        None => admission::admit(job.as_ref(), request.arrival, now_ms, driving),
    };
    // A keyless request past its ended job's window: a new job replaces it,
    // run as any new job (not stored yet: its first claim writes it).
    let (admitted, job, is_stored, renewed) = match (admitted, job) {
        (Admission::Renew, Some(ended)) => match ended.renew(now_ms, policy) {
            Some(renewed) => (Admission::Run, Some(renewed.clone()), false, Some(renewed)),
            None => (Admission::Replay, Some(ended), is_stored, None),
        },
        // Nothing to renew: a new job.
        (Admission::Renew, None) => (Admission::Run, None, false, None),
        (admitted, job) => (admitted, job, is_stored, None),
    };
    // A new job for a model no route serves is refused before anything is written.
    let unserved = match (&admitted, &job) {
        (Admission::Run, None) => no_route(),
        _ => None,
    };
    if let Some(problem) = unserved {
        return Decision { renewed, plan: Plan::Refuse { problem, state: JobState::Pending } };
    }
    let plan = match (admitted, job) {
        (admitted, job) if request.background => {
            background(admitted, job, request.arrival.fingerprint, now_ms, policy, driving)
        }
        (Admission::Refuse(problem), job) => Plan::Refuse { problem, state: state_of(job.as_ref()) },
        (Admission::Replay, Some(job)) => Plan::Replay { job, cache: true },
        (Admission::Wait, _) if streaming => Plan::FollowStream,
        (Admission::Wait, _) => Plan::Wait,
        (_, Some(job)) => Plan::Run(Run { job, stored: is_stored, created: false }),
        (_, None) => Plan::Run(Run {
            job: Job::new(request.arrival.fingerprint.clone(), now_ms, policy),
            stored: false,
            created: true,
        }),
    };
    Decision { renewed, plan }
}

/// What a background submission does with its admission: a finished job
/// is replayed, another request under the key refused; any other (run,
/// wait, in progress, unknown) is accepted — adopted by the drive here when
/// it ends, or adopted now.
fn background(
    admitted: Admission,
    job: Option<Job>,
    fingerprint: &Fingerprint,
    now_ms: u64,
    policy: JobPolicy,
    driving: bool,
) -> Plan {
    match (admitted, job) {
        (Admission::Replay, Some(job)) => Plan::Replay { job, cache: false },
        (Admission::Refuse(problem), job) if problem.kind == ProblemType::KeyReused => {
            Plan::Refuse { problem, state: state_of(job.as_ref()) }
        }
        // Being run right now (or created a moment ago by a request still
        // writing it): the running attempt finishes it, and nothing may
        // write the job under it.
        (_, job) if driving => {
            let job = job.unwrap_or_else(|| Job::new(fingerprint.clone(), now_ms, policy));
            Plan::Accept { adopt_later: !job.is_background(), job }
        }
        (_, job) => Plan::Adopt { subject_first: job.is_none() },
    }
}

/// The state a refusal reports: the job's, pending when there is none.
fn state_of(job: Option<&Job>) -> JobState {
    job.map_or(JobState::Pending, Job::state)
}

/// What a drive asks before its claim, in order; any refusal ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// The tenant's and user's token budgets ([`over_quota`]).
    Quota,
    /// A job type's subject is run once (`once_per`).
    Subject,
    /// Keep the job type's input and request (its effects are planned from
    /// them, also after a restart): no refusal.
    SaveRequest,
}

/// What a drive of a job (`stored` or new, of a job type or not) asks
/// before its claim: its quota always; for a new job of a job type, its
/// subject, then its request kept.
pub fn before_claim(stored: bool, job_type: bool) -> Vec<Check> {
    let mut checks = vec![Check::Quota];
    if !stored && job_type {
        checks.extend([Check::Subject, Check::SaveRequest]);
    }
    checks
}

/// A drive refused before its claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The caller's answer.
    pub problem: Problem,
    /// When the duplicates that waited may ask again: never for a spent
    /// budget (not worth retrying until tomorrow: the body says when).
    pub waiters_retry_after_ms: Option<u64>,
}

impl Refused {
    /// The refusal of `check` with `problem`.
    pub fn of(check: Check, problem: Problem) -> Self {
        let waiters_retry_after_ms = match check {
            Check::Quota => None,
            Check::Subject | Check::SaveRequest => problem.retry_after_ms,
        };
        Self { problem, waiters_retry_after_ms }
    }
}

/// Whether the meter must be asked for `limits` (no budget: no call).
pub fn asks_meter(limits: QuotaLimits) -> bool {
    limits.tenant_tokens_per_day.is_some() || limits.user_tokens_per_day.is_some()
}

/// The refusal of a new attempt once the meter answered (`allowed`; `None`:
/// it could not be reached, and quotas fail open), until the next day.
pub fn over_quota(allowed: Option<bool>, key: &str, now_ms: u64) -> Option<Problem> {
    if allowed.unwrap_or(true) {
        return None;
    }
    Some(
        Problem::new(ProblemType::QuotaExceeded, "this tenant's or user's token budget for today is spent")
            .with_key(key)
            .with_retry_after_ms(quota::until_next_day_ms(now_ms)),
    )
}

/// What follows a drive's result (not a stream's: a streamed answer is the caller's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterResult {
    /// Adopt the background submission kept during the drive: the job is
    /// not finished, so the queue takes it from here.
    pub adopt: bool,
    /// When to ask again, as the answer's `retry-after-ms` says it (a queue
    /// delivery defers the job by it); only for an unfinished job.
    pub retry_after_ms: Option<u64>,
}

/// What follows a result of `state` that says to ask again after
/// `retry_after_ms`, `kept_later`: a background submission was kept.
pub fn after_result(state: JobState, retry_after_ms: Option<u64>, kept_later: bool) -> AfterResult {
    let unfinished = !state.is_terminal();
    AfterResult { adopt: kept_later && unfinished, retry_after_ms: retry_after_ms.filter(|_| unfinished) }
}

/// Whether a caller's drive of `job` (as the drive left it) is followed by
/// what a delivery's drive is followed by: the job dead-lettered if it
/// needs an operator, and the alarm set for its next look. A background
/// job's queue message may have been taken while the caller drove it (a
/// delivery that finds a drive here acknowledges its message and leaves
/// the job to the alarm, [`crate::ledger::background::outbox::on_delivery`]): without
/// this, a job the caller's drive left dead, or blocked as unknown, was
/// looked at again only at its retention, and never dead-lettered. A
/// stream's pump keeps its own watchdog alarm until it ends.
pub fn tended_after_caller_drive(job: &Job) -> bool {
    job.is_background() && !job.is_streaming()
}

/// What a waiting duplicate is answered when the drive hands it a result
/// of `state`: a replay (and counted as saved) only when the job is finished.
pub fn handed_is_replay(state: JobState) -> bool {
    state.is_terminal()
}

/// A waiting duplicate whose wait ran out, or whose drive failed without
/// a result: `409 request-in-progress` about an in-flight job.
pub fn wait_over(key: &str) -> (Problem, JobState) {
    (admission::in_progress(key, admission::DEFAULT_RETRY_AFTER_MS), JobState::InFlight)
}

/// One write (or send) of an adoption, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdoptStep {
    /// Insert this new job (there was none).
    Insert(Job),
    /// Keep the new job's meta (tenant, user, key, model).
    SaveMeta,
    /// Keep the submission, marked background and of the job's
    /// `generation`, and its body: what its deliveries run (a keyless
    /// job's renewal calls its provider under a key of its own).
    SaveRequest {
        /// The job's generation, which the kept submission's provider key is derived from.
        generation: u32,
    },
    /// Write the job, now a background job, over version `read`.
    Update {
        /// The version it was read at (compare-and-swap).
        read: u64,
    },
    /// Send its queue message (through the outbox).
    Enqueue,
    /// Send its dead letter (once): it needs an operator already, an
    /// unknown outcome under `UNKNOWN_POLICY=block` whose lease is over
    /// (no alarm would ever find it so: its lease ended before it was a
    /// background job).
    DeadLetter,
}

/// An adoption: the job as it ends up, and the steps that make it so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adoption {
    /// The job, a background job unless it had finished.
    pub job: Job,
    /// What to write and send, in order; then the alarm is armed for the job.
    pub steps: Vec<AdoptStep>,
}

/// Makes the `stored` job (created if there is none) a background job with
/// one message, unless it already is one (queued or running: never a second
/// message) or is finished. The job created is `renewed` when the
/// submission renewed a keyless job ([`Decision::renewed`]: its own
/// generation, so its provider is called under a key of its own), else a
/// new one.
pub fn adopt(
    stored: Option<Job>,
    renewed: Option<Job>,
    fingerprint: &Fingerprint,
    now_ms: u64,
    policy: JobPolicy,
) -> Adoption {
    let mut steps = Vec::new();
    let mut job = match stored {
        Some(job) => job,
        None => {
            let job = renewed.unwrap_or_else(|| Job::new(fingerprint.clone(), now_ms, policy));
            steps.extend([AdoptStep::Insert(job.clone()), AdoptStep::SaveMeta]);
            job
        }
    };
    if !job.is_background() && !job.state().is_terminal() {
        let read = job.version();
        job.run_in_background(now_ms);
        let generation = job.generation();
        steps.extend([AdoptStep::SaveRequest { generation }, AdoptStep::Update { read }, AdoptStep::Enqueue]);
        if outbox::needs_operator(&job, &Outbox::default(), now_ms) {
            steps.push(AdoptStep::DeadLetter);
        }
    }
    Adoption { job, steps }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use std::cell::Cell;

    use super::*;
    use crate::job::{AttemptReport, UnknownPolicy};
    use crate::retry::classify::ErrorClass;

    const T0: u64 = 1_700_000_000_000;
    const KEY: &str = "0123456789abcdef";
    const WINDOW: Keyless = Keyless::Window { window_ms: 60_000 };

    fn policy() -> JobPolicy {
        JobPolicy::new(3, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap()
    }

    fn fp() -> Fingerprint {
        Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{}")
    }

    fn other() -> Fingerprint {
        Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{\"a\":1}")
    }

    fn new_job() -> Job {
        Job::new(fp(), T0, policy())
    }

    fn running() -> Job {
        let mut job = new_job();
        job.claim(0, T0, "p", None).unwrap();
        job
    }

    fn completed() -> Job {
        let mut job = new_job();
        let ticket = job.claim(0, T0, "p", None).unwrap();
        job.complete(
            ticket,
            T0 + 5,
            AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::None) },
        )
        .unwrap();
        job
    }

    fn unknown() -> Job {
        let mut job = new_job();
        let ticket = job.claim(0, T0, "p", None).unwrap();
        let report = AttemptReport { status: None, usage: None, error_class: Some(ErrorClass::TimeoutAfterSend) };
        job.mark_unknown(ticket, T0 + 5, report).unwrap();
        job
    }

    fn stored(job: Job) -> Read {
        Read { stored: Some(job), ..Read::default() }
    }

    fn driven(job: Job) -> Read {
        Read { stored: Some(job), driving: true, ..Read::default() }
    }

    fn keyed(fingerprint: &Fingerprint, background: bool) -> Request<'_> {
        Request { arrival: Arrival { key: KEY, fingerprint, wait_ms: 30_000 }, keyless: None, background }
    }

    fn routed() -> Option<Problem> {
        None
    }

    fn decide_at(read: Read, request: Request<'_>, now_ms: u64) -> Decision {
        decide(read, request, now_ms, policy(), routed)
    }

    fn plan(read: Read, request: Request<'_>) -> Plan {
        decide_at(read, request, T0 + 10).plan
    }

    fn no_route() -> Problem {
        Problem::new(ProblemType::NoRoute, "no route serves this model")
    }

    #[test]
    fn a_run_shares_the_job_it_creates_until_it_is_stored() {
        let new = Run { job: new_job(), stored: false, created: true };
        assert_eq!(new.creating(), Some(new_job()));
        let renewed = Run { job: running(), stored: false, created: false };
        assert_eq!(renewed.creating(), Some(running()));
        assert_eq!(Run { job: running(), stored: true, created: false }.creating(), None);
    }

    #[test]
    fn a_new_job_runs_created_here_and_sets_its_retention() {
        let decision = decide_at(Read::default(), keyed(&fp(), false), T0);
        assert_eq!(decision.renewed, None);
        assert_eq!(decision.plan, Plan::Run(Run { job: Job::new(fp(), T0, policy()), stored: false, created: true }));
    }

    #[test]
    fn a_stored_job_that_may_run_again_runs_as_stored() {
        let mut failed = new_job();
        let ticket = failed.claim(0, T0, "p", None).unwrap();
        failed.fail(ticket, T0 + 1, AttemptReport::default()).unwrap();
        let late = failed.not_before_ms() + 1;
        let decision = decide_at(stored(failed.clone()), keyed(&fp(), false), late);
        assert_eq!(decision.plan, Plan::Run(Run { job: failed, stored: true, created: false }));
    }

    #[test]
    fn the_route_is_asked_only_for_a_new_job_and_refuses_it_before_anything_is_written() {
        let asked = Cell::new(0);
        let ask = || {
            asked.set(asked.get() + 1);
            Some(no_route())
        };
        for background in [false, true] {
            let decision = decide(Read::default(), keyed(&fp(), background), T0, policy(), ask);
            assert_eq!(decision.plan, Plan::Refuse { problem: no_route(), state: JobState::Pending });
        }
        assert_eq!(asked.get(), 2);
        // A finished job of it is still replayed, a stored one still runs:
        // the route is not asked.
        let decision = decide(stored(completed()), keyed(&fp(), false), T0 + 10, policy(), ask);
        assert!(matches!(decision.plan, Plan::Replay { .. }));
        let mut failed = new_job();
        let ticket = failed.claim(0, T0, "p", None).unwrap();
        failed.fail(ticket, T0 + 1, AttemptReport::default()).unwrap();
        let decision = decide(stored(failed), keyed(&fp(), true), T0 + 999_999, policy(), ask);
        assert_eq!(decision.plan, Plan::Adopt { subject_first: false });
        assert_eq!(asked.get(), 2);
    }

    #[test]
    fn a_finished_job_replays_cached_in_the_foreground_only() {
        assert_eq!(plan(stored(completed()), keyed(&fp(), false)), Plan::Replay { job: completed(), cache: true });
        assert_eq!(plan(stored(completed()), keyed(&fp(), true)), Plan::Replay { job: completed(), cache: false });
    }

    #[test]
    fn another_request_under_the_key_is_refused_in_both_modes_with_the_job_s_state() {
        for background in [false, true] {
            match plan(stored(running()), keyed(&other(), background)) {
                Plan::Refuse { problem, state } => {
                    assert_eq!(problem.kind, ProblemType::KeyReused);
                    assert_eq!(state, JobState::InFlight);
                }
                other => panic!("expected a refusal, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_duplicate_follows_the_stream_or_waits_for_the_drive() {
        assert_eq!(plan(driven(running()), keyed(&fp(), false)), Plan::Wait);
        let streaming = Read { streaming: true, ..driven(running()) };
        assert_eq!(plan(streaming, keyed(&fp(), false)), Plan::FollowStream);
        // The job being created is what a duplicate is admitted against.
        let creating = Read { creating: Some(new_job()), driving: true, ..Read::default() };
        assert_eq!(plan(creating, keyed(&fp(), false)), Plan::Wait);
    }

    #[test]
    fn a_foreground_refusal_other_than_key_reuse_answers_with_the_job_s_state() {
        // In flight elsewhere (a runtime that restarted mid-call).
        match plan(stored(running()), keyed(&fp(), false)) {
            Plan::Refuse { problem, state } => {
                assert_eq!(problem.kind, ProblemType::RequestInProgress);
                assert_eq!(state, JobState::InFlight);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        match plan(stored(unknown()), keyed(&fp(), false)) {
            Plan::Refuse { problem, state } => {
                assert_eq!(problem.kind, ProblemType::OutcomeUnknown);
                assert_eq!(state, JobState::Unknown);
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_background_submission_of_a_driven_job_is_accepted_and_adopted_after_the_drive_once() {
        assert_eq!(plan(driven(running()), keyed(&fp(), true)), Plan::Accept { job: running(), adopt_later: true });
        let mut background = running();
        background.run_in_background(T0);
        assert_eq!(
            plan(driven(background.clone()), keyed(&fp(), true)),
            Plan::Accept { job: background, adopt_later: false },
            "a background job has its message already"
        );
        // Being created: the job as it will be written.
        let creating = Read { creating: Some(new_job()), driving: true, ..Read::default() };
        assert_eq!(plan(creating, keyed(&fp(), true)), Plan::Accept { job: new_job(), adopt_later: true });
        // Driven with no job in sight (nothing to read yet): a new one.
        let nothing = Read { driving: true, ..Read::default() };
        let decision = decide_at(nothing, keyed(&fp(), true), T0);
        assert_eq!(decision.plan, Plan::Accept { job: new_job(), adopt_later: true });
    }

    #[test]
    fn a_background_submission_nobody_drives_is_adopted_whatever_blocks_a_foreground_one() {
        assert_eq!(plan(Read::default(), keyed(&fp(), true)), Plan::Adopt { subject_first: true });
        // In flight elsewhere, unknown within its lease: adopted (the
        // outbox sends it when it may run), where a foreground one is 409.
        assert_eq!(plan(stored(running()), keyed(&fp(), true)), Plan::Adopt { subject_first: false });
        assert_eq!(plan(stored(unknown()), keyed(&fp(), true)), Plan::Adopt { subject_first: false });
    }

    #[test]
    fn a_keyless_request_past_its_window_renews_the_ended_job_first() {
        let keyless = |background| Request { keyless: Some(WINDOW), ..keyed_static(background) };
        let inside = decide_at(stored(completed()), keyless(false), T0 + 59_999);
        assert_eq!(inside.renewed, None);
        assert!(matches!(inside.plan, Plan::Replay { .. }));
        let after = decide_at(stored(completed()), keyless(false), T0 + 60_000);
        let renewed = completed().renew(T0 + 60_000, policy()).unwrap();
        assert_eq!(after.renewed, Some(renewed.clone()));
        assert_eq!(after.plan, Plan::Run(Run { job: renewed.clone(), stored: false, created: false }));
        assert_eq!(renewed.generation(), 1, "it calls its provider under a key of its own");
        // A background one: renewed, then adopted (nobody drives it).
        let background = decide_at(stored(completed()), keyless(true), T0 + 60_000);
        assert_eq!(background.renewed, Some(renewed));
        assert_eq!(background.plan, Plan::Adopt { subject_first: false });
        // While the drive that ended it still hands it out: replayed.
        let handing = decide_at(driven(completed()), keyless(false), T0 + 60_000);
        assert_eq!(handing.renewed, None);
        assert!(matches!(handing.plan, Plan::Replay { .. }));
    }

    fn keyed_static(background: bool) -> Request<'static> {
        static FP: std::sync::OnceLock<Fingerprint> = std::sync::OnceLock::new();
        keyed(FP.get_or_init(fp), background)
    }

    #[test]
    fn a_keyless_request_with_no_job_is_a_new_one() {
        let request = Request { keyless: Some(Keyless::Coalesce), ..keyed_static(false) };
        let decision = decide_at(Read::default(), request, T0);
        assert_eq!(decision.renewed, None);
        assert!(matches!(decision.plan, Plan::Run(Run { stored: false, created: true, .. })));
    }

    #[test]
    fn a_drive_checks_its_quota_and_a_new_job_type_s_subject_before_keeping_its_request() {
        assert_eq!(before_claim(true, false), vec![Check::Quota]);
        assert_eq!(before_claim(true, true), vec![Check::Quota]);
        assert_eq!(before_claim(false, false), vec![Check::Quota]);
        assert_eq!(before_claim(false, true), vec![Check::Quota, Check::Subject, Check::SaveRequest]);
    }

    #[test]
    fn a_spent_budget_is_refused_until_tomorrow_and_its_waiters_are_not_told_to_retry() {
        assert!(!asks_meter(QuotaLimits::default()));
        assert!(asks_meter(QuotaLimits { tenant_tokens_per_day: Some(1), user_tokens_per_day: None }));
        assert!(asks_meter(QuotaLimits { tenant_tokens_per_day: None, user_tokens_per_day: Some(1) }));
        assert_eq!(over_quota(Some(true), KEY, T0), None);
        assert_eq!(over_quota(None, KEY, T0), None, "a meter that cannot be reached does not stop the job");
        let problem = over_quota(Some(false), KEY, T0).expect("refused");
        assert_eq!(problem.kind, ProblemType::QuotaExceeded);
        assert_eq!(problem.key.as_deref(), Some(KEY));
        assert_eq!(problem.retry_after_ms, Some(quota::until_next_day_ms(T0)));
        let refused = Refused::of(Check::Quota, problem.clone());
        assert_eq!(refused.waiters_retry_after_ms, None);
        assert_eq!(refused.problem, problem);
        let taken = Problem::new(ProblemType::Internal, "retry").with_retry_after_ms(1_000);
        assert_eq!(Refused::of(Check::Subject, taken).waiters_retry_after_ms, Some(1_000));
    }

    #[test]
    fn after_a_result_an_unfinished_job_is_adopted_and_says_when_to_ask_again() {
        let after = after_result(JobState::Failed, Some(2_000), true);
        assert_eq!(after, AfterResult { adopt: true, retry_after_ms: Some(2_000) });
        assert!(!after_result(JobState::Failed, Some(2_000), false).adopt);
        for finished in [JobState::Completed, JobState::Dead] {
            assert_eq!(after_result(finished, Some(2_000), true), AfterResult { adopt: false, retry_after_ms: None });
        }
    }

    #[test]
    fn a_callers_drive_of_a_background_job_is_tended_as_a_deliverys_is() {
        // Simulation seeds 276991 and 282265: a delivery acknowledged during
        // a caller's drive, which then left the job unknown (or dead), and
        // nothing looked at it again before retention: no dead letter.
        let mut job = new_job();
        assert!(!tended_after_caller_drive(&job), "a caller's job keeps its retention alarm");
        job.run_in_background(T0);
        assert!(tended_after_caller_drive(&job));
        let ticket = job.claim(job.version(), T0, "p", None).expect("claim");
        job.mark_streaming(ticket, T0 + 1).expect("streaming");
        assert!(!tended_after_caller_drive(&job), "the pump's watchdog stays");
    }

    #[test]
    fn a_waiter_is_replayed_only_a_finished_result_and_told_in_progress_when_its_wait_ends() {
        assert!(handed_is_replay(JobState::Completed));
        assert!(handed_is_replay(JobState::Dead));
        assert!(!handed_is_replay(JobState::Failed));
        let (problem, state) = wait_over(KEY);
        assert_eq!(problem.kind, ProblemType::RequestInProgress);
        assert_eq!(problem.retry_after_ms, Some(admission::DEFAULT_RETRY_AFTER_MS));
        assert_eq!(state, JobState::InFlight);
    }

    #[test]
    fn adopting_creates_the_job_once_and_marks_it_background_with_one_message() {
        let adoption = adopt(None, None, &fp(), T0, policy());
        assert!(adoption.job.is_background());
        assert_eq!(
            adoption.steps,
            vec![
                AdoptStep::Insert(new_job()),
                AdoptStep::SaveMeta,
                AdoptStep::SaveRequest { generation: 0 },
                AdoptStep::Update { read: new_job().version() },
                AdoptStep::Enqueue
            ]
        );
        // Adopting it again: already a background job, nothing to write or send.
        let again = adopt(Some(adoption.job.clone()), None, &fp(), T0 + 5, policy());
        assert_eq!(again, Adoption { job: adoption.job, steps: vec![] });
        // A stored job that is not one yet.
        let adoption = adopt(Some(running()), None, &fp(), T0 + 5, policy());
        assert_eq!(
            adoption.steps,
            vec![
                AdoptStep::SaveRequest { generation: 0 },
                AdoptStep::Update { read: running().version() },
                AdoptStep::Enqueue
            ]
        );
        // A finished job is left as it is.
        assert_eq!(adopt(Some(completed()), None, &fp(), T0, policy()), Adoption { job: completed(), steps: vec![] });
        // A keyless job renewed by a background submission: the renewal is
        // created (its own generation), not a new job of generation 0.
        let renewed = completed().renew(T0 + 60_000, policy()).unwrap();
        let adoption = adopt(None, Some(renewed.clone()), &fp(), T0 + 60_000, policy());
        assert_eq!(adoption.steps[0], AdoptStep::Insert(renewed));
        assert_eq!(adoption.job.generation(), 1);
        assert!(
            adoption.steps.contains(&AdoptStep::SaveRequest { generation: 1 }),
            "its deliveries call the provider under the renewal's key: {:?}",
            adoption.steps
        );
        assert!(adoption.job.is_background());
    }

    #[test]
    fn adopting_a_job_already_waiting_for_an_operator_sends_its_dead_letter() {
        // A foreground call ended unknown under UNKNOWN_POLICY=block; its
        // unknown lease is over when a background submission adopts it.
        let block = JobPolicy::new(3, 1_000, 5_000, 86_400_000, UnknownPolicy::Block).unwrap();
        let mut job = Job::new(fp(), T0, block);
        let ticket = job.claim(job.version(), T0, "p", None).unwrap();
        job.mark_unknown(ticket, T0 + 10, AttemptReport::default()).unwrap();
        let adoption = adopt(Some(job.clone()), None, &fp(), T0 + 10 + 5_000, block);
        assert_eq!(adoption.steps.last(), Some(&AdoptStep::DeadLetter), "{:?}", adoption.steps);
        // Still within its lease: the alarm letters it when the lease ends.
        let early = adopt(Some(job), None, &fp(), T0 + 20, block);
        assert!(!early.steps.contains(&AdoptStep::DeadLetter));
    }
}
