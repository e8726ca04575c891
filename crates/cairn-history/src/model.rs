//! The one model every host's conversation is read into: Session → Message → Part, with
//! turns numbered by the store. Readers (`opencode.rs`, `claude.rs`) produce an
//! [`IngestBatch`]; the store (`store.rs`) applies it in one transaction and advances the
//! source's [`Cursor`] with it, so a crash never skips or doubles what a source holds.

use serde::{Deserialize, Serialize};

/// Which host wrote a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum HistoryHost {
    #[serde(rename = "opencode")]
    OpenCode,
    ClaudeCode,
    Codex,
    Gemini,
}

impl HistoryHost {
    /// Every host whose conversations are archived, in the order they are listed.
    pub const ALL: [HistoryHost; 4] =
        [HistoryHost::OpenCode, HistoryHost::ClaudeCode, HistoryHost::Codex, HistoryHost::Gemini];

    pub fn as_str(self) -> &'static str {
        match self {
            HistoryHost::OpenCode => "opencode",
            HistoryHost::ClaudeCode => "claude-code",
            HistoryHost::Codex => "codex",
            HistoryHost::Gemini => "gemini",
        }
    }

    pub fn parse(s: &str) -> Option<HistoryHost> {
        match s {
            "opencode" => Some(HistoryHost::OpenCode),
            "claude-code" | "claude" => Some(HistoryHost::ClaudeCode),
            "codex" => Some(HistoryHost::Codex),
            "gemini" | "gemini-cli" => Some(HistoryHost::Gemini),
            _ => None,
        }
    }
}

/// One conversation. OpenCode: `ses_…`; Claude Code: the session UUID, and for a sub-agent
/// transcript `agent-<id>` under its parent's UUID (`parent_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistorySession {
    pub id: String,
    pub host: HistoryHost,
    /// cairn's project name for `directory` (`project::detect`), when known.
    pub project: Option<String>,
    pub directory: Option<String>,
    pub parent_id: Option<String>,
    pub title: Option<String>,
    pub agent: Option<String>,
    pub model: Option<String>,
    /// RFC 3339 UTC, `clock::format_ts`.
    pub created_at: String,
    pub updated_at: String,
}

