//! Who works on a job inside its Ledger right now: one value instead of
//! flags that only comments tied together.
//!
//! A Durable Object runs one event at a time, but every `.await` lets the
//! next one in. So the object must know, between awaits, whether a request
//! is running the job's attempts (duplicates then wait for it instead of
//! starting their own), whether that job has been written yet (a duplicate
//! reads it from here until then), whether a stream's pump owns the running
//! attempt, and whether a job type's effects are being run (one runner).
//!
//! [`Coordination`] holds that. The drive is an enum ([`Driving`]) because
//! its states exclude each other; the effects runner is a flag beside it
//! because effects run both inside a drive (after its answer, before the
//! waiters are answered) and on their own (the alarm, an approval).
//! `Later` is what the shell keeps for a background submission that
//! arrived mid-drive (it is adopted if that drive does not finish the job).

use crate::job::Job;

/// The drive of the job in this object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Driving<Later> {
    /// Nobody: the next admitted request may run the job.
    #[default]
    Idle,
    /// A request runs the job's first attempt and has not written the job
    /// yet: duplicates see it here (its fingerprint) and wait.
    Creating {
        /// The job as it will be written.
        job: Job,
        /// A background submission to adopt afterwards.
        adopt_later: Option<Later>,
    },
    /// A request (or a queue delivery) runs the stored job's attempts.
    Running {
        /// A background submission to adopt afterwards.
        adopt_later: Option<Later>,
    },
    /// A stream's pump owns the running attempt until the stream ends.
    Streaming {
        /// The streaming attempt.
        attempt: u32,
    },
}

/// Why the drive could not begin: someone already runs the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlreadyDriven;

/// What the Ledger coordinates in memory (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coordination<Later> {
    driving: Driving<Later>,
    effects_running: bool,
    /// Queue sends of the job's message made here and not resolved yet.
    sends_pending: u32,
}

impl<Later> Default for Coordination<Later> {
    fn default() -> Self {
        Self { driving: Driving::Idle, effects_running: false, sends_pending: 0 }
    }
}

impl<Later> Coordination<Later> {
    /// The drive's state.
    pub fn driving(&self) -> &Driving<Later> {
        &self.driving
    }

    /// Whether someone runs the job's attempts here (a request, a
    /// delivery, or a stream's pump): what admission calls "driving".
    pub fn is_driving(&self) -> bool {
        !matches!(self.driving, Driving::Idle)
    }

    /// The job being created, until its first write.
    pub fn creating(&self) -> Option<&Job> {
        match &self.driving {
            Driving::Creating { job, .. } => Some(job),
            _ => None,
        }
    }

    /// Whether the running attempt streams here.
    pub fn is_streaming(&self) -> bool {
        matches!(self.driving, Driving::Streaming { .. })
    }

    /// A send of the job's message starts here (noted in the outbox first).
    pub fn begin_send(&mut self) {
        self.sends_pending = self.sends_pending.saturating_add(1);
    }

    /// That send resolved (the queue accepted it, or it failed).
    pub fn end_send(&mut self) {
        self.sends_pending = self.sends_pending.saturating_sub(1);
    }

    /// Whether a send of the job's message made here is still unresolved:
    /// the outbox then does not send it again (an unconfirmed send is
    /// presumed lost only when no runtime still waits on it, as after a
    /// crash, which empties this memory).
    pub fn is_sending(&self) -> bool {
        self.sends_pending > 0
    }

    /// Whether anything runs here that the alarm must not settle under it
    /// (a drive or the effects runner): the alarm then only watches.
    pub fn is_busy(&self) -> bool {
        self.is_driving() || self.effects_running
    }

    /// Begins a drive; `creating` is the job when it is new (not written yet).
    pub fn begin_drive(&mut self, creating: Option<Job>) -> Result<(), AlreadyDriven> {
        if self.is_driving() {
            return Err(AlreadyDriven);
        }
        self.driving = match creating {
            Some(job) => Driving::Creating { job, adopt_later: None },
            None => Driving::Running { adopt_later: None },
        };
        Ok(())
    }

    /// The job has been written (or will not be): duplicates read it from storage.
    pub fn created(&mut self) {
        if let Driving::Creating { adopt_later, .. } = &mut self.driving {
            self.driving = Driving::Running { adopt_later: adopt_later.take() };
        }
    }

