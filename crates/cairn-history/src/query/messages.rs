//! Messages around an anchor, previewed.

use super::requests::MessagesRequest;
use super::results::{MessagePreview, MessagesPage};
use super::turns::{attachments, injected_text_of, text_of, tool_summary};
use super::{MAX_WINDOW, MESSAGE_COLUMNS, MessageRow, PartRow, View, message_row, parts_of, view, visible_message};
use crate::model::PartKind;
use crate::store::HistoryDb;
use cairn_base::error::Result;
use cairn_base::settings::HistorySettings;
use rusqlite::{Connection, OptionalExtension, params_from_iter};

/// A window of message previews around `message_id` (default: the latest visible).
pub fn browse_messages(db: &HistoryDb, req: &MessagesRequest, cfg: &HistorySettings) -> Result<MessagesPage> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let anchor = match req.message_id.as_deref() {
        Some(id) => visible_message(conn, &view, id)?,
        None => match latest_visible(conn, &view)? {
            Some(row) => row,
            None => return Ok(MessagesPage { before_message_id: None, messages: Vec::new(), after_message_id: None }),
        },
    };
    let num_before = req.num_before.min(MAX_WINDOW);
    let num_after = req.num_after.min(MAX_WINDOW);
    let mut before = neighbours(conn, &view, &anchor, true, num_before + 1)?;
    let mut after = neighbours(conn, &view, &anchor, false, num_after + 1)?;
    let before_message_id = (before.len() > num_before).then(|| before.pop().map(|m| m.id)).flatten();
    let after_message_id = (after.len() > num_after).then(|| after.pop().map(|m| m.id)).flatten();
    before.reverse();
    let mut messages = Vec::with_capacity(before.len() + 1 + after.len());
    for row in before.into_iter().chain(std::iter::once(anchor)).chain(after) {
        let parts = parts_of(conn, &view.session_id, &row.id)?;
        messages.push(message_preview(&row, &parts, cfg));
    }
    Ok(MessagesPage { before_message_id, messages, after_message_id })
}

pub(super) fn latest_visible(conn: &Connection, view: &View) -> Result<Option<MessageRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM history_messages WHERE session_id = ?1{} ORDER BY seq DESC, id DESC LIMIT 1",
            view.filter()
        ))?
        .query_row(params_from_iter(view.params()), message_row)
        .optional()?)
}

/// Up to `limit` visible messages before (nearest first) or after the anchor.
pub(super) fn neighbours(
    conn: &Connection,
    view: &View,
    anchor: &MessageRow,
    before: bool,
    limit: usize,
) -> Result<Vec<MessageRow>> {
    let (cmp, order) = if before { ("<", "DESC") } else { (">", "ASC") };
    let mut values = view.params();
    let n = values.len();
    values.push(rusqlite::types::Value::Integer(anchor.seq));
    values.push(rusqlite::types::Value::Text(anchor.id.clone()));
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM history_messages WHERE session_id = ?1{} AND (seq, id) {cmp} (?{}, ?{})
         ORDER BY seq {order}, id {order} LIMIT {limit}",
        view.filter(),
        n + 1,
        n + 2
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    Ok(stmt.query_map(params_from_iter(values), message_row)?.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn message_preview(row: &MessageRow, parts: &[PartRow], cfg: &HistorySettings) -> MessagePreview {
    let length = if row.role == "user" {
        cfg.browse_messages.user_preview_length
    } else {
        cfg.browse_messages.assistant_preview_length
    };
    let tool_parts: Vec<&PartRow> = parts.iter().collect();
    MessagePreview {
        role: row.role.clone(),
        turn_number: row.turn,
        message_id: row.id.clone(),
        preview: preview_label(row, parts, length),
        attachment: attachments(parts),
        tool: tool_summary(&tool_parts),
        injected: !parts.is_empty() && parts.iter().all(|p| p.injected),
    }
}

/// The message's text, cut; or a label saying what it holds instead.
pub(super) fn preview_label(row: &MessageRow, parts: &[PartRow], length: usize) -> String {
    if row.summary {
        return "[compacted summary]".to_owned();
    }
    if row.compaction {
        return "[compaction trigger]".to_owned();
    }
    // a message of only cairn's text (a hook's context) is shown as that, marked by the caller
    if let Some(text) = text_of(parts).or_else(|| injected_text_of(parts)) {
        return cairn_base::text::preview(&text, length);
    }
    let has = |kind: PartKind| parts.iter().any(|p| p.kind == kind);
    let label = if has(PartKind::Subtask) {
        "[subtask request]"
    } else if has(PartKind::Tool) {
        "[tool calls only]"
    } else if has(PartKind::Reasoning) {
        "[reasoning only]"
    } else if has(PartKind::File) || has(PartKind::Image) {
        "[attachments only]"
    } else {
        "[empty]"
    };
    label.to_owned()
}
