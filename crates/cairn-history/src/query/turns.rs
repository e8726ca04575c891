//! Turns: a user's message and what answered it, previewed.

use super::pull::canonical_tool;
use super::requests::TurnsRequest;
use super::results::{ToolSummary, TurnAssistant, TurnPreview, TurnUser, TurnsPage};
use super::{MAX_WINDOW, MESSAGE_COLUMNS, MessageRow, PartRow, message_row, parts_of, view};
use crate::model::PartKind;
use crate::store::HistoryDb;
use cairn_base::error::{CairnError, ErrorCode, Result};
use cairn_base::settings::HistorySettings;
use rusqlite::params_from_iter;
use serde_json::Value;

/// Turn previews around `turn_number` (default: the newest visible turn), ascending.
pub fn browse_turns(db: &HistoryDb, req: &TurnsRequest, cfg: &HistorySettings) -> Result<TurnsPage> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let last: Option<i64> = conn
        .prepare_cached(&format!(
            "SELECT max(turn_number) FROM history_messages WHERE session_id = ?1 AND turn_number > 0{}",
            view.filter()
        ))?
        .query_row(params_from_iter(view.params()), |r| r.get(0))?;
    let Some(last) = last else {
        if let Some(asked) = req.turn_number {
            return Err(turn_out_of_range(asked, None));
        }
        return Ok(TurnsPage { turns: Vec::new() });
    };
    let turn = req.turn_number.unwrap_or(last);
    if !(1..=last).contains(&turn) {
        return Err(turn_out_of_range(turn, Some(last)));
    }
    let first = (turn - req.num_before.min(MAX_WINDOW) as i64).max(1);
    let end = (turn + req.num_after.min(MAX_WINDOW) as i64).min(last);
    let mut values = view.params();
    values.push(rusqlite::types::Value::Integer(first));
    values.push(rusqlite::types::Value::Integer(end));
    let (lo, hi) = if view.boundary.is_some() { (4, 5) } else { (2, 3) };
    let messages: Vec<MessageRow> = {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM history_messages
             WHERE session_id = ?1 AND turn_number BETWEEN ?{lo} AND ?{hi}{} ORDER BY seq, id",
            view.filter()
        ))?;
        stmt.query_map(params_from_iter(values), message_row)?.collect::<rusqlite::Result<_>>()?
    };
    let mut turns: Vec<TurnPreview> = Vec::new();
    let mut current: Vec<(MessageRow, Vec<PartRow>)> = Vec::new();
    for message in messages {
        if message.opens_turn() && !current.is_empty() {
            turns.extend(turn_preview(std::mem::take(&mut current), cfg));
        }
        let parts = parts_of(conn, &view.session_id, &message.id)?;
        current.push((message, parts));
    }
    turns.extend(turn_preview(current, cfg));
    Ok(TurnsPage { turns })
}

pub(super) fn turn_out_of_range(asked: i64, last: Option<i64>) -> CairnError {
    let hint = match last {
        Some(last) => format!("visible turns are 1..={last}; omit turn_number for the newest"),
        None => "this session has no visible turns yet".to_owned(),
    };
    CairnError::new(ErrorCode::TurnOutOfRange, format!("turn {asked} is out of range")).with_hint(hint)
}

/// One turn's preview from its messages (the user message first); `None` for messages
/// before the session's first turn.
pub(super) fn turn_preview(messages: Vec<(MessageRow, Vec<PartRow>)>, cfg: &HistorySettings) -> Option<TurnPreview> {
    let (user, user_parts) = messages.iter().find(|(m, _)| m.opens_turn())?;
    let lengths = &cfg.browse_turns;
    let assistants: Vec<&(MessageRow, Vec<PartRow>)> = messages.iter().filter(|(m, _)| m.role == "assistant").collect();
    let assistant_preview = assistants
        .iter()
        .rev()
        .flat_map(|(_, parts)| parts.iter().rev())
        .find_map(|p| p.text.as_deref().filter(|t| p.kind == PartKind::Text && !p.injected && !t.trim().is_empty()))
        .map(|t| cairn_base::text::preview(t, lengths.assistant_preview_length));
    let tool_parts: Vec<&PartRow> = assistants.iter().flat_map(|(_, parts)| parts.iter()).collect();
    let modified = modified_files(&tool_parts);
    Some(TurnPreview {
        turn_number: user.turn,
        user: TurnUser {
            preview: text_of(user_parts).map(|t| cairn_base::text::preview(&t, lengths.user_preview_length)),
            message_id: user.id.clone(),
            attachment: attachments(user_parts),
        },
        assistant: TurnAssistant {
            preview: assistant_preview,
            total_messages: assistants.len() as u64,
            tool: tool_summary(&tool_parts),
            modified: (!modified.is_empty()).then_some(modified),
        },
    })
}

