//! The Ledger's SQLite tables: the job record and the stored response of
//! each attempt, its body in chunks (a Durable Object's SQLite value holds at
//! most 2 MB; rows here hold at most [`CHUNK_BYTES`]).
//!
//! SQL calls are synchronous inside a Durable Object, so a read, a
//! transition and its write happen with no other request in between. Every
//! job write is still a compare-and-swap on the job's version: a writer whose
//! copy is stale gets [`StoreError::LostRace`], never a silent overwrite.
//!
//! Reads never write: before the first job write there are no tables, and a
//! read of a fresh object finds nothing and creates nothing.
//!
//! The object also remembers what it knows of its own tables ([`Known`]):
//! whether they exist, and the job as it last read or wrote it. SQLite stays
//! the authority (every write goes to it first); the memory only saves the
//! reads: one load of the job per object lifetime instead of one per path,
//! no query to learn that a fresh object has no table, the schema created
//! once per lifetime instead of before every first write, and a finished
//! job's (small) response kept as it was written, so its replays read no row.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use onejob_core::background::Outbox;
use onejob_core::effect::Effect;
use onejob_core::job::Job;
use worker::{SqlCursor, SqlStorage, SqlStorageValue as Value};

use crate::answer::StoredResponse;
use crate::api::handoff::JobMeta;
use crate::error::EdgeError;

/// Largest body chunk per row.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// What a stored response is, without its body.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    pub status: u16,
    pub content_type: String,
    /// Body bytes (a stream's: once it has ended).
    pub size: u64,
    /// The body is a stored stream of events.
    pub streamed: bool,
}

/// Why a write did not happen.
#[derive(Debug)]
pub enum StoreError {
    /// The job changed since this writer read it (another writer won).
    LostRace,
    /// Storage failed, or holds something unreadable.
    Failed(worker::Error),
}

impl From<worker::Error> for StoreError {
    fn from(error: worker::Error) -> Self {
        Self::Failed(error)
    }
}

impl From<StoreError> for worker::Error {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::LostRace => EdgeError::broken("the job changed concurrently").into(),
            StoreError::Failed(error) => error,
        }
    }
}

/// What one object knows of its own storage, kept for its lifetime (it is
/// dropped with the object's memory on a restart, and read again).
#[derive(Default)]
pub struct Known {
    /// The table groups that exist (`None`: not looked up yet in this lifetime).
    present: Cell<Option<u8>>,
    /// The table groups this lifetime created (or completed): not created again.
    created: Cell<u8>,
    /// The job as last read or written here: `Some(None)` is "none".
    job: RefCell<Option<Option<Job>>>,
    /// Who the job belongs to ([`JobMeta`]) as last read or written here,
    /// the same way: read by every index write and replay count, written
    /// once per job (and when its tokens are metered).
    meta: RefCell<Option<Option<JobMeta>>>,
    /// One attempt's stored response as last read or written here (not a
    /// stream's, none larger than [`KEPT_RESPONSE_BYTES`]): a finished job's
    /// replays read it from memory, not from its rows.
    response: RefCell<Option<(u32, StoredResponse)>>,
}

/// The largest response body [`Known`] keeps in memory.
const KEPT_RESPONSE_BYTES: usize = 64 * 1024;

/// The tables, in groups created together when first written: a caller's
/// first call creates only the job's group, not the tables of queues,
/// kept requests, effects or streams it never writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tables {
    /// The job record, who it belongs to, the attempts' responses.
    Job = 1,
    /// A background job's queue message and its dead letter.
    Queue = 2,
    /// A kept request (a background job's, a job type's).
    Request = 4,
    /// A job type's effects.
    Effects = 8,
    /// A streamed answer's events.
    Stream = 16,
}

impl Tables {
    const ALL: [Tables; 5] = [Tables::Job, Tables::Queue, Tables::Request, Tables::Effects, Tables::Stream];

