//! A keyed request to the Ledger: the core admits it (run, replay, wait,
//! refuse) and the drive runs it under the drive lock, fanning its one
//! result out to every duplicate that waited; the job's view, a cancel and
//! a stream's resumption.

use std::rc::Rc;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{Either, select};
use onejob_core::identity::key::IdempotencyKey;
use onejob_core::job::AttemptTicket;
use onejob_core::job::Job;
use onejob_core::job::view::JobView;
use onejob_core::ledger::operator::settle;
use onejob_core::ledger::request::admission::Arrival;
use onejob_core::ledger::request::run_machine::{self, Input, Op, RunMachine};
use onejob_core::ledger::request::submit::{self, Check, Read, Request, Run};
use onejob_core::ledger::request::submit_machine::{self, Context, Op as SubmitOp, SubmitMachine};
use onejob_core::upstream::providers::{Api, NoRoute};
use onejob_core::upstream::sse::Dialect;
use onejob_core::wire::{Problem, ProblemType};
use worker::{Delay, Response, Result};

use crate::answer::Streaming;
use crate::api::handoff::{self, Submission};
use crate::api::meter;
use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::error::EdgeError;
use crate::http::{self, JobResult};
use crate::ledger::drive::{Driven, Driver};
use crate::ledger::store::Store;
use crate::ledger::stream::Pump;

use super::index::index_now;
use super::lock::{DriveLock, Handed};
use super::{Ledger, alarms, drive, effects, stored, stream};

/// What a drive answers: the response, and when its caller may ask again
/// (what its `retry-after-ms` says; a queue delivery defers the job by it).
pub(super) struct DriveAnswer {
    pub response: Response,
    pub retry_after_ms: Option<u64>,
}

impl Ledger {
    /// `GET /onejob/v1/jobs/{key}`: reads only; a fresh object stays empty.
    pub(super) fn view(&self, key: &str) -> Result<Response> {
        let (Ok(key), Some(mut job)) = (IdempotencyKey::parse(key), self.store().load_job()?) else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        job.expire(now_ms()); // as of now, in memory only
        let mut view = JobView::new(key, &job);
        self.with_outbox(&mut view, &job)?;
        self.with_effects(&mut view)?;
        let mut response = Response::from_json(&view)?;
        if let Some(wait_ms) = settle::poll_after_ms(&job, now_ms()) {
            http::set_retry_after(response.headers_mut(), wait_ms)?;
        }
        http::with_cors(response)
    }

