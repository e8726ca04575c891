//! Claude Code's transcripts (`<config>/projects/<slug>/<session>.jsonl`, sub-agents in
//! `<slug>/<session>/subagents/agent-<id>.jsonl`) read into the history model.
//!
//! Strictly read-only and incremental: a file is tailed from the byte offset of its cursor and a
//! read stops before a partial last line (the host is still writing it), which the next read
//! picks up whole. Records are deduped by `uuid` by the store (every id is an upsert key). The
//! format is unofficial and grows a record type per release, so anything not understood is
//! counted by reason and skipped, never an error.
//!
//! Speed matters (a first run backfills gigabytes): lines are parsed with borrowed strings and
//! `RawValue`s, so only the fields the model keeps are decoded and big unused blobs
//! (`toolUseResult`, `api-request-blob`) are scanned but never allocated.

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

/// A line longer than this is skipped (counted `line_too_large`) without being loaded: one
/// pathological record must not take the daemon's memory.
pub const MAX_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// Record types Claude Code writes that hold nothing the history shows. Skipped silently;
/// any other unknown type is counted, so a new record kind shows up in `history stats`.
const BOOKKEEPING_TYPES: &[&str] = &[
    "file-history-snapshot",
    "queue-operation",
    "mode",
    "last-prompt",
    "pr-link",
    "agent-name",
    "progress",
    "atis-latch",
    "api-request",
    "api-request-blob",
    "api-request-shape",
    "tools-used",
    "cost-state",
    "permission-mode",
    "agent-setting",
    "tag",
    "worktree-state",
];

/// `<CLAUDE_CONFIG_DIR or ~/.claude>/projects`.
pub fn locate(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let config = match env("CLAUDE_CONFIG_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME")?).join(".claude"),
    };
    Some(config.join("projects"))
}

/// Every transcript under `projects`: `*/*.jsonl` and `*/*/subagents/agent-*.jsonl`, sorted so
/// a parent is read before its sub-agents.
pub fn transcripts(projects: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for slug in sorted_dir(projects) {
        if !slug.is_dir() {
            continue;
        }
        for entry in sorted_dir(&slug) {
            if entry.is_file() && entry.extension().is_some_and(|e| e == "jsonl") {
                out.push(entry);
            } else if entry.is_dir() {
                for sub in sorted_dir(&entry.join("subagents")) {
                    let name = sub.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    if name.starts_with("agent-") && name.ends_with(".jsonl") && sub.is_file() {
                        out.push(sub);
                    }
                }
            }
        }
    }
    out
}

/// Which session a transcript file is, from its path alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileIdentity {
    pub session_id: String,
    pub parent_id: Option<String>,
}

/// `<uuid>.jsonl` → session `<uuid>`; `<parent>/subagents/agent-<id>.jsonl` → `agent-<id>` under
/// `<parent>`. Ids with path characters are refused (`None`).
pub fn identify(path: &Path) -> Option<FileIdentity> {
    let stem = path.file_stem()?.to_str()?;
    let dir = path.parent()?;
    if dir.file_name().is_some_and(|n| n == "subagents") {
        let parent = dir.parent()?.file_name()?.to_str()?;
        let id = stem.strip_prefix("agent-")?;
        let session_id = format!("agent-{id}");
        return (valid_id(id) && valid_id(parent))
            .then(|| FileIdentity { session_id, parent_id: Some(parent.to_owned()) });
    }
    valid_id(stem).then(|| FileIdentity { session_id: stem.to_owned(), parent_id: None })
}

/// Read what is new in one transcript, at most about `max_bytes` of it (a line is never split).
/// Returns the batch, the cursor after it, and whether more complete lines remain.
pub fn read_file(path: &Path, cursor: &Cursor, max_bytes: usize) -> Result<(IngestBatch, Cursor, bool)> {
    read_file_limited(path, cursor, max_bytes, MAX_LINE_BYTES)
}

