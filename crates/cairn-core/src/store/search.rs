//! The SQL lexical search reads over the memories' full-text table (`crate::search` holds the
//! rules: the query, the filters, the ranking).

use std::collections::HashMap;

use rusqlite::types::Value;
use rusqlite::{OptionalExtension, params_from_iter};

use super::Store;
use crate::error::Result;
use crate::model::{OBSERVATION_COLUMNS, Observation};
use crate::text::Scope;

/// What a search may return (`crate::search` builds it from a query; the in-memory index
/// applies it too, as `crate::index::IndexFilter`).
#[derive(Debug, Clone, Default)]
pub struct MemoryFilter {
    /// Only this project (plus personal memories), when set.
    pub project: Option<String>,
    pub kind: Option<String>,
    pub scope: Option<Scope>,
}

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

    /// The live memories with topic key `key` that pass `filter`, the last updated first.
    pub(crate) fn topic_rows(&self, key: &str, filter: &MemoryFilter, limit: usize) -> Result<Vec<Observation>> {
        let (filter_sql, mut args) = filter_clause(filter);
        args.insert(0, Value::Text(key.to_owned()));
        args.push(Value::Integer(limit as i64));
        let sql = format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.topic_key = ? AND o.deleted_at IS NULL {filter_sql}
             ORDER BY o.updated_at DESC LIMIT ?"
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(params_from_iter(args), Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// The SQL of `filter` over `observations o`: project (plus personal memories), type, scope.
fn filter_clause(filter: &MemoryFilter) -> (String, Vec<Value>) {
    let mut sql = String::new();
    let mut args = Vec::new();
    if let Some(project) = &filter.project {
        sql.push_str(" AND (o.project = ? OR o.scope = 'personal')");
        args.push(Value::Text(project.clone()));
    }
    if let Some(kind) = &filter.kind {
        sql.push_str(" AND o.type = ?");
        args.push(Value::Text(kind.clone()));
    }
    if let Some(scope) = filter.scope {
        sql.push_str(" AND o.scope = ?");
        args.push(Value::Text(scope.as_str().to_owned()));
    }
    (sql, args)
}
