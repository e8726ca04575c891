//! The SQL of context assembly (`crate::context` holds what a context shows and in what order):
//! the memories each section starts from.

use rusqlite::params;

use crate::error::Result;
use crate::model::{OBSERVATION_COLUMNS, Observation};
use crate::store::Store;
use crate::text::Scope;

impl Store {
    /// Pinned live memories of `project` (and personal ones), or of every project, newest first.
    pub(crate) fn pinned(&self, project: Option<&str>, scope: Option<Scope>, limit: usize) -> Result<Vec<Observation>> {
        let project_filter = if project.is_some() { "(o.project = ?1 OR o.scope = 'personal')" } else { "?1 IS NULL" };
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.pinned = 1 AND o.deleted_at IS NULL AND {project_filter}
               AND (?2 IS NULL OR o.scope = ?2)
             ORDER BY o.updated_at DESC LIMIT ?3"
        ))?;
        let rows =
            stmt.query_map(rusqlite::params![project, scope.map(Scope::as_str), limit as i64], Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// A project's newest live memories of these three types.
    pub(crate) fn newest_of_kinds(&self, project: &str, kinds: [&str; 3], limit: usize) -> Result<Vec<Observation>> {
        let [a, b, c] = kinds;
        let sql = format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.project = ?1 AND o.deleted_at IS NULL AND o.type IN (?2, ?3, ?4)
             ORDER BY o.updated_at DESC, o.id DESC LIMIT ?5"
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(params![project, a, b, c, limit as i64], Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// A project's newest live memories of any other type than these three, outside the session
    /// `besides` (when given).
    pub(crate) fn newest_besides_kinds(
        &self,
        project: &str,
        kinds: [&str; 3],
        besides: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Observation>> {
        let [a, b, c] = kinds;
        let sql = format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.project = ?1 AND o.deleted_at IS NULL AND o.type NOT IN (?2, ?3, ?4) AND o.session_id IS NOT ?6
             ORDER BY o.updated_at DESC, o.id DESC LIMIT ?5"
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(params![project, a, b, c, limit as i64, besides], Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// A project's memories of these types, newest first, at most `limit`; the brief also by
    /// its topic.
    pub(crate) fn typed_memories(
        &self,
        project: &str,
        kinds: &[&str],
        brief: bool,
        limit: usize,
    ) -> Result<Vec<Observation>> {
        let placeholders = (0..kinds.len()).map(|i| format!("?{}", i + 3)).collect::<Vec<_>>().join(", ");
        let by_topic = if brief { " OR o.topic_key = 'project/brief'" } else { "" };
        let sql = format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.project = ?1 AND o.deleted_at IS NULL AND (o.type IN ({placeholders}){by_topic})
             ORDER BY o.updated_at DESC, o.id DESC LIMIT ?2"
        );
        let mut values: Vec<rusqlite::types::Value> = vec![project.to_owned().into(), (limit as i64).into()];
        values.extend(kinds.iter().map(|k| rusqlite::types::Value::from((*k).to_owned())));
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values), Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