/// [`read_file`] with the longest line it loads given (tests use a small one).
pub(crate) fn read_file_limited(
    path: &Path,
    cursor: &Cursor,
    max_bytes: usize,
    max_line: u64,
) -> Result<(IngestBatch, Cursor, bool)> {
    let identity = identify(path).ok_or_else(|| {
        CairnError::new(
            ErrorCode::HistorySourceUnreadable,
            format!("not a transcript name cairn accepts: {}", path.display()),
        )
    })?;
    let mut reader = TranscriptReader::new(identity);
    let tail = super::jsonl::tail(path, cursor, max_bytes, max_line, &mut |line, offset, skips| {
        reader.line(line, offset, skips);
    })?;
    let (next, more, skips) = (tail.next, tail.more, tail.skips);
    let mtime_ms = next.mtime_ms;
    let mut batch = reader.finish();
    batch.skipped = skips.into_vec();
    // A chunk of records without times (titles only) still needs a span: the file's mtime.
    for session in &mut batch.sessions {
        if session.created_at.is_empty() {
            session.created_at = ms_ts(mtime_ms);
            session.updated_at = session.created_at.clone();
        }
    }
    Ok((batch, next, more))
}

pub(crate) use super::jsonl::mtime_ms;

// --- parsing -----------------------------------------------------------------------------

/// The envelope fields cairn uses; everything else in a record is skipped by serde unparsed.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    uuid: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    subtype: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    cwd: Option<Cow<'a, str>>,
    #[serde(default, rename = "isMeta")]
    is_meta: Option<bool>,
    #[serde(default, rename = "isCompactSummary")]
    is_compact_summary: Option<bool>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
    #[serde(default, borrow)]
    summary: Option<Cow<'a, str>>,
    #[serde(default, rename = "customTitle", borrow)]
    custom_title: Option<Cow<'a, str>>,
    #[serde(default, rename = "aiTitle", borrow)]
    ai_title: Option<Cow<'a, str>>,
    #[serde(default, rename = "agentType", borrow)]
    agent_type: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    attachment: Option<&'a RawValue>,
}

/// An `attachment` record's payload, read only for a hook's context.
#[derive(Deserialize)]
struct HookContext<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    content: Vec<Cow<'a, str>>,
}

/// The attachment type under which Claude Code (2.1.3xx) records what hooks answered in
/// `additionalContext`: one string per hook, in a record of its own after the prompt (or at
/// the session's start), never inside the user's message.
const HOOK_CONTEXT: &str = "hook_additional_context";

#[derive(Deserialize)]
struct ApiMessage<'a> {
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    usage: Option<&'a RawValue>,
}

/// One content block; a flat struct rather than a tagged enum so strings stay borrowed.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    is_error: Option<bool>,
    #[serde(default, borrow)]
    source: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct MediaSource<'a> {
    #[serde(default, borrow)]
    media_type: Option<Cow<'a, str>>,
}

/// Builds one batch from the lines of one file.
struct TranscriptReader {
    identity: FileIdentity,
    session: Option<HistorySession>,
    title_rank: u8,
    messages: Vec<HistoryMessage>,
    parts: Vec<HistoryPart>,
    results: Vec<ToolResult>,
    /// Tool calls of this batch by call id → index in `parts`, to pair results in place.
    calls: HashMap<String, usize>,
}

impl TranscriptReader {
    fn new(identity: FileIdentity) -> Self {
        Self {
            identity,
            session: None,
            title_rank: 0,
            messages: Vec::new(),
            parts: Vec::new(),
            results: Vec::new(),
            calls: HashMap::new(),
        }
    }

