//! Codex's rollouts (`<CODEX_HOME or ~/.codex>/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`)
//! read into the history model, read-only and incrementally (see `jsonl.rs`).
//!
//! Format (checked against Codex 0.171): one JSON record per line, `{timestamp, type,
//! payload}`. `session_meta` names the session (`id`, `cwd`; a sub-agent's `source` names its
//! parent thread); `turn_context` the model; `response_item` is what the model saw and said:
//! `message` (roles `user`, `assistant`, and `developer`, Codex's own instructions, not shown),
//! `function_call` / `custom_tool_call` (a tool call, MCP tools with their `namespace`),
//! `function_call_output` / `custom_tool_call_output` (its result, by `call_id`) and
//! `reasoning`; `compacted` is a compaction with its summary. `event_msg`, `world_state`,
//! `token_usage_record` and the like repeat what the model saw for Codex's own UI: skipped
//! silently. A record type not known here is counted `unknown_record_type`, never an error.
//!
//! Codex puts its environment (`<environment_context>`) and hooks' context into user messages
//! of their own: those are host-injected (never a turn), and cairn's own (by its leading line)
//! are kept as injected parts. Message ids are the line's offset in the rollout, which a
//! rollout (append-only) keeps.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::value::RawValue;

use super::jsonl::sorted_dir;
use super::model::{
    Cursor, HistoryHost, HistoryMessage, HistoryPart, HistoryRole, HistorySession, IngestBatch, PartKind, ToolResult,
    ToolStatus,
};
use super::text::{SkipCounter, clean_text, is_cairn_injection, project_of, valid_id};
use cairn_base::error::{CairnError, ErrorCode, Result};

/// Record types that hold nothing the history shows (Codex's UI events, its world state,
/// usage records): skipped silently.
const BOOKKEEPING_TYPES: &[&str] = &["event_msg", "world_state", "token_usage_record"];

/// Response items that are Codex's plumbing, not conversation.
const BOOKKEEPING_ITEMS: &[&str] = &["ghost_snapshot", "web_search_call", "image_generation_call", "other"];

/// `<CODEX_HOME or ~/.codex>/sessions`.
pub fn locate(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let home = match env("CODEX_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME")?).join(".codex"),
    };
    Some(home.join("sessions"))
}

/// Every rollout under `sessions` (`YYYY/MM/DD/rollout-*.jsonl`), oldest first.
pub fn rollouts(sessions: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for year in sorted_dirs(sessions) {
        for month in sorted_dirs(&year) {
            for day in sorted_dirs(&month) {
                for file in sorted_dir(&day) {
                    if file.is_file() && identify(&file).is_some() {
                        out.push(file);
                    }
                }
            }
        }
    }
    out
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    sorted_dir(dir).into_iter().filter(|p| p.is_dir()).collect()
}

/// `rollout-2026-12-01T22-18-40-<uuid>.jsonl` → the session id `<uuid>` (its last 36
/// characters); `None` for any other name.
pub fn identify(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_prefix("rollout-")?.strip_suffix(".jsonl")?;
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    (id.len() == 36 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') && valid_id(id)).then(|| id.to_owned())
}

/// Read what is new in one rollout, at most about `max_bytes` of it.
pub fn read_file(path: &Path, cursor: &Cursor, max_bytes: usize) -> Result<(IngestBatch, Cursor, bool)> {
    let session_id = identify(path).ok_or_else(|| {
        CairnError::new(
            ErrorCode::HistorySourceUnreadable,
            format!("not a Codex rollout name cairn accepts: {}", path.display()),
        )
    })?;
    let mut reader = RolloutReader::new(session_id);
    let tail = super::jsonl::tail(path, cursor, max_bytes, super::claude::MAX_LINE_BYTES, &mut |line, at, skips| {
        reader.line(line, at, skips);
    })?;
    let mut batch = reader.finish();
    batch.skipped = tail.skips.into_vec();
    Ok((batch, tail.next, tail.more))
}

#[derive(Deserialize)]
struct Record<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    payload: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct SessionMeta<'a> {
    #[serde(default, borrow)]
    cwd: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    source: Option<&'a RawValue>,
    #[serde(default, borrow)]
    forked_from_id: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct TurnContext<'a> {
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Compacted<'a> {
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
}

/// One response item; flat so strings stay borrowed.
#[derive(Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<Vec<Content<'a>>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    namespace: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    input: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    output: Option<&'a RawValue>,
    #[serde(default, borrow)]
    summary: Option<Vec<Content<'a>>>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
}

/// The tags Codex wraps its own user-role context in.
const CODEX_CONTEXT_TAGS: &[&str] =
    &["<environment_context>", "<user_instructions>", "<skills_instructions>", "<turn_aborted>", "# AGENTS.md"];

struct RolloutReader {
    session_id: String,
    session: Option<HistorySession>,
    messages: Vec<HistoryMessage>,
    parts: Vec<HistoryPart>,
    results: Vec<ToolResult>,
    calls: HashMap<String, usize>,
}