    /// The group's tables, as [`Tables::schema`] creates them.
    fn names(self) -> &'static [&'static str] {
        match self {
            Tables::Job => &["jobs", "meta", "responses", "response_chunks"],
            Tables::Queue => &["queue", "outbox"],
            Tables::Request => &["request", "request_chunks"],
            Tables::Effects => &["effects"],
            Tables::Stream => &["stream_events"],
        }
    }

    /// The group a table of the schema belongs to.
    fn of_table(name: &str) -> Option<Tables> {
        Tables::ALL.into_iter().find(|group| group.names().contains(&name))
    }

    fn schema(self) -> &'static str {
        match self {
            Tables::Job => {
                "CREATE TABLE IF NOT EXISTS jobs (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    version INTEGER NOT NULL,
                    record TEXT NOT NULL
                );
                CREATE TABLE IF NOT EXISTS meta (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    record TEXT NOT NULL
                );
                CREATE TABLE IF NOT EXISTS responses (
                    attempt INTEGER PRIMARY KEY,
                    status INTEGER NOT NULL,
                    content_type TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    streamed INTEGER NOT NULL
                );
                CREATE TABLE IF NOT EXISTS response_chunks (
                    attempt INTEGER NOT NULL,
                    seq INTEGER NOT NULL,
                    bytes BLOB NOT NULL,
                    PRIMARY KEY (attempt, seq)
                )"
            }
            // Whether the job was dead-lettered; its counts are only read
            // from a Ledger written before the outbox table (`load_outbox`).
            Tables::Queue => {
                "CREATE TABLE IF NOT EXISTS queue (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    sends INTEGER NOT NULL,
                    last_sent_ms INTEGER NOT NULL,
                    dead_lettered_ms INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE IF NOT EXISTS outbox (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    record TEXT NOT NULL
                )"
            }
            Tables::Request => {
                "CREATE TABLE IF NOT EXISTS request (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    submission TEXT NOT NULL
                );
                CREATE TABLE IF NOT EXISTS request_chunks (
                    seq INTEGER PRIMARY KEY,
                    bytes BLOB NOT NULL
                )"
            }
            Tables::Effects => {
                "CREATE TABLE IF NOT EXISTS effects (
                    seq INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    version INTEGER NOT NULL,
                    record TEXT NOT NULL
                )"
            }
            Tables::Stream => {
                "CREATE TABLE IF NOT EXISTS stream_events (
                    attempt INTEGER NOT NULL,
                    seq INTEGER NOT NULL,
                    part INTEGER NOT NULL,
                    bytes BLOB NOT NULL,
                    PRIMARY KEY (attempt, seq, part)
                )"
            }
        }
    }
}

pub struct Store {
    sql: SqlStorage,
    known: Rc<Known>,
}

impl Store {
    pub fn new(sql: SqlStorage, known: Rc<Known>) -> Self {
        Self { sql, known }
    }

    /// The job, if this object has one.
    pub fn load_job(&self) -> worker::Result<Option<Job>> {
        if let Some(known) = self.known.job.borrow().as_ref() {
            return Ok(known.clone());
        }
        let job = self.read_job()?;
        *self.known.job.borrow_mut() = Some(job.clone());
        Ok(job)
    }

    fn read_job(&self) -> worker::Result<Option<Job>> {
        let record = self.first_text(Tables::Job, "SELECT record FROM jobs WHERE id = 1", "job record")?;
        record.map(|record| serde_json::from_str(&record).map_err(|_| unreadable("job record"))).transpose()
    }

    /// The stored job's version, without reading the job.
    pub fn job_version(&self) -> worker::Result<Option<u64>> {
        if let Some(known) = self.known.job.borrow().as_ref() {
            return Ok(known.as_ref().map(Job::version));
        }
        match self.first_row(Tables::Job, "SELECT version FROM jobs WHERE id = 1", vec![])?.as_deref() {
            Some([Value::Integer(version)]) => Ok(u64::try_from(*version).ok()),
            _ => Ok(None),
        }
    }

    /// Records a new job; `LostRace` if the object already has one.
    pub fn insert_job(&self, job: &Job) -> Result<(), StoreError> {
        self.create(Tables::Job)?;
        let written = self.write(
            "INSERT INTO jobs (id, version, record) VALUES (1, ?, ?) ON CONFLICT (id) DO NOTHING",
            vec![version(job.version())?, json(job)?],
        )?;
        self.wrote_job(written, job)
    }

    /// Writes `job` if the stored job is still at `expected_version`.
    pub fn update_job(&self, expected_version: u64, job: &Job) -> Result<(), StoreError> {
        let written = self.write(
            "UPDATE jobs SET version = ?, record = ? WHERE id = 1 AND version = ?",
            vec![version(job.version())?, json(job)?, version(expected_version)?],
        )?;
        self.wrote_job(written, job)
    }

