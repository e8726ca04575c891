//! What the history requests answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One session in a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionListing {
    pub session_id: String,
    pub host: String,
    pub title: Option<String>,
    pub directory: Option<String>,
    pub project: Option<String>,
    pub updated: String,
    pub messages: u64,
    pub parent_id: Option<String>,
}

/// How a turn's or message's tool calls went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolSummary {
    /// `"2× grep"`, in order of first call.
    pub calls: Vec<String>,
    /// `completed`, `recovered` (an error, then success), `error` or `running`.
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnUser {
    pub preview: Option<String>,
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnAssistant {
    pub preview: Option<String>,
    pub total_messages: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolSummary>,
    /// Files written by completed write/edit/apply_patch calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnPreview {
    pub turn_number: i64,
    pub user: TurnUser,
    pub assistant: TurnAssistant,
}

/// The answer to `history_browse_turns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnsPage {
    pub turns: Vec<TurnPreview>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessagePreview {
    pub role: String,
    pub turn_number: i64,
    pub message_id: String,
    pub preview: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolSummary>,
    /// Only text cairn injected (a Claude Code hook's context): the preview is of that text.
    #[serde(default, skip_serializing_if = "is_false")]
    pub injected: bool,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
pub(super) fn is_false(b: &bool) -> bool {
    !*b
}

/// The answer to `history_browse_messages`: page on with the ids either side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessagesPage {
    pub before_message_id: Option<String>,
    pub messages: Vec<MessagePreview>,
    pub after_message_id: Option<String>,
}

/// One part of a pulled message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Section {
    Text {
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_id: Option<String>,
        /// Text cairn put into the conversation (the `[MEMORY]` block, its guidance and notes),
        /// not the user's: left out of previews, the chart and search.
        #[serde(default, skip_serializing_if = "is_false")]
        injected: bool,
    },
    Reasoning {
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_id: Option<String>,
    },
    Tool {
        tool: String,
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
        input: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_id: Option<String>,
    },
    Image {
        mime: Option<String>,
    },
    File {
        path: Option<String>,
        mime: Option<String>,
    },
}

/// The answer to `history_pull_message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PulledMessage {
    pub message_id: String,
    pub role: String,
    pub turn_number: i64,
    /// ISO-8601, or `unknown`.
    pub time: String,
    pub sections: Vec<Section>,
}

/// The answer to `history_pull_part`: one page of a part's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PulledPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub content: String,
    /// Characters of the whole content, and where this page starts.
    pub total_chars: u64,
    pub offset: u64,
    /// Where the next page starts, when there is more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// Text cairn put into the conversation, not the user's.
    #[serde(default, skip_serializing_if = "is_false")]
    pub injected: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchHitPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    pub part_id: String,
    pub snippets: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchMessage {
    pub session_id: String,
    pub role: String,
    pub turn_number: i64,
    pub message_id: String,
    pub hits: Vec<SearchHitPart>,
    /// Hits in this message beyond the ones shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remain_hits: Option<u64>,
}

/// The answer to `history_search`, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchResults {
    pub messages: Vec<SearchMessage>,
}

/// The answer to `history_chart`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Chart {
    pub session_id: String,
    pub chart: String,
}

/// One compaction of a session: the trigger and the summary after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionEntry {
    /// 1-based, oldest first (`read` takes it).
    pub index: u64,
    pub time: String,
    pub trigger_message_id: Option<String>,
    pub summary_message_id: Option<String>,
    /// The summary's first 60 characters.
    pub preview: String,
}

/// The answer to `history_compactions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Compactions {
    pub session_id: String,
    pub compactions: Vec<CompactionEntry>,
    /// The full summary of compaction `read`, when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// The archive of one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HostHistoryStats {
    pub host: String,
    pub sessions: u64,
    pub messages: u64,
    pub parts: u64,
    /// Characters of text, tool input and output stored.
    pub bytes: u64,
    pub oldest: Option<String>,
    pub newest: Option<String>,
    /// Records the readers could not use, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Sources whose last read failed.
    pub errors: u64,
    /// The host's own files the archive was read from: transcripts (one each), or OpenCode's
    /// database (one, however many of its sessions were read).
    #[serde(default)]
    pub source_files: u64,
    /// Their bytes: a transcript's size when it was last read (its cursor records it), an
    /// OpenCode database's size now (its cursor records rows, not bytes).
    #[serde(default)]
    pub source_bytes: u64,
}

/// The answer to `history_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryStats {
    pub hosts: Vec<HostHistoryStats>,
    /// The archive's files on disk against the hosts' files it was read from.
    #[serde(default)]
    pub disk: ArchiveDisk,
}

/// The archive's size on disk, all hosts together (one file holds them all), against the
/// hosts' own files it was read from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ArchiveDisk {
    /// `history.db`.
    pub db_bytes: u64,
    /// `history.db`'s write-ahead log, not yet copied into it.
    pub wal_bytes: u64,
    /// The full-text index, `history-fts.db` with its write-ahead log.
    pub index_bytes: u64,
    /// The three together.
    pub archive_bytes: u64,
    /// Every host's `source_bytes` together.
    pub source_bytes: u64,
    /// `archive_bytes / source_bytes`; absent while no source was read.
    pub ratio: Option<f64>,
}

/// The answer to `history_forget`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Forgotten {
    pub session_id: String,
    /// Always `forgotten`.
    pub status: String,
    /// Rows removed (session, messages, parts).
    pub removed: u64,
}
