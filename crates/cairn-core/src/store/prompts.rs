//! The SQL of prompts (`crate::prompts` holds the type): record (deduplicated per session),
//! read, list, delete.

use rusqlite::{OptionalExtension, params};

use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{PROMPT_COLUMNS, Prompt, new_sync_id};
use crate::prompts::NewPrompt;
use crate::sessions::{NewSession, default_session_id, validate_session_id};
use crate::store::Store;
use crate::store::sessions::ensure_session;
use crate::text::{MAX_CONTENT_BYTES, fit_content, normalize_project, redact, require};

impl Store {
    /// Record a prompt. An identical prompt already recorded for the same session is not
    /// stored twice (plugins may report the same message more than once).
    pub fn add_prompt(&mut self, new: &NewPrompt) -> Result<Prompt> {
        let (new, _) = self.redacted(new);
        let now = self.now();
        let id = self.write(|tx| insert_prompt(tx, &new, &now))?;
        self.get_prompt(id)
    }

    pub fn get_prompt(&self, id: i64) -> Result<Prompt> {
        self.conn()
            .query_row(&format!("SELECT {PROMPT_COLUMNS} FROM prompts p WHERE p.id = ?1"), [id], Prompt::from_row)
            .optional()?
            .ok_or_else(|| CairnError::new(ErrorCode::PromptNotFound, format!("prompt #{id} not found")))
    }

    /// Newest prompts first.
    pub fn recent_prompts(&self, project: Option<&str>, limit: usize) -> Result<Vec<Prompt>> {
        let project = project.map(|p| normalize_project(p).0);
        let filter = if project.is_some() { "p.project = ?1" } else { "?1 IS NULL" };
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {PROMPT_COLUMNS} FROM prompts p WHERE {filter} ORDER BY p.created_at DESC, p.id DESC LIMIT ?2"
        ))?;
        let rows = stmt.query_map(params![project, limit as i64], Prompt::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Delete a prompt for good.
    pub fn delete_prompt(&mut self, id: i64) -> Result<()> {
        self.get_prompt(id)?;
        self.write(|tx| {
            tx.execute("DELETE FROM prompts WHERE id = ?1", [id])?;
            Ok(())
        })
    }
}

/// [`Store::add_prompt`] inside a transaction of the caller's (a save that attaches the
/// session's pending prompt writes both at once). The prompt's id.
pub(crate) fn insert_prompt(tx: &rusqlite::Connection, new: &NewPrompt, now: &str) -> Result<i64> {
    require("content", &new.content)?;
    let content = fit_content("content", &redact(&new.content).0, MAX_CONTENT_BYTES)?.text;
    let session_project: Option<String> = match &new.session_id {
        Some(id) => tx.query_row("SELECT project FROM sessions WHERE id = ?1", [id], |r| r.get(0)).optional()?,
        None => None,
    };
    let project = new.project.as_deref().map(|p| normalize_project(p).0).or(session_project).unwrap_or_default();
    let session_id = new.session_id.clone().unwrap_or_else(|| default_session_id(&project));
    validate_session_id(&session_id)?;
    let session = NewSession {
        id: session_id.clone(),
        project: Some(project.clone()),
        directory: new.directory.clone(),
        ..NewSession::default()
    };
    ensure_session(tx, &session, now)?;
    let existing: Option<i64> = tx
        .query_row(
            "SELECT id FROM prompts WHERE session_id = ?1 AND project = ?2 AND content = ?3",
            params![session_id, project, content],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(id) = existing {
        return Ok(id);
    }
    tx.execute(
        "INSERT INTO prompts (sync_id, session_id, content, project, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![new_sync_id(), session_id, content, project, now],
    )?;
    Ok(tx.last_insert_rowid())
}

impl Store {
    /// Prompts matching an FTS5 expression (`crate::search` builds it), best first.
    pub(crate) fn prompts_matching(&self, fts: &str, project: Option<&str>, limit: usize) -> Result<Vec<Prompt>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {PROMPT_COLUMNS} FROM prompts_fts JOIN prompts p ON p.id = prompts_fts.rowid
             WHERE prompts_fts MATCH ?1 AND (?2 IS NULL OR p.project = ?2)
             ORDER BY bm25(prompts_fts), p.created_at DESC LIMIT ?3"
        ))?;
        let rows = stmt.query_map(params![fts, project, limit as i64], Prompt::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