    /// Remembers a written job; a write that lost leaves the next load to
    /// read what won.
    fn wrote_job(&self, written: usize, job: &Job) -> Result<(), StoreError> {
        let mut known = self.known.job.borrow_mut();
        if written == 0 {
            *known = None;
            Err(StoreError::LostRace)
        } else {
            *known = Some(Some(job.clone()));
            Ok(())
        }
    }

    /// Everything was deleted (`deleteAll`): no table, no job.
    pub fn forget_all(&self) {
        self.known.present.set(Some(0));
        self.known.created.set(0);
        *self.known.job.borrow_mut() = Some(None);
        *self.known.meta.borrow_mut() = Some(None);
        self.known.response.take();
    }

    /// Remembers `attempt`'s stored response (a small one), or forgets
    /// the one remembered when `response` is `None` or large.
    fn remember_response(&self, attempt: u32, response: Option<&StoredResponse>) {
        *self.known.response.borrow_mut() = response
            .filter(|response| response.body.len() <= KEPT_RESPONSE_BYTES)
            .map(|response| (attempt, response.clone()));
    }

    /// Keeps who the job belongs to and what it asked for, for the
    /// operators' index (the job record itself holds neither).
    pub fn save_meta(&self, meta: &JobMeta) -> worker::Result<()> {
        self.create(Tables::Job)?;
        let written =
            self.write("INSERT INTO meta (id, record) VALUES (1, ?) ON CONFLICT (id) DO NOTHING", vec![json(meta)?])?;
        // A row already there stays (and is read when next asked for).
        *self.known.meta.borrow_mut() = (written > 0).then(|| Some(meta.clone()));
        Ok(())
    }

    /// Rewrites who the job belongs to (its metered tokens).
    pub fn update_meta(&self, meta: &JobMeta) -> worker::Result<()> {
        self.known.meta.take();
        let written = self.write("UPDATE meta SET record = ? WHERE id = 1", vec![json(meta)?])?;
        *self.known.meta.borrow_mut() = Some((written > 0).then(|| meta.clone()));
        Ok(())
    }

    /// Who the job belongs to, if recorded.
    pub fn load_meta(&self) -> worker::Result<Option<JobMeta>> {
        if let Some(known) = self.known.meta.borrow().as_ref() {
            return Ok(known.clone());
        }
        let record = self.first_text(Tables::Job, "SELECT record FROM meta WHERE id = 1", "job meta")?;
        let meta = record.and_then(|record| serde_json::from_str(&record).ok());
        *self.known.meta.borrow_mut() = Some(meta.clone());
        Ok(meta)
    }

    /// What the Ledger knows of the job's queue message (see
    /// [`Outbox`]): its own row, or a record kept before sends were
    /// confirmed (its `queue` row's count), or none.
    pub fn load_outbox(&self) -> worker::Result<Outbox> {
        if let Some(record) = self.first_text(Tables::Queue, "SELECT record FROM outbox WHERE id = 1", "outbox")? {
            return serde_json::from_str(&record).map_err(|_| unreadable("outbox"));
        }
        match self.first_row(Tables::Queue, "SELECT sends, last_sent_ms FROM queue WHERE id = 1", vec![])?.as_deref() {
            Some([Value::Integer(sends), Value::Integer(at)]) => {
                Ok(Outbox::legacy(u32::try_from(*sends).unwrap_or(u32::MAX), u64::try_from(*at).unwrap_or(0)))
            }
            _ => Ok(Outbox::default()),
        }
    }

    /// Writes the outbox's record, beside the job record: a send never
    /// changes the version an attempt in flight holds.
    pub fn save_outbox(&self, outbox: &Outbox) -> worker::Result<()> {
        self.create(Tables::Queue)?;
        self.write(
            "INSERT INTO outbox (id, record) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET record = excluded.record",
            vec![json(outbox)?],
        )?;
        Ok(())
    }

    /// Changes the outbox's record with `change` (read, changed and written
    /// with nothing in between) and returns it as changed.
    pub fn change_outbox(&self, change: &mut dyn FnMut(&mut Outbox)) -> worker::Result<Outbox> {
        let mut outbox = self.load_outbox()?;
        let before = outbox;
        change(&mut outbox);
        if outbox != before {
            self.save_outbox(&outbox)?;
        }
        Ok(outbox)
    }

