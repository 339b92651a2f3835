//! The Ledger's storage layout, sans-IO: its SQLite tables in groups, which
//! group a table belongs to, which groups one object has (looked up once
//! per lifetime, kept as it creates and deletes them), and where an
//! attempt's response is kept. Nothing was released before this layout, so
//! no older one is migrated (the README says to delete `.wrangler/state`). The Durable Object's store runs the SQL.
//!
//! The first call of a job is the hot path: its job, its owner and its
//! response (a small one) live in one row of one table (`job`), so a new
//! object creates one table and writes two statements per transition. The
//! other groups are created only by the object that writes them.

pub mod statements;

/// Largest body chunk per row (a Durable Object's SQLite value holds at
/// most 2 MB): a response up to this size is kept in the job's row, a
/// larger one in chunks of this size.
pub const CHUNK_BYTES: usize = 256 * 1024;

/// The job's one row (its group's schema): the job, its owner (`meta`, JSON) and one response
/// whose body fits in a value (`attempt` is NULL until one is kept here).
macro_rules! job_table {
    () => {
        "CREATE TABLE IF NOT EXISTS job (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            version INTEGER NOT NULL,
            record TEXT NOT NULL,
            meta TEXT,
            attempt INTEGER,
            status INTEGER,
            content_type TEXT,
            body BLOB
        )"
    };
}

/// The tables, in groups created together when first written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableGroup {
    /// The job: its record, version, owner and one small response, one row.
    Job,
    /// Responses not kept in the job's row (a stream's, a large one, a
    /// second attempt's), their bodies in chunks.
    Responses,
    /// A background job's queue message and its dead letter.
    Queue,
    /// A kept request (a background job's, a job type's).
    Request,
    /// A job type's effects.
    Effects,
    /// A streamed answer's events.
    Stream,
}

impl TableGroup {
    /// Every group, in the order their tables are listed.
    pub const ALL: [TableGroup; 6] = [
        TableGroup::Job,
        TableGroup::Responses,
        TableGroup::Queue,
        TableGroup::Request,
        TableGroup::Effects,
        TableGroup::Stream,
    ];

    /// The group's tables.
    pub fn tables(self) -> &'static [&'static str] {
        match self {
            TableGroup::Job => &["job"],
            TableGroup::Responses => &["responses", "response_chunks"],
            TableGroup::Queue => &["queue", "outbox"],
            TableGroup::Request => &["request", "request_chunks"],
            TableGroup::Effects => &["effects"],
            TableGroup::Stream => &["stream_events"],
        }
    }

    /// The group's tables as SQL, run when the group is first written.
    pub fn schema(self) -> &'static str {
        match self {
            TableGroup::Job => job_table!(),
            TableGroup::Responses => {
                "CREATE TABLE IF NOT EXISTS responses (
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
            // Whether the job was dead-lettered (`dead_lettered_ms`).
            TableGroup::Queue => {
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
            TableGroup::Request => {
                "CREATE TABLE IF NOT EXISTS request (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    submission TEXT NOT NULL
                );
                CREATE TABLE IF NOT EXISTS request_chunks (
                    seq INTEGER PRIMARY KEY,
                    bytes BLOB NOT NULL
                )"
            }
            TableGroup::Effects => {
                "CREATE TABLE IF NOT EXISTS effects (
                    seq INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    version INTEGER NOT NULL,
                    record TEXT NOT NULL
                )"
            }
            TableGroup::Stream => {
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

    /// The group a table belongs to (none: not one of the Ledger's).
    pub fn of_table(name: &str) -> Option<TableGroup> {
        TableGroup::ALL.into_iter().find(|group| group.tables().contains(&name))
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of table groups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableGroups(u8);

impl TableGroups {
    /// The groups the named tables belong to (other tables are ignored).
    pub fn of_tables<'a>(names: impl IntoIterator<Item = &'a str>) -> TableGroups {
        names.into_iter().filter_map(TableGroup::of_table).fold(TableGroups::default(), TableGroups::with)
    }

    /// Whether `group` is in the set.
    pub fn contains(self, group: TableGroup) -> bool {
        self.0 & group.bit() != 0
    }

    /// The set with `group` added.
    pub fn with(self, group: TableGroup) -> TableGroups {
        TableGroups(self.0 | group.bit())
    }

    /// Every table of the groups in the set.
    pub fn tables(self) -> impl Iterator<Item = &'static str> {
        self.groups().flat_map(TableGroup::tables).copied()
    }

    /// The groups in the set, in [`TableGroup::ALL`]'s order.
    pub fn groups(self) -> impl Iterator<Item = TableGroup> {
        TableGroup::ALL.into_iter().filter(move |group| self.contains(*group))
    }

    /// The groups of this set not in `other`.
    pub fn without(self, other: TableGroups) -> TableGroups {
        TableGroups(self.0 & !other.0)
    }

    /// Whether the set has no group.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Every table of every group, in [`TableGroup::ALL`]'s order: a table's
/// place here is its bit in a [`TableSet`].
const TABLES: [&str; 9] =
    ["job", "responses", "response_chunks", "queue", "outbox", "request", "request_chunks", "effects", "stream_events"];

/// A set of the Ledger's tables, each on its own: a group found may lack
/// a table added to it since an older build created it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableSet(u16);

impl TableSet {
    /// The named tables that are the Ledger's (others are ignored).
    pub fn of_tables<'a>(names: impl IntoIterator<Item = &'a str>) -> TableSet {
        names.into_iter().filter_map(TableSet::bit).fold(TableSet::default(), |set, bit| TableSet(set.0 | bit))
    }

    /// Whether `table` is in the set.
    pub fn contains(self, table: &str) -> bool {
        TableSet::bit(table).is_some_and(|bit| self.0 & bit != 0)
    }

    /// The set with every table of `group` added.
    pub fn with_group(self, group: TableGroup) -> TableSet {
        TableSet(self.0 | TableSet::of_tables(group.tables().iter().copied()).0)
    }

    /// The groups with a table in the set.
    pub fn groups(self) -> TableGroups {
        TableGroups::of_tables(self.tables())
    }

    /// The tables in the set, in [`TableGroup::ALL`]'s order.
    pub fn tables(self) -> impl Iterator<Item = &'static str> {
        TABLES.into_iter().filter(move |table| self.contains(table))
    }

    fn bit(table: &str) -> Option<u16> {
        TABLES.iter().position(|known| *known == table).map(|place| 1 << place)
    }
}

