//! What follows a job type's answer, and the cadence of its effects' run.
//!
//! Once a job type's model part has ended, its subject is marked answered
//! (or freed), a streamed answer is checked against the type's contract
//! (it was shown as it came, so it could not be checked on its way), the
//! effects are planned once, and those due are run — by whoever finds them
//! due: the request that got the answer, a queue delivery, the alarm, an
//! approval or an operator. The Ledger performs these; this module decides
//! which of them applies, and how long one run goes on before it leaves the
//! rest to the alarm.

use crate::job::{Job, JobState};
use crate::job_type::effect::{self, Effect};

/// A retry due sooner than this is waited for in the run that found it; a
/// later one is left to the alarm.
pub const INLINE_WAIT_MS: u64 = 1_500;

/// How long one run of the effects may go on (retries and checks that keep
/// failing are then left to the alarm, and the request is answered).
pub const INLINE_BUDGET_MS: u64 = 15_000;

/// While effects run, the alarm is kept this close: if the runtime dies
/// mid-effect, the alarm after the restart reconciles what was claimed.
pub const CLAIM_WATCH_MS: u64 = 5_000;

/// A dead letter that could not be recorded (the operators' database was
/// down) is tried again this long after the run that found it so.
pub const LETTER_RETRY_MS: u64 = 30_000;

/// How a job type's model part ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// The job's state.
    pub state: JobState,
    /// The final attempt's status (0: none).
    pub status: u16,
    /// The final attempt's number.
    pub attempt: u32,
    /// The answer streamed (so it was not checked on its way).
    pub streamed: bool,
}

impl Ended {
    /// How `job` ended, from its stored record (`None` while it has not).
    pub fn of_job(job: &Job) -> Option<Self> {
        if !job.state().is_terminal() {
            return None;
        }
        let attempt = job.replayed_attempt();
        Some(Self {
            state: job.state(),
            status: attempt.and_then(|a| a.status).unwrap_or(0),
            attempt: attempt.map_or(1, |a| a.number),
            streamed: attempt.is_some_and(|a| a.streamed),
        })
    }

    /// Whether it ended with an answer the effects can follow (a completed
    /// job whose answer is a 2xx).
    pub fn answered(&self) -> bool {
        self.state == JobState::Completed && (200..300).contains(&self.status)
    }
}

/// What follows the end of a job type's model part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAnswer {
    /// An answer: check a streamed one against the contract
    /// ([`AfterCheck`]); else mark the subject answered, plan the effects and run them.
    CheckThenEffects {
        /// The answer streamed and must be checked first.
        check_contract: bool,
    },
    /// Ended without an answer: its subject is free again (a new job may run it).
    ReleaseSubject,
    /// Not ended yet: nothing.
    Nothing,
}

impl AfterAnswer {
    /// What follows `ended`.
    pub fn of(ended: Ended) -> Self {
        if ended.answered() {
            Self::CheckThenEffects { check_contract: ended.streamed }
        } else if ended.state.is_terminal() {
            Self::ReleaseSubject
        } else {
            Self::Nothing
        }
    }
}

/// One step of what follows a job type's answer, in the order the Ledger
/// performs them ([`AfterAnswer::steps`], then [`AfterCheck::steps`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Check the stored (streamed) answer against the type's contract, and
    /// go on with [`AfterCheck::of`] its outcome.
    CheckContract,
    /// Free the job's subject.
    ReleaseSubject(Held),
    /// Record a dead letter of class `contract` with this detail, and alert.
    DeadLetter(String),
    /// Mark the job's subject answered: it is not run again.
    SubjectAnswered(Held),
    /// Plan the effects from the stored input and answer (once).
    PlanEffects,
    /// Run the effects that are due.
    RunEffects,
}

/// The subject a job type's job holds (`once_per`), as its follow-up frees
/// it or marks it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The job's type.
    pub type_name: String,
    /// The subject its input names.
    pub subject: String,
}

/// The steps that follow an answer in the contract: the subject answered
/// (when the job holds one), then the effects planned and run.
fn effects(held: Option<&Held>) -> Vec<Step> {
    let answered = held.map(|held| Step::SubjectAnswered(held.clone()));
    answered.into_iter().chain([Step::PlanEffects, Step::RunEffects]).collect()
}

/// Freeing the subject, when the job holds one.
fn release(held: Option<&Held>) -> Vec<Step> {
    held.map(|held| Step::ReleaseSubject(held.clone())).into_iter().collect()
}

impl AfterAnswer {
    /// The steps, in order, for a job that holds the subject `held` (none:
    /// its type names no subject, or its input none; no subject step then).
    pub fn steps(self, held: Option<&Held>) -> Vec<Step> {
        match self {
            Self::CheckThenEffects { check_contract: true } => vec![Step::CheckContract],
            Self::CheckThenEffects { check_contract: false } => effects(held),
            Self::ReleaseSubject => release(held),
            Self::Nothing => Vec::new(),
        }
    }
}