    fn line(&mut self, line: &[u8], offset: u64, skips: &mut SkipCounter) {
        let record: Record = match serde_json::from_slice(line) {
            Ok(r) => r,
            Err(_) => return skips.add("invalid_json"),
        };
        match record.kind.as_ref() {
            "user" | "assistant" => self.conversation_line(&record, offset, skips),
            "system" => self.system_line(&record, offset),
            "attachment" => self.attachment_line(&record, offset),
            "summary" => self.title(record.summary.as_deref(), 2),
            "custom-title" => self.title(record.custom_title.as_deref(), 3),
            "ai-title" => self.title(record.ai_title.as_deref(), 1),
            kind if BOOKKEEPING_TYPES.contains(&kind) => {}
            _ => skips.add("unknown_record_type"),
        }
    }

    /// The session row, created on first use; every record's time widens its span.
    fn touch_session(&mut self, record: &Record) {
        let ts = record.timestamp.as_deref().and_then(normalize_claude_ts);
        let session = self.session.get_or_insert_with(|| HistorySession {
            id: self.identity.session_id.clone(),
            host: HistoryHost::ClaudeCode,
            project: None,
            directory: None,
            parent_id: self.identity.parent_id.clone(),
            title: None,
            agent: None,
            model: None,
            created_at: String::new(),
            updated_at: String::new(),
        });
        if let (None, Some(cwd)) = (&session.directory, record.cwd.as_deref()) {
            session.directory = Some(cwd.to_owned());
            session.project = project_of(cwd);
        }
        if session.agent.is_none() {
            session.agent = record.agent_type.as_deref().map(str::to_owned);
        }
        if let Some(ts) = ts {
            if session.created_at.is_empty() || *ts < *session.created_at {
                session.created_at = ts.to_string();
            }
            if *ts > *session.updated_at {
                session.updated_at = ts.into_owned();
            }
        }
    }

    /// Titles: a user's `custom-title` beats the resume `summary`, which beats `ai-title`.
    fn title(&mut self, title: Option<&str>, rank: u8) {
        let Some(title) = title.map(str::trim).filter(|t| !t.is_empty()) else { return };
        let placeholder = Record::placeholder();
        self.touch_session(&placeholder);
        if rank >= self.title_rank {
            self.title_rank = rank;
            if let Some(s) = self.session.as_mut() {
                s.title = Some(cairn_base::text::redact(title).0);
            }
        }
    }

    fn system_line(&mut self, record: &Record, offset: u64) {
        self.touch_session(record);
        if record.subtype.as_deref() != Some("compact_boundary") {
            return;
        }
        let Some(id) = record.uuid.as_deref().filter(|u| valid_id(u)) else { return };
        let message = self.new_message(record, id, HistoryRole::User, offset);
        self.messages.push(HistoryMessage { compaction: true, ..message });
    }

    /// A hook's `additionalContext` that is cairn's (by its leading line) is kept as an injected
    /// part of a host-injected message of its own (it never opens a turn), so it can be pulled
    /// but stays out of previews and search; any other attachment is the host's bookkeeping.
    fn attachment_line(&mut self, record: &Record, offset: u64) {
        let Some(raw) = record.attachment.map(RawValue::get) else { return };
        // most attachments are large (prompt snapshots, tool listings): parsed only when they
        // may be a hook's context
        if memchr::memmem::find(raw.as_bytes(), HOOK_CONTEXT.as_bytes()).is_none() {
            return;
        }
        let Ok(hook) = serde_json::from_str::<HookContext>(raw) else { return };
        let Some(id) = record.uuid.as_deref().filter(|u| valid_id(u)) else { return };
        if hook.kind != HOOK_CONTEXT {
            return;
        }
        let first_part = self.parts.len();
        for (idx, text) in hook.content.iter().enumerate() {
            let text = clean_text(text);
            if is_cairn_injection(&text) {
                let part = self.part(id, idx as i64, PartKind::Text);
                self.parts.push(HistoryPart { text: Some(text), injected: true, ..part });
            }
        }
        if self.parts.len() == first_part {
            return;
        }
        self.touch_session(record);
        let message = self.new_message(record, id, HistoryRole::User, offset);
        self.messages.push(HistoryMessage { synthetic: true, ..message });
    }

