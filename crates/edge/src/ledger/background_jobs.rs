//! Background jobs: `Prefer: respond-async` submissions, queue deliveries
//! (judged by the core), the outbox that sends each job's message until a
//! delivery takes it, and dead letters.

use onejob_core::admission::Admission;
use onejob_core::background::{self, Outbox};
use onejob_core::fingerprint::Fingerprint;
use onejob_core::job::{Job, JobState};
use onejob_core::ledger::delivery::{self, Verdict};
use onejob_core::protocol::{JobView, ProblemType};
use worker::{Response, Result};

use crate::api::handoff::{self, JobMeta, Submission};
use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::env::random::MathRandom;
use crate::error::EdgeError;
use crate::http;
use crate::ledger::store::Store;
use crate::queue;

use super::{Ledger, alarms, pump, stored};

impl Ledger {
    /// A background submission: `202` with the job, its message sent once
    /// (by the request that creates the job); a finished job is replayed.
    pub(super) async fn submit_background(
        &self,
        config: &Config,
        submission: &Submission,
        body: &[u8],
        job: Option<Job>,
        admitted: Admission,
        fingerprint: Fingerprint,
    ) -> Result<Response> {
        let store = self.store();
        let key = submission.key.as_str();
        let now = now_ms();
        match admitted {
            Admission::Replay => match job.as_ref() {
                Some(job) => {
                    let answer = self.run_answer(config, submission, stored::finished_result(&store, job)?, true);
                    self.count_saved(submission, false);
                    answer
                }
                None => Err(EdgeError::broken("replay without a job").into()),
            },
            Admission::Refuse(problem) if problem.kind == ProblemType::KeyReused => {
                http::problem_about(&problem, key, job.as_ref().map_or(JobState::Pending, Job::state))
            }
            // Being run right now (or created a moment ago by a request
            // still writing it): the running attempt finishes it, and nothing
            // may write the job under it. If that run does not finish it,
            // the job becomes a background job afterwards (see `drive`).
            _ if self.memory.borrow().is_driving() => {
                let job = job.unwrap_or_else(|| Job::new(fingerprint, now, config.settings.policy));
                if !job.is_background() {
                    self.memory.borrow_mut().adopt_later((submission.clone(), body.to_vec()));
                }
                self.accepted(&store, key, &job)
            }
            _ => {
                // A new job of a type run once per subject: the subject first.
                if job.is_none()
                    && let Some(problem) = self.subject_taken(config, submission).await
                {
                    return http::problem_about(&problem, key, JobState::Pending);
                }
                let job = self.adopt(config, submission, body, fingerprint).await?;
                self.accepted(&store, key, &job)
            }
        }
    }

    /// Makes the job (created if there is none) a background job and sends
    /// its message, unless it already is one (queued or running: never a
    /// second message) or is finished. Returns the job as it stands.
    pub(super) async fn adopt(
        &self,
        config: &Config,
        submission: &Submission,
        body: &[u8],
        fingerprint: Fingerprint,
    ) -> Result<Job> {
        let store = self.store();
        let now = now_ms();
        let mut job = match store.load_job()? {
            Some(job) => job,
            None => {
                let job = Job::new(fingerprint, now, config.settings.policy);
                store.insert_job(&job)?;
                let model = handoff::model_of(body);
                store.save_meta(&JobMeta {
                    tenant: submission.tenant.clone(),
                    user: submission.user.clone(),
                    key: submission.key.to_string(),
                    model,
                    metered: 0,
                })?;
                job
            }
        };
        if !job.is_background() && !job.state().is_terminal() {
            let read = job.version();
            job.run_in_background(now);
            let mut background = submission.clone();
            background.background = true;
            store.save_request(&serde_json::to_string(&background)?, body)?;
            store.update_job(read, &job)?;
            self.enqueue(config, &job, false).await?;
        }
        self.arm(config, &job);
        Ok(job)
    }

    /// `202` with the job's view and its messages sent so far.
    pub(super) fn accepted(&self, store: &Store, key: &str, job: &Job) -> Result<Response> {
        let mut view = JobView::new(self.parse_key(key)?, job);
        view.enqueued = store.load_outbox()?.sends();
        self.with_effects(&mut view)?;
        http::accepted(&view)
    }