    /// Whether the job was sent to the dead-letter queue.
    pub fn dead_lettered(&self) -> worker::Result<bool> {
        Ok(matches!(
            self.first_row(Tables::Queue, "SELECT dead_lettered_ms FROM queue WHERE id = 1", vec![])?.as_deref(),
            Some([Value::Integer(ms)]) if *ms > 0
        ))
    }

    /// Records that the job was sent to the dead-letter queue (again after
    /// a replay, which clears it).
    pub fn note_dead_lettered(&self, now_ms: u64) -> worker::Result<()> {
        self.create(Tables::Queue)?;
        self.write(
            "INSERT INTO queue (id, sends, last_sent_ms, dead_lettered_ms) VALUES (1, 0, 0, ?1)
             ON CONFLICT (id) DO UPDATE SET dead_lettered_ms = ?1",
            vec![Value::Integer(i64::try_from(now_ms).unwrap_or(i64::MAX))],
        )?;
        Ok(())
    }

    /// Forgets that the job was dead-lettered (it was replayed or resolved).
    pub fn clear_dead_lettered(&self) -> worker::Result<()> {
        if !self.may_exist(Tables::Queue)? {
            return Ok(());
        }
        self.write("UPDATE queue SET dead_lettered_ms = 0 WHERE id = 1", vec![]).map(|_| ())
    }

    /// Keeps a job's request (its submission, as JSON, and its body in
    /// chunks): a background job's (the queue message names the job, the
    /// Ledger holds what to send) and a job type's (its effects are planned
    /// from it).
    pub fn save_request(&self, submission: &str, body: &[u8]) -> worker::Result<()> {
        self.create(Tables::Request)?;
        self.write(
            // The newest submission wins: a job-type run keeps its request
            // when it starts, and a later adoption into the background must
            // be able to say so (`background`), or the queue would drive it
            // as a caller's job. The body is the same (same key, same
            // fingerprint), so its chunks are kept.
            "INSERT INTO request (id, submission) VALUES (1, ?) \
             ON CONFLICT (id) DO UPDATE SET submission = excluded.submission",
            vec![Value::String(submission.to_owned())],
        )?;
        for (seq, bytes) in body.chunks(CHUNK_BYTES).enumerate() {
            self.write(
                "INSERT INTO request_chunks (seq, bytes) VALUES (?, ?) ON CONFLICT (seq) DO NOTHING",
                vec![Value::Integer(seq as i64), Value::Blob(bytes.to_vec())],
            )?;
        }
        Ok(())
    }

    /// The submission a kept request was made with (without its body).
    pub fn load_submission(&self) -> worker::Result<Option<String>> {
        self.first_text(Tables::Request, "SELECT submission FROM request WHERE id = 1", "request")
    }

    /// A background job's request, if this object keeps one.
    pub fn load_request(&self) -> worker::Result<Option<(String, Vec<u8>)>> {
        let Some(submission) = self.load_submission()? else { return Ok(None) };
        let mut body = Vec::new();
        for row in self.sql.exec("SELECT bytes FROM request_chunks ORDER BY seq", None)?.raw() {
            match row?.into_iter().next() {
                Some(Value::Blob(bytes)) => body.extend_from_slice(&bytes),
                _ => return Err(unreadable("request chunk")),
            }
        }
        Ok(Some((submission, body)))
    }

    /// Stores an attempt's response, its body split into chunks. An attempt
    /// reports once (its ticket holds the job once), so this never overwrites.
    pub fn save_response(&self, attempt: u32, response: &StoredResponse) -> worker::Result<()> {
        self.create(Tables::Job)?;
        let number = attempt;
        let attempt = Value::Integer(i64::from(attempt));
        self.write(
            "INSERT INTO responses (attempt, status, content_type, size, streamed) VALUES (?, ?, ?, ?, 0)",
            vec![
                attempt.clone(),
                Value::Integer(i64::from(response.status)),
                Value::String(response.content_type.clone()),
                Value::Integer(response.body.len() as i64),
            ],
        )?;
        for (seq, chunk) in response.body.chunks(CHUNK_BYTES).enumerate() {
            self.write(
                "INSERT INTO response_chunks (attempt, seq, bytes) VALUES (?, ?, ?)",
                vec![attempt.clone(), Value::Integer(seq as i64), Value::Blob(chunk.to_vec())],
            )?;
        }
        // Most jobs are replayed, if at all, soon after: from memory.
        self.remember_response(number, Some(response));
        Ok(())
    }