    fn conversation_line(&mut self, record: &Record, offset: u64, skips: &mut SkipCounter) {
        let Some(id) = record.uuid.as_deref() else { return skips.add("missing_uuid") };
        if !valid_id(id) {
            return skips.add("invalid_id");
        }
        let Some(raw) = record.message else { return skips.add("missing_message") };
        let api: ApiMessage = match serde_json::from_str(raw.get()) {
            Ok(m) => m,
            Err(_) => return skips.add("invalid_message"),
        };
        self.touch_session(record);
        let role = if record.kind == "assistant" { HistoryRole::Assistant } else { HistoryRole::User };
        let mut message = self.new_message(record, id, role, offset);
        message.summary = record.is_compact_summary == Some(true);
        message.synthetic = record.is_meta == Some(true);
        if role == HistoryRole::Assistant {
            message.model = api.model.as_deref().map(str::to_owned);
            message.finish = api.stop_reason.as_deref().map(str::to_owned);
            message.tokens = api.usage.map(|u| u.get().to_owned());
            if let (Some(model), Some(s)) = (&message.model, self.session.as_mut()) {
                s.model = Some(model.clone());
            }
        }
        let first_part = self.parts.len();
        self.blocks(id, api.content, skips);
        // A user line carrying only tool results is the API's plumbing, not a message.
        if self.parts.len() == first_part && role == HistoryRole::User && !message.summary {
            return;
        }
        self.messages.push(message);
    }

    fn new_message(&self, record: &Record, id: &str, role: HistoryRole, offset: u64) -> HistoryMessage {
        let created_at = record
            .timestamp
            .as_deref()
            .and_then(normalize_claude_ts)
            .map(Cow::into_owned)
            .or_else(|| self.session.as_ref().map(|s| s.updated_at.clone()))
            .unwrap_or_default();
        HistoryMessage::new(&self.identity.session_id, id, role, offset as i64, &created_at)
    }

    fn blocks(&mut self, message_id: &str, content: Option<&RawValue>, skips: &mut SkipCounter) {
        let Some(content) = content else { return };
        let raw = content.get();
        if raw.starts_with('"') {
            let text: Cow<str> = serde_json::from_str(raw).unwrap_or_default();
            self.push_text(message_id, 0, PartKind::Text, &text);
            return;
        }
        let blocks: Vec<Block> = match serde_json::from_str(raw) {
            Ok(b) => b,
            Err(_) => return skips.add("invalid_content"),
        };
        for (idx, block) in blocks.into_iter().enumerate() {
            self.block(message_id, idx as i64, block, skips);
        }
    }

    fn block(&mut self, message_id: &str, idx: i64, block: Block, skips: &mut SkipCounter) {
        match block.kind.as_ref() {
            "text" => self.push_text(message_id, idx, PartKind::Text, block.text.as_deref().unwrap_or("")),
            "thinking" => self.push_text(message_id, idx, PartKind::Reasoning, block.thinking.as_deref().unwrap_or("")),
            "redacted_thinking" => {}
            "tool_use" | "server_tool_use" => self.push_tool_use(message_id, idx, &block),
            "tool_result" => self.push_result(&block),
            "image" | "document" => {
                let mime = block
                    .source
                    .and_then(|s| serde_json::from_str::<MediaSource>(s.get()).ok())
                    .and_then(|s| s.media_type.map(Cow::into_owned));
                let kind = if block.kind == "image" { PartKind::Image } else { PartKind::File };
                let part = self.part(message_id, idx, kind);
                self.parts.push(HistoryPart { mime, ..part });
            }
            _ => skips.add("unknown_block_type"),
        }
    }

    fn part(&self, message_id: &str, idx: i64, kind: PartKind) -> HistoryPart {
        HistoryPart::new(&self.identity.session_id, message_id, &format!("{message_id}:{idx}"), idx, kind)
    }

