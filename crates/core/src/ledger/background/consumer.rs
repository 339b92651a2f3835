//! What the queue consumer does with one message, as a machine: commands
//! out (ask the job's Ledger to judge a delivery or for its dead-letter
//! facts, send the job to the dead-letter queue, record its dead letter,
//! alert, settle the message) and the outcome of each back in. The worker's
//! `queue.rs` reads the message and performs the commands; which queue a
//! batch is from is [`Queue::of`], and what each outcome does to the
//! message is [`delivery`]'s ([`on_verdict`], [`after_dead_letter`],
//! [`after_record`]).
//!
//! [`on_verdict`]: delivery::on_verdict
//! [`after_dead_letter`]: delivery::after_dead_letter
//! [`after_record`]: delivery::after_record

use crate::ledger::background::delivery::{self, Disposition, Next, Queue, Verdict};
use crate::ledger::dead_letter::DeadFacts;

/// What the consumer asks the job's Ledger (the worker's call is the
/// `LedgerCall` of the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    /// Judge this delivery, and run the job if it is due.
    Deliver,
    /// What a dead letter records about the job.
    Facts,
}

impl Ask {
    /// What asking is, for the log line of its failure.
    pub fn purpose(self) -> &'static str {
        match self {
            Ask::Deliver => "a job delivery",
            Ask::Facts => "reading a dead job's facts",
        }
    }
}

/// What the consumer performs next for its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Ask the job's Ledger; answer with [`Event::Answered`].
    Ask(Ask),
    /// Send the job to the dead-letter queue; answer with [`Event::Sent`].
    SendDeadLetter,
    /// Record the job's dead letter for operators; answer with [`Event::Recorded`].
    Record(DeadFacts),
    /// Alert the operators about a dead letter of this class recorded at
    /// `recorded_ms`, if one is due; answer with [`Event::Alerted`].
    Alert {
        /// The dead letter's cause.
        error_class: String,
        /// When it was recorded.
        recorded_ms: u64,
    },
    /// Done: settle the message so.
    Settle(Disposition),
    /// Done, nothing to record: the dead letter names a job its Ledger
    /// says is not dead (a message the consumer kept failing on may): its
    /// alarm owns it. Log this, and acknowledge the message.
    Ignore(&'static str),
}

/// What performing a [`Command`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The Ledger's answer's body; `None` when asking it failed or it refused.
    Answered(Option<Vec<u8>>),
    /// The dead letter was sent (`true`), or not.
    Sent(bool),
    /// The dead letter was recorded (when), or not.
    Recorded(Option<u64>),
    /// The alert, if one was due, was sent (`true`), or sending it failed.
    Alerted(bool),
}

/// Where the consumer is with its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Asked the Ledger for its verdict.
    Delivering,
    /// Sending the job's dead letter.
    Sending,
    /// Asked the Ledger for its dead-letter facts.
    Asking,
    /// Recording the dead letter.
    Recording,
    /// Alerting about it.
    Alerting,
}

/// One message's consumer.
#[derive(Debug)]
pub struct Consumer {
    phase: Phase,
    /// The dead letter's cause, once its facts are read (for its alert).
    error_class: String,
}

impl Consumer {
    /// The consumer of a message from `queue`, and its first command: a job
    /// message is delivered to its job's Ledger; a dead letter is recorded,
    /// if its Ledger says the job is dead.
    pub fn start(queue: Queue) -> (Consumer, Command) {
        match queue {
            Queue::Jobs => (Consumer::at(Phase::Delivering), Command::Ask(Ask::Deliver)),
            Queue::DeadLetters => (Consumer::at(Phase::Asking), Command::Ask(Ask::Facts)),
        }
    }

    fn at(phase: Phase) -> Consumer {
        Consumer { phase, error_class: String::new() }
    }