impl RolloutReader {
    fn new(session_id: String) -> Self {
        Self {
            session_id,
            session: None,
            messages: Vec::new(),
            parts: Vec::new(),
            results: Vec::new(),
            calls: HashMap::new(),
        }
    }

    fn line(&mut self, line: &[u8], offset: u64, skips: &mut SkipCounter) {
        let Ok(record) = serde_json::from_slice::<Record>(line) else { return skips.add("invalid_json") };
        let ts = record.timestamp.as_deref().and_then(cairn_base::clock::normalize_ts);
        let Some(payload) = record.payload.map(RawValue::get) else {
            return skips.add("missing_payload");
        };
        match record.kind.as_ref() {
            "session_meta" => self.meta(payload, ts.as_deref(), skips),
            "turn_context" => {
                let model =
                    serde_json::from_str::<TurnContext>(payload).ok().and_then(|t| t.model.map(Cow::into_owned));
                self.touch(ts.as_deref()).model = model;
            }
            "response_item" => self.item(payload, offset, ts.as_deref(), skips),
            "compacted" => self.compacted(payload, offset, ts.as_deref()),
            kind if BOOKKEEPING_TYPES.contains(&kind) => {}
            _ => skips.add("unknown_record_type"),
        }
    }

    /// The session row, created on first use; every record's time widens its span.
    fn touch(&mut self, ts: Option<&str>) -> &mut HistorySession {
        let session = self.session.get_or_insert_with(|| HistorySession {
            id: self.session_id.clone(),
            host: HistoryHost::Codex,
            project: None,
            directory: None,
            parent_id: None,
            title: None,
            agent: Some("codex".to_owned()),
            model: None,
            created_at: String::new(),
            updated_at: String::new(),
        });
        if let Some(ts) = ts {
            if session.created_at.is_empty() || ts < session.created_at.as_str() {
                ts.clone_into(&mut session.created_at);
            }
            if ts > session.updated_at.as_str() {
                ts.clone_into(&mut session.updated_at);
            }
        }
        session
    }

    fn meta(&mut self, payload: &str, ts: Option<&str>, skips: &mut SkipCounter) {
        let Ok(meta) = serde_json::from_str::<SessionMeta>(payload) else { return skips.add("invalid_session_meta") };
        let parent = meta.source.and_then(|s| parent_thread(s.get())).or(meta.forked_from_id.map(Cow::into_owned));
        let session = self.touch(ts);
        if let Some(cwd) = meta.cwd.as_deref().filter(|_| session.directory.is_none()) {
            session.directory = Some(cwd.to_owned());
            session.project = project_of(cwd);
        }
        if session.parent_id.is_none() {
            session.parent_id = parent.filter(|p| valid_id(p) && *p != session.id);
        }
    }

    fn message(&mut self, offset: u64, role: HistoryRole, ts: Option<&str>) -> HistoryMessage {
        let created_at = ts.map_or_else(|| self.touch(None).updated_at.clone(), str::to_owned);
        let id = format!("{}:{offset}", self.session_id);
        HistoryMessage::new(&self.session_id, &id, role, offset as i64, &created_at)
    }

    fn item(&mut self, payload: &str, offset: u64, ts: Option<&str>, skips: &mut SkipCounter) {
        let Ok(item) = serde_json::from_str::<Item>(payload) else { return skips.add("invalid_item") };
        self.touch(ts);
        match item.kind.as_ref() {
            "message" => self.conversation(&item, offset, ts),
            "function_call" | "custom_tool_call" | "local_shell_call" => self.tool_call(&item, offset, ts),
            "function_call_output" | "custom_tool_call_output" => self.tool_output(&item),
            "reasoning" => {
                let text: Vec<&str> = item.summary.iter().flatten().filter_map(|c| c.text.as_deref()).collect();
                if text.is_empty() {
                    return;
                }
                let message = self.message(offset, HistoryRole::Assistant, ts);
                self.push_text(&message.id, 0, PartKind::Reasoning, &text.join("\n"), false);
                self.messages.push(message);
            }
            kind if BOOKKEEPING_ITEMS.contains(&kind) => {}
            _ => skips.add("unknown_item_type"),
        }
    }

    fn conversation(&mut self, item: &Item, offset: u64, ts: Option<&str>) {
        let role = match item.role.as_deref() {
            Some("user") => HistoryRole::User,
            Some("assistant") => HistoryRole::Assistant,
            // `developer` and `system`: Codex's own instructions
            _ => return,
        };
        let texts: Vec<&str> = item.content.iter().flatten().filter_map(|c| c.text.as_deref()).collect();
        let joined = texts.join("\n");
        let trimmed = joined.trim_start();
        let codex_context = role == HistoryRole::User && CODEX_CONTEXT_TAGS.iter().any(|t| trimmed.starts_with(t));
        if codex_context {
            return;
        }
        let mut message = self.message(offset, role, ts);
        let text = clean_text(&joined);
        let injected = role == HistoryRole::User && is_cairn_injection(&text);
        message.synthetic = injected;
        if role == HistoryRole::Assistant {
            message.model = self.session.as_ref().and_then(|s| s.model.clone());
        }
        if text.trim().is_empty() {
            return;
        }
        let part = HistoryPart::new(&self.session_id, &message.id, &format!("{}:0", message.id), 0, PartKind::Text);
        self.parts.push(HistoryPart { text: Some(text), injected, ..part });
        self.messages.push(message);
    }