    fn push_text(&mut self, message_id: &str, idx: i64, kind: PartKind, text: &str) {
        let text = clean_text(text);
        if text.trim().is_empty() {
            return;
        }
        let part = self.part(message_id, idx, kind);
        self.parts.push(HistoryPart { text: Some(text), ..part });
    }

    fn push_tool_use(&mut self, message_id: &str, idx: i64, block: &Block) {
        let Some(call_id) = block.id.as_deref() else { return };
        let part = self.part(message_id, idx, PartKind::Tool);
        let input = block.input.map(|i| cairn_base::text::redact(i.get()).0);
        self.calls.insert(call_id.to_owned(), self.parts.len());
        self.parts.push(HistoryPart {
            tool: block.name.as_deref().map(str::to_owned),
            call_id: Some(call_id.to_owned()),
            status: Some(ToolStatus::Running),
            input,
            ..part
        });
    }

    /// A result pairs with its call in place when the call is in this batch; otherwise it goes
    /// to `results` for the store to apply to the call read earlier.
    fn push_result(&mut self, block: &Block) {
        let Some(call_id) = block.tool_use_id.as_deref() else { return };
        let output = clean_text(&result_text(block.content));
        let is_error = block.is_error == Some(true);
        if let Some(&i) = self.calls.get(call_id) {
            let part = &mut self.parts[i];
            part.status = Some(if is_error { ToolStatus::Error } else { ToolStatus::Completed });
            part.output = Some(output);
            return;
        }
        self.results.push(ToolResult {
            session_id: self.identity.session_id.clone(),
            call_id: call_id.to_owned(),
            output,
            is_error,
        });
    }

    fn finish(self) -> IngestBatch {
        IngestBatch {
            sessions: self.session.into_iter().collect(),
            messages: self.messages,
            parts: self.parts,
            results: self.results,
            skipped: Vec::new(),
        }
    }
}

impl Record<'_> {
    /// A record with no fields, to create the session row from a title-only record.
    fn placeholder() -> Record<'static> {
        Record {
            kind: Cow::Borrowed(""),
            uuid: None,
            subtype: None,
            timestamp: None,
            cwd: None,
            is_meta: None,
            is_compact_summary: None,
            message: None,
            summary: None,
            custom_title: None,
            ai_title: None,
            agent_type: None,
            attachment: None,
        }
    }
}

/// A tool result's content: a string, or blocks whose texts are joined (images are named).
fn result_text(content: Option<&RawValue>) -> String {
    let Some(raw) = content.map(RawValue::get) else { return String::new() };
    if raw.starts_with('"') {
        return serde_json::from_str::<Cow<str>>(raw).map(Cow::into_owned).unwrap_or_default();
    }
    let Ok(blocks) = serde_json::from_str::<Vec<Block>>(raw) else { return raw.to_owned() };
    let mut out = String::new();
    for block in blocks {
        let piece = match block.kind.as_ref() {
            "text" => block.text.unwrap_or_default(),
            "image" => Cow::Borrowed("[image]"),
            _ => continue,
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&piece);
    }
    out
}

/// Claude Code writes `2025-06-01T12:34:56.789Z`, already cairn's fixed-width form: kept
/// as is without parsing (the hot path); anything else goes through the general parser.
fn normalize_claude_ts(raw: &str) -> Option<Cow<'_, str>> {
    let b = raw.as_bytes();
    if b.len() == 24 && b[4] == b'-' && b[10] == b'T' && b[19] == b'.' && b[23] == b'Z' {
        return Some(Cow::Borrowed(raw));
    }
    cairn_base::clock::normalize_ts(raw).map(Cow::Owned)
}

fn ms_ts(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned(), cairn_base::clock::format_ts)
}

#[cfg(test)]
#[path = "claude_tests.rs"]
pub(crate) mod tests;