/// The message's text parts (not the ones cairn injected), joined; `None` when it has none.
pub(super) fn text_of(parts: &[PartRow]) -> Option<String> {
    texts_joined(parts.iter().filter(|p| !p.injected))
}

/// The text parts cairn injected, joined; `None` when there are none.
pub(super) fn injected_text_of(parts: &[PartRow]) -> Option<String> {
    texts_joined(parts.iter().filter(|p| p.injected))
}

pub(super) fn texts_joined<'a>(parts: impl Iterator<Item = &'a PartRow>) -> Option<String> {
    let texts: Vec<&str> = parts
        .filter(|p| p.kind == PartKind::Text)
        .filter_map(|p| p.text.as_deref())
        .filter(|t| !t.trim().is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

pub(super) fn attachments(parts: &[PartRow]) -> Option<Vec<String>> {
    let images = parts.iter().filter(|p| p.kind == PartKind::Image).count();
    let mut list = Vec::new();
    if images > 0 {
        list.push(if images == 1 { "1 image".to_owned() } else { format!("{images} images") });
    }
    list.extend(
        parts
            .iter()
            .filter(|p| p.kind == PartKind::File)
            .map(|p| p.path.clone().or_else(|| p.mime.clone()).unwrap_or_else(|| "file".to_owned())),
    );
    (!list.is_empty()).then_some(list)
}

pub(super) fn tool_summary(parts: &[&PartRow]) -> Option<ToolSummary> {
    let tools: Vec<&&PartRow> = parts.iter().filter(|p| p.kind == PartKind::Tool).collect();
    if tools.is_empty() {
        return None;
    }
    let mut counts: Vec<(String, usize)> = Vec::new();
    for part in &tools {
        let name = part.tool.clone().unwrap_or_else(|| "tool".to_owned());
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    let status = |p: &&&PartRow| p.status.as_deref().unwrap_or("completed").to_owned();
    let statuses: Vec<String> = tools.iter().map(status).collect();
    let outcome = if statuses.iter().any(|s| s == "running" || s == "pending") {
        "running"
    } else if !statuses.iter().any(|s| s == "error") {
        "completed"
    } else if statuses.last().is_some_and(|s| s == "completed") {
        "recovered"
    } else {
        "error"
    };
    Some(ToolSummary {
        calls: counts.into_iter().map(|(name, n)| format!("{n}× {name}")).collect(),
        outcome: outcome.to_owned(),
    })
}

/// Paths touched by completed writing tools, in order, once each.
pub(super) fn modified_files(parts: &[&PartRow]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for part in parts.iter().filter(|p| p.kind == PartKind::Tool && p.status.as_deref() == Some("completed")) {
        let tool = canonical_tool(part.tool.as_deref().unwrap_or(""));
        if !matches!(tool.as_str(), "edit" | "write" | "apply_patch") {
            continue;
        }
        let input: Value = part.input.as_deref().and_then(|i| serde_json::from_str(i).ok()).unwrap_or(Value::Null);
        let mut found: Vec<String> = ["filePath", "file_path", "path", "notebook_path"]
            .iter()
            .filter_map(|k| input.get(k).and_then(Value::as_str).map(str::to_owned))
            .take(1)
            .collect();
        if let Some(patch) = input.get("patchText").or_else(|| input.get("patch")).and_then(Value::as_str) {
            found.extend(patch.lines().filter_map(|line| {
                ["*** Add File: ", "*** Update File: ", "*** Delete File: "]
                    .iter()
                    .find_map(|marker| line.strip_prefix(marker))
                    .map(|p| p.trim().to_owned())
            }));
        }
        for file in found {
            if !files.contains(&file) {
                files.push(file);
            }
        }
    }
    files
}
