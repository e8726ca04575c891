//! What the memory extractor reads of the archive: each conversation's newest message (to see
//! which have new turns and which went idle), and a conversation's messages after a mark as
//! plain text (what was said, not the tool dumps). Read-only.

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::model::HistoryRole;
use crate::store::HistoryDb;
use cairn_base::error::Result;

/// A place in a conversation: a message's `seq`, then its id (the archive's order).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Mark {
    pub seq: i64,
    pub id: String,
}

/// A conversation and its newest message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionTail {
    pub session_id: String,
    pub project: Option<String>,
    pub directory: Option<String>,
    /// Sub-agent conversations have a parent.
    pub parent_id: Option<String>,
    pub last: Mark,
    /// When the newest message was written (RFC 3339).
    pub last_at: String,
}

/// One message as the extractor reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractableMessage {
    pub mark: Mark,
    pub role: HistoryRole,
    pub created_at: String,
    /// A real user message: it opens a turn.
    pub opens_turn: bool,
    /// The host compacted the conversation here.
    pub compaction: bool,
    /// What was said (text parts, cairn's injected ones left out) and a one-line note per tool
    /// call; empty for a message with neither.
    pub text: String,
}

/// Characters of a tool call's input shown in its one-line note.
const TOOL_NOTE_CHARS: usize = 160;

impl HistoryDb {
    /// Conversations whose host updated them at or after `since` (all with `None`), or the one
    /// named, each with its newest message; oldest update first. Conversations with no message
    /// are left out.
    pub fn session_tails(&self, since: Option<&str>, only: Option<&str>) -> Result<Vec<SessionTail>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT s.id, s.project, s.directory, s.parent_id, m.seq, m.id, m.created_at
             FROM history_sessions s
             JOIN history_messages m ON m.rowid = (
                 SELECT rowid FROM history_messages WHERE session_id = s.id ORDER BY seq DESC, id DESC LIMIT 1)
             WHERE s.updated_at >= ?1 AND (?2 IS NULL OR s.id = ?2)
             ORDER BY s.updated_at, s.id",
        )?;
        let rows = stmt.query_map(params![since.unwrap_or(""), only], |r| {
            Ok(SessionTail {
                session_id: r.get(0)?,
                project: r.get(1)?,
                directory: r.get(2)?,
                parent_id: r.get(3)?,
                last: Mark { seq: r.get(4)?, id: r.get(5)? },
                last_at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Up to `limit` messages of a conversation after `after` (from its start with `None`), in
    /// order, as text. Compaction summaries and host-injected messages are skipped (they repeat
    /// what was said), but still move the mark: they are returned with empty text.
    pub fn messages_after(
        &self,
        session_id: &str,
        after: Option<&Mark>,
        limit: usize,
    ) -> Result<Vec<ExtractableMessage>> {
        let (seq, id) = after.map_or((i64::MIN, ""), |m| (m.seq, m.id.as_str()));
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, role, seq, created_at, summary, compaction, synthetic FROM history_messages
             WHERE session_id = ?1 AND (seq > ?2 OR (seq = ?2 AND id > ?3))
             ORDER BY seq, id LIMIT ?4",
        )?;
        let rows = stmt.query_map(params![session_id, seq, id, i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, bool>(4)?,
                r.get::<_, bool>(5)?,
                r.get::<_, bool>(6)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, role, seq, created_at, summary, compaction, synthetic) = row?;
            let role = if role == "user" { HistoryRole::User } else { HistoryRole::Assistant };
            let text = if summary || synthetic || compaction { String::new() } else { self.said(session_id, &id)? };
            out.push(ExtractableMessage {
                opens_turn: role == HistoryRole::User && !summary && !compaction && !synthetic,
                mark: Mark { seq, id },
                role,
                created_at,
                compaction,
                text,
            });
        }
        Ok(out)
    }

    /// Whether the conversation was compacted after `after`.
    pub fn compacted_after(&self, session_id: &str, after: Option<&Mark>) -> Result<bool> {
        let (seq, id) = after.map_or((i64::MIN, ""), |m| (m.seq, m.id.as_str()));
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT 1 FROM history_messages
                 WHERE session_id = ?1 AND compaction = 1 AND (seq > ?2 OR (seq = ?2 AND id > ?3)) LIMIT 1",
            )?
            .query_row(params![session_id, seq, id], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// A message's text parts and a note per tool call, in order.
    fn said(&self, session_id: &str, message_id: &str) -> Result<String> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT kind, text, tool, input FROM history_parts
             WHERE session_id = ?1 AND message_id = ?2 AND injected = 0 AND kind IN ('text', 'tool')
             ORDER BY idx",
        )?;
        let rows = stmt.query_map(params![session_id, message_id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        })?;
        let mut pieces: Vec<String> = Vec::new();
        for row in rows {
            let (kind, text, tool, input) = row?;
            let piece = if kind == "text" {
                text.unwrap_or_default().trim().to_owned()
            } else {
                tool_note(tool.as_deref().unwrap_or("tool"), input.as_deref().unwrap_or_default())
            };
            if !piece.is_empty() {
                pieces.push(piece);
            }
        }
        Ok(pieces.join("\n"))
    }
}

/// `(ran bash: cargo test -p x)`: which tool ran on what, never its output.
fn tool_note(tool: &str, input: &str) -> String {
    let input: String = input.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut shown: String = input.chars().take(TOOL_NOTE_CHARS).collect();
    if shown.len() < input.len() {
        shown.push('…');
    }
    format!("(ran {}: {shown})", crate::query::canonical_tool(tool))
}

impl HistoryDb {
    /// Directories conversations ran in, with cairn's project for each (opencode-memory names a
    /// project by its directory's hash).
    pub fn session_directories(&self) -> Result<Vec<(String, Option<String>)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT DISTINCT directory, project FROM history_sessions WHERE coalesce(directory, '') != '' LIMIT 10000",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
