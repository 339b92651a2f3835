//! Background jobs: `Prefer: respond-async` submissions, queue deliveries
//! (judged by the core), the outbox that sends each job's message until a
//! delivery takes it, and dead letters.

use onejob_core::job::Job;
use onejob_core::job::view::JobView;
use onejob_core::ledger::background::delivery;
use onejob_core::ledger::background::delivery_machine::{DeliveryMachine, Input, Op};
use onejob_core::ledger::background::outbox::{self, Outbox};
use onejob_core::ledger::background::tending::{self, Deferral, Step};
use onejob_core::ledger::request::run_machine::RunMachine;
use onejob_core::ledger::request::submit::{self, AdoptStep, Adoption};
use worker::{Response, Result};

use crate::api::handoff::{self, JobMessage, JobMeta, Submission};
use crate::env::clock::now_ms;
use crate::env::config::Config;
use crate::env::random::MathRandom;
use crate::error::EdgeError;
use crate::http;
use crate::ledger::store::Store;
use crate::queue;

use super::memory::Memory;
use super::submit::Locked;
use super::{Ledger, alarms, stored};

impl Ledger {
    /// Makes the job a background job as the core's [`submit::adopt`] says
    /// (created if there is none, one message) and arms the alarm for it.
    /// Returns the job as it stands.
    /// `renewed`: the keyless job a background submission renewed (created in place of a new one).
    pub(super) async fn adopt(
        &self,
        config: &Config,
        submission: &Submission,
        body: &[u8],
        renewed: Option<Job>,
    ) -> Result<Job> {
        let store = self.store();
        let (stored, policy) = (store.load_job()?, config.settings.policy);
        let Adoption { job, steps } = submit::adopt(stored, renewed, &submission.fingerprint, now_ms(), policy);
        for step in steps {
            match step {
                AdoptStep::Insert(new) => store.insert_job(&new, None)?,
                AdoptStep::SaveMeta => store.save_meta(&JobMeta {
                    tenant: submission.tenant.clone(),
                    user: submission.user.clone(),
                    key: submission.key.to_string(),
                    model: handoff::model_of(body),
                    metered: 0,
                })?,
                AdoptStep::SaveRequest { generation } => {
                    let background = Submission { background: true, generation, ..submission.clone() };
                    store.save_request(&serde_json::to_string(&background)?, body)?;
                }
                AdoptStep::Update { read } => store.update_job(read, &job)?,
                AdoptStep::Enqueue => self.enqueue(config, &job, false).await?,
                AdoptStep::DeadLetter => self.dead_letter_once(&job).await?,
            }
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
        view.waiting_for_operator |= outbox::undelivered(job, &outbox);
        Ok(())
    }

    /// Sends the job's message and records it: noted before the send (with
    /// the alarm for its resend set), confirmed once the queue accepted it.
    /// A failed send, or one a crash cut short, stays unconfirmed and is
    /// left to the outbox (the alarm sends it again). `by_operator`: an
    /// operator's kick, replay or resolve (a fresh run of sends).
    pub(super) async fn enqueue(&self, config: &Config, job: &Job, by_operator: bool) -> Result<()> {
        let store = self.store();
        let Some((submission, _)) = stored::kept_request(&store)? else {
            worker::console_warn!("ledger: a background job without its request cannot be queued");
            return Ok(());
        };
        // The message says when it was sent: the queue's cursor learns from
        // it how far the consumer has got.
        let now = now_ms();
        let message = JobMessage { sent_ms: now, ..submission.message() };
        // Noted before the send, beside the job, never in it: a send must
        // not change the version an attempt in flight holds. The alarm for
        // its resend is set before the send is made, so a runtime killed in
        // between still sends it again.
        let send = store
            .change_outbox(&mut |outbox| {
                outbox.note_send(now, by_operator, &mut MathRandom);
            })?
            .sends();
        alarms::set(&self.state, self.next_alarm(config, job)).await?;
        // While the queue has not answered, the alarm does not send again
        // (a crash ends the wait and this memory with it).
        let _pending = SendPending::begin(&self.memory);
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

    /// A queue delivery, performed in the order the core's
    /// [`DeliveryMachine`] gives (the simulation runs the same machine):
    /// this loop only performs each op and says what it found.
    pub(super) async fn deliver(&self, config: &Config) -> Result<Response> {
        let store = self.store();
        let mut machine = DeliveryMachine::new();
        let mut input = Input::Start;
        let mut lock = None;
        let mut request = None;
        loop {
            input = match machine.on(input, now_ms()) {
                Op::ReadSettled => {
                    let driving = self.memory.borrow().is_driving();
                    Input::Read { job: self.read_settled(&store, now_ms(), driving)?, driving }
                }
                Op::LoadRequest => {
                    request = stored::kept_request(&store)?;
                    Input::Request { kept: request.is_some() }
                }
                Op::Lock => {
                    let taken = self.coordination().lock(None);
                    lock = Some(
                        taken.ok_or_else(|| EdgeError::broken("a delivery judged to run a job another drive holds"))?,
                    );
                    Input::Done
                }
                Op::TakeMessage => {
                    store.change_outbox(&mut |outbox| outbox.taken(now_ms()))?;
                    Input::Done
                }
                Op::Arm(job) => {
                    self.arm(config, &job);
                    Input::Done
                }
                Op::AskQuota => Input::Quota(self.over_quota(config, kept(&request)?.0).await),
                Op::Unlock => {
                    lock = None;
                    Input::Done
                }
                Op::Drive(job) => {
                    let (submission, body) = kept(&request)?;
                    let lock = lock.take().ok_or_else(|| EdgeError::broken("a delivery's drive without its lock"))?;
                    // The caller is the queue: its response is not what matters, the job is.
                    let machine = RunMachine::for_delivery(submission.run.is_some());
                    let answer =
                        self.run(config, machine, Locked::Held(lock), &store, job, true, submission, body).await?;
                    Input::Driven { job: store.load_job()?, asked_ms: answer.retry_after_ms }
                }
                Op::Tend(steps) => {
                    self.tend(config, steps).await?;
                    Input::Done
                }
                Op::Record(verdict) => {
                    let job = store.load_job()?;
                    if job.is_some() {
                        store.change_outbox(&mut |outbox| delivery::record(outbox, verdict, now_ms()))?;
                    }
                    Input::Recorded { job, driving: self.memory.borrow().is_driving() }
                }
                Op::Answer(verdict) => return Response::from_json(&verdict),
            };
        }
    }

    /// Performs the core's steps that tend a background job, in order
    /// ([`onejob_core::ledger::background::tending`]): after a delivery, its drive, or the alarm.
    pub(super) async fn tend(&self, config: &Config, steps: Vec<Step>) -> Result<()> {
        for step in steps {
            match step {
                Step::Send(job) => self.enqueue(config, &job, false).await?,
                Step::GiveUpSending => self.give_up_sending()?,
                // A CAS write; the alarm sends it again then.
                Step::Defer(Deferral { read, job }) => {
                    self.store().update_job(read, &job)?;
                    self.arm(config, &job);
                }
                Step::DeadLetter(job) => self.dead_letter_once(&job).await?,
                Step::FollowUp => self.follow_up(config).await?,
            }
        }
        Ok(())
    }

    /// No delivery took any of the job's messages: it is left to operators
    /// (a dead letter of class [`outbox::UNDELIVERED`]).
    pub(super) fn give_up_sending(&self) -> Result<()> {
        let outbox = self.store().change_outbox(&mut Outbox::give_up)?;
        worker::console_error!(
            "ledger: no delivery took any of a background job's {} queue messages: it is left to operators (a dead letter of class {})",
            outbox.sends(),
            outbox::UNDELIVERED
        );
        Ok(())
    }

    /// A background job that needs an operator (dead, or unknown under
    /// `UNKNOWN_POLICY=block` once its lease is over) goes to the dead-letter
    /// queue, once: whatever made it so (a delivery, a lease that ran out
    /// with the runtime gone, the alarm).
    pub(super) async fn dead_letter_once(&self, job: &Job) -> Result<()> {
        let store = self.store();
        if !tending::letter_due(job, &store.load_outbox()?, store.dead_lettered()?, now_ms()) {
            return Ok(());
        }
        let Some((submission, _)) = stored::kept_request(&store)? else { return Ok(()) };
        let message = submission.message();
        match queue::send_dead_letter(&self.env, &message).await {
            Ok(()) => store.note_dead_lettered(now_ms())?,
            // The next alarm or delivery tries again.
            Err(error) => worker::console_warn!("ledger: sending a dead letter failed: {error}"),
        }
        Ok(())
    }
}

/// A send of the job's message awaiting the queue, in the object's memory
/// ([`onejob_core::ledger::coordination::Coordination::is_sending`]) until
/// dropped: when the send resolves, or when its future is dropped.
struct SendPending<'a>(&'a Memory);

impl<'a> SendPending<'a> {
    fn begin(memory: &'a Memory) -> Self {
        memory.borrow_mut().begin_send();
        Self(memory)
    }
}

impl Drop for SendPending<'_> {
    fn drop(&mut self) {
        self.0.borrow_mut().end_send();
    }
}

/// The request a delivery read ([`Op::LoadRequest`]), for the ops that use it.
fn kept(request: &Option<(Submission, Vec<u8>)>) -> Result<(&Submission, &[u8])> {
    let (submission, body) =
        request.as_ref().ok_or_else(|| EdgeError::broken("a delivery's op before its request was read"))?;
    Ok((submission, body))
}
