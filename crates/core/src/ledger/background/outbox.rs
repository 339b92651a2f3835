//! Background jobs (`Prefer: respond-async`): what the Ledger does with a
//! queue delivery, and when it must send the job's message again.
//!
//! Queues deliver at least once and never dedup by content, so every
//! delivery is judged against the job ([`on_delivery`]): only a delivery
//! that finds the job claimable runs an attempt; one that finds it finished,
//! or being run, is acknowledged with no effect.
//!
//! The Ledger's alarm is the outbox ([`outbox_step`]). It sends again only a
//! message that may not exist, so a backlog in the queue is never amplified:
//!
//! | the job's message ([`Message`]) | sent again |
//! |---|---|
//! | noted, not confirmed (the send failed, or the runtime stopped before it resolved) | after `OUTBOX_DELAY_MS`·2ⁿ for its n-th send in a row, capped at [`UNCONFIRMED_CAP_FACTOR`] × `OUTBOX_DELAY_MS`, with equal jitter (half to all of it) |
//! | confirmed by the queue (or handed back to it by a delivery's retry) | when the consumer's progress says the queue lost it ([`super::progress::presumed_lost`]: overtaken by a later message, or the consumer idle since it was due), looked at [`LOOK_MS`] after it was due, then a little less often each time (up to [`LOOK_CAP_MS`] apart); if the progress cannot be read, [`QUEUED_RESEND_MS`] after it was due (half to all of it, doubling per such send, capped at [`QUEUED_CAP_MS`]) |
//! | taken by a delivery (it ran the job, or acknowledged the message) | when the job may run again: its lease's end, its backoff's end |
//!
//! A job whose message no delivery took after [`MAX_UNTAKEN_SENDS`] sends in
//! a row is left to operators: the outbox gives up ([`OutboxStep::GiveUp`]),
//! and the job is a dead letter of class [`UNDELIVERED`] until an operator
//! replays it. A job never waits on the outbox while the lease of a delivery
//! that started holds it.
//!
//! Why the consumer's progress: a message the queue accepted and no
//! delivery took is either in a backlog or lost (a local queue loses what
//! it holds when its runtime dies). Waiting a fixed time cannot serve both:
//! before, a confirmed message was presumed lost only after 15 to 30
//! minutes, and accepted jobs sat idle that long after a restart. Now a
//! restart's lost messages are sent again within a minute, and a backlog
//! that drains is never sent again (see [`super::progress`]).

use serde::{Deserialize, Serialize};

use super::progress::{self, Progress};
use crate::identity::random::{RandomSource, SplitMix64};
use crate::job::{Job, JobError, JobState, UnknownPolicy};
use crate::retry::backoff::{Backoff, Jitter};

/// Sends in a row that no delivery took, after which the outbox gives up
/// and the job waits for an operator (a dead letter of class [`UNDELIVERED`]).
/// With the default `OUTBOX_DELAY_MS` (5 s), a job whose every send fails
/// is given up 19 to 37 minutes after its first send.
pub const MAX_UNTAKEN_SENDS: u32 = 12;

/// The backoff between unconfirmed sends is capped at this many times
/// `OUTBOX_DELAY_MS` (5 s × 64: about 5 minutes).
pub const UNCONFIRMED_CAP_FACTOR: u64 = 64;

/// When the consumer's progress cannot be read: how long a message the
/// queue accepted may stay undelivered past its due time before it is
/// presumed lost and sent again: half to all of this (at least
/// `OUTBOX_DELAY_MS`), doubling per such send.
pub const QUEUED_RESEND_MS: u64 = 30 * 60_000;

/// A confirmed message no delivery took is looked at (the consumer's
/// progress read, [`super::progress::presumed_lost`]) this long after it was due;
/// each look after is a sixth of this later than the one before, up to
/// [`LOOK_CAP_MS`] apart, and each comes up to half its gap later (jitter
/// drawn from the send's seed and the look's number, so a thousand
/// messages confirmed together are not all looked at together). A message
/// lost in a restart is looked at within 30 s in its first minute; one
/// waiting in an hour-long backlog costs the queue's cursor about 60 reads,
/// not 360.
pub const LOOK_MS: u64 = 10_000;

/// The longest gap between two looks.
pub const LOOK_CAP_MS: u64 = 120_000;

/// The cap of that wait (4 hours: 2 to 4 hours with its jitter).
pub const QUEUED_CAP_MS: u64 = 4 * 3_600_000;

/// The dead-letter class of a job whose messages no delivery took.
pub const UNDELIVERED: &str = "undelivered";

/// What a queue delivery does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Claim the job and run one attempt.
    Run,
    /// Nothing to do: acknowledge the message. The job is finished, being
    /// run, gone, or waiting for something the Ledger's alarm will act on
    /// (a lease to end, an operator).
    Ack,
    /// Not yet: redeliver this message after so many milliseconds (the
    /// backoff after a transient failure).
    RetryIn(u64),
}

/// Judges a delivery for `job` at `now_ms`; `driving` says whether a
/// request of this object is running the job right now.
pub fn on_delivery(job: Option<&Job>, now_ms: u64, driving: bool) -> Delivery {
    let Some(job) = job else { return Delivery::Ack };
    if job.state().is_terminal() || driving {
        return Delivery::Ack;
    }
    if job.not_before_ms() > now_ms {
        return Delivery::RetryIn(job.not_before_ms() - now_ms);
    }
    match job.check_claim(now_ms) {
        Ok(()) => Delivery::Run,
        // In flight elsewhere (a runtime that died mid-call), unknown, or
        // blocked: the alarm sends the job again when it may run.
        Err(
            JobError::InFlight { .. } | JobError::UnknownLease { .. } | JobError::Blocked | JobError::Finished { .. },
        ) => Delivery::Ack,
        Err(_) => Delivery::RetryIn(1_000),
    }
}

