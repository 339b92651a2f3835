//! The statements the Ledger's store runs on its tables, as data: each
//! names the one table it touches, and a write says what it needs of its
//! table's group first ([`Missing`]) — created, or skipped when its table is
//! absent. The store asks [`Tables::before`] and performs the answer, then
//! the statement, so no write path decides on its own which tables to
//! create; a read of a table that does not exist runs no query
//! ([`Tables::has`]).
//!
//! The job's first call writes [`INSERT_JOB`] (the claim, with who the job
//! belongs to), then [`KEEP_IN_ROW_WITH_JOB`] (the result: the response in
//! the job's row and the job's compare-and-swap): one statement per
//! transition, one table created.

use super::{ResponsePlace, TableGroup, TableGroups, Tables};

/// A statement that writes one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write {
    /// The statement, its arguments as `?`.
    pub sql: &'static str,
    /// The table it writes.
    pub table: &'static str,
    /// What it needs when this lifetime has not created its table's group.
    pub missing: Missing,
}

impl Write {
    /// The group of its table.
    pub fn group(&self) -> TableGroups {
        TableGroups::of_tables([self.table])
    }
}

/// What a write does about its group's tables before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Creates them if this lifetime has not (`IF NOT EXISTS`): the write
    /// that may be a group's first.
    Create,
    /// Creates them and another group's: what the row it writes promises
    /// its readers (a streamed response, its events' table).
    CreateWith(TableGroup),
    /// Runs only if its table exists: with none, there is nothing to change.
    Skip,
    /// Runs as is: an earlier write created them (a missing table is an
    /// error, as storage that lost them is).
    Run,
}

/// What the store does before a write ([`Tables::before`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// Runs the groups' schemas, in order, then the write.
    Create(TableGroups),
    /// Runs the write.
    Run,
    /// Runs nothing: the write would change no row (it wrote none).
    Skip,
}

impl Tables {
    /// What `write` needs before it runs, given what this lifetime knows
    /// of its tables (after a lookup).
    pub fn before(self, write: &Write) -> Before {
        let needed = match write.missing {
            Missing::Skip if !self.has(write.table) => return Before::Skip,
            Missing::Create => write.group(),
            Missing::CreateWith(other) => write.group().with(other),
            Missing::Skip | Missing::Run => TableGroups::default(),
        };
        let to_create = needed.without(self.created_groups());
        if to_create.is_empty() { Before::Run } else { Before::Create(to_create) }
    }
}

/// A statement that reads one table: read as nothing when the table does
/// not exist (no query runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// The statement, its arguments as `?`.
    pub sql: &'static str,
    /// The table it reads.
    pub table: &'static str,
    /// What is read, named in the error when a row is unreadable.
    pub what: &'static str,
}

const fn write(sql: &'static str, table: &'static str, missing: Missing) -> Write {
    Write { sql, table, missing }
}

const fn read(sql: &'static str, table: &'static str, what: &'static str) -> Read {
    Read { sql, table, what }
}

/// The job's row, its record and owner.
pub const LOAD_JOB: Read = read("SELECT record, meta FROM job WHERE id = 1", "job", "job record");

/// A new job (`version`, `record`, and who it belongs to, `meta`, or NULL
/// to be saved later by [`SAVE_META`]); writes nothing if the object has one.
pub const INSERT_JOB: Write = write(
    "INSERT INTO job (id, version, record, meta) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
    "job",
    Missing::Create,
);

/// The job (`version`, `record`) if still at the expected version (the third argument).
pub const UPDATE_JOB: Write =
    write("UPDATE job SET version = ?, record = ? WHERE id = 1 AND version = ?", "job", Missing::Run);

/// Who the job belongs to, once (one already there stays).
pub const SAVE_META: Write = write("UPDATE job SET meta = ? WHERE id = 1 AND meta IS NULL", "job", Missing::Create);

/// Who the job belongs to, rewritten (its metered tokens).
pub const UPDATE_META: Write = write("UPDATE job SET meta = ? WHERE id = 1 AND meta IS NOT NULL", "job", Missing::Run);

