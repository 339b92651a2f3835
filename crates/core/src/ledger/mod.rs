//! What the `Ledger` Durable Object decides about one job, sans-IO.
//!
//! The Ledger's decisions move here one at a time, each with its unit tests,
//! and the Durable Object keeps only what performs them (storage, calls,
//! timers). Where it goes: one machine that takes the job's
//! events — a submission, a provider's answer, a stream's end, an alarm, a
//! queue delivery, an operator's action, an effect's outcome — and returns
//! the commands to perform, with time, randomness and ids as inputs.
//!
//! | Folder | What it decides | The edge performs it in |
//! |---|---|---|
//! | [`request`] | a keyed request: admitted, replayed, waiting or run; the drive (placement, claim, call, hedge, record, retry); what an attempt's answer means | `ledger/submit.rs`, `ledger/drive.rs` |
//! | [`stream`] | a streamed answer as it arrives, how its end settles the attempt, what is written when it ends or its pump is gone | `ledger/stream.rs` |
//! | [`background`] | the outbox, the queue consumer's progress, a delivery, tending after it, the alarm | `ledger/background.rs`, `ledger/mod.rs` (alarm), `queue.rs` |
//! | [`effects`] | a job type's effects run (claim, perform, record, reconcile by receipt, approvals), what follows its answer, its subject | `ledger/effects.rs` |
//! | [`operator`] | a settlement, a cancel, a poll's wait; what an operator's or approver's request performs | `ledger/operator.rs` |
//! | [`storage`] | the SQLite layout as data: table groups, schemas, where a response is kept | `ledger/store.rs` |
//! | [`coordination`] | who works on the job in the object's memory (a drive, a pump, the effects runner) | `ledger/lock.rs` |
//! | [`dead_letter`] | what a dead letter says about a job or an effect, secrets redacted | `ledger/background.rs`, `ledger/effects.rs` |

pub mod background;
pub mod coordination;
pub mod dead_letter;
pub mod effects;
pub mod operator;
pub mod request;
pub mod storage;
pub mod stream;