    /// Keeps `answer` as an attempt's response, in place of any it stored:
    /// the final answer a caller got for an attempt whose own outcome kept
    /// none (unknown), or whose response is not what was answered (a race's
    /// other racer's unknown outcome decided it). The job replays it once it
    /// is dead ([`onejob_core::answer`]).
    pub fn keep_answer(&self, attempt: u32, answer: &StoredResponse) -> worker::Result<()> {
        self.remember_response(attempt, None);
        let number = Value::Integer(i64::from(attempt));
        self.write("DELETE FROM response_chunks WHERE attempt = ?", vec![number.clone()])?;
        self.write("DELETE FROM responses WHERE attempt = ?", vec![number])?;
        self.save_response(attempt, answer)
    }

    /// What an attempt's stored response is, without reading its body.
    pub fn response_head(&self, attempt: u32) -> worker::Result<Option<ResponseHead>> {
        let row = self.first_row(
            Tables::Job,
            "SELECT status, content_type, size, streamed FROM responses WHERE attempt = ?",
            vec![Value::Integer(i64::from(attempt))],
        )?;
        match row.as_deref() {
            None => Ok(None),
            Some(
                [Value::Integer(status), Value::String(content_type), Value::Integer(size), Value::Integer(streamed)],
            ) => Ok(Some(ResponseHead {
                status: u16::try_from(*status).unwrap_or(500),
                content_type: content_type.clone(),
                size: u64::try_from(*size).unwrap_or(0),
                streamed: *streamed != 0,
            })),
            Some(_) => Err(unreadable("response")),
        }
    }

    /// An attempt's stored response, body reassembled (a stream's from its events).
    pub fn load_response(&self, attempt: u32) -> worker::Result<Option<StoredResponse>> {
        if let Some((_, response)) = self.known.response.borrow().as_ref().filter(|(kept, _)| *kept == attempt) {
            return Ok(Some(response.clone()));
        }
        let Some(head) = self.response_head(attempt)? else { return Ok(None) };
        let body = if head.streamed {
            self.load_events(attempt, 0, u64::MAX)?.concat()
        } else {
            let mut body = Vec::with_capacity(usize::try_from(head.size).unwrap_or(0));
            let chunks = self.sql.exec(
                "SELECT bytes FROM response_chunks WHERE attempt = ? ORDER BY seq",
                vec![Value::Integer(i64::from(attempt))],
            )?;
            for row in chunks.raw() {
                match row?.into_iter().next() {
                    Some(Value::Blob(bytes)) => body.extend_from_slice(&bytes),
                    // An empty BLOB may come back as an empty string.
                    Some(Value::String(text)) if text.is_empty() => {}
                    _ => return Err(unreadable("response chunk")),
                }
            }
            if body.len() as u64 != head.size {
                return Err(unreadable("response body (size mismatch)"));
            }
            body
        };
        let response = StoredResponse { status: head.status, content_type: head.content_type, body };
        if !head.streamed {
            self.remember_response(attempt, Some(&response));
        }
        Ok(Some(response))
    }

