//! Domain types as they cross every door (JSON field names follow engram's wire contract).

use serde::{Deserialize, Serialize};

use crate::text::Scope;

/// A memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Observation {
    /// Local id, shown as `#id`.
    pub id: i64,
    /// Global id (UUID v7).
    pub sync_id: String,
    pub session_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub content: String,
    #[serde(default)]
    pub tool_name: Option<String>,
    /// Empty when the memory belongs to no project.
    #[serde(default)]
    // Always served: `default` is only for reading older or foreign records.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub project: String,
    pub scope: Scope,
    #[serde(default)]
    pub topic_key: Option<String>,
    #[serde(default = "one")]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub revision_count: i64,
    #[serde(default = "one")]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub duplicate_count: i64,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub pinned: bool,
    #[serde(default)]
    pub last_seen_at: Option<String>,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub deleted_at: Option<String>,
    /// When a decision, policy or preference should be reviewed.
    #[serde(default)]
    pub review_after: Option<String>,
}

fn one() -> i64 {
    1
}

/// Columns selected for an [`Observation`], in [`Observation::from_row`] order.
pub(crate) const OBSERVATION_COLUMNS: &str = "o.id, o.sync_id, o.session_id, o.type, o.title, o.content, \
     o.tool_name, o.project, o.scope, o.topic_key, o.revision_count, o.duplicate_count, o.pinned, \
     o.last_seen_at, o.created_at, o.updated_at, o.deleted_at, o.review_after";

impl Observation {
    pub(crate) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Observation> {
        let scope: String = row.get(8)?;
        Ok(Observation {
            id: row.get(0)?,
            sync_id: row.get(1)?,
            session_id: row.get(2)?,
            kind: row.get(3)?,
            title: row.get(4)?,
            content: row.get(5)?,
            tool_name: row.get(6)?,
            project: row.get(7)?,
            scope: Scope::parse(&scope),
            topic_key: row.get(9)?,
            revision_count: row.get(10)?,
            duplicate_count: row.get(11)?,
            pinned: row.get(12)?,
            last_seen_at: row.get(13)?,
            created_at: row.get(14)?,
            updated_at: row.get(15)?,
            deleted_at: row.get(16)?,
            review_after: row.get(17)?,
        })
    }
}

/// A coding session of one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Session {
    pub id: String,
    #[serde(default)]
    // Always served: `default` is only for reading older or foreign records.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub project: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub directory: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub agent: String,
    #[serde(default)]
    pub parent_id: Option<String>,
    pub started_at: String,
    #[serde(default)]
    pub ended_at: Option<String>,
    #[serde(default)]
    pub summary: Option<String>,
    /// The host's name for the session (OpenCode titles), when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

pub(crate) const SESSION_COLUMNS: &str =
    "s.id, s.project, s.directory, s.agent, s.parent_id, s.started_at, s.ended_at, s.summary, s.title";

impl Session {
    pub(crate) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Session> {
        Ok(Session {
            id: row.get(0)?,
            project: row.get(1)?,
            directory: row.get(2)?,
            agent: row.get(3)?,
            parent_id: row.get(4)?,
            started_at: row.get(5)?,
            ended_at: row.get(6)?,
            summary: row.get(7)?,
            title: row.get(8)?,
        })
    }
}

/// A session with its memory count, for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionSummary {
    #[serde(flatten)]
    pub session: Session,
    pub observation_count: i64,
    /// Latest of the newest memory and the start: what "recent" sorts by.
    pub last_activity_at: String,
}

/// What a user asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Prompt {
    pub id: i64,
    pub sync_id: String,
    pub session_id: String,
    pub content: String,
    #[serde(default)]
    // Always served: `default` is only for reading older or foreign records.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub project: String,
    pub created_at: String,
}

pub(crate) const PROMPT_COLUMNS: &str = "p.id, p.sync_id, p.session_id, p.content, p.project, p.created_at";

impl Prompt {
    pub(crate) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Prompt> {
        Ok(Prompt {
            id: row.get(0)?,
            sync_id: row.get(1)?,
            session_id: row.get(2)?,
            content: row.get(3)?,
            project: row.get(4)?,
            created_at: row.get(5)?,
        })
    }
}

/// A verdict between two memories (by their sync ids).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Relation {
    pub id: i64,
    pub sync_id: String,
    pub source_id: String,
    pub target_id: String,
    /// `pending` or a verdict: related, compatible, scoped, conflicts_with, supersedes, not_conflict.
    pub relation: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub evidence: Option<String>,
    #[serde(default)]
    pub confidence: Option<f64>,
    /// `pending`, `judged` or `orphaned`.
    pub judgment_status: String,
    #[serde(default)]
    pub marked_by_actor: Option<String>,
    #[serde(default)]
    pub marked_by_kind: Option<String>,
    #[serde(default)]
    pub marked_by_model: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

pub(crate) const RELATION_COLUMNS: &str = "r.id, r.sync_id, r.source_id, r.target_id, r.relation, r.reason, \
     r.evidence, r.confidence, r.judgment_status, r.marked_by_actor, r.marked_by_kind, r.marked_by_model, \
     r.session_id, r.created_at, r.updated_at";

impl Relation {
    pub(crate) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Relation> {
        Ok(Relation {
            id: row.get(0)?,
            sync_id: row.get(1)?,
            source_id: row.get(2)?,
            target_id: row.get(3)?,
            relation: row.get(4)?,
            reason: row.get(5)?,
            evidence: row.get(6)?,
            confidence: row.get(7)?,
            judgment_status: row.get(8)?,
            marked_by_actor: row.get(9)?,
            marked_by_kind: row.get(10)?,
            marked_by_model: row.get(11)?,
            session_id: row.get(12)?,
            created_at: row.get(13)?,
            updated_at: row.get(14)?,
        })
    }
}

/// An earlier version of a memory, kept when a topic save or an update replaced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Revision {
    pub revision: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub content: String,
    pub replaced_at: String,
}

/// A new global id for an entity (UUID v7: time-ordered, unique across machines).
pub fn new_sync_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The memory type of compaction summaries.
pub const COMPACTION_SUMMARY: &str = "compaction_summary";
/// The memory type of Last Session records.
pub const SESSION_RECORD: &str = "session_record";
/// `tool_name` of a Last Session record: its origin, and whether the session was compacted (a
/// compacted session's own record is its "Last Session" in its next `[MEMORY]` block).
pub const SESSION_RECORD_SOURCE: &str = "session-record";
pub const SESSION_RECORD_SOURCE_COMPACTED: &str = "session-record:compacted";

/// Whether a Last Session record (by its `tool_name`) says its session was compacted.
pub fn record_says_compacted(tool_name: Option<&str>) -> bool {
    tool_name == Some(SESSION_RECORD_SOURCE_COMPACTED)
}

/// The session a memory lands in when its caller names none: `manual-save-<project>`
/// (engram's convention, so its plugins agree).
const CATCH_ALL_SESSION: &str = "manual-save";

/// The session used when a caller names none.
pub fn default_session_id(project: &str) -> String {
    if project.is_empty() { CATCH_ALL_SESSION.to_owned() } else { format!("{CATCH_ALL_SESSION}-{project}") }
}

/// SQL `LIKE` pattern of the catch-all sessions. Their memories are unrelated to each other,
/// so being saved next to one there says nothing: no session context in ranking, no
/// contextual embedding.
pub(crate) fn catch_all_sessions_like() -> String {
    format!("{CATCH_ALL_SESSION}%")
}
