//! An object as the build before the job's one row kept it, made on
//! purpose by the test build (cargo feature `faults`; the production build
//! has none of this): a job whose key starts with [`LEGACY_KEY_PREFIX`] is
//! rewritten, after each of its writes, into the older layout — its job in
//! `jobs`, its owner in `meta`, its response in `responses` and
//! `response_chunks` — and the object forgets what it knew of its tables,
//! as a deploy's restart does. Its next touch finds the older layout and
//! migrates it (tests/edge/legacy-schema.test.mjs).

use onejob_core::ledger::storage::TableGroup;

use super::{Known, Store};

/// The key prefix that asks for the older layout.
pub const LEGACY_KEY_PREFIX: &str = "legacy-schema-";

/// The job's row as the older build's tables (created as it created them;
/// its `responses` and `response_chunks` are this build's, unchanged).
const REWRITE: &str = "CREATE TABLE IF NOT EXISTS jobs (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        version INTEGER NOT NULL,
        record TEXT NOT NULL
    );
    CREATE TABLE IF NOT EXISTS meta (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        record TEXT NOT NULL
    );
    INSERT INTO jobs (id, version, record) SELECT 1, version, record FROM job WHERE id = 1;
    INSERT INTO meta (id, record) SELECT 1, meta FROM job WHERE id = 1 AND meta IS NOT NULL;
    INSERT INTO responses (attempt, status, content_type, size, streamed)
        SELECT attempt, status, content_type, length(body), 0 FROM job WHERE id = 1 AND attempt IS NOT NULL;
    INSERT INTO response_chunks (attempt, seq, bytes)
        SELECT attempt, 0, body FROM job WHERE id = 1 AND attempt IS NOT NULL AND length(body) > 0;
    DROP TABLE job";

/// After a job write: rewrites the object into the older layout if its
/// job's key asks for it, then forgets what the object knew.
pub(super) fn rewrite_if_asked(store: &Store) {
    let asked = store.load_meta().ok().flatten().is_some_and(|meta| meta.key.starts_with(LEGACY_KEY_PREFIX));
    if !asked {
        return;
    }
    let rewritten = [TableGroup::Responses.schema(), REWRITE]
        .into_iter()
        .try_for_each(|sql| store.sql.exec(sql, None).and_then(|cursor| super::drain(&cursor)));
    if let Err(error) = rewritten {
        worker::console_error!("ledger: the older layout (faults) could not be written: {error}");
    }
    let known: &Known = &store.known;
    known.tables.take();
    known.job.take();
    known.meta.take();
    known.response.take();
}