/// Where a background job's queue message stands, as far as its Ledger knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// No send was ever noted.
    #[default]
    None,
    /// A send was noted and the queue has not confirmed it: it failed, or
    /// the runtime stopped before it resolved. The message may not exist.
    Unconfirmed,
    /// In the queue: accepted by it, or handed back by a delivery to be
    /// delivered again; its delivery is due at `due_ms`.
    Queued {
        /// When the queue should deliver it.
        due_ms: u64,
    },
    /// A delivery took it at `at_ms`: it claimed the job, or its answer
    /// acknowledged the message. No message waits in the queue.
    Taken {
        /// When.
        at_ms: u64,
    },
}

/// What the Ledger records of a background job's queue message, beside the
/// job record (a send never changes the version an attempt in flight holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Outbox {
    sends: u32,
    last_sent_ms: u64,
    message: Message,
    /// Sends since a delivery last took the message.
    untaken: u32,
    /// Random bits drawn at the last send: its jitter, the same at every look.
    seed: u64,
    /// The outbox stopped sending: an operator must act.
    #[serde(default)]
    gave_up: bool,
}

impl Outbox {
    /// Messages sent (tried) for the job: the job view's `enqueued`.
    pub fn sends(&self) -> u32 {
        self.sends
    }

    /// When the last send was noted (0: never).
    pub fn last_sent_ms(&self) -> u64 {
        self.last_sent_ms
    }

    /// Where the job's message stands.
    pub fn message(&self) -> Message {
        self.message
    }

    /// Sends since a delivery last took the message.
    pub fn untaken(&self) -> u32 {
        self.untaken
    }

    /// Whether the outbox gave up on the job (see [`outbox_step`]).
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Notes a send about to be made, before it is made: a crash between
    /// the two leaves it unconfirmed, and the outbox sends it again. An
    /// operator's send (`by_operator`: a kick, a replay, a resolve) starts
    /// a fresh run of [`MAX_UNTAKEN_SENDS`]. Returns the send's number, to
    /// [`confirm`](Self::confirm) it with.
    pub fn note_send(&mut self, now_ms: u64, by_operator: bool, rng: &mut dyn RandomSource) -> u32 {
        if by_operator {
            self.untaken = 0;
            self.gave_up = false;
        }
        self.sends = self.sends.saturating_add(1);
        self.untaken = self.untaken.saturating_add(1);
        self.last_sent_ms = now_ms;
        self.message = Message::Unconfirmed;
        self.seed = rng.next_u64();
        self.sends
    }

    /// The queue accepted send number `send` at `now_ms`. Only the last
    /// send, still unconfirmed, is confirmed: a delivery that took the
    /// message meanwhile, or a later send, wins. Returns whether the record
    /// changed.
    pub fn confirm(&mut self, send: u32, now_ms: u64) -> bool {
        if send != self.sends || self.message != Message::Unconfirmed {
            return false;
        }
        self.message = Message::Queued { due_ms: now_ms };
        true
    }

    /// A delivery took the message: it claims the job, or its answer
    /// acknowledges the message.
    pub fn taken(&mut self, now_ms: u64) {
        self.message = Message::Taken { at_ms: now_ms };
        self.untaken = 0;
    }

    /// A delivery handed the message back to the queue, to be delivered
    /// again in `delay_ms`.
    pub fn requeued(&mut self, now_ms: u64, delay_ms: u64) {
        self.message = Message::Queued { due_ms: now_ms.saturating_add(delay_ms) };
        self.untaken = 0;
    }

    /// Records that the outbox gave up (see [`OutboxStep::GiveUp`]).
    pub fn give_up(&mut self) {
        self.gave_up = true;
    }

    /// The wait after a send or a due delivery: `base_ms` doubling per send
    /// no delivery took, up to `cap_ms`, equal jitter drawn from the send's
    /// seed (never under half the doubled base).
    fn wait_ms(&self, base_ms: u64, cap_ms: u64) -> u64 {
        let backoff = Backoff::new(base_ms.max(1), cap_ms.max(base_ms.max(1)), Jitter::Equal);
        let retry = self.untaken.saturating_sub(1);
        backoff.map_or(base_ms, |b| b.delay_ms(retry, None, &mut SplitMix64::new(self.seed)))
    }
}

/// When a background job may run next, so when its message is needed: its
/// backoff's end, or the end of the lease a delivery that started holds.
/// `None` for a job that needs no message (finished, not background, or
/// waiting for an operator).
fn runnable_at(job: &Job) -> Option<u64> {
    if !job.is_background() || job.state().is_terminal() {
        return None;
    }
    match job.state() {
        JobState::Pending | JobState::Failed => Some(job.not_before_ms().max(job.created_ms())),
        // When the lease ends the job is unknown (or dead, or claimable).
        JobState::InFlight => job.lease_until_ms(),
        JobState::Unknown => match job.policy().unknown_policy() {
            UnknownPolicy::RetryAfterLease => job.lease_until_ms(),
            UnknownPolicy::Block => None,
        },
        _ => None,
    }
}

