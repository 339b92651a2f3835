use super::*;
use crate::ledger::storage::{TableGroups, TableSet};

fn groups(groups: &[TableGroup]) -> TableGroups {
    groups.iter().fold(TableGroups::default(), |set, group| set.with(*group))
}

const WRITES: [Write; 20] = [
    INSERT_JOB,
    UPDATE_JOB,
    SAVE_META,
    UPDATE_META,
    SAVE_OUTBOX,
    NOTE_DEAD_LETTERED,
    CLEAR_DEAD_LETTERED,
    SAVE_SUBMISSION,
    SAVE_REQUEST_CHUNK,
    KEEP_IN_ROW,
    KEEP_IN_ROW_WITH_JOB,
    SAVE_RESPONSE_HEAD,
    SAVE_RESPONSE_CHUNK,
    FORGET_RESPONSE[0],
    FORGET_RESPONSE[1],
    FORGET_RESPONSE[2],
    START_STREAM,
    FINISH_STREAM,
    APPEND_EVENT,
    PLAN_EFFECT,
];

const READS: [Read; 12] = [
    LOAD_JOB,
    LOAD_OUTBOX,
    LOAD_QUEUE_ROW,
    LOAD_SUBMISSION,
    LOAD_REQUEST_BODY,
    ROW_RESPONSE_HEAD,
    CHUNKED_RESPONSE_HEAD,
    ROW_RESPONSE_BODY,
    CHUNKED_RESPONSE_BODY,
    LOAD_EVENTS,
    COUNT_EVENTS,
    LOAD_EFFECTS,
];

