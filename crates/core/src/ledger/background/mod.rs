//! Background jobs: the outbox and when a message is sent again
//! ([`outbox`]), how far the queue's consumer has got ([`progress`]), what a
//! delivery does ([`delivery`]) and in which order ([`delivery_machine`]), the consumer's machine ([`consumer`]), the
//! steps that tend a job ([`tending`]) and the alarm ([`wake`]).

pub mod consumer;
pub mod delivery;
pub mod delivery_machine;
pub mod outbox;
pub mod progress;
pub mod tending;
pub mod wake;