impl HistorySession {
    /// A session with no project, directory, parent, title, agent or model yet.
    pub fn new(id: &str, host: HistoryHost, created_at: &str, updated_at: &str) -> HistorySession {
        HistorySession {
            id: id.into(),
            host,
            project: None,
            directory: None,
            parent_id: None,
            title: None,
            agent: None,
            model: None,
            created_at: created_at.into(),
            updated_at: updated_at.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HistoryRole {
    User,
    Assistant,
}

/// One message. The store gives it `turn_number` (see [`HistoryMessage::opens_turn`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryMessage {
    pub id: String,
    pub session_id: String,
    pub role: HistoryRole,
    /// Order inside the session (OpenCode: creation time in ms; Claude Code: the line's byte
    /// offset). Ties are broken by `id`.
    pub seq: i64,
    pub created_at: String,
    /// The compaction summary (OpenCode `summary: true`; Claude Code `isCompactSummary`).
    pub summary: bool,
    /// The compaction trigger (OpenCode's user message with a `compaction` part; Claude Code's
    /// `system/compact_boundary` record, stored as a user message with no parts).
    pub compaction: bool,
    /// Host-injected text (OpenCode `synthetic` text only, the auto-continue prompt; Claude
    /// Code `isMeta` lines). Never opens a turn.
    pub synthetic: bool,
    pub finish: Option<String>,
    /// The host's usage record as it came (the text of a JSON object), for the context meter:
    /// kept as text, not parsed, since only the meter reads it (parsing, re-serialising and
    /// freeing it was a twentieth of an ingest's writer thread).
    pub tokens: Option<String>,
    pub model: Option<String>,
    pub agent: Option<String>,
}

impl HistoryMessage {
    /// A plain message (no summary, compaction or host-injected text, no usage yet).
    pub fn new(session_id: &str, id: &str, role: HistoryRole, seq: i64, created_at: &str) -> HistoryMessage {
        HistoryMessage {
            id: id.to_owned(),
            session_id: session_id.to_owned(),
            role,
            seq,
            created_at: created_at.to_owned(),
            summary: false,
            compaction: false,
            synthetic: false,
            finish: None,
            tokens: None,
            model: None,
            agent: None,
        }
    }

    /// A turn is one real user message plus the assistant messages after it.
    pub fn opens_turn(&self) -> bool {
        self.role == HistoryRole::User && !self.summary && !self.compaction && !self.synthetic
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PartKind {
    Text,
    Reasoning,
    Tool,
    File,
    Image,
    /// OpenCode `subtask` (a sub-agent request).
    Subtask,
    /// OpenCode `compaction` part.
    Compaction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    Pending,
    Running,
    Completed,
    Error,
}

/// One part of a message. Ids: OpenCode `prt_…`; Claude Code `<record uuid>:<block index>`.
/// Parts of kinds cairn does not show (step-start, step-finish, snapshot, patch, agent, retry)
/// are not produced; a reader counts them as skipped only if they are unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryPart {
    pub id: String,
    pub message_id: String,
    pub session_id: String,
    pub idx: i64,
    pub kind: PartKind,
    /// Text of `text`, `reasoning`, `subtask` (its prompt) and `compaction` parts; already
    /// redacted of `<private>` and stripped of `<system-reminder>` by the reader.
    pub text: Option<String>,
    /// Tool name as the host spells it (`bash`, `Bash`, `mcp__cairn__mem_save`).
    pub tool: Option<String>,
    /// The tool call id (OpenCode `callID`, Claude Code `tool_use.id`), to pair results.
    pub call_id: Option<String>,
    pub status: Option<ToolStatus>,
    /// Tool input as compact JSON text.
    pub input: Option<String>,
    /// Tool output (or error text) as text.
    pub output: Option<String>,
    /// Files and images: media type and path or name.
    pub mime: Option<String>,
    pub path: Option<String>,
    /// Output pruned by the host (OpenCode `time.compacted`); still served in full.
    pub pruned: bool,
    /// Text cairn put into the conversation (the `[MEMORY]` block, the protocol, its notes),
    /// as both the host (OpenCode `synthetic`, a Claude Code hook's context) and cairn's own
    /// leading line say (`history::injected`): kept and pullable, left out of previews, the
    /// chart and search.
    #[serde(default)]
    pub injected: bool,
}

impl HistoryPart {
    /// A part of `kind` at place `idx` of its message, with no content yet (readers and tests
    /// fill in the fields their kind has).
    pub fn new(session_id: &str, message_id: &str, id: &str, idx: i64, kind: PartKind) -> HistoryPart {
        HistoryPart {
            id: id.to_owned(),
            message_id: message_id.to_owned(),
            session_id: session_id.to_owned(),
            idx,
            kind,
            text: None,
            tool: None,
            call_id: None,
            status: None,
            input: None,
            output: None,
            mime: None,
            path: None,
            pruned: false,
            injected: false,
        }
    }
}

/// A tool result that arrived after its call, possibly in a later read (Claude Code's
/// `tool_result` on a user line). Applied to the part with this `call_id` in the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub session_id: String,
    pub call_id: String,
    pub output: String,
    pub is_error: bool,
}

/// Where a reader stopped in one source, stored with the rows it produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cursor {
    /// JSONL: byte offset after the last complete line. OpenCode DB: unused (0).
    pub offset: u64,
    /// JSONL: the file's size and mtime (ms) at the last read, to see truncation/rotation.
    pub size: u64,
    pub mtime_ms: i64,
    /// OpenCode DB: the highest `time_updated` of `message` and `part` rows already read,
    /// and the ids read at exactly that time (to resume without missing or repeating rows).
    pub watermark: Option<String>,
}

/// Everything one read of one source produced, applied atomically with its cursor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IngestBatch {
    pub sessions: Vec<HistorySession>,
    pub messages: Vec<HistoryMessage>,
    pub parts: Vec<HistoryPart>,
    pub results: Vec<ToolResult>,
    /// Lines or rows the reader could not use (bad JSON, unknown shapes), by reason code.
    pub skipped: Vec<(String, u64)>,
}

impl IngestBatch {
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.messages.is_empty() && self.parts.is_empty() && self.results.is_empty()
    }
}

pub(crate) fn role_str(role: HistoryRole) -> &'static str {
    match role {
        HistoryRole::User => "user",
        HistoryRole::Assistant => "assistant",
    }
}

pub(crate) fn kind_str(kind: PartKind) -> &'static str {
    match kind {
        PartKind::Text => "text",
        PartKind::Reasoning => "reasoning",
        PartKind::Tool => "tool",
        PartKind::File => "file",
        PartKind::Image => "image",
        PartKind::Subtask => "subtask",
        PartKind::Compaction => "compaction",
    }
}

pub(crate) fn parse_kind(raw: &str) -> PartKind {
    match raw {
        "reasoning" => PartKind::Reasoning,
        "tool" => PartKind::Tool,
        "file" => PartKind::File,
        "image" => PartKind::Image,
        "subtask" => PartKind::Subtask,
        "compaction" => PartKind::Compaction,
        _ => PartKind::Text,
    }
}

pub(crate) fn status_str(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Pending => "pending",
        ToolStatus::Running => "running",
        ToolStatus::Completed => "completed",
        ToolStatus::Error => "error",
    }
}
