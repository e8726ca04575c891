//! The SQL the agent protocol reads beside its own table (`crate::agent` holds the rules): the
//! user's profile, and what a session left for its Last Session record (the session row
//! itself is `store::sessions`' `find_session`).

use rusqlite::{OptionalExtension, params};

use crate::error::Result;
use crate::model::{OBSERVATION_COLUMNS, Observation};
use crate::store::Store;

impl Store {
    /// Personal memories and, with a (normalized) project, that project's `preference`
    /// memories; pinned first, then preferences, then the most recently seen; at most `limit`.
    pub(crate) fn profile_memories(&self, project: Option<&str>, limit: usize) -> Result<Vec<Observation>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.deleted_at IS NULL
               AND (o.scope = 'personal' OR (o.type = 'preference' AND o.project = ?1))
             ORDER BY o.pinned DESC, o.type = 'preference' DESC, COALESCE(o.last_seen_at, o.updated_at) DESC, o.id DESC
             LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![project, limit as i64], Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The tool name of the newest live memory of `kind` under `topic` (`None`: no such memory,
    /// or it has none).
    pub(crate) fn newest_tool_name(&self, topic: &str, kind: &str) -> Result<Option<String>> {
        let tool: Option<Option<String>> = self
            .conn()
            .query_row(
                "SELECT tool_name FROM observations WHERE topic_key = ?1 AND type = ?2 AND deleted_at IS NULL
                 ORDER BY updated_at DESC LIMIT 1",
                params![topic, kind],
                |r| r.get(0),
            )
            .optional()?;
        Ok(tool.flatten())
    }

    /// The session's newest `limit` prompts, oldest first.
    pub(crate) fn session_requests(&self, id: &str, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT content FROM prompts WHERE session_id = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2",
        )?;
        let mut rows: Vec<String> =
            stmt.query_map(params![id, limit as i64], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        rows.reverse();
        Ok(rows)
    }

    /// The session's newest `limit` Key Learnings (passive capture), newest first.
    pub(crate) fn session_learnings(&self, id: &str, limit: usize) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT content FROM observations WHERE session_id = ?1 AND type = 'passive' AND deleted_at IS NULL
             ORDER BY created_at DESC, id DESC LIMIT ?2",
        )?;
        Ok(stmt.query_map(params![id, limit as i64], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?)
    }

    /// The newest `limit` live memories the session saved (`(id, title)`), none of the kinds
    /// `skipped`, newest first.
    pub(crate) fn session_saved(&self, id: &str, skipped: &[&str; 4], limit: usize) -> Result<Vec<(i64, String)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, title FROM observations
             WHERE session_id = ?1 AND deleted_at IS NULL AND type NOT IN (?2, ?3, ?4, ?5)
             ORDER BY id DESC LIMIT ?6",
        )?;
        let [a, b, c, d] = skipped;
        let rows = stmt.query_map(params![id, a, b, c, d, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