/// When the outbox acts on the job next if nothing changes: sends its
/// message again, or gives up (see the table in the module docs).
fn due_at(job: &Job, outbox: &Outbox, outbox_delay_ms: u64) -> Option<u64> {
    let runnable = runnable_at(job)?;
    // A delivery that started holds the job for its lease.
    let leased = matches!(job.state(), JobState::InFlight | JobState::Unknown);
    let after = match outbox.message {
        Message::None => job.created_ms().saturating_add(outbox_delay_ms),
        Message::Unconfirmed => outbox
            .last_sent_ms
            .saturating_add(outbox.wait_ms(outbox_delay_ms, outbox_delay_ms.saturating_mul(UNCONFIRMED_CAP_FACTOR))),
        // Delivered while the lease holds the job, it is acknowledged with
        // no effect: the lease's end needs a message of its own.
        Message::Queued { due_ms } if leased && due_ms < runnable => runnable,
        Message::Queued { due_ms } => {
            due_ms.saturating_add(outbox.wait_ms(QUEUED_RESEND_MS.max(outbox_delay_ms), QUEUED_CAP_MS))
        }
        // Taken by the delivery that holds the lease: its end.
        Message::Taken { .. } if leased => runnable,
        // Acknowledged while the job waits (a quota, a driver here): once
        // it may run, and not at once.
        Message::Taken { at_ms } => at_ms.saturating_add(outbox_delay_ms),
    };
    Some(after.max(runnable))
}

/// When the Ledger's alarm should send a background job's message again,
/// or give up on it, if nothing changes and the consumer's progress is
/// not read (see [`outbox_step`]); `None` when it will not (the job needs
/// no message, or the outbox gave up).
pub fn resend_at(job: &Job, outbox: &Outbox, outbox_delay_ms: u64) -> Option<u64> {
    if outbox.gave_up {
        return None;
    }
    due_at(job, outbox, outbox_delay_ms)
}

/// Since when a message the queue confirmed is awaited: its due time (or
/// when the job may run, if later). `None` unless the job needs a message
/// and its message is confirmed and taken by no delivery (one queued while
/// a lease holds the job is not awaited: the lease's end sends one).
fn awaited_since(job: &Job, outbox: &Outbox) -> Option<u64> {
    let runnable = runnable_at(job)?;
    let leased = matches!(job.state(), JobState::InFlight | JobState::Unknown);
    match outbox.message {
        Message::Queued { due_ms } if leased && due_ms < runnable => None,
        Message::Queued { due_ms } if !outbox.gave_up => Some(due_ms.max(runnable)),
        _ => None,
    }
}

impl Outbox {
    /// The gap before the `n`-th look (from 1): [`LOOK_MS`], a sixth of it
    /// more at each look, up to [`LOOK_CAP_MS`].
    fn look_gap(n: u64) -> u64 {
        (LOOK_MS + LOOK_MS * n.saturating_sub(1) / 6).min(LOOK_CAP_MS)
    }

    /// The `n`-th look (from 1) at a message awaited since `since_ms`: the
    /// gaps up to it, plus up to half of its own (so each look is still
    /// after the one before).
    fn look_at(&self, since_ms: u64, n: u64) -> u64 {
        // The gaps grow by a sixth of LOOK_MS until they reach the cap
        // (look CAPPED), then stay there: summed, not counted one by one.
        const CAPPED: u64 = (LOOK_CAP_MS - LOOK_MS) * 6 / LOOK_MS + 1;
        let growing = n.min(CAPPED);
        let grown: u64 = (1..=growing).map(Self::look_gap).sum();
        let gaps = grown.saturating_add(n.saturating_sub(CAPPED).saturating_mul(LOOK_CAP_MS));
        let jitter =
            SplitMix64::new(self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)).uniform_inclusive(Self::look_gap(n) / 2);
        since_ms.saturating_add(gaps).saturating_add(jitter)
    }

    /// The first look after `now_ms` (the looks are in order).
    fn next_look(&self, since_ms: u64, now_ms: u64) -> u64 {
        // At least (now - since) / LOOK_CAP_MS looks are past: start there.
        let mut n = (now_ms.saturating_sub(since_ms) / LOOK_CAP_MS).max(1);
        // The look before that one is never after `now`: each look is at
        // most LOOK_CAP_MS and a half after `since` per look made.
        loop {
            let at = self.look_at(since_ms, n);
            if at > now_ms {
                return at;
            }
            n += 1;
        }
    }

    /// Whether the message awaited since `since_ms` is presumed lost at
    /// `now_ms` ([`super::progress::presumed_lost`]). A consumer that started or
    /// ended no batch since the last send may be down rather than losing
    /// messages: each send it did not notice doubles the idle time that
    /// presumes the next one lost (up to [`QUEUED_CAP_MS`]), so a queue
    /// whose consumer is gone for hours costs a dozen messages, not one a
    /// minute. A restart's first send again waits [`super::progress::IDLE_MS`].
    fn presumed_lost(&self, since_ms: u64, progress: &Progress, now_ms: u64) -> bool {
        let unnoticed = progress.last_seen_ms < self.last_sent_ms;
        let doublings = if unnoticed { self.untaken.saturating_sub(1).min(16) } else { 0 };
        let idle_ms = (progress::IDLE_MS << doublings).min(QUEUED_CAP_MS);
        progress::presumed_lost(since_ms, progress, now_ms, idle_ms)
    }
}

/// Whether the outbox's step at `now_ms` needs the consumer's progress
/// (the shell reads it from the queue's cursor and passes it to
/// [`outbox_step`]): the job's message is confirmed, no delivery took it,
/// and its first look is due.
pub fn needs_progress(job: &Job, outbox: &Outbox, now_ms: u64) -> bool {
    awaited_since(job, outbox).is_some_and(|since| now_ms >= outbox.look_at(since, 1))
}

/// What the Ledger's alarm does about a background job's message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxStep {
    /// Nothing now.
    Wait,
    /// Send the job's message again.
    Send,
    /// Stop: [`MAX_UNTAKEN_SENDS`] messages and no delivery took one. The
    /// job waits for an operator (record it with [`Outbox::give_up`]).
    GiveUp,
}

