//! The statements the Ledger's store runs on its tables, as data: each
//! names the group whose tables it touches, and a write says what it needs
//! of that group first ([`Missing`]) — created, or skipped when absent. The
//! store asks [`Tables::before`] and performs the answer, then the
//! statement, so no write path decides on its own which table to create.
//!
//! The job's first call writes [`INSERT_JOB`] and [`SAVE_META`] (the
//! claim), then [`KEEP_IN_ROW`] and [`UPDATE_JOB`] (the result): two
//! statements per transition, one table created.

use super::{ResponsePlace, TableGroup, Tables};

/// A statement that writes, on `group`'s tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write {
    /// The statement, its arguments as `?`.
    pub sql: &'static str,
    /// The group whose tables it writes.
    pub group: TableGroup,
    /// What it needs when this lifetime has not created its group.
    pub missing: Missing,
}

/// What a write does about its group's tables before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Creates them if this lifetime has not (`IF NOT EXISTS`): the write
    /// that may be a group's first.
    Create,
    /// Runs only if they may exist: with none, there is nothing to change.
    Skip,
    /// Runs as is: an earlier write created them (a missing table is an
    /// error, as storage that lost them is).
    Run,
}

/// What the store does before a write ([`Tables::before`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// Runs the group's schema, then the write.
    Create(TableGroup),
    /// Runs the write.
    Run,
    /// Runs nothing: the write would change no row (it wrote none).
    Skip,
}

impl Tables {
    /// What `write` needs before it runs, given what this lifetime knows
    /// of its tables (after a lookup).
    pub fn before(self, write: &Write) -> Before {
        match write.missing {
            Missing::Create if !self.created(write.group) => Before::Create(write.group),
            Missing::Skip if !self.may_exist(write.group) => Before::Skip,
            Missing::Create | Missing::Skip | Missing::Run => Before::Run,
        }
    }
}

/// A statement that reads `group`'s tables: read as nothing when the
/// group does not exist (no query runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// The statement, its arguments as `?`.
    pub sql: &'static str,
    /// The group whose tables it reads.
    pub group: TableGroup,
    /// What is read, named in the error when a row is unreadable.
    pub what: &'static str,
}

const fn write(sql: &'static str, group: TableGroup, missing: Missing) -> Write {
    Write { sql, group, missing }
}

const fn read(sql: &'static str, group: TableGroup, what: &'static str) -> Read {
    Read { sql, group, what }
}

/// The job's row, its record and owner.
pub const LOAD_JOB: Read = read("SELECT record, meta FROM job WHERE id = 1", TableGroup::Job, "job record");

/// A new job (`version`, `record`); writes nothing if the object has one.
pub const INSERT_JOB: Write = write(
    "INSERT INTO job (id, version, record) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING",
    TableGroup::Job,
    Missing::Create,
);

/// The job (`version`, `record`) if still at the expected version (the third argument).
pub const UPDATE_JOB: Write =
    write("UPDATE job SET version = ?, record = ? WHERE id = 1 AND version = ?", TableGroup::Job, Missing::Run);

/// Who the job belongs to, once (one already there stays).
pub const SAVE_META: Write =
    write("UPDATE job SET meta = ? WHERE id = 1 AND meta IS NULL", TableGroup::Job, Missing::Create);

/// Who the job belongs to, rewritten (its metered tokens).
pub const UPDATE_META: Write =
    write("UPDATE job SET meta = ? WHERE id = 1 AND meta IS NOT NULL", TableGroup::Job, Missing::Run);

/// The outbox's record.
pub const LOAD_OUTBOX: Read = read("SELECT record FROM outbox WHERE id = 1", TableGroup::Queue, "outbox");

/// The queue's row: a record kept before the outbox's, and the dead letter.
pub const LOAD_QUEUE_ROW: Read =
    read("SELECT sends, last_sent_ms, dead_lettered_ms FROM queue WHERE id = 1", TableGroup::Queue, "queue");

/// The outbox's record, replacing any.
pub const SAVE_OUTBOX: Write = write(
    "INSERT INTO outbox (id, record) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record",
    TableGroup::Queue,
    Missing::Create,
);

