//! Sessions: created on first use, ended with a (redacted) summary, listed by recent activity.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{SESSION_COLUMNS, Session, SessionSummary};
use crate::store::Store;
use crate::text::{normalize_project, redact, require};

/// Who opens a session and where.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSession {
    pub id: String,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub directory: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub parent_id: Option<String>,
    /// The host's name for the session; a later start with a title renames it.
    #[serde(default)]
    pub title: Option<String>,
}

pub(crate) use crate::model::catch_all_sessions_like;
pub use crate::model::default_session_id;

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
        self.conn()
            .query_row(&format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?1"), [id], Session::from_row)
            .optional()?
            .ok_or_else(|| session_not_found(id))
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

pub(crate) fn session_not_found(id: &str) -> CairnError {
    CairnError::new(ErrorCode::SessionNotFound, format!("session {id:?} not found"))
        .with_hint("start it first (POST /sessions or mem_session_start), or omit the session id")
}

/// Session ids are agent-supplied; refuse the ones that would break paths, logs or terminals.
pub(crate) fn validate_session_id(id: &str) -> Result<()> {
    require("session id", id)?;
    if id.len() > 256 || id.chars().any(char::is_control) {
        return Err(CairnError::invalid("session id must be at most 256 bytes with no control characters"));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        Store::open_in_memory().unwrap()
    }

    #[test]
    fn start_is_idempotent_and_fills_blanks() {
        let mut s = store();
        s.start_session(&NewSession { id: "s1".into(), ..Default::default() }).unwrap();
        let got = s
            .start_session(&NewSession {
                id: "s1".into(),
                project: Some("Cairn".into()),
                directory: Some("/w".into()),
                agent: Some("opencode".into()),
                parent_id: Some("p0".into()),
                title: None,
            })
            .unwrap();
        assert_eq!(got.project, "cairn");
        assert_eq!(got.directory, "/w");
        assert_eq!(got.parent_id.as_deref(), Some("p0"));
        // A later start does not overwrite what is set.
        let again = s
            .start_session(&NewSession { id: "s1".into(), project: Some("other".into()), ..Default::default() })
            .unwrap();
        assert_eq!(again.project, "cairn");
    }

    /// A session with nothing left to fill is not rewritten (a save names one every time).
    #[test]
    fn a_complete_session_is_left_untouched() {
        let s = store();
        // Rows inserted or updated, triggers included.
        let writes = |session: NewSession| {
            let before = s.conn().total_changes();
            ensure_session(s.conn(), &session, "2026-11-22T00:00:00Z").unwrap();
            s.conn().total_changes() > before
        };
        let full = || NewSession {
            id: "s1".into(),
            project: Some("cairn".into()),
            directory: Some("/w".into()),
            agent: Some("opencode".into()),
            parent_id: Some("p0".into()),
            title: Some("Fix the build".into()),
        };
        assert!(writes(full()), "created");
        assert!(!writes(NewSession { id: "s1".into(), ..Default::default() }), "nothing given");
        assert!(!writes(full()), "everything already set");
        assert!(writes(NewSession { id: "s2".into(), ..Default::default() }), "created blank");
        let agent = NewSession { id: "s2".into(), agent: Some("codex".into()), ..Default::default() };
        assert!(writes(agent), "a blank filled");
        let renamed = NewSession { id: "s1".into(), title: Some("Fix the tests".into()), ..Default::default() };
        assert!(writes(renamed), "a new title replaces the old one");
    }

    #[test]
    fn titles_are_kept_and_renamed_children_listed_on_request() {
        let mut s = store();
        let titled = |id: &str, title: Option<&str>, parent: Option<&str>| NewSession {
            id: id.into(),
            project: Some("p".into()),
            title: title.map(str::to_owned),
            parent_id: parent.map(str::to_owned),
            ..Default::default()
        };
        assert_eq!(
            s.start_session(&titled("main", Some("Auth <private>x</private>"), None)).unwrap().title.as_deref(),
            Some("Auth [REDACTED]")
        );
        assert_eq!(
            s.start_session(&titled("main", None, None)).unwrap().title.as_deref(),
            Some("Auth [REDACTED]"),
            "kept"
        );
        assert_eq!(
            s.start_session(&titled("main", Some("Auth flow"), None)).unwrap().title.as_deref(),
            Some("Auth flow")
        );
        s.start_session(&titled("child", None, Some("main"))).unwrap();
        let ids = |children| {
            s.recent_sessions(Some("p"), 10, children).unwrap().into_iter().map(|x| x.session.id).collect::<Vec<_>>()
        };
        assert_eq!(ids(false), ["main"]);
        assert_eq!(ids(true).len(), 2);
    }

    #[test]
    fn end_unknown_is_not_found_and_summary_redacted() {
        let mut s = store();
        assert_eq!(s.end_session("nope", None).unwrap_err().code, ErrorCode::SessionNotFound);
        s.start_session(&NewSession { id: "s1".into(), ..Default::default() }).unwrap();
        let ended = s.end_session("s1", Some("did it <private>pw=1</private>")).unwrap();
        assert_eq!(ended.summary.as_deref(), Some("did it [REDACTED]"));
        assert!(ended.ended_at.is_some());
    }

    #[test]
    fn bad_ids_rejected() {
        let mut s = store();
        assert_eq!(s.start_session(&NewSession::default()).unwrap_err().code, ErrorCode::EmptyField);
        let bad = NewSession { id: "a\nb".into(), ..Default::default() };
        assert_eq!(s.start_session(&bad).unwrap_err().code, ErrorCode::InvalidArgument);
    }

    #[test]
    fn repeated_summaries_revise_one_memory() {
        let mut s = store();
        let a = s.save_session_summary(Some("s9"), Some("p"), "Goal: fix auth").unwrap();
        let b = s.save_session_summary(Some("s9"), Some("p"), "Goal: fix auth. Done: token refresh").unwrap();
        assert_eq!(a.id, b.id);
        assert_eq!(s.get_session("s9").unwrap().summary.as_deref(), Some("Goal: fix auth. Done: token refresh"));
    }

    #[test]
    fn default_session_names() {
        assert_eq!(default_session_id(""), "manual-save");
        assert_eq!(default_session_id("cairn"), "manual-save-cairn");
    }
}
