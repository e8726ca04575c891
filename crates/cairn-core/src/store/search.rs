//! The SQL lexical search reads over the memories' full-text table (`crate::search` holds the
//! rules: the query, the filters, the ranking).

use std::collections::HashMap;

use rusqlite::OptionalExtension;

use super::Store;
use crate::error::Result;

/// What re-ranking reads of a live memory: its title, the start of its content and the
/// content's length in characters.
pub(crate) struct MemoryHead {
    pub(crate) title: String,
    /// The first characters of the content (as many as asked for).
    pub(crate) head: String,
    /// Characters of the whole content.
    pub(crate) length: i64,
}

/// Memory id → the memories saved right before and right after it in its session.
pub(crate) type Neighbours = HashMap<i64, (Option<i64>, Option<i64>)>;

impl Store {
    /// Top rows by BM25 (the weights live in the table's `rank` setting, so FTS5 sorts
    /// internally instead of handing SQLite every match).
    pub(crate) fn fts_ranked(&self, expr: &str, limit: usize) -> Result<Vec<(i64, f64)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT rowid, rank FROM observations_fts WHERE observations_fts MATCH ?1 ORDER BY rank LIMIT ?2",
        )?;
        let rows = stmt.query_map(rusqlite::params![expr, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The best passage of one memory, matches in bold. Only computed for the hits returned.
    pub(crate) fn fts_snippet(&self, terms: &str, id: i64) -> Result<String> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT snippet(observations_fts, -1, '**', '**', '…', 24) FROM observations_fts
             WHERE observations_fts MATCH ?1 AND rowid = ?2",
        )?;
        Ok(stmt.query_row(rusqlite::params![terms, id], |r| r.get(0)).optional()?.unwrap_or_default())
    }

    /// What search filters a live memory by: its project, scope, type and `updated_at`.
    pub(crate) fn filtered_fields(&self, id: i64) -> Result<Option<(String, String, String, String)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT project, scope, type, updated_at FROM observations WHERE id = ?1 AND deleted_at IS NULL",
        )?;
        Ok(stmt.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).optional()?)
    }

    /// Title, the first `head_chars` characters and the length of the content of the live
    /// memories among `ids`.
    pub(crate) fn memory_heads(&self, ids: &[i64], head_chars: i64) -> Result<HashMap<i64, MemoryHead>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        // The ids as one JSON array: one statement text whatever their number, so it stays cached.
        let ids = serde_json::to_string(ids).unwrap_or_default();
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, title, substr(content, 1, ?2), length(content) FROM observations
             WHERE deleted_at IS NULL AND id IN (SELECT value FROM json_each(?1))",
        )?;
        let rows = stmt.query_map(rusqlite::params![ids, head_chars], |r| {
            Ok((r.get(0)?, MemoryHead { title: r.get(1)?, head: r.get(2)?, length: r.get(3)? }))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The live memories saved just before and just after each of `ids` in the same session
    /// (by id, which is save order); memories whose session matches `catch_all_like` (the
    /// catch-all sessions of saves without one) are left out.
    pub(crate) fn session_neighbours_of(&self, ids: &[i64], catch_all_like: String) -> Result<Neighbours> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let placeholders = vec!["?"; ids.len()].join(",");
        let sql = format!(
            "SELECT c.id,
               (SELECT o.id FROM observations o WHERE o.session_id = c.session_id AND o.id < c.id
                  AND o.deleted_at IS NULL ORDER BY o.id DESC LIMIT 1),
               (SELECT o.id FROM observations o WHERE o.session_id = c.session_id AND o.id > c.id
                  AND o.deleted_at IS NULL ORDER BY o.id LIMIT 1)
             FROM observations c WHERE c.id IN ({placeholders}) AND c.session_id NOT LIKE ?"
        );
        // Not cached: the text changes with the number of ids and would evict hot statements.
        let mut stmt = self.conn().prepare(&sql)?;
        let args = ids
            .iter()
            .map(|&id| rusqlite::types::Value::Integer(id))
            .chain([rusqlite::types::Value::Text(catch_all_like)]);
        let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
