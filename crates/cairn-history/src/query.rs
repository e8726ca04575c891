//! Reading the archive (every history op): sessions, turns, messages,
//! parts, search, the compaction chart, compactions, children, stats, forget. Pure functions
//! over a [`HistoryDb`](crate::store::HistoryDb); the doors call them through ops.
//!
//! Visibility: when `caller_session_id` is the session asked about, only what came before
//! its latest compaction is visible (the rest is in the caller's context already), and the
//! compaction records themselves are hidden. Other sessions are shown in full.

use rusqlite::{Connection, OptionalExtension, params};

use super::model::PartKind;
use crate::model::parse_kind;
use cairn_base::error::{CairnError, ErrorCode, Result};

/// Tools whose input `history_pull_message` shows unless configured otherwise.
pub const DEFAULT_INPUT_TOOLS: &[&str] =
    &["bash", "grep", "glob", "task", "websearch", "webfetch", "question", "skill"];
/// Tools whose output it shows.
pub const DEFAULT_OUTPUT_TOOLS: &[&str] =
    &["question", "bash", "task", "apply_patch", "grep", "todowrite", "edit", "glob"];
/// Largest page `history_pull_part` serves (Claude Code caps an MCP answer near 25k tokens).
pub const MAX_PART_CHARS: usize = 100_000;
/// Longest `history_search` query.
pub const MAX_QUERY_CHARS: usize = 500;
/// Most turns or messages one browse shows on each side of its anchor.
const MAX_WINDOW: usize = 50;

mod chart;
mod messages;
mod pull;
mod requests;
mod results;
mod scope;
mod search;
mod sessions;
mod stats;
mod turns;
pub use chart::{chart, compactions};
pub use messages::browse_messages;
pub use pull::{canonical_tool, pull_message, pull_part, tool_shown};
pub use requests::{
    CompactionsRequest, MessageRequest, MessagesRequest, PartRequest, SearchRequest, SessionRef, SessionsRequest,
    TurnsRequest,
};
pub use results::{
    ArchiveDisk, Chart, CompactionEntry, Compactions, Forgotten, HistoryStats, HostHistoryStats, MessagePreview,
    MessagesPage, PulledMessage, PulledPart, SearchHitPart, SearchMessage, SearchResults, Section, SessionListing,
    ToolSummary, TurnAssistant, TurnPreview, TurnUser, TurnsPage,
};
pub use search::search;
pub use sessions::{children, sessions};
pub use stats::{forget, stats};
pub use turns::browse_turns;

#[derive(Debug, Clone)]
struct MessageRow {
    id: String,
    role: String,
    seq: i64,
    turn: i64,
    summary: bool,
    compaction: bool,
    synthetic: bool,
    created_at: String,
}

impl MessageRow {
    fn opens_turn(&self) -> bool {
        self.role == "user" && !self.summary && !self.compaction && !self.synthetic
    }
}

#[derive(Debug, Clone)]
struct PartRow {
    id: String,
    kind: PartKind,
    text: Option<String>,
    tool: Option<String>,
    status: Option<String>,
    input: Option<String>,
    output: Option<String>,
    mime: Option<String>,
    path: Option<String>,
    injected: bool,
}

const MESSAGE_COLUMNS: &str = "id, role, seq, coalesce(turn_number, 0), summary, compaction, synthetic, created_at";
const PART_COLUMNS: &str = "id, kind, text, tool, status, input, output, mime, path, injected";

fn message_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        id: r.get(0)?,
        role: r.get(1)?,
        seq: r.get(2)?,
        turn: r.get(3)?,
        summary: r.get(4)?,
        compaction: r.get(5)?,
        synthetic: r.get(6)?,
        created_at: r.get(7)?,
    })
}

fn part_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PartRow> {
    Ok(PartRow {
        id: r.get(0)?,
        kind: parse_kind(&r.get::<_, String>(1)?),
        text: r.get(2)?,
        tool: r.get(3)?,
        status: r.get(4)?,
        input: r.get(5)?,
        output: r.get(6)?,
        mime: r.get(7)?,
        path: r.get(8)?,
        injected: r.get(9)?,
    })
}

/// What of one session the caller may see.
struct View {
    session_id: String,
    /// Own session with a compaction: only messages ordered before this (seq, id), and no
    /// compaction records.
    boundary: Option<(i64, String)>,
}