    /// Appends the events numbered `first_seq..` of an attempt's stream
    /// (an event longer than a chunk spans several rows).
    pub fn append_events(&self, attempt: u32, first_seq: u64, events: &[Vec<u8>]) -> worker::Result<()> {
        self.create(Tables::Stream)?;
        for (offset, event) in events.iter().enumerate() {
            for (part, bytes) in event.chunks(CHUNK_BYTES).enumerate() {
                self.write(
                    "INSERT INTO stream_events (attempt, seq, part, bytes) VALUES (?, ?, ?, ?)",
                    vec![
                        Value::Integer(i64::from(attempt)),
                        Value::Integer((first_seq + offset as u64) as i64),
                        Value::Integer(part as i64),
                        Value::Blob(bytes.to_vec()),
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// The stored events `from..to` of an attempt's stream, each whole.
    pub fn load_events(&self, attempt: u32, from: u64, to: u64) -> worker::Result<Vec<Vec<u8>>> {
        let rows = self.sql.exec(
            "SELECT seq, bytes FROM stream_events WHERE attempt = ? AND seq >= ? AND seq < ? ORDER BY seq, part",
            vec![Value::Integer(i64::from(attempt)), Value::Integer(clamp(from)), Value::Integer(clamp(to))],
        )?;
        let mut events: Vec<Vec<u8>> = Vec::new();
        let mut current = None;
        for row in rows.raw() {
            let mut values = row?.into_iter();
            let (seq, bytes) = match (values.next(), values.next()) {
                (Some(Value::Integer(seq)), Some(Value::Blob(bytes))) => (seq, bytes),
                _ => return Err(unreadable("stream event")),
            };
            if current == Some(seq) {
                if let Some(last) = events.last_mut() {
                    last.extend_from_slice(&bytes);
                }
            } else {
                events.push(bytes);
                current = Some(seq);
            }
        }
        Ok(events)
    }

    /// Records that an attempt's response streams: its body is its events.
    pub fn start_streamed_response(&self, attempt: u32, content_type: &str) -> worker::Result<()> {
        self.remember_response(attempt, None);
        self.create(Tables::Job)?;
        self.create(Tables::Stream)?;
        self.write(
            "INSERT INTO responses (attempt, status, content_type, size, streamed) VALUES (?, 200, ?, 0, 1)",
            vec![Value::Integer(i64::from(attempt)), Value::String(content_type.to_owned())],
        )?;
        Ok(())
    }

    /// Records a finished stream's size.
    pub fn finish_streamed_response(&self, attempt: u32, size: u64) -> worker::Result<()> {
        self.write(
            "UPDATE responses SET size = ? WHERE attempt = ?",
            vec![Value::Integer(clamp(size)), Value::Integer(i64::from(attempt))],
        )?;
        Ok(())
    }

    /// How many events of an attempt's stream are stored.
    pub fn count_events(&self, attempt: u32) -> worker::Result<u64> {
        let row = self.first_row(
            Tables::Stream,
            "SELECT COUNT(DISTINCT seq) FROM stream_events WHERE attempt = ?",
            vec![Value::Integer(i64::from(attempt))],
        )?;
        match row.as_deref() {
            Some([Value::Integer(n)]) => Ok(u64::try_from(*n).unwrap_or(0)),
            _ => Ok(0),
        }
    }

    /// A job type's effects, in the type's order (none before they are planned).
    pub fn load_effects(&self) -> worker::Result<Vec<Effect>> {
        if !self.may_exist(Tables::Effects)? {
            return Ok(Vec::new());
        }
        let cursor = match self.sql.exec("SELECT record FROM effects ORDER BY seq", None) {
            Ok(cursor) => cursor,
            Err(error) if error.to_string().contains("no such table") => return Ok(Vec::new()),
            Err(error) => return Err(error),
        };
        let mut effects = Vec::new();
        for row in cursor.raw() {
            let Some(Value::String(record)) = row?.into_iter().next() else {
                return Err(unreadable("effect"));
            };
            effects.push(serde_json::from_str(&record).map_err(|_| unreadable("effect"))?);
        }
        Ok(effects)
    }

    /// Plans the effects, once: planning again (after a restart, by a
    /// duplicate) keeps the first plan.
    pub fn plan_effects(&self, effects: &[Effect]) -> worker::Result<()> {
        self.create(Tables::Effects)?;
        for (seq, effect) in effects.iter().enumerate() {
            self.write(
                "INSERT INTO effects (seq, name, version, record) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                vec![
                    Value::Integer(seq as i64),
                    Value::String(effect.name.clone()),
                    version(effect.version)?,
                    json(effect)?,
                ],
            )?;
        }
        Ok(())
    }

    /// Writes `effect` if its stored version is still `expected_version`
    /// (the compare-and-swap every claim and record goes through).
    pub fn update_effect(&self, expected_version: u64, effect: &Effect) -> Result<(), StoreError> {
        let written = self.write(
            "UPDATE effects SET version = ?, record = ? WHERE name = ? AND version = ?",
            vec![
                version(effect.version)?,
                json(effect)?,
                Value::String(effect.name.clone()),
                version(expected_version)?,
            ],
        )?;
        if written == 0 { Err(StoreError::LostRace) } else { Ok(()) }
    }

    /// Deletes the job and everything it kept, every row of every table
    /// it has, with nothing in between (a keyless job replaced by a new one
    /// under its key: the Ledger's `keyless`). The tables stay for the next
    /// job's first write; the object then knows it has no job.
    pub fn clear_job(&self) -> worker::Result<()> {
        let present = self.present()?;
        let tables = Tables::ALL.into_iter().filter(|group| present & *group as u8 != 0).flat_map(Tables::names);
        for table in tables {
            match self.sql.exec(&format!("DELETE FROM {table}"), None) {
                Ok(cursor) => cursor.raw().try_for_each(|row| row.map(drop))?,
                Err(error) if error.to_string().contains("no such table") => {}
                Err(error) => return Err(error),
            }
        }
        *self.known.job.borrow_mut() = Some(None);
        *self.known.meta.borrow_mut() = Some(None);
        self.known.response.take();
        Ok(())
    }

    /// Creates `group`'s tables if this lifetime has not (`IF NOT EXISTS`:
    /// an older object's tables are kept, and the ones added since created).
    fn create(&self, group: Tables) -> worker::Result<()> {
        let bit = group as u8;
        if self.known.created.get() & bit != 0 {
            return Ok(());
        }
        self.sql.exec(group.schema(), None)?;
        self.known.created.set(self.known.created.get() | bit);
        let present = self.present()?;
        self.known.present.set(Some(present | bit));
        Ok(())
    }

    /// Whether `group`'s tables may exist (looked up once per lifetime, and
    /// kept as this object creates or deletes them). One that may exist can
    /// still lack a table added since it was created: reads find nothing.
    fn may_exist(&self, group: Tables) -> worker::Result<bool> {
        Ok(self.present()? & group as u8 != 0)
    }

    fn present(&self) -> worker::Result<u8> {
        if let Some(present) = self.known.present.get() {
            return Ok(present);
        }
        let mut present = 0;
        for row in self.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'", None)?.raw() {
            if let Some(Value::String(name)) = row?.into_iter().next()
                && let Some(group) = Tables::of_table(&name)
            {
                present |= group as u8;
            }
        }
        self.known.present.set(Some(present));
        Ok(present)
    }

    /// The first row of a query, or `None` — also when the tables do not
    /// exist yet (nothing was ever written here).
    fn first_row(&self, group: Tables, query: &str, args: Vec<Value>) -> worker::Result<Option<Vec<Value>>> {
        if !self.may_exist(group)? {
            return Ok(None);
        }
        let cursor = match self.sql.exec(query, args) {
            Ok(cursor) => cursor,
            Err(error) if error.to_string().contains("no such table") => return Ok(None),
            Err(error) => return Err(error),
        };
        cursor.raw().next().transpose()
    }

    /// The first row's one text column (a record as JSON), or `None` as
    /// [`Self::first_row`]; anything else in it is `what`, unreadable.
    fn first_text(&self, group: Tables, query: &str, what: &str) -> worker::Result<Option<String>> {
        match self.first_row(group, query, vec![])?.map(Vec::into_iter).as_mut().map(Iterator::next) {
            None => Ok(None),
            Some(Some(Value::String(text))) => Ok(Some(text)),
            Some(_) => Err(unreadable(what)),
        }
    }

    /// Runs a write to completion and returns the rows it wrote.
    fn write(&self, query: &str, args: Vec<Value>) -> worker::Result<usize> {
        let cursor: SqlCursor = self.sql.exec(query, args)?;
        for row in cursor.raw() {
            row?;
        }
        Ok(cursor.rows_written())
    }
}

/// An event number as SQLite's signed integer (past i64, the largest).
fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn version(version: u64) -> worker::Result<Value> {
    Value::try_from_i64(i64::try_from(version).unwrap_or(i64::MAX))
}

/// A record (job, meta, outbox, effect) as the JSON text it is stored as.
fn json(record: &impl serde::Serialize) -> worker::Result<Value> {
    serde_json::to_string(record).map(Value::String).map_err(|e| EdgeError::Unwritable(e.to_string()).into())
}

fn unreadable(what: &str) -> worker::Error {
    EdgeError::Unreadable(what.into()).into()
}