    /// The view's messages sent so far; a job the outbox gave up on waits
    /// for an operator.
    pub(super) fn with_outbox(&self, view: &mut JobView, job: &Job) -> Result<()> {
        let outbox = self.store().load_outbox()?;
        view.enqueued = outbox.sends();
        view.waiting_for_operator |= background::undelivered(job, &outbox);
        Ok(())
    }

    /// Sends the job's message and records it: noted before the send (with
    /// the alarm for its resend set), confirmed once the queue accepted it.
    /// A failed send, or one a crash cut short, stays unconfirmed and is
    /// left to the outbox (the alarm sends it again). `by_operator`: an
    /// operator's kick, replay or resolve (a fresh run of sends).
    pub(super) async fn enqueue(&self, config: &Config, job: &Job, by_operator: bool) -> Result<()> {
        let store = self.store();
        let Some((submission, _)) = store.load_request()? else {
            worker::console_warn!("ledger: a background job without its request cannot be queued");
            return Ok(());
        };
        let Ok(submission) = serde_json::from_str::<Submission>(&submission) else {
            return Err(EdgeError::Unreadable("request".into()).into());
        };
        let message = submission.message();
        // Noted before the send, beside the job, never in it: a send must
        // not change the version an attempt in flight holds. The alarm for
        // its resend is set before the send is made, so a runtime killed in
        // between still sends it again.
        let send = store
            .change_outbox(&mut |outbox| {
                outbox.note_send(now_ms(), by_operator, &mut MathRandom);
            })?
            .sends();
        alarms::set(&self.state, self.next_alarm(config, job)).await?;
        match queue::send_job(&self.env, config, &message).await {
            Ok(()) => {
                store.change_outbox(&mut |outbox| {
                    outbox.confirm(send, now_ms());
                })?;
            }
            Err(error) => {
                worker::console_warn!("ledger: queueing a background job failed (the outbox will retry): {error}")
            }
        }
        self.arm(config, job);
        Ok(())
    }

    /// Sets the alarm for the job's next due time (outbox or retention).
    pub(super) fn arm(&self, config: &Config, job: &Job) {
        alarms::set_in_background(&self.state, self.next_alarm(config, job));
    }

    /// The job's next due time: its outbox, its effects, or its retention.
    pub(super) fn next_alarm(&self, config: &Config, job: &Job) -> worker::ScheduledTime {
        let outbox = self.store().load_outbox().unwrap_or_else(|error| {
            worker::console_error!("ledger: reading the outbox failed: {error}");
            Outbox::default()
        });
        alarms::next(job, &outbox, config.settings.outbox_delay_ms, self.effects_due(config))
    }

    /// A queue delivery: the core judges it; at most one attempt runs.
    pub(super) async fn deliver(&self, config: &Config) -> Result<Response> {
        let store = self.store();
        let now = now_ms();
        let mut job = store.load_job()?;
        if let Some(job) = job.as_mut() {
            pump::settle_by_time(&store, job, now, self.memory.borrow().is_driving())?;
        }
        let judged = background::on_delivery(job.as_ref(), now, self.memory.borrow().is_driving());
        let verdict = match delivery::without_run(judged, job.as_ref(), now) {
            Some(verdict) => {
                // A job that needs an operator is dead-lettered now, once: its
                // runtime may have died before the dead letter went out, and
                // after its lease nothing else looks again before retention
                // (found by the simulation: SIM_EDGE_AS_IS=1, seed 232426).
                if let Some(job) = job.as_ref() {
                    self.dead_letter_once(job).await?;
                }
                // A redelivery of a finished job type's job: what follows its
                // answer, and effects due or claimed by a runtime that is
                // gone, are settled now.
                if delivery::follows_up(judged, job.as_ref(), self.memory.borrow().is_driving()) {
                    self.follow_up(config).await?;
                }
                verdict
            }
            None => match (job, store.load_request()?) {
                (Some(mut job), Some((submission, body))) => {
                    let submission: Submission = serde_json::from_str(&submission)?;
                    // This delivery runs the job from here: a duplicate that
                    // arrives while the quota is asked must find it taken.
                    let Some(lock) = self.coordination().lock(None) else {
                        return Err(EdgeError::broken("a delivery judged to run a job another drive holds").into());
                    };
                    // It took the message: from here the attempt's lease
                    // covers the job, not the outbox. The alarm is set for
                    // soon: if it finds the job being run, it looks again
                    // when the lease ends (a crash mid-call is sent again then).
                    store.change_outbox(&mut |outbox| outbox.taken(now))?;
                    self.arm(config, &job);
                    if let Some(problem) = self.over_quota(config, &submission).await {
                        drop(lock);
                        // Over budget: the job waits for the next day (the
                        // alarm sends it again then).
                        self.defer(config, &mut job, problem.retry_after_ms.unwrap_or(0))?;
                        Verdict::Ack
                    } else {
                        // The caller is the queue: its response is not what matters, the job is.
                        let asked_ms =
                            self.drive(config, lock, &store, job, true, &submission, &body).await?.retry_after_ms;
                        let mut job = store.load_job()?;
                        // No attempt could be made (no route, every provider's
                        // breaker open): the job waits for the next probe.
                        if let Some(waiting) = job.as_mut()
                            && let Some(wait_ms) = delivery::no_attempt_wait_ms(waiting, asked_ms)
                        {
                            self.defer(config, waiting, wait_ms)?;
                        }
                        if let Some(job) = job.as_ref() {
                            self.dead_letter_once(job).await?;
                        }
                        delivery::after_run(job.as_ref(), now_ms())
                    }
                }
                _ => Verdict::Ack,
            },
        };
        self.delivered(config, &verdict)?;
        Response::from_json(&verdict)
    }