    /// Keeps a background submission to adopt once the running drive is
    /// over. Only the first is kept (one adoption is enough); `false` when
    /// it is not kept (no drive runs, a stream runs, or one is kept already).
    pub fn adopt_later(&mut self, later: Later) -> bool {
        match &mut self.driving {
            Driving::Creating { adopt_later, .. } | Driving::Running { adopt_later } if adopt_later.is_none() => {
                *adopt_later = Some(later);
                true
            }
            _ => false,
        }
    }

    /// The drive is over: the job is free again. Returns the background
    /// submission kept meanwhile, if any.
    pub fn finish_drive(&mut self) -> Option<Later> {
        match std::mem::take(&mut self.driving) {
            Driving::Creating { adopt_later, .. } | Driving::Running { adopt_later } => adopt_later,
            Driving::Idle | Driving::Streaming { .. } => None,
        }
    }

    /// The drive's attempt streams: its pump owns the job until
    /// [`Self::end_stream`]. A background submission kept meanwhile is
    /// returned (a streamed answer is the caller's: nothing is adopted).
    pub fn hand_to_pump(&mut self, attempt: u32) -> Option<Later> {
        let later = self.finish_drive();
        self.driving = Driving::Streaming { attempt };
        later
    }

    /// The stream's pump is done.
    pub fn end_stream(&mut self) {
        if self.is_streaming() {
            self.driving = Driving::Idle;
        }
    }

    /// Begins a run of the effects; `false` when one runs already (one runner per object).
    pub fn begin_effects(&mut self) -> bool {
        !std::mem::replace(&mut self.effects_running, true)
    }

    /// The effects' run is over.
    pub fn end_effects(&mut self) {
        self.effects_running = false;
    }

    /// Whether the effects run here now.
    pub fn effects_running(&self) -> bool {
        self.effects_running
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn job() -> Job {
        crate::job::test_job::new()
    }

    #[test]
    fn one_drive_at_a_time_and_a_new_job_is_seen_until_its_first_write() {
        let mut c = Coordination::<&str>::default();
        assert!(!c.is_driving());
        c.begin_drive(Some(job())).expect("free");
        assert!(c.is_driving());
        assert_eq!(c.creating(), Some(&job()));
        assert_eq!(c.begin_drive(None), Err(AlreadyDriven));
        c.created();
        assert!(c.is_driving());
        assert_eq!(c.creating(), None);
        assert_eq!(c.finish_drive(), None);
        assert!(!c.is_driving());
        c.begin_drive(None).expect("free again");
    }

    #[test]
    fn a_background_submission_mid_drive_is_kept_once_and_handed_back_at_its_end() {
        let mut c = Coordination::default();
        assert!(!c.adopt_later("idle"), "nothing to adopt after when nobody drives");
        c.begin_drive(Some(job())).expect("free");
        assert!(c.adopt_later("first"));
        assert!(!c.adopt_later("second"));
        c.created();
        assert_eq!(c.finish_drive(), Some("first"));
        assert_eq!(c.finish_drive(), None);
    }

    #[test]
    fn a_stream_holds_the_job_until_its_end_and_adopts_nothing() {
        let mut c = Coordination::default();
        c.begin_drive(None).expect("free");
        assert!(c.adopt_later("later"));
        assert_eq!(c.hand_to_pump(2), Some("later"));
        assert!(c.is_driving() && c.is_streaming());
        assert!(!c.adopt_later("during the stream"));
        assert_eq!(c.begin_drive(None), Err(AlreadyDriven));
        c.end_stream();
        assert!(!c.is_driving());
    }

    #[test]
    fn one_effects_runner_inside_a_drive_or_on_its_own_and_the_alarm_waits_for_both() {
        let mut c = Coordination::<()>::default();
        assert!(!c.is_busy());
        assert!(c.begin_effects());
        assert!(!c.begin_effects(), "a second runner is refused");
        assert!(c.is_busy() && !c.is_driving());
        c.begin_drive(None).expect("effects do not hold the drive");
        c.end_effects();
        assert!(c.is_busy(), "the drive still runs");
        c.finish_drive();
        assert!(!c.is_busy());
    }

    #[test]
    fn a_send_is_pending_until_it_resolves() {
        let mut c = Coordination::<()>::default();
        assert!(!c.is_sending());
        c.begin_send();
        c.begin_send();
        c.end_send();
        assert!(c.is_sending(), "one of two still pending");
        c.end_send();
        c.end_send();
        assert!(!c.is_sending() && !c.is_busy(), "never below zero, and not a drive");
    }
}
