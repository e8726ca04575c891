//! The SQL of an agent's session activity (`crate::agent::activity` holds the rules): one
//! `agent_activity` row per session, and the session's project it is counted in.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use crate::error::Result;

/// The last prompt recorded, waiting to be attached to the next save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PendingPrompt {
    pub content: String,
    pub project: String,
    /// The session it is already stored in (none: not stored yet).
    pub stored_in: Option<String>,
}

/// A session's activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionActivity {
    pub session_id: String,
    /// The session's project ("" when it has none).
    pub project: String,
    /// When counting started (the first event, or the restart after a long quiet spell).
    pub started_at: String,
    pub updated_at: String,
    pub tool_calls: i64,
    pub saves: i64,
    pub last_save_at: Option<String>,
    pub reminders: i64,
    pub last_reminder_at: Option<String>,
    pub pending_prompt: Option<PendingPrompt>,
    pub context_fingerprint: Option<String>,
}

/// The project session `id` is registered with, if it exists.
pub(crate) fn session_project_of(conn: &Connection, id: &str) -> Result<Option<String>> {
    Ok(conn.prepare_cached("SELECT project FROM sessions WHERE id = ?1")?.query_row([id], |r| r.get(0)).optional()?)
}

const ACTIVITY_COLUMNS: &str = "session_id, started_at, updated_at, tool_calls, saves, last_save_at, reminders, \
     last_reminder_at, pending_prompt, pending_prompt_project, pending_prompt_session, context_fingerprint";

/// Session `id`'s stored activity (its `project` left empty: the session's is the one).
pub(crate) fn read_activity(conn: &Connection, id: &str) -> Result<Option<SessionActivity>> {
    let sql = format!("SELECT {ACTIVITY_COLUMNS} FROM agent_activity WHERE session_id = ?1");
    Ok(conn.prepare_cached(&sql)?.query_row([id], activity_from_row).optional()?)
}

fn activity_from_row(r: &Row<'_>) -> rusqlite::Result<SessionActivity> {
    let prompt: Option<String> = r.get(8)?;
    Ok(SessionActivity {
        session_id: r.get(0)?,
        project: String::new(),
        started_at: r.get(1)?,
        updated_at: r.get(2)?,
        tool_calls: r.get(3)?,
        saves: r.get(4)?,
        last_save_at: r.get(5)?,
        reminders: r.get(6)?,
        last_reminder_at: r.get(7)?,
        pending_prompt: match prompt {
            Some(content) => Some(PendingPrompt { content, project: r.get(9)?, stored_in: r.get(10)? }),
            None => None,
        },
        context_fingerprint: r.get(11)?,
    })
}

/// Insert or replace `a`'s row.
pub(crate) fn write_activity(tx: &Connection, a: &SessionActivity) -> Result<()> {
    let prompt = a.pending_prompt.as_ref();
    let sql = format!(
        "INSERT INTO agent_activity ({ACTIVITY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT(session_id) DO UPDATE SET
            started_at = excluded.started_at, updated_at = excluded.updated_at,
            tool_calls = excluded.tool_calls, saves = excluded.saves, last_save_at = excluded.last_save_at,
            reminders = excluded.reminders, last_reminder_at = excluded.last_reminder_at,
            pending_prompt = excluded.pending_prompt, pending_prompt_project = excluded.pending_prompt_project,
            pending_prompt_session = excluded.pending_prompt_session,
            context_fingerprint = excluded.context_fingerprint"
    );
    tx.prepare_cached(&sql)?.execute(params![
        a.session_id,
        a.started_at,
        a.updated_at,
        a.tool_calls,
        a.saves,
        a.last_save_at,
        a.reminders,
        a.last_reminder_at,
        prompt.map(|p| &p.content),
        prompt.map(|p| &p.project),
        prompt.and_then(|p| p.stored_in.as_ref()),
        a.context_fingerprint,
    ])?;
    Ok(())
}

/// Forget session `id`'s activity.
pub(crate) fn delete(tx: &Connection, id: &str) -> Result<()> {
    tx.prepare_cached("DELETE FROM agent_activity WHERE session_id = ?1")?.execute([id])?;
    Ok(())
}

/// How many `user_prompt`s session `id` has counted (0: no row yet).
pub(crate) fn user_prompts(tx: &Connection, id: &str) -> Result<i64> {
    Ok(tx
        .prepare_cached("SELECT user_prompts FROM agent_activity WHERE session_id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Count one more `user_prompt` in session `id`'s row.
pub(crate) fn count_user_prompt(tx: &Connection, id: &str) -> Result<()> {
    tx.prepare_cached("UPDATE agent_activity SET user_prompts = user_prompts + 1 WHERE session_id = ?1")?
        .execute([id])?;
    Ok(())
}