    /// The next command once `event` answered the last one. An answer
    /// that does not read counts as no answer (the message is redelivered
    /// or tried again); a failed record or alert tries the dead letter
    /// again a few seconds later (recording it again is harmless).
    pub fn on(&mut self, event: Event) -> Command {
        match (self.phase, event) {
            (Phase::Delivering, Event::Answered(body)) => {
                let verdict = body.and_then(|body| serde_json::from_slice::<Verdict>(&body).ok());
                match delivery::on_verdict(verdict) {
                    Next::Settle(disposition) => Command::Settle(disposition),
                    Next::SendDeadLetter => {
                        self.phase = Phase::Sending;
                        Command::SendDeadLetter
                    }
                }
            }
            (Phase::Sending, Event::Sent(sent)) => Command::Settle(delivery::after_dead_letter(sent)),
            (Phase::Asking, Event::Answered(body)) => {
                match body.and_then(|body| serde_json::from_slice::<DeadFacts>(&body).ok()) {
                    Some(facts) if facts.dead => {
                        self.phase = Phase::Recording;
                        self.error_class.clone_from(&facts.error_class);
                        Command::Record(facts)
                    }
                    Some(_) => Command::Ignore("a dead-letter message for a job that is not dead; its Ledger keeps it"),
                    None => Command::Settle(delivery::after_record(false)),
                }
            }
            (Phase::Recording, Event::Recorded(Some(recorded_ms))) => {
                self.phase = Phase::Alerting;
                Command::Alert { error_class: std::mem::take(&mut self.error_class), recorded_ms }
            }
            (Phase::Recording, Event::Recorded(None)) => Command::Settle(delivery::after_record(false)),
            (Phase::Alerting, Event::Alerted(sent)) => Command::Settle(delivery::after_record(sent)),
            // An answer to a command this phase did not give: the shell's
            // mistake; the message is handed back rather than lost.
            _ => Command::Settle(Disposition::Retry),
        }
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::ledger::background::delivery::{DEAD_LETTER_RETRY_S, redelivery_delay_s};

    fn answer<T: serde::Serialize>(value: &T) -> Event {
        Event::Answered(Some(serde_json::to_vec(value).expect("json")))
    }

    fn facts(dead: bool) -> DeadFacts {
        DeadFacts {
            dead,
            error_class: "server_error".into(),
            last_status: Some(503),
            detail: "down".into(),
            attempts: 3,
        }
    }

    fn delivered(verdict: Event) -> (Consumer, Command) {
        let (mut consumer, first) = Consumer::start(Queue::Jobs);
        assert_eq!(first, Command::Ask(Ask::Deliver), "a job message is delivered to its Ledger first");
        let next = consumer.on(verdict);
        (consumer, next)
    }

    #[test]
    fn a_job_message_is_settled_as_its_ledger_s_verdict_says() {
        assert_eq!(delivered(answer(&Verdict::Ack)).1, Command::Settle(Disposition::Ack));
        let retry = answer(&Verdict::Retry { delay_ms: 2_500 });
        assert_eq!(delivered(retry).1, Command::Settle(Disposition::RetryAfter(redelivery_delay_s(2_500))));
    }

    #[test]
    fn a_ledger_that_failed_or_answered_what_does_not_read_has_the_message_redelivered() {
        assert_eq!(delivered(Event::Answered(None)).1, Command::Settle(Disposition::Retry));
        assert_eq!(delivered(Event::Answered(Some(b"<html>".to_vec()))).1, Command::Settle(Disposition::Retry));
    }

    #[test]
    fn a_dead_job_s_message_is_acknowledged_only_once_its_dead_letter_is_sent() {
        let (mut consumer, next) = delivered(answer(&Verdict::Dead));
        assert_eq!(next, Command::SendDeadLetter);
        assert_eq!(consumer.on(Event::Sent(true)), Command::Settle(Disposition::Ack));
        let (mut unsent, _) = delivered(answer(&Verdict::Dead));
        assert_eq!(unsent.on(Event::Sent(false)), Command::Settle(Disposition::Retry), "sent again on redelivery");
    }

    #[test]
    fn a_dead_letter_is_recorded_then_alerted_about_then_acknowledged() {
        let (mut consumer, first) = Consumer::start(Queue::DeadLetters);
        assert_eq!(first, Command::Ask(Ask::Facts));
        assert_eq!(consumer.on(answer(&facts(true))), Command::Record(facts(true)));
        let alert = Command::Alert { error_class: "server_error".into(), recorded_ms: 7 };
        assert_eq!(consumer.on(Event::Recorded(Some(7))), alert);
        assert_eq!(consumer.on(Event::Alerted(true)), Command::Settle(Disposition::Ack));
    }

    #[test]
    fn a_dead_letter_whose_facts_record_or_alert_failed_is_tried_again_shortly() {
        let again = Command::Settle(Disposition::RetryAfter(DEAD_LETTER_RETRY_S));
        for failed in [Event::Answered(None), Event::Answered(Some(b"{}".to_vec()))] {
            let (mut consumer, _) = Consumer::start(Queue::DeadLetters);
            assert_eq!(consumer.on(failed), again, "no facts: nothing recorded yet");
        }
        let (mut consumer, _) = Consumer::start(Queue::DeadLetters);
        consumer.on(answer(&facts(true)));
        assert_eq!(consumer.on(Event::Recorded(None)), again);
        let (mut consumer, _) = Consumer::start(Queue::DeadLetters);
        consumer.on(answer(&facts(true)));
        consumer.on(Event::Recorded(Some(7)));
        assert_eq!(consumer.on(Event::Alerted(false)), again, "recorded again with the alert's next try");
    }

    #[test]
    fn a_dead_letter_for_a_job_that_is_not_dead_records_nothing_and_is_acknowledged() {
        let (mut consumer, _) = Consumer::start(Queue::DeadLetters);
        assert!(matches!(consumer.on(answer(&facts(false))), Command::Ignore(_)));
    }

    #[test]
    fn an_answer_to_a_command_not_given_hands_the_message_back() {
        let (mut consumer, _) = Consumer::start(Queue::Jobs);
        assert_eq!(consumer.on(Event::Recorded(Some(1))), Command::Settle(Disposition::Retry));
        let (mut consumer, _) = Consumer::start(Queue::DeadLetters);
        assert_eq!(consumer.on(Event::Sent(true)), Command::Settle(Disposition::Retry));
    }
}
