//! The SQL of git sync's chunks (`crate::sync::git` holds the rules and the files): which
//! chunks of a folder were applied here, and a folder's last error.

use std::collections::HashSet;

use rusqlite::{Connection, params};

use crate::error::Result;
use crate::store::Store;

impl Store {
    /// The chunks of a folder (its `folder_key`) applied here.
    pub fn sync_applied_chunks(&self, source: &str) -> Result<HashSet<String>> {
        let mut stmt = self.conn().prepare("SELECT chunk_id FROM sync_chunks WHERE target_key = ?1")?;
        let rows = stmt.query_map([source], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Whether chunk `chunk_id` of folder `source` was applied here.
    pub(crate) fn sync_chunk_applied(&self, source: &str, chunk_id: &str) -> Result<bool> {
        Ok(self.conn().query_row(
            "SELECT EXISTS (SELECT 1 FROM sync_chunks WHERE target_key = ?1 AND chunk_id = ?2)",
            params![source, chunk_id],
            |r| r.get(0),
        )?)
    }

    /// The last error recorded for target `target_key`; `None` without one, or when it cannot
    /// be read.
    pub(crate) fn sync_target_last_error(&self, target_key: &str) -> Option<String> {
        self.conn()
            .query_row("SELECT last_error FROM sync_targets WHERE target_key = ?1", [target_key], |r| r.get(0))
            .unwrap_or(None)
    }
}

/// Record in `tx` that chunk `chunk_id` of folder `source` is applied here (written here, or
/// imported); recording it again changes nothing.
pub(crate) fn record_chunk(tx: &Connection, source: &str, chunk_id: &str, now: &str) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO sync_chunks (target_key, chunk_id, applied_at) VALUES (?1, ?2, ?3)",
        params![source, chunk_id, now],
    )?;
    Ok(())
}