    /// A keyed request, performed in the order the core's [`SubmitMachine`]
    /// gives (the simulation performs the same machine): read, decide, then
    /// what the decision says. From reading the job to the claim nothing
    /// awaits but a background job's subject.
    pub(super) async fn submit(
        &self,
        config: &Config,
        mut submission: Submission,
        mut body: Vec<u8>,
    ) -> Result<Response> {
        let store = self.store();
        let now = now_ms();
        let mut machine = SubmitMachine::new();
        let mut input = submit_machine::Input::Start;
        loop {
            let arrival = Arrival {
                key: submission.key.as_str(),
                fingerprint: &submission.fingerprint,
                wait_ms: submission.wait_ms,
            };
            let request = Request { arrival, keyless: submission.keyless, background: submission.background };
            let op = machine.on(input, Context { request, now_ms: now, policy: config.settings.policy });
            input = match op {
                SubmitOp::Read => {
                    let driving = self.memory.borrow().is_driving();
                    let stored = self.read_settled(&store, now, driving)?;
                    let creating = self.memory.borrow().creating().cloned();
                    submit_machine::Input::Read(Read {
                        stored,
                        creating,
                        driving,
                        streaming: self.live.borrow().is_some(),
                    })
                }
                SubmitOp::AskRoute => {
                    let model = handoff::model_of(&body);
                    let no_route = drive::route_of(config, &submission.target, model.as_deref()).err();
                    submit_machine::Input::Route(no_route.map(NoRoute::problem))
                }
                SubmitOp::ReplaceEnded(renewed) => {
                    self.replace_ended(&store, &renewed)?;
                    submit_machine::Input::Done
                }
                SubmitOp::KeepForAdoption => {
                    self.memory.borrow_mut().adopt_later((submission.clone(), std::mem::take(&mut body)));
                    submit_machine::Input::Done
                }
                SubmitOp::ClaimSubject => submit_machine::Input::Checked(self.subject_taken(config, &submission).await),
                SubmitOp::Adopt { renewed } => {
                    submit_machine::Input::Adopted(self.adopt(config, &submission, &body, renewed).await?)
                }
                SubmitOp::Refuse { problem, state } => {
                    return http::problem_about(&problem, submission.key.as_str(), state);
                }
                SubmitOp::Replay { job, cache } => {
                    let result = stored::finished_result(&store, &job)?;
                    self.after_replay(config, &submission, &job, &result, cache);
                    return self.run_answer(config, &submission, result, true);
                }
                // A duplicate of a streaming job follows the stream from its first event.
                SubmitOp::FollowStream => {
                    let subscription = stream::subscribe(&self.live, &store, 0)?
                        .ok_or_else(|| EdgeError::broken("a stream to follow that is not open"))?;
                    self.count_saved(&submission, true);
                    return subscription.into_response(submission.key.as_str(), true, false);
                }
                SubmitOp::Wait => return self.wait_for_driver(config, &submission).await,
                SubmitOp::Accepted(job) => return self.accepted(&store, submission.key.as_str(), &job),
                SubmitOp::Run(run) => {
                    let creating = run.creating();
                    let Run { job, stored, created } = run;
                    let machine = RunMachine::for_caller(stored, created, submission.run.is_some());
                    // A renewed keyless job calls its provider under its own key.
                    submission.generation = job.generation();
                    let answer =
                        self.run(config, machine, Locked::Later(creating), &store, job, stored, &submission, &body);
                    return Ok(answer.await?.response);
                }
            };
        }
    }

    /// The stored job as of `now`, what time settled in it written first
    /// (`driving`: a drive, or a stream's pump, runs here).
    pub(super) fn read_settled(&self, store: &Store, now: u64, driving: bool) -> Result<Option<Job>> {
        let mut stored = store.load_job()?;
        if let Some(job) = stored.as_mut() {
            stream::settle_by_time(store, job, now, driving)?;
        }
        Ok(stored)
    }

