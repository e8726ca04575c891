//! Pulling one message whole, and one part page by page.

use super::requests::{MessageRequest, PartRequest};
use super::results::{PulledMessage, PulledPart, Section};
use super::{
    DEFAULT_INPUT_TOOLS, DEFAULT_OUTPUT_TOOLS, MAX_PART_CHARS, PartRow, check_id, parts_of, view, visible_message,
};
use crate::model::PartKind;
use crate::store::HistoryDb;
use cairn_base::error::{CairnError, ErrorCode, Result};
use cairn_base::settings::HistorySettings;
use serde_json::Value;

/// One message split into sections, long ones cut with their part id to pull in full.
pub fn pull_message(db: &HistoryDb, req: &MessageRequest, cfg: &HistorySettings) -> Result<PulledMessage> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let row = visible_message(conn, &view, &req.message_id)?;
    let parts = parts_of(conn, &view.session_id, &row.id)?;
    let lengths = &cfg.pull_message;
    let sections = parts
        .iter()
        .map(|part| {
            let cut_text = |text: &str, max: usize| {
                let (content, cut) = cut_chars(text, max);
                (content, cut.then(|| part.id.clone()))
            };
            match part.kind {
                PartKind::Text | PartKind::Subtask | PartKind::Compaction => {
                    let text = part.text.as_deref().unwrap_or("");
                    let text = match part.kind {
                        PartKind::Subtask => format!("[subtask request] {text}"),
                        PartKind::Compaction => "[compaction trigger]".to_owned(),
                        _ => text.to_owned(),
                    };
                    let (content, part_id) = cut_text(&text, lengths.text_length);
                    Section::Text { content, part_id, injected: part.injected }
                }
                PartKind::Reasoning => {
                    let (content, part_id) = cut_text(part.text.as_deref().unwrap_or(""), lengths.reasoning_length);
                    Section::Reasoning { content, part_id }
                }
                PartKind::Tool => tool_section(part, cfg),
                PartKind::Image => Section::Image { mime: part.mime.clone() },
                PartKind::File => Section::File { path: part.path.clone(), mime: part.mime.clone() },
            }
        })
        .collect();
    Ok(PulledMessage {
        message_id: row.id,
        role: row.role,
        turn_number: row.turn,
        time: if row.created_at.is_empty() { "unknown".to_owned() } else { row.created_at },
        sections,
    })
}

pub(super) fn tool_section(part: &PartRow, cfg: &HistorySettings) -> Section {
    let name = part.tool.clone().unwrap_or_else(|| "tool".to_owned());
    let lengths = &cfg.pull_message;
    let mut cut_any = false;
    let input = tool_shown(&name, DEFAULT_INPUT_TOOLS, &cfg.show_tool_input)
        .then(|| part.input.as_deref().map(|raw| cut_input(raw, lengths.tool_input_length, &mut cut_any)))
        .flatten();
    let content = tool_shown(&name, DEFAULT_OUTPUT_TOOLS, &cfg.show_tool_output)
        .then(|| {
            part.output.as_deref().map(|out| {
                let (content, cut) = cut_chars(out, lengths.tool_output_length);
                cut_any |= cut;
                content
            })
        })
        .flatten();
    // Whatever was cut or left out can be pulled whole by its part id.
    let withheld = cut_any || (input.is_none() && part.input.is_some()) || (content.is_none() && part.output.is_some());
    Section::Tool {
        tool: name,
        status: part.status.clone().unwrap_or_else(|| "completed".to_owned()),
        input,
        content,
        part_id: withheld.then(|| part.id.clone()),
    }
}

/// `text` cut at `max` characters, ending with `[N chars more]` when cut.
pub(super) fn cut_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        None => (text.to_owned(), false),
        Some((at, _)) => {
            let more = text[at..].chars().count();
            (format!("{} [{more} chars more]", &text[..at]), true)
        }
    }
}

/// A tool's input as JSON with each string field cut (a string if it is not JSON).
pub(super) fn cut_input(raw: &str, max: usize, cut_any: &mut bool) -> Value {
    fn walk(value: Value, max: usize, cut_any: &mut bool) -> Value {
        match value {
            Value::String(s) => {
                let (text, cut) = cut_chars(&s, max);
                *cut_any |= cut;
                Value::String(text)
            }
            Value::Array(items) => Value::Array(items.into_iter().map(|v| walk(v, max, cut_any)).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, walk(v, max, cut_any))).collect()),
            other => other,
        }
    }
    let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    walk(value, max, cut_any)
}