/// The outbox's record.
pub const LOAD_OUTBOX: Read = read("SELECT record FROM outbox WHERE id = 1", "outbox", "outbox");

/// The queue's row: a record kept before the outbox's, and the dead letter.
pub const LOAD_QUEUE_ROW: Read =
    read("SELECT sends, last_sent_ms, dead_lettered_ms FROM queue WHERE id = 1", "queue", "queue");

/// The outbox's record, replacing any.
pub const SAVE_OUTBOX: Write = write(
    "INSERT INTO outbox (id, record) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record",
    "outbox",
    Missing::Create,
);

/// When the job was sent to the dead-letter queue (`?1`, ms).
pub const NOTE_DEAD_LETTERED: Write = write(
    "INSERT INTO queue (id, sends, last_sent_ms, dead_lettered_ms) VALUES (1, 0, 0, ?1)
     ON CONFLICT (id) DO UPDATE SET dead_lettered_ms = ?1",
    "queue",
    Missing::Create,
);

/// The job is no longer dead-lettered (none was, with no queue table).
pub const CLEAR_DEAD_LETTERED: Write =
    write("UPDATE queue SET dead_lettered_ms = 0 WHERE id = 1", "queue", Missing::Skip);

/// A kept request's submission.
pub const LOAD_SUBMISSION: Read = read("SELECT submission FROM request WHERE id = 1", "request", "request");

/// A kept request's body, its chunks in order.
pub const LOAD_REQUEST_BODY: Read =
    read("SELECT bytes FROM request_chunks ORDER BY seq", "request_chunks", "request chunk");

/// A kept request's submission. The newest submission wins: a job-type run
/// keeps its request when it starts, and a later adoption into the
/// background must be able to say so (`background`), or the queue would
/// drive it as a caller's job.
pub const SAVE_SUBMISSION: Write = write(
    "INSERT INTO request (id, submission) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET submission = excluded.submission",
    "request",
    Missing::Create,
);

/// One chunk of a kept request's body (`seq`, `bytes`). The body is the
/// same for every submission of the job (same key, same fingerprint), so
/// chunks already kept stay.
pub const SAVE_REQUEST_CHUNK: Write = write(
    "INSERT INTO request_chunks (seq, bytes) VALUES (?, ?) ON CONFLICT (seq) DO NOTHING",
    "request_chunks",
    Missing::Create,
);

/// An attempt's response in the job's row, if its place there is free
/// (`attempt`, `status`, `content_type`, `body`).
pub const KEEP_IN_ROW: Write = write(
    "UPDATE job SET attempt = ?, status = ?, content_type = ?, body = ? WHERE id = 1 AND attempt IS NULL",
    "job",
    Missing::Skip,
);

/// [`KEEP_IN_ROW`] and [`UPDATE_JOB`] as one statement (`attempt`,
/// `status`, `content_type`, `body`, then `version`, `record`, then the
/// expected version): writes nothing unless the row's place is free and
/// the job is still at the expected version (then the two run in order,
/// as they would with no job table: skipped then, as [`KEEP_IN_ROW`] is).
pub const KEEP_IN_ROW_WITH_JOB: Write = write(
    "UPDATE job SET attempt = ?, status = ?, content_type = ?, body = ?, version = ?, record = ?
     WHERE id = 1 AND attempt IS NULL AND version = ?",
    "job",
    Missing::Skip,
);

/// An attempt's response head in the responses' table (`attempt`,
/// `status`, `content_type`, `size`); its body follows in chunks.
pub const SAVE_RESPONSE_HEAD: Write = write(
    "INSERT INTO responses (attempt, status, content_type, size, streamed) VALUES (?, ?, ?, ?, 0)",
    "responses",
    Missing::Create,
);

/// One chunk of an attempt's response body (`attempt`, `seq`, `bytes`).
pub const SAVE_RESPONSE_CHUNK: Write =
    write("INSERT INTO response_chunks (attempt, seq, bytes) VALUES (?, ?, ?)", "response_chunks", Missing::Create);

