//! The Ledger's SQLite tables: one row holds the job — its record and
//! version, who it belongs to, and one small response — and the other
//! tables (a large or second response, a stream's events, a kept request,
//! the queue's records, effects) are created only by the object that writes
//! them. A body larger than [`CHUNK_BYTES`] is kept in chunks of that size
//! (a Durable Object's SQLite value holds at most 2 MB). Which tables there
//! are, and where a response goes, is `core::ledger::storage`'s.
//!
//! A job's first call is two transitions, one statement each (the runtime
//! commits the statements between two awaits together): the claim — the
//! job with its owner, in its row — durable before the upstream call, and
//! the result — the response in the row with the job's compare-and-swap —
//! durable before the answer. A new object creates one table for them.
//!
//! SQL calls are synchronous inside a Durable Object, so a read, a
//! transition and its write happen with no other request in between. Every
//! job write is still a compare-and-swap on the job's version: a writer whose
//! copy is stale gets [`StoreError::LostRace`], never a silent overwrite.
//!
//! Reads never write, except once: an object written by an older build
//! (its job and owner in the two tables `jobs` and `meta`) is migrated into
//! the one row when this lifetime first looks at its tables, in one
//! idempotent step, before anything reads or writes it (one read path, and
//! an older object pays the step once). Before the first job write there are
//! no tables, and a read of a fresh object finds nothing and creates nothing.
//!
//! The object also remembers what it knows of its own tables ([`Known`]):
//! which exist, and the job as it last read or wrote it. SQLite stays the
//! authority (every write goes to it first); the memory only saves the
//! reads: one load of the job per object lifetime instead of one per path,
//! the schema created once per lifetime, and a finished job's (small)
//! response kept as it was written, so its replays read no row.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use onejob_core::job::Job;
use onejob_core::job_type::effect::Effect;
use onejob_core::ledger::background::outbox::Outbox;
use onejob_core::ledger::request::drive::shell::ResponseWithJob;
use onejob_core::ledger::storage::statements::{self as sql, Before, BodyRead, Read, Write};
use onejob_core::ledger::storage::{ResponsePlace, TableGroups, TableSet, Tables, join_parts, response_place};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use worker::{SqlCursor, SqlStorage, SqlStorageValue as Value};

use crate::answer::StoredResponse;
use crate::api::handoff::JobMeta;
use crate::error::EdgeError;

pub use onejob_core::ledger::storage::CHUNK_BYTES;

/// What a stored response is, without its body.
#[derive(Debug, Clone, Deserialize)]
pub struct ResponseHead {
    pub status: u16,
    pub content_type: String,
    /// Body bytes (a stream's: once it has ended).
    pub size: u64,
    /// The body is a stored stream of events.
    #[serde(deserialize_with = "flag")]
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
    /// Which table groups exist and which this lifetime created.
    tables: Cell<Tables>,
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

/// A row of one text column named `record` (a record as JSON).
#[derive(Deserialize)]
struct Record {
    record: String,
}

/// The job's row, as [`Store::load_job`] reads it.
#[derive(Deserialize)]
struct JobRow {
    record: String,
    meta: Option<String>,
}

/// A queue row written before the outbox's record.
#[derive(Deserialize)]
struct QueueRow {
    dead_lettered_ms: u64,
}

/// A row of one count.
#[derive(Deserialize)]
struct Count {
    n: u64,
}

/// A table's name (`sqlite_master`).
#[derive(Deserialize)]
struct Name {
    name: String,
}

pub struct Store {
    sql: SqlStorage,
    known: Rc<Known>,
}

impl Store {
    pub fn new(sql: SqlStorage, known: Rc<Known>) -> Self {
        Self { sql, known }
    }