/// The outbox's decision at `now_ms`; `progress`: the queue consumer's, if
/// [`needs_progress`] said to read it and it could be read.
pub fn outbox_step(
    job: &Job,
    outbox: &Outbox,
    outbox_delay_ms: u64,
    now_ms: u64,
    progress: Option<&Progress>,
) -> OutboxStep {
    let Some(at) = resend_at(job, outbox, outbox_delay_ms) else { return OutboxStep::Wait };
    let lost = progress
        .zip(awaited_since(job, outbox))
        .is_some_and(|(progress, since)| outbox.presumed_lost(since, progress, now_ms));
    match at <= now_ms || lost {
        false => OutboxStep::Wait,
        true if outbox.untaken >= MAX_UNTAKEN_SENDS => OutboxStep::GiveUp,
        true => OutboxStep::Send,
    }
}

/// Whether a background job waits for an operator because the outbox gave
/// up on its message (a dead letter of class [`UNDELIVERED`]).
pub fn undelivered(job: &Job, outbox: &Outbox) -> bool {
    outbox.gave_up && runnable_at(job).is_some()
}

/// Whether a background job needs an operator: dead, unknown with no
/// automatic retry (`UNKNOWN_POLICY=block`) once its lease is over, or
/// [`undelivered`]. Such a job is a dead letter.
pub fn needs_operator(job: &Job, outbox: &Outbox, now_ms: u64) -> bool {
    if !job.is_background() {
        return false;
    }
    match job.state() {
        JobState::Dead => true,
        JobState::Unknown
            if job.policy().unknown_policy() == UnknownPolicy::Block && job.lease_remaining_ms(now_ms) == 0 =>
        {
            true
        }
        _ => undelivered(job, outbox),
    }
}

