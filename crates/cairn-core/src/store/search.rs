//! The SQL lexical search reads over the memories' full-text table (`crate::search` holds the
//! rules: the query, the filters, the ranking).

use rusqlite::OptionalExtension;

use super::Store;
use crate::error::Result;

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
}
