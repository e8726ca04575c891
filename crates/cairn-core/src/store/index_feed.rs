//! What the daemon's in-memory index (`crate::index`) reads: the indexed fields of live
//! memories and the change log (`observation_changes`) it follows. Functions over a bare
//! connection: the index also builds on a connection of its own, off the store's thread.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;

/// One memory as the index needs it.
#[derive(Debug, Clone)]
pub(crate) struct IndexedRow {
    pub(crate) id: i64,
    pub(crate) title: String,
    pub(crate) content: String,
    pub(crate) kind: String,
    pub(crate) project: String,
    pub(crate) scope: String,
    pub(crate) topic_key: Option<String>,
    pub(crate) tool_name: Option<String>,
    pub(crate) updated_at: String,
}

const ROW_SQL: &str =
    "SELECT id, title, content, type, project, scope, topic_key, tool_name, updated_at FROM observations";

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<IndexedRow> {
    Ok(IndexedRow {
        id: r.get(0)?,
        title: r.get(1)?,
        content: r.get(2)?,
        kind: r.get(3)?,
        project: r.get(4)?,
        scope: r.get(5)?,
        topic_key: r.get(6)?,
        tool_name: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

/// Up to `chunk` live memories with an id above `after`, by id. Collected, so the statement
/// is reset (its read transaction ends) before the caller works on the rows.
pub(crate) fn live_rows_after(conn: &Connection, after: i64, chunk: usize) -> Result<Vec<IndexedRow>> {
    let mut stmt =
        conn.prepare_cached(&format!("{ROW_SQL} WHERE id > ?1 AND deleted_at IS NULL ORDER BY id LIMIT ?2"))?;
    Ok(stmt.query_map(params![after, chunk as i64], read_row)?.collect::<rusqlite::Result<_>>()?)
}

/// The memory `id`, when it is live.
pub(crate) fn live_row(conn: &Connection, id: i64) -> Result<Option<IndexedRow>> {
    let mut stmt = conn.prepare_cached(&format!("{ROW_SQL} WHERE id = ?1 AND deleted_at IS NULL"))?;
    Ok(stmt.query_row([id], read_row).optional()?)
}

/// The oldest `seq` the change log still holds (`None` when it is empty).
pub(crate) fn oldest_change_seq(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn.prepare_cached("SELECT min(seq) FROM observation_changes")?.query_row([], |r| r.get(0))?)
}

/// The newest `seq` of the change log, 0 when empty. Cached: the daemon asks after every
/// commit and before every search.
pub(crate) fn newest_change_seq(conn: &Connection) -> Result<i64> {
    Ok(conn.prepare_cached("SELECT COALESCE(max(seq), 0) FROM observation_changes")?.query_row([], |r| r.get(0))?)
}

/// `(seq, memory id)` of every change logged after `seq`, in order.
pub(crate) fn changes_after(conn: &Connection, seq: i64) -> Result<Vec<(i64, i64)>> {
    let mut stmt =
        conn.prepare_cached("SELECT seq, observation_id FROM observation_changes WHERE seq > ?1 ORDER BY seq")?;
    Ok(stmt.query_map([seq], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?)
}