/// After a streamed answer's contract check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterCheck {
    /// It breaks the contract: no effect runs, its subject is freed, and it
    /// is a dead letter of class `contract` (with this detail).
    DeadLetter(String),
    /// It meets it: the subject is answered, the effects planned and run.
    Effects,
}

impl AfterCheck {
    /// The outcome of checking `job_type`'s streamed answer (`violation`: what is wrong with it).
    pub fn of(job_type: &str, violation: Option<String>) -> Self {
        match violation {
            Some(violation) => Self::DeadLetter(format!(
                "the streamed answer broke the {job_type} job type's output contract: {violation}"
            )),
            None => Self::Effects,
        }
    }

    /// The steps, in order, for a job that holds the subject `held`: a
    /// broken answer frees its subject before its dead letter is recorded
    /// (a new job may take the subject at once).
    pub fn steps(self, held: Option<&Held>) -> Vec<Step> {
        match self {
            Self::DeadLetter(detail) => release(held).into_iter().chain([Step::DeadLetter(detail)]).collect(),
            Self::Effects => effects(held),
        }
    }
}

/// What a follow-up (any path that finds a job type's answer in) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowUp {
    /// Effects are planned: run those due.
    RunEffects,
    /// The job ended and nothing followed it yet: [`AfterAnswer::of`] this end.
    AfterAnswer(Ended),
    /// Not a job type's job, or not ended: nothing.
    Nothing,
}

impl FollowUp {
    /// What follows up a job type's job (`is_run`) whose effects are
    /// `planned` or not, as `job` stands in storage.
    pub fn of(is_run: bool, planned: bool, job: Option<&Job>) -> Self {
        if planned {
            return Self::RunEffects;
        }
        match job.filter(|_| is_run).and_then(Ended::of_job) {
            Some(ended) => Self::AfterAnswer(ended),
            None => Self::Nothing,
        }
    }
}

/// What one run of the effects does after a pass over them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterPass {
    /// Something was done: another pass now (what it did may make another due).
    Again,
    /// A retry is due soon: wait this long, then pass again.
    Sleep(u64),
    /// Over budget, or nothing due soon: stop (the alarm goes on).
    Stop,
}

impl AfterPass {
    /// After a pass that `acted` (or not) and found the earliest retry due at
    /// `earliest_wake_ms`, in a run that started at `started_ms`.
    pub fn of(acted: bool, earliest_wake_ms: Option<u64>, started_ms: u64, now_ms: u64) -> Self {
        if now_ms.saturating_sub(started_ms) > INLINE_BUDGET_MS {
            return Self::Stop;
        }
        if acted {
            return Self::Again;
        }
        match earliest_wake_ms.map(|at| at.saturating_sub(now_ms)) {
            Some(wait_ms) if wait_ms <= INLINE_WAIT_MS => Self::Sleep(wait_ms),
            _ => Self::Stop,
        }
    }
}