    /// What the queue does with a delivered message is what the outbox
    /// knows of it: acknowledged (taken), or handed back to be delivered
    /// again after a delay. A fresh object is left as it is (no tables).
    pub(super) fn delivered(&self, config: &Config, verdict: &Verdict) -> Result<()> {
        let store = self.store();
        let Some(job) = store.load_job()? else { return Ok(()) };
        store.change_outbox(&mut |outbox| match *verdict {
            Verdict::Retry { delay_ms } => outbox.requeued(now_ms(), delay_ms),
            Verdict::Ack | Verdict::Dead => outbox.taken(now_ms()),
        })?;
        // A driver here arms the alarm when it is done (a stream's watchdog
        // must not be replaced meanwhile).
        if !self.memory.borrow().is_driving() {
            self.arm(config, &job);
        }
        Ok(())
    }

    /// A background job's next attempt waits `wait_ms` (a CAS write; the
    /// alarm sends it again then).
    pub(super) fn defer(&self, config: &Config, job: &mut Job, wait_ms: u64) -> Result<()> {
        let read = job.version();
        job.defer_until(now_ms() + wait_ms, now_ms());
        self.store().update_job(read, job)?;
        self.arm(config, job);
        Ok(())
    }

    /// No delivery took any of the job's messages: it is left to operators
    /// (a dead letter of class [`background::UNDELIVERED`]).
    pub(super) fn give_up_sending(&self) -> Result<()> {
        let outbox = self.store().change_outbox(&mut Outbox::give_up)?;
        worker::console_error!(
            "ledger: no delivery took any of a background job's {} queue messages: it is left to operators (a dead letter of class {})",
            outbox.sends(),
            background::UNDELIVERED
        );
        Ok(())
    }

    /// A background job that needs an operator (dead, or unknown under
    /// `UNKNOWN_POLICY=block` once its lease is over) goes to the dead-letter
    /// queue, once: whatever made it so (a delivery, a lease that ran out
    /// with the runtime gone, the alarm).
    pub(super) async fn dead_letter_once(&self, job: &Job) -> Result<()> {
        let store = self.store();
        if !background::needs_operator(job, &store.load_outbox()?, now_ms()) || store.dead_lettered()? {
            return Ok(());
        }
        let Some((submission, _)) = store.load_request()? else { return Ok(()) };
        let submission: Submission = serde_json::from_str(&submission)?;
        let message = submission.message();
        match queue::send_dead_letter(&self.env, &message).await {
            Ok(()) => store.note_dead_lettered(now_ms())?,
            // The next alarm or delivery tries again.
            Err(error) => worker::console_warn!("ledger: sending a dead letter failed: {error}"),
        }
        Ok(())
    }
}