/// When the Ledger should next look at a background job: for its outbox
/// ([`resend_at`], or a look at a confirmed message no delivery took), or, for one unknown under `UNKNOWN_POLICY=block`, when
/// its lease ends and it becomes a dead letter ([`needs_operator`]).
/// `None`: nothing to do before retention.
pub fn wake_at(job: &Job, outbox: &Outbox, outbox_delay_ms: u64, now_ms: u64) -> Option<u64> {
    let look = awaited_since(job, outbox).map(|since| outbox.next_look(since, now_ms));
    let outbox_due = resend_at(job, outbox, outbox_delay_ms).into_iter().chain(look).min();
    outbox_due.or_else(|| {
        let blocked = job.is_background() && job.state() == JobState::Unknown;
        blocked.then(|| job.lease_until_ms()).flatten().filter(|until| *until > now_ms)
    })
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use proptest::prelude::*;

    use super::*;
    use crate::identity::fingerprint::{Body, Fingerprint};
    use crate::job::{AttemptReport, JobPolicy};
    use crate::retry::classify::ErrorClass;

    const T0: u64 = 1_700_000_000_000;
    const DELAY: u64 = 5_000;

    fn job(unknown_policy: UnknownPolicy) -> Job {
        let fp = Fingerprint::of_request("POST", "/v1/chat/completions", Body::Json(b"{}")).unwrap();
        let policy = JobPolicy::new(3, 1_000, 5_000, 86_400_000, unknown_policy).unwrap();
        let mut job = Job::new(fp, T0, policy);
        job.run_in_background(T0);
        job
    }

    fn unavailable() -> AttemptReport {
        AttemptReport { status: Some(503), usage: None, error_class: Some(ErrorClass::Unavailable) }
    }

    /// An outbox whose first send was noted at `at_ms` (and confirmed then, if `confirmed`).
    fn sent(at_ms: u64, confirmed: bool, seed: u64) -> Outbox {
        let mut outbox = Outbox::default();
        let send = outbox.note_send(at_ms, false, &mut SplitMix64::new(seed));
        if confirmed {
            assert!(outbox.confirm(send, at_ms));
        }
        outbox
    }

    #[test]
    fn a_delivery_runs_only_a_claimable_job() {
        let mut j = job(UnknownPolicy::RetryAfterLease);
        assert_eq!(on_delivery(None, T0, false), Delivery::Ack);
        assert_eq!(on_delivery(Some(&j), T0, false), Delivery::Run);
        // The same message again while this object runs it: no effect.
        assert_eq!(on_delivery(Some(&j), T0, true), Delivery::Ack);
        let t = j.claim(j.version(), T0, "p", None).unwrap();
        // In flight after a restart (no driver here): the alarm will act at the lease's end.
        assert_eq!(on_delivery(Some(&j), T0 + 10, false), Delivery::Ack);
        j.fail(t, T0 + 20, unavailable()).unwrap();
        j.defer_until(T0 + 2_020, T0 + 20);
        assert_eq!(on_delivery(Some(&j), T0 + 1_020, false), Delivery::RetryIn(1_000));
        assert_eq!(on_delivery(Some(&j), T0 + 2_020, false), Delivery::Run);
        let t = j.claim(j.version(), T0 + 2_030, "p", None).unwrap();
        j.complete(
            t,
            T0 + 2_040,
            AttemptReport { status: Some(200), usage: None, error_class: Some(ErrorClass::None) },
        )
        .unwrap();
        assert_eq!(on_delivery(Some(&j), T0 + 3_000, false), Delivery::Ack);
    }

    #[test]
    fn the_outbox_resends_only_a_message_that_may_not_exist() {
        let mut j = job(UnknownPolicy::RetryAfterLease);
        assert_eq!(resend_at(&j, &Outbox::default(), DELAY), Some(T0 + DELAY), "never sent: after its creation");
        // Noted, not confirmed (the send failed, or the runtime died before it
        // resolved): half to all of OUTBOX_DELAY_MS, the same at every look.
        let noted = sent(T0 + 50, false, 7);
        let at = resend_at(&j, &noted, DELAY).unwrap();
        assert!((T0 + 50 + DELAY / 2..=T0 + 50 + DELAY).contains(&at), "{}", at - T0);
        assert_eq!(resend_at(&j, &noted, DELAY), Some(at));
        assert_eq!(outbox_step(&j, &noted, DELAY, at - 1, None), OutboxStep::Wait);
        assert_eq!(outbox_step(&j, &noted, DELAY, at, None), OutboxStep::Send);
        // Confirmed: the queue has it. A backlog is no reason to send it again;
        // only a message undelivered 15 to 30 minutes past its due time is.
        let mut outbox = sent(T0 + 50, true, 7);
        let lost_at = resend_at(&j, &outbox, DELAY).unwrap();
        assert!((T0 + 50 + QUEUED_RESEND_MS / 2..=T0 + 50 + QUEUED_RESEND_MS).contains(&lost_at));
        assert_eq!(outbox_step(&j, &outbox, DELAY, T0 + 50 + 10 * 60_000, None), OutboxStep::Wait);
        assert_eq!(outbox_step(&j, &outbox, DELAY, lost_at, None), OutboxStep::Send);
        // A delivery takes it and claims the job: its lease covers it.
        let t = j.claim(j.version(), T0 + 100, "p", None).unwrap();
        outbox.taken(T0 + 100);
        assert_eq!(resend_at(&j, &outbox, DELAY), j.lease_until_ms());
        assert_eq!(resend_at(&j, &outbox, 500), Some(T0 + 1_100), "the lease's end");
        j.mark_unknown(t, T0 + 200, AttemptReport::default()).unwrap();
        assert_eq!(resend_at(&j, &outbox, 500), Some(T0 + 5_200), "the unknown lease's end");
        // A 503: the delivery hands the message back for the backoff.
        let mut failed = job(UnknownPolicy::RetryAfterLease);
        let t = failed.claim(failed.version(), T0, "p", None).unwrap();
        failed.fail(t, T0 + 10, unavailable()).unwrap();
        failed.defer_until(T0 + 2_010, T0 + 10);
        outbox.requeued(T0 + 10, 2_000);
        assert_eq!(outbox.message(), Message::Queued { due_ms: T0 + 2_010 });
        assert!(resend_at(&failed, &outbox, DELAY).unwrap() >= T0 + 2_010 + QUEUED_RESEND_MS / 2);
        // An acknowledged message of a job that waits (over its quota): when it may run.
        outbox.taken(T0 + 20);
        failed.defer_until(T0 + 3_600_000, T0 + 20);
        assert_eq!(resend_at(&failed, &outbox, DELAY), Some(T0 + 3_600_000));

        let mut blocked = job(UnknownPolicy::Block);
        let t = blocked.claim(blocked.version(), T0, "p", None).unwrap();
        blocked.mark_unknown(t, T0 + 1, AttemptReport::default()).unwrap();
        assert_eq!(resend_at(&blocked, &outbox, 500), None, "an operator must resolve it");
        // ...but its lease's end makes it a dead letter: the Ledger wakes then.
        assert_eq!(wake_at(&blocked, &outbox, 500, T0 + 2), Some(T0 + 1 + 5_000));
        assert!(!needs_operator(&blocked, &outbox, T0 + 2));
        assert!(needs_operator(&blocked, &outbox, T0 + 1 + 5_000));
        assert_eq!(wake_at(&blocked, &outbox, 500, T0 + 1 + 5_000), None);
        let sync = Job::new(blocked.fingerprint().clone(), T0, *blocked.policy());
        assert_eq!(resend_at(&sync, &Outbox::default(), 500), None, "not a background job");
    }

    #[test]
    fn a_message_queued_while_a_lease_holds_the_job_does_not_delay_its_end() {
        // An operator's kick while the job runs: the kick's delivery finds
        // it in flight and is acknowledged, so the lease's end needs a send.
        let mut j = job(UnknownPolicy::RetryAfterLease);
        j.claim(j.version(), T0, "p", None).unwrap();
        let kicked = sent(T0 + 10, true, 3);
        assert_eq!(resend_at(&j, &kicked, DELAY), j.lease_until_ms());
        // One due after the lease's end runs the job then: it is waited for.
        let mut late = kicked;
        late.requeued(T0, j.lease_until_ms().unwrap() - T0 + 1);
        assert!(resend_at(&j, &late, DELAY).unwrap() > j.lease_until_ms().unwrap() + QUEUED_RESEND_MS / 2);
    }

    #[test]
    fn a_confirmation_counts_only_for_the_last_send_still_unconfirmed() {
        let rng = &mut SplitMix64::new(1);
        let mut outbox = Outbox::default();
        let first = outbox.note_send(T0, false, rng);
        let second = outbox.note_send(T0 + 1, false, rng);
        assert_eq!((first, second, outbox.sends()), (1, 2, 2));
        assert!(!outbox.confirm(first, T0 + 2), "a later send is still unconfirmed");
        assert_eq!(outbox.message(), Message::Unconfirmed);
        // A delivery took the message while the send was still resolving.
        outbox.taken(T0 + 3);
        assert!(!outbox.confirm(second, T0 + 4));
        assert_eq!(outbox.message(), Message::Taken { at_ms: T0 + 3 });
        assert_eq!(outbox.untaken(), 0);
        let third = outbox.note_send(T0 + 5, false, rng);
        assert!(outbox.confirm(third, T0 + 6));
        assert!(!outbox.confirm(third, T0 + 7), "once");
        assert_eq!(outbox.message(), Message::Queued { due_ms: T0 + 6 });
        assert_eq!((outbox.sends(), outbox.last_sent_ms()), (3, T0 + 5));
    }

    #[test]
    fn failed_sends_back_off_up_to_a_cap_then_the_job_goes_to_operators() {
        let j = job(UnknownPolicy::RetryAfterLease);
        let rng = &mut SplitMix64::new(42);
        let mut outbox = Outbox::default();
        outbox.note_send(T0, false, rng); // the first send, at the job's creation, fails
        let mut now = T0;
        let mut gaps = Vec::new();
        loop {
            let at = resend_at(&j, &outbox, DELAY).unwrap();
            assert!(at >= now);
            gaps.push(at - now);
            now = at;
            match outbox_step(&j, &outbox, DELAY, now, None) {
                OutboxStep::Send => {
                    outbox.note_send(now, false, rng); // and it fails: never confirmed
                }
                OutboxStep::GiveUp => break,
                OutboxStep::Wait => panic!("due at {at} but waiting"),
            }
        }
        assert_eq!(outbox.sends(), MAX_UNTAKEN_SENDS, "bounded: {gaps:?}");
        for (n, gap) in gaps.iter().enumerate() {
            let ceiling = (DELAY << n).min(DELAY * UNCONFIRMED_CAP_FACTOR);
            assert!((ceiling / 2..=ceiling).contains(gap), "gap {n}: {gap} ms, ceiling {ceiling}");
        }
        let total: u64 = gaps.iter().sum();
        assert!((18 * 60_000..=38 * 60_000).contains(&total), "{total} ms from the first send to giving up");
        // Not yet recorded: needs_operator waits for the record.
        assert!(!needs_operator(&j, &outbox, now));
        outbox.give_up();
        assert!(undelivered(&j, &outbox) && needs_operator(&j, &outbox, now));
        assert_eq!((resend_at(&j, &outbox, DELAY), wake_at(&j, &outbox, DELAY, now)), (None, None));
        assert_eq!(
            outbox_step(&j, &outbox, DELAY, now + 86_400_000, None),
            OutboxStep::Wait,
            "no send after giving up"
        );
        // An operator's replay: a fresh run of sends, the first after OUTBOX_DELAY_MS.
        outbox.note_send(now, true, rng);
        assert!(!outbox.gave_up() && !undelivered(&j, &outbox));
        assert_eq!(outbox.untaken(), 1);
        assert!(resend_at(&j, &outbox, DELAY).unwrap() <= now + DELAY);
    }

    #[test]
    fn a_delivery_resets_the_run_of_sends() {
        let mut j = job(UnknownPolicy::RetryAfterLease);
        let rng = &mut SplitMix64::new(5);
        let mut outbox = Outbox::default();
        for n in 0..MAX_UNTAKEN_SENDS - 1 {
            outbox.note_send(T0 + u64::from(n), false, rng);
        }
        let t = j.claim(j.version(), T0 + 100, "p", None).unwrap();
        outbox.taken(T0 + 100);
        j.fail(t, T0 + 200, unavailable()).unwrap();
        outbox.requeued(T0 + 200, 1_000);
        outbox.note_send(T0 + 300, false, rng);
        assert_eq!(outbox.untaken(), 1);
        let due = resend_at(&j, &outbox, DELAY).unwrap();
        assert_eq!(outbox_step(&j, &outbox, DELAY, due, None), OutboxStep::Send);
    }

    /// What the queue's consumer shows, for the tests below: batches of 10
    /// every `batch_ms` from `from_ms`, in the order the messages were sent.
    struct Drain {
        from_ms: u64,
        batch_ms: u64,
    }

    impl Drain {
        /// When the batch holding message `i` (in send order) starts.
        fn takes(&self, i: u64) -> u64 {
            self.from_ms + (i / 10) * self.batch_ms
        }

        /// The consumer's progress at `now_ms`, all `sent_ms[i]` given.
        fn progress(&self, sent_ms: &[u64], now_ms: u64) -> Progress {
            let batches = (now_ms.saturating_sub(self.from_ms) / self.batch_ms + 1) as usize;
            let taken = (batches * 10).min(sent_ms.len());
            let newest_sent_ms = sent_ms[..taken].iter().copied().max().unwrap_or(0);
            let drained = taken == sent_ms.len();
            let last_seen_ms = self.takes(taken.saturating_sub(1) as u64);
            Progress { newest_sent_ms, last_seen_ms, busy: !drained || now_ms < last_seen_ms + self.batch_ms }
        }
    }

    /// Rings one job's alarm from `from_ms` until `until_ms` (when a
    /// delivery takes its message): at every `wake_at`, the progress read
    /// when `needs_progress` says so, and a send (confirmed at once) when
    /// `outbox_step` says so. Returns the sends' times and the looks made.
    fn ring_until(
        outbox: &mut Outbox,
        j: &Job,
        (from_ms, until_ms): (u64, u64),
        progress: &dyn Fn(u64) -> Progress,
        rng: &mut SplitMix64,
    ) -> (Vec<u64>, u32) {
        let (mut sent, mut looks, mut now) = (Vec::new(), 0, from_ms);
        while let Some(at) = wake_at(j, outbox, DELAY, now).filter(|at| *at < until_ms) {
            assert!(at > now, "the alarm rings again at once at {} ms", at - T0);
            now = at;
            let seen = needs_progress(j, outbox, at).then(|| progress(at));
            looks += u32::from(seen.is_some());
            match outbox_step(j, outbox, DELAY, at, seen.as_ref()) {
                OutboxStep::Send => {
                    let send = outbox.note_send(at, false, rng);
                    assert!(outbox.confirm(send, at));
                    sent.push(at);
                }
                OutboxStep::GiveUp => panic!("gave up at {} ms", at - T0),
                OutboxStep::Wait => {}
            }
        }
        (sent, looks)
    }

    #[test]
    fn a_backlog_of_a_thousand_jobs_costs_one_message_each() {
        // 1,000 jobs sent over 5 s; the consumer drains 10 messages every
        // 700 ms from T0 + 1 s (about 70 s for all). Each job's alarm rings
        // at every look and reads the progress: the consumer is busy with
        // messages sent before this one, so nothing is sent again.
        let rng = &mut SplitMix64::new(9);
        let sent_ms: Vec<u64> = (0..1_000u64).map(|i| T0 + i * 5).collect();
        let drain = Drain { from_ms: T0 + 1_000, batch_ms: 700 };
        let (mut sends, mut looks) = (0, 0u32);
        for (i, sent_at) in sent_ms.iter().enumerate() {
            let j = job(UnknownPolicy::RetryAfterLease);
            let mut outbox = Outbox::default();
            let send = outbox.note_send(*sent_at, false, rng);
            outbox.confirm(send, sent_at + 5);
            let taken = drain.takes(i as u64);
            let progress = |now| drain.progress(&sent_ms, now);
            let (extra, looked) = ring_until(&mut outbox, &j, (sent_at + 5, taken), &progress, rng);
            assert_eq!(extra, Vec::<u64>::new(), "job {i} sent again though the consumer was getting to it");
            looks += looked;
            sends += outbox.sends();
        }
        assert_eq!(sends, 1_000);
        // About one look per 10 to 15 s of waiting: 70 s for the last.
        assert!(looks < 4_500, "{looks} looks");
    }

    #[test]
    fn after_a_restart_every_lost_message_is_sent_again_within_a_minute() {
        // 150 jobs' messages were confirmed (the last at T0 + 2 s); the
        // runtime died at T0 + 3 s with them in its queue, and came back at
        // T0 + 8 s: the consumer's memory, its open batches with it, is gone.
        let rng = &mut SplitMix64::new(21);
        let (crash, restart) = (T0 + 3_000, T0 + 8_000);
        let mut resent = Vec::new();
        for i in 0..150u64 {
            let j = job(UnknownPolicy::RetryAfterLease);
            let mut outbox = Outbox::default();
            let send = outbox.note_send(T0 + i * 13, false, rng);
            outbox.confirm(send, T0 + i * 13 + 5);
            // Before the crash the consumer was busy with older messages;
            // after it, nothing is delivered until this job sends again.
            let progress = |now: u64| match now < crash {
                true => Progress { newest_sent_ms: T0, last_seen_ms: now, busy: true },
                false => Progress { newest_sent_ms: T0, last_seen_ms: crash, busy: false },
            };
            // A ring due while the runtime is down comes at the restart.
            let mut now = T0 + i * 13 + 5;
            let first = loop {
                let due = wake_at(&j, &outbox, DELAY, now).unwrap();
                let at = if (crash..restart).contains(&due) { restart } else { due };
                let seen = needs_progress(&j, &outbox, at).then(|| progress(at));
                if outbox_step(&j, &outbox, DELAY, at, seen.as_ref()) == OutboxStep::Send {
                    break at;
                }
                now = at;
            };
            assert!(
                first >= crash + progress::IDLE_MS,
                "job {i}: sent again at {} ms, before the consumer was idle",
                first - T0
            );
            resent.push(first - restart);
        }
        let worst = resent.iter().max().unwrap();
        assert!(*worst <= 30_000, "the last lost message sent again {worst} ms after the restart");
    }

    #[test]
    fn the_looks_come_in_order_less_often_with_time() {
        let outbox = sent(T0, true, 17);
        let since = T0;
        let looks: Vec<u64> = (1..=200).map(|n| outbox.look_at(since, n)).collect();
        assert!(looks.windows(2).all(|w| w[1] > w[0]), "in order");
        let gaps: Vec<u64> = looks.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[..6].iter().all(|gap| *gap <= 30_000), "the first minute: {:?}", &gaps[..6]);
        assert!(gaps.iter().all(|gap| *gap <= LOOK_CAP_MS * 3 / 2), "never further apart than the cap and a half");
        let in_an_hour = looks.iter().filter(|at| **at <= since + 3_600_000).count();
        assert!((40..=80).contains(&in_an_hour), "{in_an_hour} looks in the first hour");
        // next_look finds the first look after any time, far out too.
        for now in [T0, T0 + 1, looks[0], looks[0] + 1, looks[57] - 1, looks[57], T0 + 86_400_000, T0 + 30 * 86_400_000]
        {
            let next = outbox.next_look(since, now);
            assert!(next > now);
            let n = (1..).find(|n| outbox.look_at(since, *n) == next).unwrap();
            assert!(n == 1 || outbox.look_at(since, n - 1) <= now, "the first after {}", now - T0);
        }
    }

    #[test]
    fn a_message_overtaken_by_later_ones_is_sent_again_while_the_consumer_is_busy() {
        let j = job(UnknownPolicy::RetryAfterLease);
        let rng = &mut SplitMix64::new(4);
        let mut outbox = Outbox::default();
        let send = outbox.note_send(T0, false, rng);
        outbox.confirm(send, T0 + 10);
        // Busy all along, with messages sent ever later: this one was lost.
        let busy = |now: u64| Progress { newest_sent_ms: now - 1_000, last_seen_ms: now, busy: true };
        let first_look = wake_at(&j, &outbox, DELAY, T0 + 10).unwrap();
        assert!((T0 + 10 + LOOK_MS..=T0 + 10 + LOOK_MS * 3 / 2).contains(&first_look), "{}", first_look - T0);
        assert!(!needs_progress(&j, &outbox, first_look - 1) && needs_progress(&j, &outbox, first_look));
        assert_eq!(outbox_step(&j, &outbox, DELAY, first_look, Some(&busy(first_look))), OutboxStep::Send);
        // Without the progress (the cursor could not be read): the long wait.
        assert_eq!(outbox_step(&j, &outbox, DELAY, first_look, None), OutboxStep::Wait);
    }

    #[test]
    fn a_consumer_that_notices_nothing_is_sent_to_less_and_less_often() {
        // The consumer is gone (no batch since T0): every send is presumed
        // lost after an idle time that doubles per send it did not notice,
        // so a dozen sends take hours, and then the job goes to operators.
        let j = job(UnknownPolicy::RetryAfterLease);
        let rng = &mut SplitMix64::new(8);
        let mut outbox = Outbox::default();
        let send = outbox.note_send(T0 + 100, false, rng);
        outbox.confirm(send, T0 + 100);
        let gone = Progress { newest_sent_ms: T0, last_seen_ms: T0, busy: false };
        let mut now = T0 + 100;
        let mut sends = vec![now];
        loop {
            now = wake_at(&j, &outbox, DELAY, now).unwrap();
            let seen = needs_progress(&j, &outbox, now).then_some(gone);
            match outbox_step(&j, &outbox, DELAY, now, seen.as_ref()) {
                OutboxStep::Send => {
                    let send = outbox.note_send(now, false, rng);
                    outbox.confirm(send, now);
                    sends.push(now);
                }
                OutboxStep::GiveUp => break,
                OutboxStep::Wait => {}
            }
        }
        assert_eq!(sends.len(), MAX_UNTAKEN_SENDS as usize);
        let gaps: Vec<u64> = sends.windows(2).map(|w| (w[1] - w[0]) / 1_000).collect();
        assert!(gaps[0] <= 25, "the first send again comes soon: {gaps:?} s");
        assert!(gaps.windows(2).all(|w| w[1] >= w[0]), "never sooner than the one before: {gaps:?} s");
        assert!(now - T0 >= 3 * 3_600_000, "gave up after {} min only: {gaps:?} s", (now - T0) / 60_000);
    }

    #[test]
    fn the_stored_record_reads_back_and_gave_up_defaults_to_false() {
        let outbox = sent(T0, true, 11);
        let json = serde_json::to_string(&outbox).unwrap();
        assert_eq!(serde_json::from_str::<Outbox>(&json).unwrap(), outbox);
        let old = r#"{"sends":1,"last_sent_ms":5,"message":{"taken":{"at_ms":6}},"untaken":0,"seed":1}"#;
        let read: Outbox = serde_json::from_str(old).unwrap();
        assert_eq!((read.message(), read.gave_up()), (Message::Taken { at_ms: 6 }, false));
    }

    /// An outbox event, for the property below.
    #[derive(Debug, Clone)]
    enum Event {
        /// The alarm rings; the consumer's progress, if read: its newest
        /// send and last batch so many ms ago, and whether it is busy.
        Alarm(u64, u64, bool),
        SendResolves(bool),
        Delivered {
            retry_in: Option<u64>,
        },
        Kick,
        Later(u64),
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            4 => (0u64..120_000, 0u64..120_000, any::<bool>()).prop_map(|(sent, seen, busy)| Event::Alarm(sent, seen, busy)),
            3 => any::<bool>().prop_map(Event::SendResolves),
            1 => proptest::option::of(0u64..10_000).prop_map(|retry_in| Event::Delivered { retry_in }),
            1 => Just(Event::Kick),
            4 => (0u64..3_600_000).prop_map(Event::Later),
        ]
    }

    proptest! {
        /// Whatever happens, a background job that needs a message always
        /// has a wake-up or is left to operators, and the outbox never sends
        /// more than MAX_UNTAKEN_SENDS in a row that no delivery took.
        #[test]
        fn the_outbox_is_bounded_and_never_forgets_a_job(seed: u64, events in proptest::collection::vec(event(), 1..80)) {
            let j = job(UnknownPolicy::RetryAfterLease);
            let rng = &mut SplitMix64::new(seed);
            let mut outbox = Outbox::default();
            let mut now = T0;
            let mut pending_send = None;
            let mut outbox_sends_in_a_row = 0;
            for event in events {
                match event {
                    Event::Alarm(sent_ago, seen_ago, busy) => {
                        let progress = Progress { newest_sent_ms: now.saturating_sub(sent_ago), last_seen_ms: now.saturating_sub(seen_ago), busy };
                        let seen = needs_progress(&j, &outbox, now).then_some(progress);
                        match outbox_step(&j, &outbox, DELAY, now, seen.as_ref()) {
                        OutboxStep::Send => {
                            pending_send = Some(outbox.note_send(now, false, rng));
                            outbox_sends_in_a_row += 1;
                        }
                        OutboxStep::GiveUp => outbox.give_up(),
                        OutboxStep::Wait => {}
                        }
                    }
                    Event::SendResolves(ok) => {
                        if let (Some(send), true) = (pending_send.take(), ok) {
                            outbox.confirm(send, now);
                        }
                    }
                    Event::Delivered { retry_in } => {
                        match retry_in {
                            Some(ms) => outbox.requeued(now, ms),
                            None => outbox.taken(now),
                        }
                        outbox_sends_in_a_row = 0;
                    }
                    Event::Kick => {
                        pending_send = Some(outbox.note_send(now, true, rng));
                        outbox_sends_in_a_row = 0;
                    }
                    Event::Later(ms) => now += ms,
                }
                prop_assert!(outbox_sends_in_a_row <= MAX_UNTAKEN_SENDS);
                prop_assert!(outbox.untaken() <= MAX_UNTAKEN_SENDS);
                prop_assert!(wake_at(&j, &outbox, DELAY, now).is_some() || needs_operator(&j, &outbox, now));
            }
        }
    }
}