impl View {
    /// The SQL condition on `history_messages` (parameters `?2`, `?3`), empty when all is visible.
    fn filter(&self) -> &'static str {
        if self.boundary.is_some() { " AND (seq, id) < (?2, ?3) AND summary = 0 AND compaction = 0" } else { "" }
    }

    fn params(&self) -> Vec<rusqlite::types::Value> {
        let mut values = vec![rusqlite::types::Value::Text(self.session_id.clone())];
        if let Some((seq, id)) = &self.boundary {
            values.push(rusqlite::types::Value::Integer(*seq));
            values.push(rusqlite::types::Value::Text(id.clone()));
        }
        values
    }

    fn shows(&self, m: &MessageRow) -> bool {
        match &self.boundary {
            None => true,
            Some((seq, id)) => (m.seq, m.id.as_str()) < (*seq, id.as_str()) && !m.summary && !m.compaction,
        }
    }
}

/// Ids come from agents: refuse the empty, the huge and anything shaped like a path.
pub fn check_id(what: &str, id: &str) -> Result<()> {
    if id.trim().is_empty() {
        return Err(CairnError::empty(what));
    }
    // No such id can exist (the readers refuse them on ingest), so it is not found, with why.
    if id.len() > 200 || id.contains(['/', '\\', '\0']) || id.contains("..") {
        let code = match what {
            "message_id" => cairn_base::ErrorCode::MessageNotFound,
            "part_id" => cairn_base::ErrorCode::PartNotFound,
            _ => cairn_base::ErrorCode::HistorySessionNotFound,
        };
        return Err(CairnError::new(
            code,
            format!("no {what} {id:?}: ids hold no /, \\, .. or NUL and are at most 200 bytes"),
        )
        .with_hint("use an id from history_sessions, history_browse_turns or history_browse_messages"));
    }
    Ok(())
}

fn view(conn: &Connection, session_id: &str, caller: Option<&str>) -> Result<View> {
    check_id("session_id", session_id)?;
    let exists: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM history_sessions WHERE id = ?1)")?
        .query_row([session_id], |r| r.get(0))?;
    if !exists {
        return Err(session_not_found(session_id));
    }
    let boundary = if caller == Some(session_id) { latest_compaction(conn, session_id)? } else { None };
    Ok(View { session_id: session_id.to_owned(), boundary })
}

fn latest_compaction(conn: &Connection, session_id: &str) -> Result<Option<(i64, String)>> {
    Ok(conn
        .prepare_cached(
            "SELECT seq, id FROM history_messages WHERE session_id = ?1 AND (compaction = 1 OR summary = 1)
             ORDER BY seq DESC, id DESC LIMIT 1",
        )?
        .query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

fn session_not_found(id: &str) -> CairnError {
    CairnError::new(ErrorCode::HistorySessionNotFound, format!("no history for session {id:?}"))
        .with_hint("list sessions with history_sessions; a new session appears after the next scan (history_ingest)")
}

fn message_not_found(session_id: &str, id: &str) -> CairnError {
    CairnError::new(ErrorCode::MessageNotFound, format!("no message {id:?} in session {session_id:?}"))
        .with_hint("find message ids with history_browse_turns or history_browse_messages")
}

fn message_not_visible(id: &str) -> CairnError {
    CairnError::new(
        ErrorCode::MessageNotVisible,
        format!("message {id:?} is after this session's latest compaction: it is in your context already"),
    )
    .with_hint("history_browse_turns shows the turns before the compaction")
}

/// A message of the session, checked against the view.
fn visible_message(conn: &Connection, view: &View, message_id: &str) -> Result<MessageRow> {
    check_id("message_id", message_id)?;
    let row = conn
        .prepare_cached(&format!("SELECT {MESSAGE_COLUMNS} FROM history_messages WHERE session_id = ?1 AND id = ?2"))?
        .query_row(params![view.session_id, message_id], message_row)
        .optional()?
        .ok_or_else(|| message_not_found(&view.session_id, message_id))?;
    if !view.shows(&row) {
        return Err(message_not_visible(message_id));
    }
    Ok(row)
}

fn parts_of(conn: &Connection, session_id: &str, message_id: &str) -> Result<Vec<PartRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {PART_COLUMNS} FROM history_parts WHERE session_id = ?1 AND message_id = ?2 ORDER BY idx"
    ))?;
    Ok(stmt.query_map(params![session_id, message_id], part_row)?.collect::<rusqlite::Result<_>>()?)
}