/// When the job was sent to the dead-letter queue (`?1`, ms).
pub const NOTE_DEAD_LETTERED: Write = write(
    "INSERT INTO queue (id, sends, last_sent_ms, dead_lettered_ms) VALUES (1, 0, 0, ?1)
     ON CONFLICT (id) DO UPDATE SET dead_lettered_ms = ?1",
    TableGroup::Queue,
    Missing::Create,
);

/// The job is no longer dead-lettered (none was, with no queue table).
pub const CLEAR_DEAD_LETTERED: Write =
    write("UPDATE queue SET dead_lettered_ms = 0 WHERE id = 1", TableGroup::Queue, Missing::Skip);

/// A kept request's submission.
pub const LOAD_SUBMISSION: Read = read("SELECT submission FROM request WHERE id = 1", TableGroup::Request, "request");

/// A kept request's body, its chunks in order.
pub const LOAD_REQUEST_BODY: Read =
    read("SELECT bytes FROM request_chunks ORDER BY seq", TableGroup::Request, "request chunk");

/// A kept request's submission. The newest submission wins: a job-type run
/// keeps its request when it starts, and a later adoption into the
/// background must be able to say so (`background`), or the queue would
/// drive it as a caller's job.
pub const SAVE_SUBMISSION: Write = write(
    "INSERT INTO request (id, submission) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET submission = excluded.submission",
    TableGroup::Request,
    Missing::Create,
);

/// One chunk of a kept request's body (`seq`, `bytes`). The body is the
/// same for every submission of the job (same key, same fingerprint), so
/// chunks already kept stay.
pub const SAVE_REQUEST_CHUNK: Write = write(
    "INSERT INTO request_chunks (seq, bytes) VALUES (?, ?) ON CONFLICT (seq) DO NOTHING",
    TableGroup::Request,
    Missing::Create,
);

/// An attempt's response in the job's row, if its place there is free
/// (`attempt`, `status`, `content_type`, `body`).
pub const KEEP_IN_ROW: Write = write(
    "UPDATE job SET attempt = ?, status = ?, content_type = ?, body = ? WHERE id = 1 AND attempt IS NULL",
    TableGroup::Job,
    Missing::Skip,
);

/// An attempt's response head in the responses' table (`attempt`,
/// `status`, `content_type`, `size`); its body follows in chunks.
pub const SAVE_RESPONSE_HEAD: Write = write(
    "INSERT INTO responses (attempt, status, content_type, size, streamed) VALUES (?, ?, ?, ?, 0)",
    TableGroup::Responses,
    Missing::Create,
);

/// One chunk of an attempt's response body (`attempt`, `seq`, `bytes`).
pub const SAVE_RESPONSE_CHUNK: Write =
    write("INSERT INTO response_chunks (attempt, seq, bytes) VALUES (?, ?, ?)", TableGroup::Responses, Missing::Create);

/// Deletes an attempt's stored response (`attempt`, the one argument of
/// each) wherever it is kept, in order: its place in the job's row freed,
/// its chunks, its head. A group that does not exist holds none of it.
pub const FORGET_RESPONSE: [Write; 3] = [
    write(
        "UPDATE job SET attempt = NULL, status = NULL, content_type = NULL, body = NULL WHERE id = 1 AND attempt = ?",
        TableGroup::Job,
        Missing::Skip,
    ),
    write("DELETE FROM response_chunks WHERE attempt = ?", TableGroup::Responses, Missing::Skip),
    write("DELETE FROM responses WHERE attempt = ?", TableGroup::Responses, Missing::Skip),
];

/// An attempt's response head in the job's row (`attempt`).
pub const ROW_RESPONSE_HEAD: Read = read(
    "SELECT status, content_type, length(body) AS size, 0 AS streamed FROM job WHERE id = 1 AND attempt = ?",
    TableGroup::Job,
    "response",
);

/// An attempt's response head in the responses' table (`attempt`).
pub const CHUNKED_RESPONSE_HEAD: Read = read(
    "SELECT status, content_type, size, streamed FROM responses WHERE attempt = ?",
    TableGroup::Responses,
    "response",
);

