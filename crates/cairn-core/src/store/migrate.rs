//! Numbered migrations tracked by `PRAGMA user_version`. Each runs once, inside an IMMEDIATE
//! transaction that re-reads the version after taking the write lock, so two processes starting
//! together never both apply the same step (engram migrates on every start and races: #1182).

pub use cairn_base::migrate::run_list;
use cairn_base::migrate::{check_not_newer, user_version};
use rusqlite::Connection;

use crate::error::{CairnError, ErrorCode, Result};

/// Migrations in order; index + 1 is the version each one produces.
const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_change_log.sql"),
    include_str!("../../migrations/0003_session_activity.sql"),
    include_str!("../../migrations/0004_embeddings.sql"),
    include_str!("../../migrations/0005_partial_topic_index.sql"),
    include_str!("../../migrations/0006_agent_activity.sql"),
    include_str!("../../migrations/0007_session_title_and_prompts.sql"),
    include_str!("../../migrations/0008_spool_events.sql"),
    include_str!("../../migrations/0009_sync_journal.sql"),
    include_str!("../../migrations/0010_sync_remote.sql"),
    include_str!("../../migrations/0011_extraction.sql"),
    include_str!("../../migrations/0012_sync_parked.sql"),
    include_str!("../../migrations/0013_judging.sql"),
    include_str!("../../migrations/0014_stats_counts.sql"),
    include_str!("../../migrations/0015_sync_provenance.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub(super) fn run(conn: &mut Connection) -> Result<()> {
    run_list(conn, MIGRATIONS)
}

/// A database opened read-only must already have this cairn's schema: it cannot be migrated.
pub(crate) fn check_current(conn: &Connection) -> Result<()> {
    let version = user_version(conn)?;
    check_not_newer(version, SCHEMA_VERSION)?;
    if version < SCHEMA_VERSION {
        return Err(CairnError::new(
            ErrorCode::SchemaTooOld,
            format!("the database has schema version {version}; this cairn reads version {SCHEMA_VERSION}"),
        )
        .with_hint("start the daemon (cairn serve) or run any command that writes once, to upgrade it"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_once_and_is_idempotent() {
        let mut conn = Connection::open_in_memory().unwrap();
        run(&mut conn).unwrap();
        run(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn upgrading_a_store_with_data_backfills_session_activity() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.execute_batch(MIGRATIONS[1]).unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions (id, project, started_at) VALUES ('s', 'p', '2026-01-01T00:00:00.000Z');
             INSERT INTO observations (sync_id, session_id, type, title, content, project, normalized_hash, created_at, updated_at)
             VALUES ('x', 's', 'manual', 't', 'c', 'p', 'h', '2026-03-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z');",
        )
        .unwrap();
        run(&mut conn).unwrap();
        let activity: String =
            conn.query_row("SELECT last_activity_at FROM sessions WHERE id = 's'", [], |r| r.get(0)).unwrap();
        assert_eq!(activity, "2026-03-01T00:00:00.000Z");
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
    }

    #[test]
    fn refuses_newer_schema() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let err = run(&mut conn).unwrap_err();
        assert_eq!(err.code, ErrorCode::SchemaTooNew);
    }
}