/// OpenCode's name for a tool Claude Code spells its own way, so one selector covers both.
pub fn canonical_tool(name: &str) -> String {
    match name {
        "Agent" | "Task" => "task".to_owned(),
        "Write" | "MultiEdit" | "NotebookEdit" => "edit".to_owned(),
        "AskUserQuestion" => "question".to_owned(),
        other => other.to_lowercase(),
    }
}

/// Whether a tool's input (or output) is shown: configured selectors first (`!name` and `!`
/// exclusions win), then the defaults.
pub fn tool_shown(name: &str, defaults: &[&str], selectors: &[String]) -> bool {
    let canonical = canonical_tool(name);
    let lower = name.to_lowercase();
    let matches = |selector: &str| {
        let selector = selector.trim().to_lowercase();
        glob_match(&selector, &lower) || glob_match(&selector, &canonical)
    };
    let mut hide_all = false;
    for selector in selectors {
        match selector.trim().strip_prefix('!') {
            Some("") => hide_all = true,
            Some(excluded) if matches(excluded) => return false,
            _ => {}
        }
    }
    if selectors.iter().any(|s| !s.trim().starts_with('!') && matches(s)) {
        return true;
    }
    !hide_all && defaults.contains(&canonical.as_str())
}

/// `*` (any run) and `?` (one character) globbing.
pub(super) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// One part in full, a page at a time.
pub fn pull_part(db: &HistoryDb, req: &PartRequest) -> Result<PulledPart> {
    if req.max_chars == 0 || req.max_chars > MAX_PART_CHARS {
        return Err(CairnError::invalid(format!("max_chars must be between 1 and {MAX_PART_CHARS}"))
            .with_hint("page through a long part with offset and next_offset"));
    }
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let message = visible_message(conn, &view, &req.message_id)?;
    check_id("part_id", &req.part_id)?;
    let part = parts_of(conn, &view.session_id, &message.id)?
        .into_iter()
        .find(|p| p.id == req.part_id)
        .ok_or_else(|| part_not_found(&req.part_id, &message.id, "no such part in the message"))?;
    let (kind, content) = match part.kind {
        PartKind::Image | PartKind::File => {
            return Err(part_not_found(&req.part_id, &message.id, "an attachment has no content to pull"));
        }
        PartKind::Reasoning => ("reasoning", part.text.clone().unwrap_or_default()),
        PartKind::Tool => ("tool", tool_content(&part)),
        _ => ("text", part.text.clone().unwrap_or_default()),
    };
    let content = if content.trim().is_empty() { format!("Section '{}' has no content.", part.id) } else { content };
    Ok(PulledPart { injected: part.injected, ..page(kind, &content, req.offset, req.max_chars)? })
}

pub(super) fn part_not_found(part_id: &str, message_id: &str, why: &str) -> CairnError {
    CairnError::new(ErrorCode::PartNotFound, format!("part {part_id:?} of message {message_id:?}: {why}"))
        .with_hint("history_pull_message lists the message's parts with their part_id")
}

/// A tool call as text: its signature, `---`, its output.
pub(super) fn tool_content(part: &PartRow) -> String {
    let name = part.tool.as_deref().unwrap_or("tool");
    let header = match part.input.as_deref().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(args))) => {
            let args: Vec<String> = args.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{name}({})", args.join(", "))
        }
        Some(_) => format!("{name}({})", part.input.as_deref().unwrap_or("")),
        None => format!("{name}()"),
    };
    match (&part.output, part.status.as_deref()) {
        (Some(output), _) => format!("{header}\n---\n{output}"),
        (None, Some(status @ ("running" | "pending"))) => {
            format!("{header}\n---\nSection '{}' has no content yet (status: {status})", part.id)
        }
        (None, _) => format!("{header}\n---\nSection '{}' has no content.", part.id),
    }
}

pub(super) fn page(kind: &str, content: &str, offset: usize, max_chars: usize) -> Result<PulledPart> {
    let total = content.chars().count();
    if offset > 0 && offset >= total {
        return Err(CairnError::invalid(format!("offset {offset} is past the end of the part ({total} chars)"))
            .with_hint("start at 0, then follow next_offset"));
    }
    let text: String = content.chars().skip(offset).take(max_chars).collect();
    let end = offset + text.chars().count();
    Ok(PulledPart {
        kind: kind.to_owned(),
        content: text,
        total_chars: total as u64,
        offset: offset as u64,
        next_offset: (end < total).then_some(end as u64),
        injected: false,
    })
}
