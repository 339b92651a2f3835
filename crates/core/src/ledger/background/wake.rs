//! The Ledger's one alarm: what it does when it rings, and when it rings next.
//!
//! One alarm serves three purposes: retention (everything is deleted when
//! the job expires), a running stream's watchdog (a stream whose pump is
//! gone is settled), and the follow-ups that are due — a background job's
//! outbox (its message sent again if it may not exist) and a job type's
//! effects (a retry, an approval's expiry, a claim left by a runtime that is gone).

use crate::job::Job;
use crate::ledger::background::outbox::{self, Outbox, OutboxStep};
use crate::ledger::background::progress::Progress;
use crate::ledger::background::tending::Step;

/// How often a running stream's (or effects run's) watchdog looks.
pub const WATCHDOG_MS: u64 = 30_000;

/// What the alarm does when it rings, with the job it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ring {
    /// Something runs here that must not be settled under it (a drive, a
    /// stream's pump, the effects runner) while the job is past its
    /// retention or streaming: only look again after the watchdog's interval.
    Watch,
    /// Tend the job: settle what time decided, perform what [`tend`] says,
    /// and set the next alarm.
    Tend(Job),
    /// Expired, or nothing here: leave no table, row or alarm behind (the
    /// job's subject released, if it had one).
    Delete(Option<Job>),
}

impl Ring {
    /// What the alarm does for `job` at `now_ms` (`busy`: something runs here).
    pub fn of(job: Option<Job>, now_ms: u64, busy: bool) -> Self {
        match job {
            Some(job) if (job.is_expired(now_ms) || job.is_streaming()) && busy => Self::Watch,
            Some(job) if !job.is_expired(now_ms) => Self::Tend(job),
            job => Self::Delete(job),
        }
    }
}

/// What runs in the object when the alarm rings (its memory:
/// [`crate::ledger::coordination::Coordination`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Here {
    /// A drive (a request, a delivery, a stream's pump) owns the job.
    pub driving: bool,
    /// A send of the job's message is still awaiting the queue.
    pub sending: bool,
}

impl Here {
    /// Whether the outbox waits for what runs here: a drive owns the job,
    /// or a send's answer is still to come.
    fn outbox_waits(self) -> bool {
        self.driving || self.sending
    }
}

/// What a [`Ring::Tend`] does after settling a stream whose pump is gone,
/// in this order: the outbox's step (the job's message sent again, or
/// given up on), the job's dead letter if it needs an operator (looked at
/// every time, sent once), then the follow-up (a job type's answer not
/// followed up yet, effects that are due); the shell then indexes the job
/// and sets the next alarm ([`next_ms`]). A drive running here owns the
/// job: its message is neither sent nor given up on, and nothing is
/// followed up under it (the drive does both when it ends). A send still
/// awaiting the queue here is not made again: its answer decides.
/// `progress`: the queue consumer's, read first if [`needs_progress`] said so.
pub fn tend(
    job: &Job,
    outbox: &Outbox,
    outbox_delay_ms: u64,
    now_ms: u64,
    here: Here,
    progress: Option<&Progress>,
) -> Vec<Step> {
    let outbox_step = match here.outbox_waits() {
        true => OutboxStep::Wait,
        false => outbox::outbox_step(job, outbox, outbox_delay_ms, now_ms, progress),
    };
    let send = match outbox_step {
        OutboxStep::Send => Some(Step::Send(job.clone())),
        OutboxStep::GiveUp => Some(Step::GiveUpSending),
        OutboxStep::Wait => None,
    };
    let follow_up = (!here.driving).then_some(Step::FollowUp);
    send.into_iter().chain([Step::DeadLetter(job.clone())]).chain(follow_up).collect()
}

/// Whether a [`Ring::Tend`] at `now_ms` first reads the queue consumer's
/// progress, to pass to [`tend`] ([`outbox::needs_progress`]): not
/// while a drive running here owns the job.
pub fn needs_progress(job: &Job, outbox: &Outbox, now_ms: u64, here: Here) -> bool {
    !here.outbox_waits() && outbox::needs_progress(job, outbox, now_ms)
}