/// Deletes an attempt's stored response (`attempt`, the one argument of
/// each) wherever it is kept, in order: its place in the job's row freed,
/// its chunks, its head. A group that does not exist holds none of it.
pub const FORGET_RESPONSE: [Write; 3] = [
    write(
        "UPDATE job SET attempt = NULL, status = NULL, content_type = NULL, body = NULL WHERE id = 1 AND attempt = ?",
        "job",
        Missing::Skip,
    ),
    write("DELETE FROM response_chunks WHERE attempt = ?", "response_chunks", Missing::Skip),
    write("DELETE FROM responses WHERE attempt = ?", "responses", Missing::Skip),
];

/// An attempt's response head in the job's row (`attempt`).
pub const ROW_RESPONSE_HEAD: Read = read(
    "SELECT status, content_type, length(body) AS size, 0 AS streamed FROM job WHERE id = 1 AND attempt = ?",
    "job",
    "response",
);

/// An attempt's response head in the responses' table (`attempt`).
pub const CHUNKED_RESPONSE_HEAD: Read =
    read("SELECT status, content_type, size, streamed FROM responses WHERE attempt = ?", "responses", "response");

/// Where an attempt's response head may be (`attempt`, the one argument
/// of each), in the order the store looks: the job's row first (most jobs
/// keep their one response there: one read), then the responses' table.
/// An attempt's response is in one of them at most.
pub const RESPONSE_HEADS: [(ResponsePlace, Read); 2] =
    [(ResponsePlace::JobRow, ROW_RESPONSE_HEAD), (ResponsePlace::Chunked, CHUNKED_RESPONSE_HEAD)];

/// An attempt's response body in the job's row (`attempt`).
pub const ROW_RESPONSE_BODY: Read = read("SELECT body FROM job WHERE id = 1 AND attempt = ?", "job", "response");

/// An attempt's response body, its chunks in order (`attempt`).
pub const CHUNKED_RESPONSE_BODY: Read =
    read("SELECT bytes FROM response_chunks WHERE attempt = ? ORDER BY seq", "response_chunks", "response chunk");

/// An attempt's response that streams (`attempt`, `content_type`): its
/// body is its events, its size recorded when it ends.
pub const START_STREAM: Write = write(
    "INSERT INTO responses (attempt, status, content_type, size, streamed) VALUES (?, 200, ?, 0, 1)",
    "responses",
    Missing::CreateWith(TableGroup::Stream),
);

/// A finished stream's size (`size`, `attempt`).
pub const FINISH_STREAM: Write = write("UPDATE responses SET size = ? WHERE attempt = ?", "responses", Missing::Run);

/// One chunk of a stream's event (`attempt`, `seq`, `part`, `bytes`).
pub const APPEND_EVENT: Write = write(
    "INSERT INTO stream_events (attempt, seq, part, bytes) VALUES (?, ?, ?, ?)",
    "stream_events",
    Missing::Create,
);

/// The events `from..to` of an attempt's stream, in order, each in its
/// parts (`attempt`, `from`, `to`).
pub const LOAD_EVENTS: Read = read(
    "SELECT seq, bytes FROM stream_events WHERE attempt = ? AND seq >= ? AND seq < ? ORDER BY seq, part",
    "stream_events",
    "stream event",
);

/// How many events of an attempt's stream are stored (`attempt`).
pub const COUNT_EVENTS: Read =
    read("SELECT COUNT(DISTINCT seq) AS n FROM stream_events WHERE attempt = ?", "stream_events", "event count");

/// A job type's effects, in the type's order.
pub const LOAD_EFFECTS: Read = read("SELECT record FROM effects ORDER BY seq", "effects", "effect");

/// One planned effect (`seq`, `name`, `version`, `record`); planning again
/// keeps the first plan.
pub const PLAN_EFFECT: Write = write(
    "INSERT INTO effects (seq, name, version, record) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    "effects",
    Missing::Create,
);

/// An effect (`version`, `record`) if still at the expected version
/// (`name`, then the version expected).
pub const UPDATE_EFFECT: Write =
    write("UPDATE effects SET version = ?, record = ? WHERE name = ? AND version = ?", "effects", Missing::Run);

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