/// The tables a statement names (after `INTO`, `UPDATE` or `FROM`; an
/// upsert's `DO UPDATE` names none).
fn tables_named(sql: &str) -> Vec<&str> {
    let words: Vec<&str> = sql.split_whitespace().filter(|word| *word != "DO").collect();
    words
        .windows(2)
        .filter(|pair| matches!(pair[0], "INTO" | "UPDATE" | "FROM") && pair[1] != "SET")
        .map(|pair| pair[1].trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_'))
        .collect()
}

#[test]
fn every_statement_touches_only_the_table_it_names_one_of_a_group() {
    let statements = WRITES.iter().map(|w| (w.sql, w.table)).chain(READS.iter().map(|r| (r.sql, r.table)));
    for (sql, table) in statements.chain([(UPDATE_EFFECT.sql, UPDATE_EFFECT.table)]) {
        assert_eq!(tables_named(sql), [table], "{sql}");
        assert!(TableGroup::of_table(table).is_some(), "{table}");
    }
}

#[test]
fn the_writes_that_insert_into_a_group_create_it_first() {
    // An INSERT may be the group's first write; an UPDATE or a DELETE only
    // changes what one before it wrote, or skips when there is none.
    for write in WRITES.iter().chain([&UPDATE_EFFECT]) {
        if write.sql.starts_with("INSERT") {
            assert!(matches!(write.missing, Missing::Create | Missing::CreateWith(_)), "{}", write.sql);
        }
    }
    // The one other: the owner, written with the job's claim into its row.
    let creating_updates: Vec<Write> =
        WRITES.into_iter().filter(|w| w.missing == Missing::Create && !w.sql.starts_with("INSERT")).collect();
    assert_eq!(creating_updates, [SAVE_META]);
}

#[test]
fn a_write_creates_its_group_once_per_lifetime() {
    let mut tables = Tables::default();
    tables.looked_up(TableSet::default());
    assert_eq!(tables.before(&INSERT_JOB), Before::Create(groups(&[TableGroup::Job])));
    tables.create(TableGroup::Job);
    assert_eq!(tables.before(&INSERT_JOB), Before::Run);
    assert_eq!(tables.before(&SAVE_META), Before::Run);
    assert_eq!(tables.before(&SAVE_OUTBOX), Before::Create(groups(&[TableGroup::Queue])));
}

#[test]
fn a_streamed_response_creates_its_events_table_with_it() {
    let mut tables = Tables::default();
    tables.looked_up(TableSet::default());
    assert_eq!(tables.before(&START_STREAM), Before::Create(groups(&[TableGroup::Responses, TableGroup::Stream])));
    tables.create(TableGroup::Responses);
    assert_eq!(tables.before(&START_STREAM), Before::Create(groups(&[TableGroup::Stream])));
    tables.create(TableGroup::Stream);
    assert_eq!(tables.before(&START_STREAM), Before::Run);
    assert_eq!(tables.before(&APPEND_EVENT), Before::Run);
}

#[test]
fn a_group_found_but_not_created_here_is_created_again_for_its_added_tables() {
    let mut tables = Tables::default();
    tables.looked_up(TableSet::of_tables(["queue"]));
    assert_eq!(tables.before(&SAVE_OUTBOX), Before::Create(groups(&[TableGroup::Queue])));
    assert_eq!(tables.before(&CLEAR_DEAD_LETTERED), Before::Run);
}

#[test]
fn a_write_that_skips_runs_only_when_its_group_may_exist() {
    let mut tables = Tables::default();
    tables.looked_up(TableSet::of_tables(["job", "response_chunks"]));
    assert_eq!(tables.before(&CLEAR_DEAD_LETTERED), Before::Skip);
    assert_eq!(tables.before(&KEEP_IN_ROW), Before::Run);
    // Table by table: a group found without one of its tables skips that one.
    assert_eq!(FORGET_RESPONSE.map(|write| tables.before(&write)), [Before::Run, Before::Run, Before::Skip]);
    tables.create(TableGroup::Responses);
    assert_eq!(FORGET_RESPONSE.map(|write| tables.before(&write)), [Before::Run; 3]);
    assert_eq!(Tables::deleted().before(&KEEP_IN_ROW), Before::Skip, "no job row: the response goes in chunks");
}

#[test]
fn a_write_that_runs_is_never_skipped_nor_creates() {
    let mut tables = Tables::default();
    tables.looked_up(TableSet::default());
    for write in [UPDATE_JOB, UPDATE_META, FINISH_STREAM, UPDATE_EFFECT] {
        assert_eq!(tables.before(&write), Before::Run, "{}", write.sql);
    }
}

#[test]
fn forgetting_a_response_clears_every_place_one_is_kept() {
    let touched: Vec<&str> = FORGET_RESPONSE.iter().flat_map(|write| tables_named(write.sql)).collect();
    assert_eq!(touched, ["job", "response_chunks", "responses"], "the chunks before their head");
    let holding = [KEEP_IN_ROW, SAVE_RESPONSE_HEAD, SAVE_RESPONSE_CHUNK, START_STREAM];
    for write in holding {
        assert!(tables_named(write.sql).iter().all(|table| touched.contains(table)), "{}", write.sql);
    }
    assert!(FORGET_RESPONSE.iter().all(|write| write.missing == Missing::Skip));
}

#[test]
fn a_body_is_read_from_where_its_head_was_found() {
    assert_eq!(BodyRead::of(ResponsePlace::JobRow, false), BodyRead::Rows(ROW_RESPONSE_BODY));
    assert_eq!(BodyRead::of(ResponsePlace::Chunked, false), BodyRead::Rows(CHUNKED_RESPONSE_BODY));
    assert_eq!(BodyRead::of(ResponsePlace::Chunked, true), BodyRead::Events);
    assert_eq!(BodyRead::of(ResponsePlace::JobRow, true), BodyRead::Events);
}

#[test]
fn a_body_in_rows_must_be_its_heads_size_a_streams_is_not_checked() {
    let rows = BodyRead::of(ResponsePlace::Chunked, false);
    assert!(rows.complete(10, 10));
    assert!(!rows.complete(10, 9), "a chunk missing");
    assert!(!rows.complete(0, 1));
    assert!(BodyRead::Events.complete(0, 42), "a stream's size is known once it ended");
}

#[test]
fn a_streams_body_is_not_kept_in_memory() {
    assert!(!BodyRead::Events.keepable());
    assert!(BodyRead::of(ResponsePlace::JobRow, false).keepable());
    assert!(BodyRead::of(ResponsePlace::Chunked, false).keepable());
}

#[test]
fn a_head_is_looked_for_in_the_row_first_and_its_body_read_from_where_it_was_found() {
    let places: Vec<ResponsePlace> = RESPONSE_HEADS.iter().map(|(place, _)| *place).collect();
    assert_eq!(places, [ResponsePlace::JobRow, ResponsePlace::Chunked]);
    for (place, head) in RESPONSE_HEADS {
        let BodyRead::Rows(body) = BodyRead::of(place, false) else { panic!("{place:?}") };
        let head_group = TableGroup::of_table(head.table);
        assert_eq!(TableGroup::of_table(body.table), head_group, "{place:?}: the body is in the head's group");
    }
    // Where a response is saved, its head is found: the row's write and the chunks' head.
    assert_eq!(TableGroup::of_table(RESPONSE_HEADS[0].1.table), TableGroup::of_table(KEEP_IN_ROW.table));
    assert_eq!(RESPONSE_HEADS[1].1.table, SAVE_RESPONSE_HEAD.table);
}

/// The columns a statement's `SET` names, and what its `WHERE` checks.
fn set_and_where(sql: &str) -> (Vec<String>, String) {
    let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
    let (set, condition) = sql.split_once(" SET ").and_then(|(_, rest)| rest.split_once(" WHERE ")).expect("an UPDATE");
    let columns = set.split(", ").map(|a| a.split(" = ").next().unwrap_or_default().to_owned()).collect();
    (columns, condition.to_owned())
}

#[test]
fn a_results_one_write_is_the_response_in_the_row_and_the_jobs_compare_and_swap() {
    let (row_columns, row_condition) = set_and_where(KEEP_IN_ROW.sql);
    let (job_columns, job_condition) = set_and_where(UPDATE_JOB.sql);
    let (columns, condition) = set_and_where(KEEP_IN_ROW_WITH_JOB.sql);
    assert_eq!(columns, [row_columns, job_columns].concat(), "both writes' columns, in their arguments' order");
    assert_eq!(condition, format!("{row_condition} AND version = ?"), "the row's place free and the version as read");
    assert!(job_condition.ends_with("version = ?"));
    assert_eq!(Tables::deleted().before(&KEEP_IN_ROW_WITH_JOB), Before::Skip, "no job row: the two writes, as before");
}