/// When the alarm rings next: the earliest of the job's retention, a
/// background job's next look ([`outbox::wake_at`]) and its effects'
/// next look (`effects_due`).
pub fn next_ms(job: &Job, outbox: &Outbox, outbox_delay_ms: u64, effects_due: Option<u64>, now_ms: u64) -> u64 {
    outbox::wake_at(job, outbox, outbox_delay_ms, now_ms)
        .into_iter()
        .chain(effects_due)
        .fold(job.expires_ms(), u64::min)
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    const IDLE: Here = Here { driving: false, sending: false };
    const DRIVING: Here = Here { driving: true, sending: false };

    fn job() -> Job {
        crate::job::test_job::kept_for(1_000_000)
    }

    #[test]
    fn a_live_job_is_tended_and_an_expired_or_missing_one_deleted() {
        assert_eq!(Ring::of(Some(job()), 10, false), Ring::Tend(job()));
        assert_eq!(Ring::of(Some(job()), 2_000_000, false), Ring::Delete(Some(job())), "its subject is released");
        assert_eq!(Ring::of(None, 10, false), Ring::Delete(None));
        assert_eq!(Ring::of(None, 10, true), Ring::Delete(None));
    }

    #[test]
    fn nothing_is_settled_under_a_running_drive_stream_or_effects_run() {
        assert_eq!(Ring::of(Some(job()), 2_000_000, true), Ring::Watch, "expired while something runs");
        let mut streaming = job();
        let ticket = streaming.claim(streaming.version(), 1, "p", None).expect("claim");
        streaming.mark_streaming(ticket, 2).expect("stream");
        assert_eq!(Ring::of(Some(streaming.clone()), 10, true), Ring::Watch);
        assert_eq!(
            Ring::of(Some(streaming.clone()), 10, false),
            Ring::Tend(streaming),
            "a stream whose pump is gone is settled"
        );
        assert_eq!(Ring::of(Some(job()), 10, true), Ring::Tend(job()), "a live job that is not streaming is tended");
    }

    #[test]
    fn the_next_ring_is_the_earliest_due_thing_and_never_past_retention() {
        let j = job();
        let outbox = Outbox::default();
        assert_eq!(next_ms(&j, &outbox, 5_000, None, 0), 1_000_000);
        assert_eq!(next_ms(&j, &outbox, 5_000, Some(7_000), 0), 7_000);
        assert_eq!(next_ms(&j, &outbox, 5_000, Some(5_000_000), 0), 1_000_000);
    }

    #[test]
    fn a_drive_running_here_keeps_the_outbox_and_the_follow_up_for_itself() {
        let mut background_job = job();
        background_job.run_in_background(0);
        let mut outbox = Outbox::default();
        outbox.note_send(0, false, &mut crate::identity::random::SplitMix64::new(7));
        // An unconfirmed send past its delay is sent again, unless a drive runs here.
        let due = 400_000;
        assert_eq!(outbox::outbox_step(&background_job, &outbox, 5_000, due, None), OutboxStep::Send);
        let letter = Step::DeadLetter(background_job.clone());
        assert_eq!(
            tend(&background_job, &outbox, 5_000, due, IDLE, None),
            vec![Step::Send(background_job.clone()), letter.clone(), Step::FollowUp]
        );
        assert_eq!(
            tend(&background_job, &outbox, 5_000, due, DRIVING, None),
            vec![letter],
            "only its dead letter is looked at"
        );
        // Nothing due: the follow-up still looks (effects may be due).
        assert_eq!(
            tend(&job(), &Outbox::default(), 5_000, 10, IDLE, None),
            vec![Step::DeadLetter(job()), Step::FollowUp]
        );
    }

    #[test]
    fn an_outbox_no_delivery_took_is_given_up_and_the_job_still_looked_at() {
        let mut background_job = job();
        background_job.run_in_background(0);
        let mut outbox = Outbox::default();
        let mut random = crate::identity::random::SplitMix64::new(7);
        // Sent at every resend, and nothing took it.
        let mut now = 0;
        outbox.note_send(now, false, &mut random);
        while let Some(at) = outbox::resend_at(&background_job, &outbox, 5_000) {
            now = at;
            if outbox::outbox_step(&background_job, &outbox, 5_000, now, None) != OutboxStep::Send {
                break;
            }
            outbox.note_send(now, false, &mut random);
        }
        assert_eq!(outbox::outbox_step(&background_job, &outbox, 5_000, now, None), OutboxStep::GiveUp);
        assert_eq!(
            tend(&background_job, &outbox, 5_000, now, IDLE, None),
            vec![Step::GiveUpSending, Step::DeadLetter(background_job.clone()), Step::FollowUp]
        );
    }

    #[test]
    fn a_send_still_awaiting_the_queue_here_is_not_made_again() {
        // The first send is slow: the alarm set before it rings while the
        // queue has not answered. Only a runtime that lost that wait (a
        // crash empties the memory) sends again.
        let mut background_job = job();
        background_job.run_in_background(0);
        let mut outbox = Outbox::default();
        outbox.note_send(0, false, &mut crate::identity::random::SplitMix64::new(7));
        let due = outbox::resend_at(&background_job, &outbox, 5_000).unwrap();
        let sending = Here { driving: false, sending: true };
        let letter = Step::DeadLetter(background_job.clone());
        assert_eq!(tend(&background_job, &outbox, 5_000, due, sending, None), vec![letter.clone(), Step::FollowUp]);
        assert_eq!(tend(&background_job, &outbox, 5_000, due, IDLE, None)[0], Step::Send(background_job.clone()));
        assert!(!needs_progress(&background_job, &outbox, due, sending));
    }
}