/// When the effects next need a look (for the alarm): the earliest due one
/// among those the job type still defines (one a deploy removed is never
/// run), a dead letter still due [`LETTER_RETRY_MS`] from now, but no sooner than the watch while they run here (their runner is
/// busy, and records before it stops).
pub fn next_look_ms(
    effects: &[Effect],
    defined: impl Fn(&str) -> bool,
    running_here: bool,
    now_ms: u64,
) -> Option<u64> {
    let live: Vec<Effect> = effects.iter().filter(|e| defined(&e.name)).cloned().collect();
    // A dead letter still due (its record failed) is sent again later.
    let letter = live.iter().any(|e| e.dead_letter_due).then_some(now_ms + LETTER_RETRY_MS);
    let due = effect::next_wake_ms(&live, now_ms).into_iter().chain(letter).min()?;
    Some(if running_here { due.max(now_ms + CLAIM_WATCH_MS) } else { due })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn ended(state: JobState, status: u16, streamed: bool) -> Ended {
        Ended { state, status, attempt: 1, streamed }
    }

    #[test]
    fn an_answer_is_followed_by_its_effects_after_a_streamed_one_is_checked() {
        assert_eq!(
            AfterAnswer::of(ended(JobState::Completed, 200, false)),
            AfterAnswer::CheckThenEffects { check_contract: false }
        );
        assert_eq!(
            AfterAnswer::of(ended(JobState::Completed, 200, true)),
            AfterAnswer::CheckThenEffects { check_contract: true }
        );
    }

    #[test]
    fn an_end_without_an_answer_frees_the_subject_and_a_running_job_waits() {
        // A permanent error is the job's answer, but not one effects follow.
        assert_eq!(AfterAnswer::of(ended(JobState::Completed, 400, false)), AfterAnswer::ReleaseSubject);
        assert_eq!(AfterAnswer::of(ended(JobState::Dead, 503, false)), AfterAnswer::ReleaseSubject);
        assert_eq!(AfterAnswer::of(ended(JobState::Failed, 503, false)), AfterAnswer::Nothing);
        assert_eq!(AfterAnswer::of(ended(JobState::Unknown, 0, false)), AfterAnswer::Nothing);
    }

    #[test]
    fn a_streamed_answer_outside_the_contract_is_a_dead_letter_naming_the_type() {
        assert_eq!(AfterCheck::of("triage", None), AfterCheck::Effects);
        assert_eq!(
            AfterCheck::of("triage", Some("missing key label".into())),
            AfterCheck::DeadLetter(
                "the streamed answer broke the triage job type's output contract: missing key label".into()
            )
        );
    }

    fn held() -> Held {
        Held { type_name: "triage".into(), subject: "T-7".into() }
    }

    #[test]
    fn the_steps_after_an_answer_check_a_streamed_one_before_its_effects_and_free_a_failed_ones_subject() {
        let held = Some(held());
        let held = held.as_ref();
        let streamed = AfterAnswer::of(ended(JobState::Completed, 200, true));
        assert_eq!(streamed.steps(held), vec![Step::CheckContract]);
        let answered = AfterAnswer::of(ended(JobState::Completed, 200, false));
        assert_eq!(
            answered.steps(held),
            vec![Step::SubjectAnswered(self::held()), Step::PlanEffects, Step::RunEffects]
        );
        let dead = AfterAnswer::of(ended(JobState::Dead, 503, false));
        assert_eq!(dead.steps(held), vec![Step::ReleaseSubject(self::held())]);
        assert_eq!(AfterAnswer::of(ended(JobState::Failed, 503, false)).steps(held), vec![]);
        assert_eq!(AfterCheck::Effects.steps(held), answered.steps(held));
        let broken = AfterCheck::of("triage", Some("no label".into())).steps(held);
        assert_eq!(broken[0], Step::ReleaseSubject(self::held()), "the subject is freed first");
        assert!(matches!(&broken[1], Step::DeadLetter(detail) if detail.ends_with("no label")));
        assert_eq!(broken.len(), 2, "no effect follows a broken answer");
    }

    #[test]
    fn a_job_that_holds_no_subject_has_no_subject_step() {
        let answered = AfterAnswer::of(ended(JobState::Completed, 200, false));
        assert_eq!(answered.steps(None), vec![Step::PlanEffects, Step::RunEffects]);
        assert_eq!(AfterAnswer::of(ended(JobState::Dead, 503, false)).steps(None), vec![]);
        assert_eq!(AfterCheck::Effects.steps(None), answered.steps(None));
        let broken = AfterCheck::of("triage", Some("no label".into())).steps(None);
        assert!(matches!(&broken[..], [Step::DeadLetter(detail)] if detail.ends_with("no label")));
        // A streamed answer is checked whether or not its job holds a subject.
        assert_eq!(AfterAnswer::of(ended(JobState::Completed, 200, true)).steps(None), vec![Step::CheckContract]);
    }

    #[test]
    fn planned_effects_run_and_an_unfollowed_end_is_followed_once() {
        assert_eq!(FollowUp::of(true, true, None), FollowUp::RunEffects);
        assert_eq!(FollowUp::of(true, false, None), FollowUp::Nothing);
        assert_eq!(FollowUp::of(false, false, None), FollowUp::Nothing);
    }

    #[test]
    fn a_run_goes_on_while_it_acts_waits_for_soon_retries_and_stops_at_its_budget() {
        assert_eq!(AfterPass::of(true, None, 0, 1_000), AfterPass::Again);
        assert_eq!(AfterPass::of(false, Some(2_000), 0, 1_000), AfterPass::Sleep(1_000));
        assert_eq!(AfterPass::of(false, Some(1_000 + INLINE_WAIT_MS), 0, 1_000), AfterPass::Sleep(INLINE_WAIT_MS));
        assert_eq!(AfterPass::of(false, Some(1_001 + INLINE_WAIT_MS), 0, 1_000), AfterPass::Stop);
        assert_eq!(AfterPass::of(false, Some(500), 0, 1_000), AfterPass::Sleep(0), "overdue: at once");
        assert_eq!(AfterPass::of(false, None, 0, 1_000), AfterPass::Stop);
        assert_eq!(AfterPass::of(true, None, 0, INLINE_BUDGET_MS + 1), AfterPass::Stop);
    }

    #[test]
    fn no_effects_need_no_look() {
        assert_eq!(next_look_ms(&[], |_| true, true, 0), None);
    }
}
