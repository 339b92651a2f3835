//! What the Ledger's shell makes of the drive machine's output, decided
//! here so the shell only performs it: the caller's answer once the machine
//! finished ([`Caller::of`]) and the writes a hedge's loser still asks for
//! after that answer ([`late_writes`]), and a result's two writes taken
//! as one ([`take_response_with_job`]). (The log lines each write prints
//! are [`crate::telemetry::job_log`]'s.)

use std::collections::VecDeque;

use super::{Command, Ending};
use crate::job::{AttemptTicket, Job, JobState};
use crate::ledger::request::admission;
use crate::ledger::request::attempts::StoredResponse;
use crate::ledger::storage::{ResponsePlace, response_place};
use crate::wire::Problem;

/// A response the caller gets, with what its headers say of the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The response (an upstream's as kept, or a problem as problem+json).
    pub response: StoredResponse,
    /// The job's state.
    pub state: JobState,
    /// The attempt it is from, if any.
    pub attempt: Option<u32>,
    /// When to ask again.
    pub retry_after_ms: Option<u64>,
}

impl Answered {
    /// A problem of onejob's own (no upstream response), about a job in
    /// `state`: asked again when the problem says.
    pub fn problem(problem: &Problem, state: JobState) -> Self {
        Self {
            response: StoredResponse::problem(problem),
            state,
            attempt: None,
            retry_after_ms: problem.retry_after_ms,
        }
    }
}

/// What the caller of a drive gets, from the machine's [`Ending`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// This response.
    Answer(Answered),
    /// The job's stored result (it finished with another attempt's answer).
    Stored,
    /// The answer streams: the attempt holding `ticket` is the pump's.
    Stream {
        /// The streaming attempt.
        ticket: AttemptTicket,
    },
    /// A transition the job refused (a bug, or storage changed under it).
    Broken(String),
}

impl Caller {
    /// What the caller of the job under `key` gets for `ending`, the job in
    /// `state` as the drive left it: an answer or a problem as they are; a
    /// job someone else still works on is `409 request-in-progress` (asked
    /// again after the default wait).
    pub fn of(ending: Ending, key: &str, state: JobState) -> Self {
        match ending {
            Ending::Answer { response, state, attempt, retry_after_ms } => {
                Self::Answer(Answered { response, state, attempt, retry_after_ms })
            }
            Ending::Problem { problem, state } => Self::Answer(Answered::problem(&problem, state)),
            Ending::InProgress => {
                let problem = admission::in_progress(key, admission::DEFAULT_RETRY_AFTER_MS);
                Self::Answer(Answered::problem(&problem, state))
            }
            Ending::Stored => Self::Stored,
            Ending::Stream { ticket } => Self::Stream { ticket },
            Ending::Broken(error) => Self::Broken(error),
        }
    }
}

/// A write of the job a machine asks for after its caller's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LateWrite {
    /// The job as it is to be stored.
    pub job: Job,
    /// The version the write expects to replace.
    pub expected: u64,
}

/// What the shell performs of `commands` after the caller's answer: only a
/// hedge's loser's audit is written (a compare-and-swap: the job was
/// created before any call); nothing else is asked for once the job is won.
pub fn late_writes(commands: Vec<Command>) -> Vec<LateWrite> {
    commands
        .into_iter()
        .filter_map(|command| match command {
            Command::Persist { job, expected } => Some(LateWrite { job, expected }),
            _ => None,
        })
        .collect()
}

/// An attempt's response and the job write the machine asked for right
/// after it, written as one statement ([`take_response_with_job`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseWithJob {
    /// The attempt whose response it is.
    pub attempt: u32,
    /// The response, kept in the job's row.
    pub response: StoredResponse,
    /// The job as it is to be stored.
    pub job: Job,
    /// The version the write expects to replace.
    pub expected: u64,
}

