//! Gemini CLI's saved chats (`~/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl`, and the
//! whole-file `session-*.json` older versions wrote) read into the history model, read-only.
//!
//! Format (checked against Gemini CLI 0.61): the first line is the session's header
//! (`sessionId`, `projectHash`, `startTime`, `kind`); each message is a line of its own (`id`,
//! `timestamp`, `type`: `user`, `gemini`, or `info`/`error`/`warning` for the UI, `content`,
//! `thoughts`, `toolCalls` with their results, `model`); `{"$set": {...}}` lines update the
//! header, and a `$set` of `messages` (the session's start, a compression, a rewind) restates
//! the list, whose messages are upserted by id like any other. Gemini CLI writes hooks'
//! context into the user's message as `<hook_context>` blocks: cairn's (by its leading line)
//! become injected parts, the user's own words stay the message's text. A line of an unknown
//! shape is counted `unknown_record_type`, never an error; a `.jsonl` is tailed (see
//! `jsonl.rs`), a `.json` re-read whole when it changed, and one cut short (being written) is
//! skipped, counted, until it parses.

use std::borrow::Cow;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::jsonl::sorted_dir;
use super::model::{
    Cursor, HistoryHost, HistoryMessage, HistoryPart, HistoryRole, HistorySession, IngestBatch, PartKind, ToolStatus,
};
use super::text::{SkipCounter, clean_text, is_cairn_injection, project_of, valid_id};
use cairn_base::error::{CairnError, ErrorCode, Result};

/// The most of a `.json` chat loaded at once.
const MAX_JSON_BYTES: u64 = 64 * 1024 * 1024;

/// `~/.gemini/tmp`.
pub fn locate(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    Some(PathBuf::from(env("HOME")?).join(".gemini").join("tmp"))
}

/// Every chat under `tmp`: `*/chats/session-*.jsonl` and `.json`, sorted.
pub fn chats(tmp: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for project in sorted_dir(tmp) {
        for file in sorted_dir(&project.join("chats")) {
            if file.is_file() && is_chat_name(&file) {
                out.push(file);
            }
        }
    }
    out
}

/// `session-….jsonl` or `session-….json`.
pub fn is_chat_name(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    name.starts_with("session-") && (name.ends_with(".jsonl") || name.ends_with(".json")) && valid_id(name)
}

/// Read what is new in one chat, at most about `max_bytes` of a `.jsonl`.
pub fn read_file(path: &Path, cursor: &Cursor, max_bytes: usize) -> Result<(IngestBatch, Cursor, bool)> {
    if !is_chat_name(path) {
        return Err(CairnError::new(
            ErrorCode::HistorySourceUnreadable,
            format!("not a Gemini CLI chat name cairn accepts: {}", path.display()),
        ));
    }
    if path.extension().is_some_and(|e| e == "json") {
        return read_whole(path, cursor);
    }
    // The header names the session; a read from the middle of the file reads it first.
    let mut reader = ChatReader::new(header_session(path)?);
    let tail = super::jsonl::tail(path, cursor, max_bytes, super::claude::MAX_LINE_BYTES, &mut |line, at, skips| {
        reader.line(line, at, skips);
    })?;
    let mut batch = reader.finish();
    batch.skipped = tail.skips.into_vec();
    Ok((batch, tail.next, tail.more))
}

/// The session id of a `.jsonl` chat: its first line's `sessionId`, else the file's name.
fn header_session(path: &Path) -> Result<String> {
    let mut head = Vec::new();
    let file = std::fs::File::open(path).map_err(|e| super::jsonl::unreadable(path, &e))?;
    file.take(64 * 1024).read_to_end(&mut head).map_err(|e| super::jsonl::unreadable(path, &e))?;
    let first = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let id = serde_json::from_slice::<Header>(first).ok().and_then(|h| h.session_id.map(Cow::into_owned));
    Ok(id.filter(|id| valid_id(id)).unwrap_or_else(|| stem(path)))
}

fn stem(path: &Path) -> String {
    path.file_stem().and_then(|s| s.to_str()).unwrap_or("gemini").to_owned()
}

/// A `.json` chat, read whole when its size or time changed since the cursor.
fn read_whole(path: &Path, cursor: &Cursor) -> Result<(IngestBatch, Cursor, bool)> {
    let meta = std::fs::metadata(path).map_err(|e| super::jsonl::unreadable(path, &e))?;
    let next =
        Cursor { offset: meta.len(), size: meta.len(), mtime_ms: super::jsonl::mtime_ms(&meta), watermark: None };
    if next == *cursor {
        return Ok((IngestBatch::default(), next, false));
    }
    let mut skips = SkipCounter::default();
    if meta.len() > MAX_JSON_BYTES {
        skips.add("file_too_large");
        return Ok((IngestBatch { skipped: skips.into_vec(), ..IngestBatch::default() }, next, false));
    }
    let bytes = std::fs::read(path).map_err(|e| super::jsonl::unreadable(path, &e))?;
    let Ok(chat) = serde_json::from_slice::<WholeChat>(&bytes) else {
        // being written (or not a chat): counted, and read again once it changes
        skips.add("incomplete_file");
        let stay = Cursor { offset: 0, size: 0, mtime_ms: 0, watermark: None };
        return Ok((IngestBatch { skipped: skips.into_vec(), ..IngestBatch::default() }, stay, false));
    };
    let id = chat.session_id.as_deref().filter(|id| valid_id(id)).map_or_else(|| stem(path), str::to_owned);
    let mut reader = ChatReader::new(id);
    reader.header(&Header { session_id: None, start_time: chat.start_time, kind: chat.kind, directories: None });
    for (idx, message) in chat.messages.iter().enumerate() {
        reader.message(message.get(), idx as u64, &mut skips);
    }
    let mut batch = reader.finish();
    batch.skipped = skips.into_vec();
    Ok((batch, next, false))
}