    /// The job, if this object has one (and who it belongs to, kept for
    /// [`Self::load_meta`]: both are in its row).
    pub fn load_job(&self) -> worker::Result<Option<Job>> {
        if let Some(known) = self.known.job.borrow().as_ref() {
            return Ok(known.clone());
        }
        let row: Option<JobRow> = self.first(&sql::LOAD_JOB, vec![])?;
        let job = row.as_ref().map(|row| parse(&row.record, sql::LOAD_JOB.what)).transpose()?;
        let meta = row.and_then(|row| row.meta).and_then(|meta| serde_json::from_str(&meta).ok());
        *self.known.job.borrow_mut() = Some(job.clone());
        self.known.meta.borrow_mut().get_or_insert(meta);
        Ok(job)
    }

    /// The stored job's version.
    pub fn job_version(&self) -> worker::Result<Option<u64>> {
        Ok(self.load_job()?.as_ref().map(Job::version))
    }

    /// Records a new job with who it belongs to (`meta`; none: saved later
    /// by [`Self::save_meta`]), in one statement; `LostRace` if the object
    /// already has one.
    pub fn insert_job(&self, job: &Job, meta: Option<&JobMeta>) -> Result<(), StoreError> {
        let owner = meta.map(json).transpose()?.unwrap_or(Value::Null);
        let written = self.perform(&sql::INSERT_JOB, vec![version(job.version())?, json(job)?, owner])?;
        if written > 0 {
            *self.known.meta.borrow_mut() = Some(meta.cloned());
        }
        self.wrote_job(written, job)
    }

    /// Writes `job` if the stored job is still at `expected_version`.
    pub fn update_job(&self, expected_version: u64, job: &Job) -> Result<(), StoreError> {
        let written =
            self.perform(&sql::UPDATE_JOB, vec![version(job.version())?, json(job)?, version(expected_version)?])?;
        self.wrote_job(written, job)
    }

    /// Remembers a written job; a write that lost leaves the next load to
    /// read what won.
    fn wrote_job(&self, written: usize, job: &Job) -> Result<(), StoreError> {
        let mut known = self.known.job.borrow_mut();
        if written == 0 {
            *known = None;
            return Err(StoreError::LostRace);
        }
        *known = Some(Some(job.clone()));
        drop(known);
        Ok(())
    }

    /// Everything was deleted (`deleteAll`): no table, no job.
    pub fn forget_all(&self) {
        self.known.tables.set(Tables::deleted());
        self.forget_job();
    }

