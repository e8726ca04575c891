//! The SQL of sessions (`crate::sessions` holds the rules): create or fill in, end, read,
//! list by recent activity, delete.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{SESSION_COLUMNS, Session, SessionSummary};
use crate::sessions::{NewSession, session_not_found, validate_session_id};
use crate::store::Store;
use crate::text::{normalize_project, redact};

impl Store {
    /// Create a session, or fill in what an existing one lacks (project, directory, agent,
    /// parent). Idempotent: agents call it at every start.
    pub fn start_session(&mut self, new: &NewSession) -> Result<Session> {
        let (new, _) = self.redacted(new);
        let new = &new;
        validate_session_id(&new.id)?;
        let now = self.now();
        self.write(|tx| ensure_session(tx, new, &now))?;
        self.get_session(&new.id)
    }

    /// End a session with an optional summary. Unknown ids are an error (engram says "ok").
    pub fn end_session(&mut self, id: &str, summary: Option<&str>) -> Result<Session> {
        let now = self.now();
        // The id as it was stored: redacted the same way.
        let id = &*self.redaction().apply(id).0;
        let summary = summary.map(|s| self.redaction().apply(s).0.into_owned()).filter(|s| !s.trim().is_empty());
        let changed = self.write(|tx| {
            Ok(tx.execute(
                "UPDATE sessions SET ended_at = ?2, summary = COALESCE(?3, summary) WHERE id = ?1",
                params![id, now, summary],
            )?)
        })?;
        if changed == 0 {
            return Err(session_not_found(id));
        }
        self.get_session(id)
    }

    pub fn get_session(&self, id: &str) -> Result<Session> {
        self.find_session(id)?.ok_or_else(|| session_not_found(id))
    }

    /// Session `id`, if it exists.
    pub(crate) fn find_session(&self, id: &str) -> Result<Option<Session>> {
        Ok(self
            .conn()
            .query_row(&format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?1"), [id], Session::from_row)
            .optional()?)
    }

    /// Sessions ordered by their latest activity (newest memory or start), with memory counts.
    /// Sub-agent sessions (with a `parent_id`) are left out unless `include_children`: they
    /// are steps of their parent's work, and would crowd the list.
    pub fn recent_sessions(
        &self,
        project: Option<&str>,
        limit: usize,
        include_children: bool,
    ) -> Result<Vec<SessionSummary>> {
        self.recent_sessions_counted(project, limit, None, include_children)
    }

    /// Like [`Store::recent_sessions`], counting each session's memories only up to `cap`
    /// (a long-lived session has thousands; a context line only needs "100+").
    pub(crate) fn recent_sessions_counted(
        &self,
        project: Option<&str>,
        limit: usize,
        cap: Option<usize>,
        include_children: bool,
    ) -> Result<Vec<SessionSummary>> {
        let project = project.map(|p| normalize_project(p).0);
        let mut filter = if project.is_some() { "WHERE s.project = ?1" } else { "WHERE ?1 IS NULL" }.to_owned();
        if !include_children {
            filter.push_str(" AND s.parent_id IS NULL");
        }
        let count = match cap {
            Some(cap) => format!(
                "(SELECT count(*) FROM (SELECT 1 FROM observations o WHERE o.session_id = s.id AND o.deleted_at IS NULL LIMIT {cap}))"
            ),
            None => {
                "(SELECT count(*) FROM observations o WHERE o.session_id = s.id AND o.deleted_at IS NULL)".to_owned()
            }
        };
        // Walk the activity index for the page, count memories only for those sessions.
        let sql = format!(
            "SELECT {SESSION_COLUMNS}, {count}, COALESCE(s.last_activity_at, s.started_at)
             FROM sessions s {filter}
             ORDER BY s.last_activity_at DESC, s.id
             LIMIT ?2"
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(params![project, limit as i64], |row| {
            Ok(SessionSummary {
                session: Session::from_row(row)?,
                observation_count: row.get(9)?,
                last_activity_at: row.get(10)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Delete a session and its prompts; refused while it has memories (even deleted ones).
    pub fn delete_session(&mut self, id: &str) -> Result<()> {
        self.get_session(id)?;
        self.write(|tx| {
            let count: i64 =
                tx.query_row("SELECT count(*) FROM observations WHERE session_id = ?1", [id], |r| r.get(0))?;
            if count > 0 {
                return Err(CairnError::new(
                    ErrorCode::SessionHasObservations,
                    format!("session {id} still has {count} memories"),
                )
                .with_hint("delete its memories first (cairn delete --hard), or keep the session"));
            }
            tx.execute("DELETE FROM prompts WHERE session_id = ?1", [id])?;
            // Its activity holds the text of its last prompt.
            tx.execute("DELETE FROM agent_activity WHERE session_id = ?1", [id])?;
            tx.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
            Ok(())
        })
    }
}

/// Insert the session if missing; otherwise fill empty fields. Runs inside the caller's
/// transaction so a save and its session commit together.
pub(crate) fn ensure_session(tx: &Connection, new: &NewSession, now: &str) -> Result<()> {
    let project = new.project.as_deref().map(|p| normalize_project(p).0).unwrap_or_default();
    let directory = new.directory.as_deref().map(|d| redact(d).0).unwrap_or_default();
    let agent = new.agent.as_deref().map(|a| redact(a).0).unwrap_or_default();
    let title = new.title.as_deref().map(|t| redact(t.trim()).0).filter(|t| !t.is_empty());
    // Nearly every save names a session that exists with nothing left to fill in: the WHERE
    // leaves that row alone instead of rewriting it and its index entries for no change.
    // A title is the one field a later call replaces (hosts rename sessions).
    tx.prepare_cached(
        "INSERT INTO sessions (id, project, directory, agent, parent_id, started_at, title)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(id) DO UPDATE SET
            project   = CASE WHEN sessions.project = '' THEN excluded.project ELSE sessions.project END,
            directory = CASE WHEN sessions.directory = '' THEN excluded.directory ELSE sessions.directory END,
            agent     = CASE WHEN sessions.agent = '' THEN excluded.agent ELSE sessions.agent END,
            parent_id = COALESCE(sessions.parent_id, excluded.parent_id),
            title     = COALESCE(excluded.title, sessions.title)
         WHERE (sessions.project = '' AND excluded.project != '')
            OR (sessions.directory = '' AND excluded.directory != '')
            OR (sessions.agent = '' AND excluded.agent != '')
            OR (sessions.parent_id IS NULL AND excluded.parent_id IS NOT NULL)
            OR (excluded.title IS NOT NULL AND excluded.title IS NOT sessions.title)",
    )?
    .execute(params![new.id, project, directory, agent, new.parent_id, now, title])?;
    Ok(())
}
