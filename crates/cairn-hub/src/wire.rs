//! The wire format of `/sync/mutations/push` and `/sync/mutations/pull` (engram cloud's, plus
//! an optional per-entry `mutation_id`). docs/HUB.md documents every field; keep them in step.

use serde::{Deserialize, Serialize};

/// engram's limits for one push.
pub const MAX_PUSH_ENTRIES: usize = 100;
pub const MAX_PUSH_BYTES: usize = 8 * 1024 * 1024;
/// Default and maximum `limit` of a pull.
pub const MAX_PULL_LIMIT: i64 = 100;
/// Longest `project`, `entity`, `entity_key`, `op`, `mutation_id`, `created_by` accepted.
pub const MAX_FIELD_CHARS: usize = 512;

/// `POST /sync/mutations/push` body.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PushRequest {
    pub entries: Vec<PushEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// One mutation as a client sends it. Fields are optional here so that a missing one is
/// answered by name (`invalid_entry`, `empty_project`) rather than as a parse error.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PushEntry {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub entity: Option<String>,
    #[serde(default)]
    pub entity_key: Option<String>,
    #[serde(default)]
    pub op: Option<String>,
    #[serde(default)]
    pub payload: Option<serde_json::Value>,
    /// The client's idempotency key, unique per project: a push that repeats it gets the seq
    /// stored the first time instead of a second row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation_id: Option<String>,
}

/// `POST /sync/mutations/push` answer: one seq per stored entry, in entry order, all
/// committed; the entries not stored are in `rejected` (absent when every entry was stored).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PushResponse {
    pub accepted_seqs: Vec<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedEntry>,
    pub project: String,
    pub project_source: String,
    pub project_path: String,
}

/// An entry of a push the hub refused on its own, the error body's fields with its index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedEntry {
    pub index: usize,
    /// The HTTP status the entry alone would have been answered with (a 4xx).
    pub status: u16,
    pub error_class: String,
    pub error_code: String,
    pub error: String,
}

/// One mutation as a puller gets it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PulledMutation {
    pub seq: i64,
    pub project: String,
    pub entity: String,
    pub entity_key: String,
    pub op: String,
    pub payload: serde_json::Value,
    pub occurred_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation_id: Option<String>,
}

/// `GET /sync/mutations/pull` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PullResponse {
    pub mutations: Vec<PulledMutation>,
    pub has_more: bool,
    /// The highest seq this token can see, read in the same snapshot as `mutations`: when
    /// `has_more` is false a client may store it as its next `since_seq`.
    pub latest_seq: i64,
    pub project: String,
}

/// A push entry checked field by field.
#[derive(Debug, Clone)]
pub struct ValidEntry {
    pub project: String,
    pub entity: String,
    pub entity_key: String,
    pub op: String,
    pub payload: serde_json::Value,
    pub mutation_id: Option<String>,
}

/// The fields a relation payload must carry (engram validates the same set).
pub const RELATION_REQUIRED_FIELDS: [&str; 7] =
    ["sync_id", "source_id", "target_id", "relation", "judgment_status", "marked_by_actor", "marked_by_kind"];