/// What one object knows of its own tables in this lifetime (dropped with
/// its memory, looked up again after a restart).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tables {
    /// The tables that exist (`None`: not looked up yet).
    present: Option<TableSet>,
    /// The groups this lifetime created: not created again.
    created: TableGroups,
}

impl Tables {
    /// The tables present, if looked up already in this lifetime.
    pub fn present(self) -> Option<TableSet> {
        self.present
    }

    /// Whether `group` was created in this lifetime (its `CREATE` is not run again).
    pub fn created(self, group: TableGroup) -> bool {
        self.created.contains(group)
    }

    /// The groups created in this lifetime.
    pub fn created_groups(self) -> TableGroups {
        self.created
    }

    /// Records what a lookup found.
    pub fn looked_up(&mut self, found: TableSet) {
        self.present = Some(found);
    }

    /// Records that this lifetime created `group` (after a lookup).
    pub fn create(&mut self, group: TableGroup) {
        self.created = self.created.with(group);
        self.present = Some(self.present.unwrap_or_default().with_group(group));
    }

    /// Whether `table` exists (after a lookup): a read of one that does
    /// not runs no query.
    pub fn has(self, table: &str) -> bool {
        self.present.is_some_and(|present| present.contains(table))
    }

    /// Whether any of `group`'s tables exists (after a lookup).
    pub fn may_exist(self, group: TableGroup) -> bool {
        self.present.is_some_and(|present| present.groups().contains(group))
    }

    /// Everything was deleted: no table is left, none is to be looked up.
    pub fn deleted() -> Tables {
        Tables { present: Some(TableSet::default()), created: TableGroups::default() }
    }
}

/// Where an attempt's response is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponsePlace {
    /// In the job's row (one response per job: the first small one).
    JobRow,
    /// In the responses' tables, its body in [`CHUNK_BYTES`] chunks.
    Chunked,
}

/// Where a response of `body_len` bytes goes: a small one in the job's row
/// (if the row's place is still free: the store learns that from the
/// write), a large one in chunks.
pub fn response_place(body_len: usize) -> ResponsePlace {
    if body_len <= CHUNK_BYTES { ResponsePlace::JobRow } else { ResponsePlace::Chunked }
}