    /// The object has no job (nothing to read to know it).
    fn forget_job(&self) {
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
    /// operators' index (the job record itself holds neither), in the
    /// job's row: written once, after [`Self::insert_job`].
    pub fn save_meta(&self, meta: &JobMeta) -> worker::Result<()> {
        let written = self.perform(&sql::SAVE_META, vec![json(meta)?])?;
        // One already there stays (and is read when next asked for).
        *self.known.meta.borrow_mut() = (written > 0).then(|| Some(meta.clone()));
        Ok(())
    }

    /// Rewrites who the job belongs to (its metered tokens).
    pub fn update_meta(&self, meta: &JobMeta) -> worker::Result<()> {
        self.known.meta.take();
        let written = self.perform(&sql::UPDATE_META, vec![json(meta)?])?;
        *self.known.meta.borrow_mut() = Some((written > 0).then(|| meta.clone()));
        Ok(())
    }

    /// Who the job belongs to, if recorded (read with the job).
    pub fn load_meta(&self) -> worker::Result<Option<JobMeta>> {
        if let Some(known) = self.known.meta.borrow().as_ref() {
            return Ok(known.clone());
        }
        self.known.job.take();
        self.load_job()?;
        Ok(self.known.meta.borrow().clone().flatten())
    }

    /// What the Ledger knows of the job's queue message (see [`Outbox`]):
    /// its row, or none yet.
    pub fn load_outbox(&self) -> worker::Result<Outbox> {
        match self.first::<Record>(&sql::LOAD_OUTBOX, vec![])? {
            Some(row) => parse(&row.record, sql::LOAD_OUTBOX.what),
            None => Ok(Outbox::default()),
        }
    }

    fn queue_row(&self) -> worker::Result<Option<QueueRow>> {
        self.first(&sql::LOAD_QUEUE_ROW, vec![])
    }

    /// Writes the outbox's record, beside the job record: a send never
    /// changes the version an attempt in flight holds.
    pub fn save_outbox(&self, outbox: &Outbox) -> worker::Result<()> {
        self.perform(&sql::SAVE_OUTBOX, vec![json(outbox)?])?;
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
        Ok(self.queue_row()?.is_some_and(|row| row.dead_lettered_ms > 0))
    }

    /// Records that the job was sent to the dead-letter queue (again after
    /// a replay, which clears it).
    pub fn note_dead_lettered(&self, now_ms: u64) -> worker::Result<()> {
        self.perform(&sql::NOTE_DEAD_LETTERED, vec![Value::Integer(clamp(now_ms))])?;
        Ok(())
    }

    /// Forgets that the job was dead-lettered (it was replayed or resolved).
    pub fn clear_dead_lettered(&self) -> worker::Result<()> {
        self.perform(&sql::CLEAR_DEAD_LETTERED, vec![]).map(|_| ())
    }

    /// Keeps a job's request (its submission, as JSON, and its body in
    /// chunks): a background job's (the queue message names the job, the
    /// Ledger holds what to send) and a job type's (its effects are planned
    /// from it).
    pub fn save_request(&self, submission: &str, body: &[u8]) -> worker::Result<()> {
        // The newest submission wins; the body's chunks already kept stay.
        self.perform(&sql::SAVE_SUBMISSION, vec![Value::String(submission.to_owned())])?;
        self.write_chunks(&sql::SAVE_REQUEST_CHUNK, &[], body)
    }

    /// The submission a kept request was made with (without its body).
    pub fn load_submission(&self) -> worker::Result<Option<String>> {
        #[derive(Deserialize)]
        struct Request {
            submission: String,
        }
        let row: Option<Request> = self.first(&sql::LOAD_SUBMISSION, vec![])?;
        Ok(row.map(|row| row.submission))
    }

    /// A background job's request, if this object keeps one.
    pub fn load_request(&self) -> worker::Result<Option<(String, Vec<u8>)>> {
        let Some(submission) = self.load_submission()? else { return Ok(None) };
        let body = self.read_bytes(&sql::LOAD_REQUEST_BODY, vec![], 0)?;
        Ok(Some((submission, body)))
    }

    /// Stores an attempt's response: a small one in the job's row if no
    /// other is there, any other in the responses' tables, its body in
    /// chunks. An attempt reports once (its ticket holds the job once), so
    /// this never overwrites.
    pub fn save_response(&self, attempt: u32, response: &StoredResponse) -> worker::Result<()> {
        let number = Value::Integer(i64::from(attempt));
        // Skipped with no job row: then it goes in chunks.
        let in_row = response_place(response.body.len()) == ResponsePlace::JobRow
            && self.perform(
                &sql::KEEP_IN_ROW,
                vec![
                    number.clone(),
                    Value::Integer(i64::from(response.status)),
                    Value::String(response.content_type.clone()),
                    Value::Blob(response.body.clone()),
                ],
            )? > 0;
        if !in_row {
            self.perform(
                &sql::SAVE_RESPONSE_HEAD,
                vec![
                    number.clone(),
                    Value::Integer(i64::from(response.status)),
                    Value::String(response.content_type.clone()),
                    Value::Integer(response.body.len() as i64),
                ],
            )?;
            self.write_chunks(&sql::SAVE_RESPONSE_CHUNK, &[number], &response.body)?;
        }
        // Most jobs are replayed, if at all, soon after: from memory.
        self.remember_response(attempt, Some(response));
        Ok(())
    }

    /// An attempt's response in the job's row and the job written after it
    /// ([`ResponseWithJob`]), in one statement when the row's place is free
    /// and the job is still at the version expected; otherwise the two
    /// writes in order, as [`Self::save_response`] and [`Self::update_job`].
    pub fn save_response_with_job(&self, pair: &ResponseWithJob) -> Result<(), StoreError> {
        let ResponseWithJob { attempt, response, job, expected } = pair;
        let written = self.perform(
            &sql::KEEP_IN_ROW_WITH_JOB,
            vec![
                Value::Integer(i64::from(*attempt)),
                Value::Integer(i64::from(response.status)),
                Value::String(response.content_type.clone()),
                Value::Blob(response.body.clone()),
                version(job.version())?,
                json(job)?,
                version(*expected)?,
            ],
        )?;
        if written == 0 {
            self.save_response(*attempt, response)?;
            return self.update_job(*expected, job);
        }
        self.remember_response(*attempt, Some(response));
        self.wrote_job(written, job)
    }

    /// Keeps `answer` as an attempt's response, in place of any it stored:
    /// the final answer a caller got for an attempt whose own outcome kept
    /// none (unknown), or whose response is not what was answered (a race's
    /// other racer's unknown outcome decided it). The job replays it once it
    /// is dead ([`onejob_core::job::answer`]).
    pub fn keep_answer(&self, attempt: u32, answer: &StoredResponse) -> worker::Result<()> {
        self.remember_response(attempt, None);
        for write in &sql::FORGET_RESPONSE {
            self.perform(write, vec![Value::Integer(i64::from(attempt))])?;
        }
        self.save_response(attempt, answer)
    }

    /// What an attempt's stored response is, without reading its body.
    pub fn response_head(&self, attempt: u32) -> worker::Result<Option<ResponseHead>> {
        Ok(self.stored_head(attempt)?.map(|(_, head)| head))
    }

    /// An attempt's stored response head, and where it is kept.
    fn stored_head(&self, attempt: u32) -> worker::Result<Option<(ResponsePlace, ResponseHead)>> {
        for (place, read) in sql::RESPONSE_HEADS {
            if let Some(head) = self.first(&read, vec![Value::Integer(i64::from(attempt))])? {
                return Ok(Some((place, head)));
            }
        }
        Ok(None)
    }

    /// An attempt's stored response, body reassembled (a stream's from its events).
    pub fn load_response(&self, attempt: u32) -> worker::Result<Option<StoredResponse>> {
        if let Some((_, response)) = self.known.response.borrow().as_ref().filter(|(kept, _)| *kept == attempt) {
            return Ok(Some(response.clone()));
        }
        let Some((place, head)) = self.stored_head(attempt)? else { return Ok(None) };
        let number = vec![Value::Integer(i64::from(attempt))];
        let size = usize::try_from(head.size).unwrap_or(0);
        let read = BodyRead::of(place, head.streamed);
        let body = match read {
            BodyRead::Events => self.load_events(attempt, 0, u64::MAX)?.concat(),
            BodyRead::Rows(rows) => self.read_bytes(&rows, number, size)?,
        };
        if !read.complete(size, body.len()) {
            return Err(unreadable("response body (size mismatch)"));
        }
        let response = StoredResponse { status: head.status, content_type: head.content_type, body };
        if read.keepable() {
            self.remember_response(attempt, Some(&response));
        }
        Ok(Some(response))
    }

    /// Appends the events numbered `first_seq..` of an attempt's stream
    /// (an event longer than a chunk spans several rows).
    pub fn append_events(&self, attempt: u32, first_seq: u64, events: &[Vec<u8>]) -> worker::Result<()> {
        for (offset, event) in events.iter().enumerate() {
            self.write_chunks(
                &sql::APPEND_EVENT,
                &[Value::Integer(i64::from(attempt)), Value::Integer(clamp(first_seq + offset as u64))],
                event,
            )?;
        }
        Ok(())
    }

    /// The stored events `from..to` of an attempt's stream, each whole.
    pub fn load_events(&self, attempt: u32, from: u64, to: u64) -> worker::Result<Vec<Vec<u8>>> {
        let args = vec![Value::Integer(i64::from(attempt)), Value::Integer(clamp(from)), Value::Integer(clamp(to))];
        let Some(rows) = self.query(&sql::LOAD_EVENTS, args)? else { return Ok(Vec::new()) };
        let mut parts = Vec::new();
        for row in rows.raw() {
            let mut values = row?.into_iter();
            let (Some(Value::Integer(seq)), Some(Value::Blob(bytes))) = (values.next(), values.next()) else {
                return Err(unreadable(sql::LOAD_EVENTS.what));
            };
            parts.push((seq, bytes));
        }
        Ok(join_parts(parts))
    }

    /// Records that an attempt's response streams: its body is its events.
    pub fn start_streamed_response(&self, attempt: u32, content_type: &str) -> worker::Result<()> {
        self.remember_response(attempt, None);
        self.perform(
            &sql::START_STREAM,
            vec![Value::Integer(i64::from(attempt)), Value::String(content_type.to_owned())],
        )?;
        Ok(())
    }

    /// Records a finished stream's size.
    pub fn finish_streamed_response(&self, attempt: u32, size: u64) -> worker::Result<()> {
        self.perform(&sql::FINISH_STREAM, vec![Value::Integer(clamp(size)), Value::Integer(i64::from(attempt))])?;
        Ok(())
    }

    /// How many events of an attempt's stream are stored.
    pub fn count_events(&self, attempt: u32) -> worker::Result<u64> {
        let row: Option<Count> = self.first(&sql::COUNT_EVENTS, vec![Value::Integer(i64::from(attempt))])?;
        Ok(row.map_or(0, |row| row.n))
    }

    /// A job type's effects, in the type's order (none before they are planned).
    pub fn load_effects(&self) -> worker::Result<Vec<Effect>> {
        let Some(cursor) = self.query(&sql::LOAD_EFFECTS, vec![])? else {
            return Ok(Vec::new());
        };
        cursor.next::<Record>().map(|row| parse(&row?.record, sql::LOAD_EFFECTS.what)).collect()
    }

    /// Plans the effects, once: planning again (after a restart, by a
    /// duplicate) keeps the first plan.
    pub fn plan_effects(&self, effects: &[Effect]) -> worker::Result<()> {
        for (seq, effect) in effects.iter().enumerate() {
            self.perform(
                &sql::PLAN_EFFECT,
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
        let written = self.perform(
            &sql::UPDATE_EFFECT,
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
        let present = self.tables()?.present().unwrap_or_default();
        for table in present.tables() {
            self.write(&format!("DELETE FROM {table}"), vec![])?;
        }
        self.forget_job();
        Ok(())
    }

    /// Creates the groups' tables (`IF NOT EXISTS`: an older object's
    /// tables are kept, and the ones added since created), after a lookup.
    fn create(&self, groups: TableGroups) -> worker::Result<()> {
        let mut tables = self.known.tables.get();
        for group in groups.groups() {
            self.sql.exec(group.schema(), None)?;
            tables.create(group);
        }
        self.known.tables.set(tables);
        Ok(())
    }

    /// Which tables this object has: looked up once per lifetime (then
    /// kept as this object creates or deletes them).
    fn tables(&self) -> worker::Result<Tables> {
        let mut tables = self.known.tables.get();
        if tables.present().is_some() {
            return Ok(tables);
        }
        let names: Vec<Name> =
            self.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table'", None)?.to_array()?;
        tables.looked_up(TableSet::of_tables(names.iter().map(|row| row.name.as_str())));
        self.known.tables.set(tables);
        Ok(tables)
    }

    /// A read of its table, or `None` when the table does not exist
    /// (nothing was ever written there, or an older build's group lacks it).
    fn query(&self, read: &Read, args: Vec<Value>) -> worker::Result<Option<SqlCursor>> {
        if !self.tables()?.has(read.table) {
            return Ok(None);
        }
        self.sql.exec(read.sql, args).map(Some)
    }

    /// The first row of a read, decoded by its column names, or `None`
    /// (also when its group's tables do not exist).
    fn first<T: DeserializeOwned>(&self, read: &Read, args: Vec<Value>) -> worker::Result<Option<T>> {
        let Some(cursor) = self.query(read, args)? else { return Ok(None) };
        cursor.next::<T>().next().transpose()
    }

    /// A body kept in one or more rows (found by a read before it): the
    /// read's one BLOB column, concatenated (`size`: the bytes expected).
    fn read_bytes(&self, read: &Read, args: Vec<Value>, size: usize) -> worker::Result<Vec<u8>> {
        let mut body = Vec::with_capacity(size);
        // No table, no bytes: an older object may keep a request without
        // its chunks' table (the caller checks a response's size).
        let Some(rows) = self.query(read, args)? else { return Ok(body) };
        for row in rows.raw() {
            match row?.into_iter().next() {
                Some(Value::Blob(bytes)) => body.extend_from_slice(&bytes),
                // An empty BLOB may come back as an empty string.
                Some(Value::String(text)) if text.is_empty() => {}
                _ => return Err(unreadable(read.what)),
            }
        }
        Ok(body)
    }

    /// Writes `bytes` in [`CHUNK_BYTES`] chunks, one row each: `write`
    /// takes `key`, then the chunk's number, then the chunk. Nothing is
    /// written for no bytes.
    fn write_chunks(&self, write: &Write, key: &[Value], bytes: &[u8]) -> worker::Result<()> {
        for (seq, chunk) in bytes.chunks(CHUNK_BYTES).enumerate() {
            let args = key.iter().cloned().chain([Value::Integer(seq as i64), Value::Blob(chunk.to_vec())]);
            self.perform(write, args.collect())?;
        }
        Ok(())
    }

    /// Performs a write after what it needs of its group's tables
    /// ([`Tables::before`]), and returns the rows it wrote (none when skipped).
    fn perform(&self, write: &Write, args: Vec<Value>) -> worker::Result<usize> {
        match self.tables()?.before(write) {
            Before::Skip => return Ok(0),
            Before::Create(group) => self.create(group)?,
            Before::Run => {}
        }
        self.write(write.sql, args)
    }

    /// Runs a write to completion and returns the rows it wrote.
    fn write(&self, query: &str, args: Vec<Value>) -> worker::Result<usize> {
        let cursor = self.sql.exec(query, args)?;
        drain(&cursor)?;
        Ok(cursor.rows_written())
    }
}

/// Runs a statement's cursor to its end.
fn drain(cursor: &SqlCursor) -> worker::Result<()> {
    cursor.raw().try_for_each(|row| row.map(drop))
}

/// An event number as SQLite's signed integer (past i64, the largest).
fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn version(version: u64) -> worker::Result<Value> {
    Value::try_from_i64(clamp(version))
}

/// A record (job, meta, outbox, effect) as the JSON text it is stored as.
fn json(record: &impl serde::Serialize) -> worker::Result<Value> {
    serde_json::to_string(record).map(Value::String).map_err(|e| EdgeError::Unwritable(e.to_string()).into())
}

/// A record from the JSON text it is stored as; anything else is `what`, unreadable.
fn parse<T: DeserializeOwned>(record: &str, what: &str) -> worker::Result<T> {
    serde_json::from_str(record).map_err(|_| unreadable(what))
}

/// SQLite's 0/1 integer as a flag.
fn flag<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    u8::deserialize(deserializer).map(|n| n != 0)
}

fn unreadable(what: &str) -> worker::Error {
    EdgeError::Unreadable(what.into()).into()
}