#[derive(Deserialize)]
struct WholeChat<'a> {
    #[serde(default, rename = "sessionId", borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "startTime", borrow)]
    start_time: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    messages: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct Header<'a> {
    #[serde(default, rename = "sessionId", borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "startTime", borrow)]
    start_time: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    directories: Option<Vec<Cow<'a, str>>>,
}

/// One line: a header, a `$set`, or a message (told apart by their keys).
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default, rename = "sessionId", borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "$set", borrow)]
    set: Option<&'a RawValue>,
    #[serde(default, rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Set<'a> {
    #[serde(default, borrow)]
    messages: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    thoughts: Option<Vec<Thought<'a>>>,
    #[serde(default, rename = "toolCalls", borrow)]
    tool_calls: Option<Vec<ToolCall<'a>>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Thought<'a> {
    #[serde(default, borrow)]
    subject: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    description: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ToolCall<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    args: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    status: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct TextPart<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

/// Message types that are Gemini CLI's UI, not the conversation.
const UI_TYPES: &[&str] = &["info", "error", "warning"];

struct ChatReader {
    session_id: String,
    session: HistorySession,
    seen: bool,
    messages: Vec<HistoryMessage>,
    parts: Vec<HistoryPart>,
}

impl ChatReader {
    fn new(session_id: String) -> Self {
        let session = HistorySession {
            id: session_id.clone(),
            host: HistoryHost::Gemini,
            project: None,
            directory: None,
            parent_id: None,
            title: None,
            agent: Some("gemini".to_owned()),
            model: None,
            created_at: String::new(),
            updated_at: String::new(),
        };
        Self { session_id, session, seen: false, messages: Vec::new(), parts: Vec::new() }
    }

    fn line(&mut self, line: &[u8], offset: u64, skips: &mut SkipCounter) {
        let Ok(text) = std::str::from_utf8(line) else { return skips.add("invalid_json") };
        let Ok(parsed) = serde_json::from_str::<Line>(text) else { return skips.add("invalid_json") };
        if let Some(set) = parsed.set {
            let messages = serde_json::from_str::<Set>(set.get()).ok().and_then(|s| s.messages);
            // a restated list: each message again, at this line's offset, in order
            for (idx, message) in messages.into_iter().flatten().enumerate() {
                self.message(message.get(), offset + idx as u64, skips);
            }
        } else if parsed.session_id.is_some() {
            if let Ok(header) = serde_json::from_str::<Header>(text) {
                self.header(&header);
            }
        } else if parsed.kind.is_some() {
            self.message(text, offset, skips);
        } else {
            skips.add("unknown_record_type");
        }
    }

    fn touch(&mut self, ts: Option<&str>) {
        self.seen = true;
        let Some(ts) = ts.and_then(cairn_base::clock::normalize_ts) else { return };
        if self.session.created_at.is_empty() || ts < self.session.created_at {
            self.session.created_at.clone_from(&ts);
        }
        if ts > self.session.updated_at {
            self.session.updated_at = ts;
        }
    }

    fn header(&mut self, header: &Header) {
        self.touch(header.start_time.as_deref());
        if let Some(kind) = header.kind.as_deref().filter(|k| *k != "main") {
            self.session.agent = Some(format!("gemini/{kind}"));
        }
        if let Some(dir) = header.directories.iter().flatten().next() {
            self.session.directory = Some(dir.to_string());
            self.session.project = project_of(dir);
        }
    }

    fn message(&mut self, raw: &str, offset: u64, skips: &mut SkipCounter) {
        let Ok(m) = serde_json::from_str::<Message>(raw) else { return skips.add("invalid_message") };
        if !valid_id(&m.id) {
            return skips.add("invalid_id");
        }
        self.touch(m.timestamp.as_deref());
        let role = match m.kind.as_ref() {
            "user" => HistoryRole::User,
            "gemini" => HistoryRole::Assistant,
            kind if UI_TYPES.contains(&kind) => return,
            _ => return skips.add("unknown_message_type"),
        };
        let id = format!("{}:{}", self.session_id, m.id);
        let created_at = m
            .timestamp
            .as_deref()
            .and_then(cairn_base::clock::normalize_ts)
            .unwrap_or_else(|| self.session.updated_at.clone());
        let mut message = HistoryMessage::new(&self.session_id, &id, role, offset as i64, &created_at);
        let texts = content_texts(m.content);
        // Gemini CLI's own context at the session's start
        if role == HistoryRole::User && texts.first().is_some_and(|t| t.trim_start().starts_with("<session_context>")) {
            return;
        }
        let mut idx = 0i64;
        let mut own_text = false;
        for text in &texts {
            for (piece, hook) in split_hook_context(text) {
                // the blank lines Gemini CLI puts between its context and the prompt are its own
                let piece = clean_text(piece.trim());
                if piece.trim().is_empty() || (hook && !is_cairn_injection(&piece)) {
                    continue;
                }
                own_text |= !hook;
                self.push(&id, idx, PartKind::Text, |p| HistoryPart { text: Some(piece), injected: hook, ..p });
                idx += 1;
            }
        }
        for thought in m.thoughts.iter().flatten() {
            let text =
                [thought.subject.as_deref(), thought.description.as_deref()].into_iter().flatten().collect::<Vec<_>>();
            let text = clean_text(&text.join(": "));
            if !text.trim().is_empty() {
                self.push(&id, idx, PartKind::Reasoning, |p| HistoryPart { text: Some(text), ..p });
                idx += 1;
            }
        }
        for call in m.tool_calls.iter().flatten() {
            let status = match call.status.as_deref() {
                Some("success") => ToolStatus::Completed,
                Some("error" | "cancelled") => ToolStatus::Error,
                _ => ToolStatus::Running,
            };
            let input = call.args.map(|a| cairn_base::text::redact(a.get()).0);
            let output = call.result.map(|r| clean_text(&result_text(r.get())));
            self.push(&id, idx, PartKind::Tool, |p| HistoryPart {
                tool: call.name.as_deref().map(str::to_owned),
                call_id: call.id.as_deref().map(str::to_owned),
                status: Some(status),
                input,
                output,
                ..p
            });
            idx += 1;
        }
        if idx == 0 {
            return;
        }
        // a user message of cairn's context alone is host-injected: it opens no turn
        message.synthetic = role == HistoryRole::User && !own_text;
        if role == HistoryRole::Assistant {
            message.model = m.model.as_deref().map(str::to_owned);
            if message.model.is_some() {
                self.session.model.clone_from(&message.model);
            }
        }
        self.messages.push(message);
    }

    fn push(&mut self, message_id: &str, idx: i64, kind: PartKind, fill: impl FnOnce(HistoryPart) -> HistoryPart) {
        let part = HistoryPart::new(&self.session_id, message_id, &format!("{message_id}:{idx}"), idx, kind);
        self.parts.push(fill(part));
    }

    fn finish(mut self) -> IngestBatch {
        if !self.seen {
            return IngestBatch::default();
        }
        if self.session.created_at.is_empty() {
            "1970-01-01T00:00:00.000Z".clone_into(&mut self.session.created_at);
            self.session.updated_at.clone_from(&self.session.created_at);
        }
        IngestBatch {
            sessions: vec![self.session],
            messages: self.messages,
            parts: self.parts,
            results: Vec::new(),
            skipped: Vec::new(),
        }
    }
}

/// A message's content: a string, or parts with `text`.
fn content_texts(content: Option<&RawValue>) -> Vec<String> {
    let Some(raw) = content.map(RawValue::get) else { return Vec::new() };
    if raw.starts_with('"') {
        return serde_json::from_str::<String>(raw).into_iter().collect();
    }
    serde_json::from_str::<Vec<TextPart>>(raw)
        .map(|parts| parts.into_iter().filter_map(|p| p.text.map(Cow::into_owned)).collect())
        .unwrap_or_default()
}

/// A text cut into its `<hook_context>` blocks (`true`) and the rest (`false`), in order.
fn split_hook_context(text: &str) -> Vec<(&str, bool)> {
    const OPEN: &str = "<hook_context>";
    const CLOSE: &str = "</hook_context>";
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let Some(len) = rest[start + OPEN.len()..].find(CLOSE) else { break };
        out.push((&rest[..start], false));
        out.push((&rest[start + OPEN.len()..start + OPEN.len() + len], true));
        rest = &rest[start + OPEN.len() + len + CLOSE.len()..];
    }
    out.push((rest, false));
    out
}

/// A tool call's result as text: Gemini CLI keeps the function responses it sent the model.
fn result_text(raw: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(raw) else { return raw.to_owned() };
    let mut texts = Vec::new();
    collect_output(&value, &mut texts);
    if texts.is_empty() { raw.to_owned() } else { texts.join("\n") }
}

fn collect_output(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for key in ["output", "text", "error"] {
                if let Some(s) = map.get(key).and_then(serde_json::Value::as_str) {
                    out.push(s.to_owned());
                    return;
                }
            }
            map.values().for_each(|v| collect_output(v, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| collect_output(v, out)),
        _ => {}
    }
}

#[cfg(test)]
#[path = "gemini_tests.rs"]
mod tests;