/// A stored stream's events from their parts, in order (`(seq, bytes)`,
/// as read by the event's number, then the part's): an event longer than
/// a chunk was written in several parts, one row each, joined here.
pub fn join_parts(parts: impl IntoIterator<Item = (i64, Vec<u8>)>) -> Vec<Vec<u8>> {
    let mut events: Vec<Vec<u8>> = Vec::new();
    let mut current = None;
    for (seq, bytes) in parts {
        match events.last_mut().filter(|_| current == Some(seq)) {
            Some(event) => event.extend_from_slice(&bytes),
            None => events.push(bytes),
        }
        current = Some(seq);
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_schema_creates_its_groups_tables_and_no_other() {
        let created = |sql: &str| -> Vec<String> {
            sql.split("CREATE TABLE IF NOT EXISTS ")
                .skip(1)
                .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_owned())
                .collect()
        };
        for group in TableGroup::ALL {
            assert_eq!(created(group.schema()), group.tables(), "{group:?}");
        }
    }

    #[test]
    fn every_table_belongs_to_one_group() {
        let all: Vec<&str> = TableGroup::ALL.into_iter().flat_map(TableGroup::tables).copied().collect();
        for table in &all {
            let owners = TableGroup::ALL.into_iter().filter(|group| group.tables().contains(table)).count();
            assert_eq!(owners, 1, "{table}");
            assert!(TableGroup::of_table(table).is_some_and(|group| group.tables().contains(table)));
        }
        assert_eq!(TableGroup::of_table("_cf_KV"), None);
        assert_eq!(TableGroup::of_table("sqlite_sequence"), None);
    }

    #[test]
    fn a_set_of_groups_from_table_names() {
        let groups = TableGroups::of_tables(["job", "responses", "_cf_KV", "stream_events"]);
        assert!(groups.contains(TableGroup::Job));
        assert!(groups.contains(TableGroup::Responses));
        assert!(groups.contains(TableGroup::Stream));
        assert!(!groups.contains(TableGroup::Queue));
        let tables: Vec<&str> = groups.tables().collect();
        assert_eq!(tables, ["job", "responses", "response_chunks", "stream_events"]);
        assert_eq!(TableGroups::default().tables().count(), 0);
    }

    #[test]
    fn the_tables_are_every_groups_in_order() {
        let all: Vec<&str> = TableGroup::ALL.into_iter().flat_map(TableGroup::tables).copied().collect();
        assert_eq!(all, TABLES);
        assert!(TABLES.len() <= 16, "a table set holds 16");
    }

    #[test]
    fn a_set_of_tables_from_their_names() {
        let set = TableSet::of_tables(["queue", "_cf_KV", "job"]);
        assert!(set.contains("queue") && set.contains("job"));
        assert!(!set.contains("outbox") && !set.contains("_cf_KV"));
        assert_eq!(set.tables().collect::<Vec<_>>(), ["job", "queue"]);
        assert!(set.groups().contains(TableGroup::Queue) && set.groups().contains(TableGroup::Job));
        assert_eq!(set.with_group(TableGroup::Queue).tables().collect::<Vec<_>>(), ["job", "queue", "outbox"]);
    }

    #[test]
    fn a_group_found_without_a_table_added_since_lacks_only_that_table() {
        let mut tables = Tables::default();
        tables.looked_up(TableSet::of_tables(["job", "queue"]));
        assert!(tables.may_exist(TableGroup::Queue));
        assert!(tables.has("queue"));
        assert!(!tables.has("outbox"), "a read of it runs no query");
        tables.create(TableGroup::Queue);
        assert!(tables.has("outbox"), "created with its group");
    }

    #[test]
    fn nothing_may_exist_before_the_lookup() {
        let tables = Tables::default();
        assert_eq!(tables.present(), None);
        assert!(TableGroup::ALL.into_iter().all(|group| !tables.may_exist(group)));
    }

    #[test]
    fn a_fresh_object_is_current_and_has_no_group() {
        let mut tables = Tables::default();
        tables.looked_up(TableSet::default());
        assert_eq!(tables.present(), Some(TableSet::default()));
        assert!(!tables.may_exist(TableGroup::Job));
        assert!(!tables.created(TableGroup::Job));
    }

    #[test]
    fn a_current_layout_is_kept_as_found() {
        let mut tables = Tables::default();
        let found = TableSet::of_tables(["job", "queue", "outbox"]);
        tables.looked_up(found);
        assert!(tables.may_exist(TableGroup::Job));
        assert!(tables.may_exist(TableGroup::Queue));
        assert!(!tables.may_exist(TableGroup::Effects));
        // Found is not created: a group added to since gets its CREATE once.
        assert!(!tables.created(TableGroup::Job));
    }

    #[test]
    fn a_created_group_is_present_and_not_created_again() {
        let mut tables = Tables::default();
        tables.looked_up(TableSet::default());
        tables.create(TableGroup::Effects);
        assert!(tables.created(TableGroup::Effects));
        assert!(tables.may_exist(TableGroup::Effects));
        assert!(!tables.may_exist(TableGroup::Job));
    }

    #[test]
    fn deleting_everything_leaves_no_group_and_nothing_to_look_up() {
        let mut tables = Tables::default();
        tables.looked_up(TableSet::of_tables(["job"]));
        tables.create(TableGroup::Job);
        let tables = Tables::deleted();
        assert_eq!(tables.present(), Some(TableSet::default()));
        assert!(!tables.created(TableGroup::Job));
    }

    #[test]
    fn an_events_parts_are_joined_and_events_kept_apart() {
        let parts = [(3, b"da".to_vec()), (3, b"ta".to_vec()), (4, b"x".to_vec()), (5, vec![]), (6, b"y".to_vec())];
        assert_eq!(join_parts(parts), [b"data".to_vec(), b"x".to_vec(), vec![], b"y".to_vec()]);
        assert!(join_parts([]).is_empty());
        // Events read from any point: the first number need not be 0.
        assert_eq!(join_parts([(7, b"a".to_vec())]), [b"a".to_vec()]);
    }

    #[test]
    fn the_same_bytes_in_two_events_stay_two_events() {
        let parts = [(0, b"a".to_vec()), (1, b"a".to_vec())];
        assert_eq!(join_parts(parts), [b"a".to_vec(), b"a".to_vec()]);
    }

    #[test]
    fn small_responses_go_in_the_job_row_large_ones_in_chunks() {
        assert_eq!(response_place(0), ResponsePlace::JobRow);
        assert_eq!(response_place(CHUNK_BYTES), ResponsePlace::JobRow);
        assert_eq!(response_place(CHUNK_BYTES + 1), ResponsePlace::Chunked);
    }
}