    fn tool_call(&mut self, item: &Item, offset: u64, ts: Option<&str>) {
        let Some(call_id) = item.call_id.as_deref() else { return };
        let message = self.message(offset, HistoryRole::Assistant, ts);
        let tool = match (item.namespace.as_deref(), item.name.as_deref()) {
            (Some(ns), Some(name)) => Some(format!("{ns}__{name}")),
            (None, Some(name)) => Some(name.to_owned()),
            _ => Some(item.kind.to_string()),
        };
        let input = item.arguments.as_deref().or(item.input.as_deref()).map(|i| cairn_base::text::redact(i).0);
        let part = HistoryPart::new(&self.session_id, &message.id, &format!("{}:0", message.id), 0, PartKind::Tool);
        self.calls.insert(call_id.to_owned(), self.parts.len());
        self.parts.push(HistoryPart {
            tool,
            call_id: Some(call_id.to_owned()),
            status: Some(ToolStatus::Running),
            input,
            ..part
        });
        self.messages.push(message);
    }

    /// A result pairs with its call in place when the call is in this batch; otherwise it goes
    /// to `results` for the store to apply to the call read earlier.
    fn tool_output(&mut self, item: &Item) {
        let Some(call_id) = item.call_id.as_deref() else { return };
        let output = clean_text(&output_text(item.output));
        if let Some(&i) = self.calls.get(call_id) {
            let part = &mut self.parts[i];
            part.status = Some(ToolStatus::Completed);
            part.output = Some(output);
            return;
        }
        self.results.push(ToolResult {
            session_id: self.session_id.clone(),
            call_id: call_id.to_owned(),
            output,
            is_error: false,
        });
    }

    /// A compaction: its trigger (a user message with no parts) and the summary Codex wrote.
    fn compacted(&mut self, payload: &str, offset: u64, ts: Option<&str>) {
        self.touch(ts);
        let boundary = self.message(offset, HistoryRole::User, ts);
        let summary_text = serde_json::from_str::<Compacted>(payload).ok().and_then(|c| c.message.map(Cow::into_owned));
        self.messages.push(HistoryMessage { compaction: true, ..boundary });
        let Some(text) = summary_text.filter(|t| !t.trim().is_empty()) else { return };
        // one past the boundary's offset: the summary follows it and has an id of its own
        let mut summary = self.message(offset + 1, HistoryRole::User, ts);
        summary.summary = true;
        self.push_text(&summary.id, 0, PartKind::Text, &text, false);
        self.messages.push(summary);
    }

    fn push_text(&mut self, message_id: &str, idx: i64, kind: PartKind, text: &str, injected: bool) {
        let text = clean_text(text);
        if text.trim().is_empty() {
            return;
        }
        let part = HistoryPart::new(&self.session_id, message_id, &format!("{message_id}:{idx}"), idx, kind);
        self.parts.push(HistoryPart { text: Some(text), injected, ..part });
    }

    fn finish(mut self) -> IngestBatch {
        if let Some(session) = self.session.as_mut()
            && session.created_at.is_empty()
        {
            "1970-01-01T00:00:00.000Z".clone_into(&mut session.created_at);
            session.updated_at.clone_from(&session.created_at);
        }
        IngestBatch {
            sessions: self.session.into_iter().collect(),
            messages: self.messages,
            parts: self.parts,
            results: self.results,
            skipped: Vec::new(),
        }
    }
}

/// The parent thread a sub-agent's `source` names (`{"subagent": {"thread_spawn":
/// {"parent_thread_id": …}}}` and similar shapes): the first `parent_thread_id` in it.
fn parent_thread(source: &str) -> Option<String> {
    if !source.contains("parent_thread_id") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(source).ok()?;
    find_key(&value, "parent_thread_id")
}

fn find_key(value: &serde_json::Value, key: &str) -> Option<String> {
    match value {
        serde_json::Value::Object(map) => map
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
            .or_else(|| map.values().find_map(|v| find_key(v, key))),
        serde_json::Value::Array(items) => items.iter().find_map(|v| find_key(v, key)),
        _ => None,
    }
}

/// A tool's output: a string, or content items whose texts are joined.
fn output_text(output: Option<&RawValue>) -> String {
    let Some(raw) = output.map(RawValue::get) else { return String::new() };
    if raw.starts_with('"') {
        return serde_json::from_str::<Cow<str>>(raw).map(Cow::into_owned).unwrap_or_default();
    }
    if let Ok(items) = serde_json::from_str::<Vec<Content>>(raw) {
        return items.iter().filter_map(|c| c.text.as_deref()).collect::<Vec<_>>().join("\n");
    }
    // an older shape: `{content, success}`
    serde_json::from_str::<serde_json::Value>(raw)
        .ok()
        .and_then(|v| v.get("content").and_then(serde_json::Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| raw.to_owned())
}

#[cfg(test)]
#[path = "codex_tests.rs"]
mod tests;