    /// A run of the job under its drive lock, performed in the order the
    /// core's [`RunMachine`] gives (the simulation performs the same
    /// machine): this loop only performs each op and says what it found.
    /// Every way out hands the result to the waiters (`finish`), hands the
    /// lock and the stream to a stream's pump (the waiters follow it), or
    /// drops the lock, which releases it and fails the waiters (see
    /// [`super::lock`]). A caller's answer is kept whatever tending it after fails.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run(
        &self,
        config: &Config,
        mut machine: RunMachine,
        locked: Locked<'_>,
        store: &Store,
        mut job: Job,
        stored: bool,
        submission: &Submission,
        body: &[u8],
    ) -> Result<DriveAnswer> {
        let key = submission.key.as_str();
        let (mut lock, creating) = match locked {
            Locked::Held(lock) => (Some(lock), None),
            Locked::Later(creating) => (None, creating),
        };
        let (mut answer, mut result, mut stream, mut later) = (None, None, None, None);
        let mut input = Input::Start;
        loop {
            input = match machine.on(input) {
                Op::ArmRetention => {
                    alarms::set_in_background(&self.state, alarms::retention(&job));
                    Input::Done
                }
                // Admitted to run: nobody drives the job (no await since the decision).
                Op::Lock => {
                    let taken = self.coordination().lock(creating.clone());
                    lock = Some(taken.ok_or_else(|| EdgeError::broken("admitted to run a job another drive holds"))?);
                    Input::Done
                }
                Op::Check(check) => Input::Checked(match check {
                    Check::Quota => self.over_quota(config, submission).await,
                    Check::Subject => self.subject_taken(config, submission).await,
                    Check::SaveRequest => {
                        store.save_request(&serde_json::to_string(submission)?, body)?;
                        None
                    }
                }),
                Op::Refuse(refused) => {
                    let mut handed = JobResult::problem(&refused.problem, job.state(), None);
                    handed.retry_after_ms = refused.waiters_retry_after_ms;
                    later = held(lock.take())?.finish(&handed);
                    let response = http::problem_about(&refused.problem, key, job.state())?;
                    answer = Some(DriveAnswer { response, retry_after_ms: refused.problem.retry_after_ms });
                    Input::Finished { kept_later: later.is_some() }
                }
                Op::Drive => {
                    let driver = Driver::new(config, &self.env, store, submission, body);
                    let driven = driver.run(&mut job, stored).await;
                    held(lock.as_ref())?.created();
                    if let Some(late) = driver.take_late() {
                        // A hedge's loser is still out: audit what it cost when it answers.
                        let (env, store, metering) = (self.env.clone(), self.store(), Rc::clone(&self.metering));
                        self.state.wait_until(drive::audit_late(env, store, metering, late));
                    }
                    Input::Driven(match driven? {
                        Driven::Result(driven) => {
                            let (state, retry_after_ms) = (driven.state, driven.retry_after_ms);
                            result = Some(driven);
                            run_machine::Driven::Result { state, retry_after_ms }
                        }
                        Driven::Stream { ticket, streaming } => {
                            stream = Some((ticket, streaming));
                            run_machine::Driven::Stream
                        }
                    })
                }
                Op::HandToPump => {
                    let (ticket, streaming) = stream.take().ok_or_else(|| EdgeError::broken("no stream to hand on"))?;
                    let response = self.hand_to_pump(held(lock.take())?, &job, ticket, streaming, submission)?;
                    answer = Some(DriveAnswer { response, retry_after_ms: None });
                    Input::Done
                }
                Op::RunEffects => {
                    let ended = effects::ended_of(held(result.as_ref())?);
                    self.after_answer(config, submission, ended).await;
                    Input::Done
                }
                Op::Finish => {
                    later = held(lock.take())?.finish(held(result.as_ref())?);
                    Input::Finished { kept_later: later.is_some() }
                }
                // A background submission came in meanwhile and the job is
                // not finished: the queue takes it from here.
                Op::Adopt => {
                    let (later, later_body) = held(later.take())?;
                    self.adopt(config, &later, &later_body, None).await?;
                    Input::Done
                }
                Op::Answer { retry_after_ms } => {
                    let response = self.run_answer(config, submission, held(result.take())?, false)?;
                    answer = Some(DriveAnswer { response, retry_after_ms });
                    Input::Done
                }
                // The caller has its answer: a failure from here is logged, not answered.
                Op::LoadJob => Input::Job(store.load_job().unwrap_or_else(|error| {
                    worker::console_error!("ledger: reading the job after a caller's drive failed: {error}");
                    None
                })),
                Op::DeadLetter(job) => {
                    if let Err(error) = self.dead_letter_once(&job).await {
                        worker::console_error!("ledger: a dead letter after a caller's drive failed: {error}");
                    }
                    Input::Done
                }
                Op::Arm(job) => {
                    self.arm(config, &job);
                    Input::Done
                }
                Op::Over => return answer.ok_or_else(|| EdgeError::broken("a run over without an answer").into()),
            };
        }
    }

    /// The answer streams: a pump owns the stream and the lock from here and
    /// ends the drive at the stream's end. The stream is followed before the
    /// pump starts, so no event is missed.
    fn hand_to_pump(
        &self,
        lock: DriveLock<'_>,
        job: &Job,
        ticket: AttemptTicket,
        streaming: Streaming,
        submission: &Submission,
    ) -> Result<Response> {
        let own = lock.hand_to_pump(ticket.attempt, &streaming.content_type);
        let (live, store, memory, cancel) =
            (Rc::clone(&self.live), self.store(), Rc::clone(&self.memory), Rc::clone(&self.cancel));
        let pump = Pump::new(live, store, memory, cancel, job.clone(), ticket, streaming)
            .speaking(Dialect::from(Api::of_path(&submission.target)));
        let (env, store, metering) = (self.env.clone(), self.store(), Rc::clone(&self.metering));
        let job_type_job = submission.run.is_some().then(|| submission.clone());
        self.state.wait_until(async move {
            pump.run().await;
            // The stream's end is the job's last change: index it.
            index_now(&env, &store, &metering).await;
            // A job type's effects wait for the whole answer: the
            // Ledger is asked to run them now (its alarm would, later).
            if let Some(submission) = job_type_job {
                effects::effects_after_stream(&env, &submission).await;
            }
        });
        alarms::set_in_background(&self.state, alarms::watchdog());
        own.into_response(submission.key.as_str(), false, false)
    }

    pub(super) async fn wait_for_driver(&self, config: &Config, submission: &Submission) -> Result<Response> {
        let key = submission.key.as_str();
        let (sender, receiver) = oneshot::channel();
        self.waiters.borrow_mut().push(sender);
        let wait = Delay::from(Duration::from_millis(submission.wait_ms));
        // The wait ran out, or the driver failed without a result.
        let Either::Left((Ok(handed), _)) = select(receiver, wait).await else {
            let (problem, state) = submit::wait_over(key);
            return http::problem_about(&problem, key, state);
        };
        match handed {
            // Replayed: only a finished job's stored result is a replay.
            Handed::Result(result) => {
                let replayed = submit::handed_is_replay(result.state);
                if replayed {
                    self.count_saved(submission, true);
                }
                self.run_answer(config, submission, result, replayed)
            }
            Handed::Stream(subscription) => {
                self.count_saved(submission, true);
                subscription.into_response(key, true, false)
            }
        }
    }

    /// `POST /onejob/v1/jobs/{key}/cancel`: stops a streaming answer (the
    /// upstream call is aborted, what arrived is kept). Idempotent: a
    /// finished job is left as it is. Answers with the job as it stands
    /// (`202` while the cancel is under way).
    pub(super) fn cancel(&self, key: &str) -> Result<Response> {
        let store = self.store();
        let (Ok(parsed), Some(job)) = (IdempotencyKey::parse(key), store.load_job()?) else {
            return http::problem_of(ProblemType::JobNotFound, "this tenant has no job with that key");
        };
        let streaming_here = self.live.borrow().is_some();
        let cancel = match settle::cancel(&job, streaming_here) {
            Ok(cancel) => cancel,
            Err(refused) => return http::problem_about(&refused.problem(), key, job.state()),
        };
        self.cancel.set(cancel.stops);
        http::with_cors(Response::from_json(&JobView::new(parsed, &job))?.with_status(cancel.status))
    }

    /// `GET /onejob/v1/jobs/{key}/stream?from=N`: the events after the first
    /// `N`, live while the job streams, from storage once it has finished.
    pub(super) fn resume_stream(&self, key: &str, from: u64, ids: bool) -> Result<Response> {
        let store = self.store();
        if let Some(subscription) = stream::subscribe(&self.live, &store, from)? {
            return subscription.into_response(key, true, ids);
        }
        let job = store.load_job()?;
        match settle::resume(job.as_ref(), |job| stored::stream_after(&store, job, from, ids))? {
            Ok(result) => result.into_response(key, true),
            Err(refused) => http::problem(&refused.problem()),
        }
    }

    /// The refusal of a new attempt whose tenant's or user's token budget
    /// for today is spent (quotas fail open: a meter that cannot be reached
    /// does not stop the job).
    pub(super) async fn over_quota(&self, config: &Config, submission: &Submission) -> Option<Problem> {
        let limits = config.settings_quota_limits(&submission.tenant);
        if !submit::asks_meter(limits) {
            return None;
        }
        let allowed = meter::allows(&self.env, &submission.tenant, submission.user.as_deref(), limits).await;
        submit::over_quota(allowed.ok(), submission.key.as_str(), now_ms())
    }
}

/// The drive lock a run starts with: held already (a delivery's), or taken
/// by the run ([`Op::Lock`]) for the job, if new, being created.
pub(super) enum Locked<'a> {
    Held(DriveLock<'a>),
    Later(Option<Job>),
}

/// What an op needs from an earlier one: its absence is the machine's or
/// this loop's bug, an error rather than a panic.
fn held<T>(value: Option<T>) -> Result<T> {
    value.ok_or_else(|| EdgeError::broken("a run's op without what an earlier op gave").into())
}
