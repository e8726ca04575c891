//! The SQL of the privacy rewrite (`crate::privacy` holds the rule of what to redact): the
//! tables whose texts are checked, reading their rows, writing one back, zeroing freed space
//! and rebuilding the file.

use rusqlite::Connection;
use rusqlite::types::Value as SqlValue;

use crate::error::Result;
use crate::memory::ObservationPatch;
use crate::store::Store;

/// A table's rows whose text columns are checked, keyed by what identifies a row.
pub(crate) struct Table {
    pub(crate) select: &'static str,
    pub(crate) update: &'static str,
}

/// Everything but live memories, redacted in place. Each select gives the key column(s) first
/// (`keys`), then the text columns the update sets in order.
pub(crate) const IN_PLACE: &[(&str, usize, Table)] = &[
    (
        "revisions",
        2,
        Table {
            select: "SELECT observation_id, revision, type, title, content FROM observation_revisions",
            update: "UPDATE observation_revisions SET type = ?3, title = ?4, content = ?5
                     WHERE observation_id = ?1 AND revision = ?2",
        },
    ),
    (
        "deleted memories",
        1,
        Table {
            select: "SELECT id, type, title, content, coalesce(topic_key, ''), coalesce(tool_name, '')
                     FROM observations WHERE deleted_at IS NOT NULL",
            update: "UPDATE observations SET type = ?2, title = ?3, content = ?4, topic_key = nullif(?5, ''),
                     tool_name = nullif(?6, '') WHERE id = ?1",
        },
    ),
    (
        "prompts",
        1,
        Table { select: "SELECT id, content FROM prompts", update: "UPDATE prompts SET content = ?2 WHERE id = ?1" },
    ),
    (
        "sessions",
        1,
        Table {
            select: "SELECT id, coalesce(summary, ''), coalesce(title, ''), directory, agent FROM sessions",
            update: "UPDATE sessions SET summary = nullif(?2, ''), title = nullif(?3, ''), directory = ?4, agent = ?5
                     WHERE id = ?1",
        },
    ),
    (
        "relations",
        1,
        Table {
            select: "SELECT id, coalesce(reason, ''), coalesce(evidence, '') FROM relations",
            update: "UPDATE relations SET reason = nullif(?2, ''), evidence = nullif(?3, '') WHERE id = ?1",
        },
    ),
    (
        "journal",
        1,
        Table {
            select: "SELECT seq, payload FROM sync_journal",
            update: "UPDATE sync_journal SET payload = ?2 WHERE seq = ?1",
        },
    ),
    (
        "journal",
        1,
        Table {
            select: "SELECT sync_id, payload FROM sync_deferred",
            update: "UPDATE sync_deferred SET payload = ?2 WHERE sync_id = ?1",
        },
    ),
];

/// One row: its key values and its text values.
pub(crate) type Row = (Vec<SqlValue>, Vec<String>);

/// The rows of `table` that `keep` turns into new texts (`None`: the row is left out).
pub(crate) fn table_rows(
    conn: &Connection,
    table: &Table,
    keys: usize,
    mut keep: impl FnMut(&[String]) -> Option<Vec<String>>,
) -> Result<Vec<Row>> {
    let mut stmt = conn.prepare(table.select)?;
    let columns = stmt.column_count();
    let rows = stmt.query_map([], |r| {
        let key = (0..keys).map(|i| r.get::<_, SqlValue>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
        let texts = (keys..columns).map(|i| r.get::<_, String>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
        Ok((key, texts))
    })?;
    let mut found = Vec::new();
    for row in rows {
        let (key, texts) = row?;
        if let Some(texts) = keep(&texts) {
            found.push((key, texts));
        }
    }
    Ok(found)
}

/// Live memories' text fields as a patch, those `keep` changes (it redacts them in place).
pub(crate) fn live_memory_fields(
    conn: &Connection,
    mut keep: impl FnMut(&mut ObservationPatch) -> bool,
) -> Result<Vec<(i64, ObservationPatch)>> {
    let mut stmt = conn.prepare(
        "SELECT id, type, title, content, topic_key, tool_name FROM observations WHERE deleted_at IS NULL ORDER BY id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            ObservationPatch {
                kind: Some(r.get(1)?),
                title: Some(r.get(2)?),
                content: Some(r.get(3)?),
                topic_key: r.get(4)?,
                tool_name: r.get(5)?,
                ..ObservationPatch::default()
            },
        ))
    })?;
    let mut found = Vec::new();
    for row in rows {
        let (id, mut patch) = row?;
        if keep(&mut patch) {
            found.push((id, patch));
        }
    }
    Ok(found)
}

/// Write `texts` back into the row of `table` keyed by `key`.
pub(crate) fn rewrite_row(conn: &Connection, table: &Table, key: Vec<SqlValue>, texts: Vec<String>) -> Result<()> {
    let values: Vec<SqlValue> = key.into_iter().chain(texts.into_iter().map(SqlValue::Text)).collect();
    conn.execute(table.update, rusqlite::params_from_iter(values))?;
    Ok(())
}

impl Store {
    /// Freed pages are zeroed from now on (on this connection).
    pub(crate) fn set_secure_delete(&self) -> Result<()> {
        self.conn().pragma_update(None, "secure_delete", true)?;
        Ok(())
    }

    /// Copy the WAL into the file and truncate it, waiting for readers: what a rewrite that
    /// cannot rebuild the file still does, so the redacted pages are in the file and the WAL's
    /// frames of the old ones are gone.
    pub(crate) fn checkpoint_truncate(&self) -> Result<()> {
        cairn_base::vacuum::checkpoint_truncate(self.conn())
    }

    /// Rebuild the file and empty the WAL, so no freed byte is left on disk.
    pub(crate) fn vacuum_and_checkpoint(&self) -> Result<()> {
        cairn_base::vacuum::vacuum_on_disk(self.conn())
    }
}