/// An attempt's response body in the job's row (`attempt`).
pub const ROW_RESPONSE_BODY: Read =
    read("SELECT body FROM job WHERE id = 1 AND attempt = ?", TableGroup::Job, "response");

/// An attempt's response body, its chunks in order (`attempt`).
pub const CHUNKED_RESPONSE_BODY: Read =
    read("SELECT bytes FROM response_chunks WHERE attempt = ? ORDER BY seq", TableGroup::Responses, "response chunk");

/// An attempt's response that streams (`attempt`, `content_type`): its
/// body is its events, its size recorded when it ends.
pub const START_STREAM: Write = write(
    "INSERT INTO responses (attempt, status, content_type, size, streamed) VALUES (?, 200, ?, 0, 1)",
    TableGroup::Responses,
    Missing::Create,
);

/// A finished stream's size (`size`, `attempt`).
pub const FINISH_STREAM: Write =
    write("UPDATE responses SET size = ? WHERE attempt = ?", TableGroup::Responses, Missing::Run);

/// One chunk of a stream's event (`attempt`, `seq`, `part`, `bytes`).
pub const APPEND_EVENT: Write = write(
    "INSERT INTO stream_events (attempt, seq, part, bytes) VALUES (?, ?, ?, ?)",
    TableGroup::Stream,
    Missing::Create,
);

/// The events `from..to` of an attempt's stream, in order, each in its
/// parts (`attempt`, `from`, `to`).
pub const LOAD_EVENTS: Read = read(
    "SELECT seq, bytes FROM stream_events WHERE attempt = ? AND seq >= ? AND seq < ? ORDER BY seq, part",
    TableGroup::Stream,
    "stream event",
);

/// How many events of an attempt's stream are stored (`attempt`).
pub const COUNT_EVENTS: Read =
    read("SELECT COUNT(DISTINCT seq) AS n FROM stream_events WHERE attempt = ?", TableGroup::Stream, "event count");

/// A job type's effects, in the type's order.
pub const LOAD_EFFECTS: Read = read("SELECT record FROM effects ORDER BY seq", TableGroup::Effects, "effect");

/// One planned effect (`seq`, `name`, `version`, `record`); planning again
/// keeps the first plan.
pub const PLAN_EFFECT: Write = write(
    "INSERT INTO effects (seq, name, version, record) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    TableGroup::Effects,
    Missing::Create,
);

/// An effect (`version`, `record`) if still at the expected version
/// (`name`, then the version expected).
pub const UPDATE_EFFECT: Write = write(
    "UPDATE effects SET version = ?, record = ? WHERE name = ? AND version = ?",
    TableGroup::Effects,
    Missing::Run,
);

/// How an attempt's stored response body is read back, from where its
/// head was found ([`ResponsePlace`]) and whether it streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRead {
    /// A stream's body: its events, concatenated (its size is only known
    /// once it has ended, so it is not checked).
    Events,
    /// A body in rows (the job's, or its chunks): their bytes,
    /// concatenated, must be the size its head says.
    Rows(Read),
}

impl BodyRead {
    /// The read for a head found in `place`, streamed or not.
    pub fn of(place: ResponsePlace, streamed: bool) -> BodyRead {
        match (place, streamed) {
            (_, true) => BodyRead::Events,
            (ResponsePlace::JobRow, false) => BodyRead::Rows(ROW_RESPONSE_BODY),
            (ResponsePlace::Chunked, false) => BodyRead::Rows(CHUNKED_RESPONSE_BODY),
        }
    }

    /// Whether `read` bytes are the whole body its head says is `size`.
    pub fn complete(self, size: usize, read: usize) -> bool {
        match self {
            BodyRead::Events => true,
            BodyRead::Rows(_) => read == size,
        }
    }

    /// Whether the response may be kept in the object's memory: a
    /// stream's is not (its replays read its events, from any point).
    pub fn keepable(self) -> bool {
        self != BodyRead::Events
    }
}

#[cfg(test)]
mod tests;