/// Takes from the front of `queue` an attempt's first response that goes in
/// the job's row ([`Command::SaveResponse`], not a replacement) together
/// with the job write right after it ([`Command::Persist`]): a result's
/// transition is then one statement, not two. The shell writes the pair
/// only if the row's place is free and the job is still at `expected`;
/// otherwise it performs the two commands in order, so the pair means
/// exactly what they mean. Anything else stays in the queue.
pub fn take_response_with_job(queue: &mut VecDeque<Command>) -> Option<ResponseWithJob> {
    let in_row = matches!(
        queue.front(),
        Some(Command::SaveResponse { response, replace: false, .. })
            if response_place(response.body.len()) == ResponsePlace::JobRow
    );
    if !in_row || !matches!(queue.get(1), Some(Command::Persist { .. })) {
        return None;
    }
    match (queue.pop_front(), queue.pop_front()) {
        (Some(Command::SaveResponse { attempt, response, .. }), Some(Command::Persist { job, expected })) => {
            Some(ResponseWithJob { attempt, response, job, expected })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::identity::fingerprint::Fingerprint;
    use crate::job::{JobPolicy, UnknownPolicy};
    use crate::wire::{PROBLEM_CONTENT_TYPE, ProblemType};

    const T0: u64 = 1_700_000_000_000;
    const KEY: &str = "0123456789abcdef";

    fn job() -> Job {
        let policy = JobPolicy::new(3, 1_000, 5_000, 86_400_000, UnknownPolicy::RetryAfterLease).unwrap();
        Job::new(Fingerprint::of_bytes("POST", "/v1/chat/completions", b"{}"), T0, policy)
    }

    #[test]
    fn an_answer_is_the_callers_as_it_is() {
        let response = StoredResponse { status: 200, content_type: "application/json".into(), body: b"{}".to_vec() };
        let ending = Ending::Answer {
            response: response.clone(),
            state: JobState::Completed,
            attempt: Some(2),
            retry_after_ms: None,
        };
        let expected = Answered { response, state: JobState::Completed, attempt: Some(2), retry_after_ms: None };
        assert_eq!(Caller::of(ending, KEY, JobState::Completed), Caller::Answer(expected));
    }

    #[test]
    fn a_problem_is_answered_as_problem_json_with_its_retry() {
        let problem = Problem::new(ProblemType::NoHealthyProvider, "every breaker is open").with_retry_after_ms(5_000);
        let caller =
            Caller::of(Ending::Problem { problem: problem.clone(), state: JobState::Pending }, KEY, JobState::InFlight);
        let Caller::Answer(answered) = caller else { panic!("an answer") };
        assert_eq!(answered.response.status, problem.status());
        assert_eq!(answered.response.content_type, PROBLEM_CONTENT_TYPE);
        assert_eq!(answered.response.body, problem.to_json().into_bytes());
        assert_eq!((answered.state, answered.attempt, answered.retry_after_ms), (JobState::Pending, None, Some(5_000)));
    }

    #[test]
    fn a_job_someone_else_works_on_is_in_progress_about_the_key() {
        let Caller::Answer(answered) = Caller::of(Ending::InProgress, KEY, JobState::Unknown) else {
            panic!("an answer")
        };
        let problem = admission::in_progress(KEY, admission::DEFAULT_RETRY_AFTER_MS);
        assert_eq!(answered, Answered::problem(&problem, JobState::Unknown));
        assert_eq!(answered.response.status, 409);
        assert_eq!(answered.retry_after_ms, Some(admission::DEFAULT_RETRY_AFTER_MS));
    }

    #[test]
    fn stored_streamed_and_broken_endings_are_the_shells_to_perform() {
        assert_eq!(Caller::of(Ending::Stored, KEY, JobState::Completed), Caller::Stored);
        assert_eq!(Caller::of(Ending::Broken("no".into()), KEY, JobState::InFlight), Caller::Broken("no".into()));
        let mut job = job();
        let ticket = job.claim(0, T0, "p", None).unwrap();
        assert_eq!(Caller::of(Ending::Stream { ticket }, KEY, JobState::InFlight), Caller::Stream { ticket });
    }

    #[test]
    fn after_the_answer_only_the_losers_audit_is_written() {
        let job = job();
        let commands = vec![
            Command::Sleep { ms: 5 },
            Command::Persist { job: job.clone(), expected: 3 },
            Command::Create { job: job.clone() },
            Command::Persist { job: job.clone(), expected: 4 },
        ];
        let writes = late_writes(commands);
        assert_eq!(writes, vec![LateWrite { job: job.clone(), expected: 3 }, LateWrite { job, expected: 4 }]);
        assert!(late_writes(Vec::new()).is_empty());
    }

    fn save(attempt: u32, bytes: usize, replace: bool) -> Command {
        let response = StoredResponse { status: 200, content_type: "application/json".into(), body: vec![b'x'; bytes] };
        Command::SaveResponse { attempt, response, replace }
    }

    #[test]
    fn a_small_response_and_the_job_write_after_it_are_one_write() {
        let job = job();
        let persist = Command::Persist { job: job.clone(), expected: 3 };
        let mut queue = VecDeque::from(vec![save(2, 10, false), persist, Command::Sleep { ms: 5 }]);
        let pair = take_response_with_job(&mut queue).expect("paired");
        assert_eq!((pair.attempt, pair.response.body.len(), pair.job, pair.expected), (2, 10, job, 3));
        assert_eq!(queue, VecDeque::from(vec![Command::Sleep { ms: 5 }]), "the rest stays, in order");
    }

    #[test]
    fn a_response_in_chunks_a_replacement_or_one_alone_is_not_paired() {
        let persist = || Command::Persist { job: job(), expected: 3 };
        let chunked = crate::ledger::storage::CHUNK_BYTES + 1;
        for commands in [
            vec![save(1, chunked, false), persist()],
            vec![save(1, 10, true), persist()],
            vec![save(1, 10, false)],
            vec![save(1, 10, false), Command::Sleep { ms: 1 }, persist()],
            vec![persist(), save(1, 10, false)],
            vec![Command::Create { job: job() }],
        ] {
            let mut queue = VecDeque::from(commands.clone());
            assert_eq!(take_response_with_job(&mut queue), None, "{commands:?}");
            assert_eq!(queue, VecDeque::from(commands), "nothing taken");
        }
    }

    #[test]
    fn a_response_the_size_of_a_chunk_still_goes_in_the_row() {
        let mut queue = VecDeque::from(vec![
            save(1, crate::ledger::storage::CHUNK_BYTES, false),
            Command::Persist { job: job(), expected: 1 },
        ]);
        assert!(take_response_with_job(&mut queue).is_some());
        assert!(queue.is_empty());
    }
}
