//! The memory model (engram §4, done right): save with topic revision and dedupe, partial
//! update, soft and hard delete, pinning, reads that never show deleted memories.

use serde::{Deserialize, Serialize};
use time::Duration;

use crate::clock::{format_ts, parse_ts};
use crate::error::{CairnError, ErrorCode, Result};
use crate::model::Observation;
use crate::text::{
    self, MAX_CONTENT_BYTES, MAX_TITLE_BYTES, Scope, normalize_project, normalize_topic_key, normalized_hash, redact,
    require,
};

/// Two identical saves closer than this are one memory seen twice.
pub const DEDUPE_WINDOW: Duration = Duration::minutes(15);
/// Type used when the caller gives none.
pub const DEFAULT_TYPE: &str = "manual";

/// What a caller asks to save.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewObservation {
    pub title: String,
    pub content: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    #[serde(default)]
    pub topic_key: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub pinned: bool,
    /// Working directory of the caller, recorded on a session created for this save.
    #[serde(default)]
    pub directory: Option<String>,
}

/// What a save did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum SaveAction {
    /// A new memory.
    Created,
    /// An existing memory with the same topic_key (project, scope) now holds this content.
    Revised,
    /// The same memory was saved again within the dedupe window; its count went up.
    Duplicate,
}

/// The result of a save (`Store::save`, in `crate::store::memories`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SaveOutcome {
    /// The id of the created, revised or deduplicated memory.
    pub id: i64,
    pub sync_id: String,
    pub action: SaveAction,
    pub project: String,
    pub session_id: String,
    /// The title as stored (redacted, first line, within limits): what an answer may show.
    pub title: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub topic_key: Option<String>,
    /// A topic key to pass next time, when none was given (so the memory can be revised).
    pub suggested_topic_key: Option<String>,
    pub revision_count: i64,
    pub duplicate_count: i64,
    /// Original content length in bytes when it was cut to the limit.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<u64>))]
    pub truncated_from: Option<usize>,
    /// Whether `<private>` content was removed.
    pub redacted: bool,
    /// Things the caller should know (normalised project name, similar project...).
    pub warnings: Vec<String>,
}

impl SaveOutcome {
    /// What a door tells the user when the content was cut to the limit.
    pub fn truncation_notice(&self) -> Option<String> {
        self.truncated_from.map(|from| format!("content was cut from {from} bytes to {MAX_CONTENT_BYTES}, the limit"))
    }
}

/// A partial update: `None` keeps the field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObservationPatch {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    /// `Some("")` clears the key.
    #[serde(default)]
    pub topic_key: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
}

impl ObservationPatch {
    pub fn is_empty(&self) -> bool {
        self == &ObservationPatch::default()
    }
}

/// Filters for listing memories.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ListFilter {
    pub project: Option<String>,
    pub scope: Option<Scope>,
    pub kind: Option<String>,
    pub limit: usize,
    pub offset: usize,
    /// The trash instead: soft-deleted memories, most recently deleted first (to restore one).
    pub deleted: bool,
}

/// Cleaned fields of a save, after redaction, limits and normalisation.
pub(crate) struct Prepared {
    pub(crate) kind: String,
    pub(crate) title: String,
    pub(crate) content: String,
    pub(crate) hash: String,
    pub(crate) tool_name: Option<String>,
    pub(crate) topic_key: Option<String>,
    pub(crate) scope: Scope,
    pub(crate) truncated_from: Option<usize>,
    pub(crate) redacted: bool,
}

impl Prepared {
    /// The same title, type and content as `current`: a repeat, counted, not a new revision.
    pub(crate) fn repeats(&self, current: &Observation) -> bool {
        normalized_hash(&current.content) == self.hash && current.title == self.title && current.kind == self.kind
    }
}

/// The fields of `new`, already redacted (`redacted`: whether anything was), checked and
/// normalised.
pub(crate) fn prepare(new: &NewObservation, redacted: bool) -> Result<Prepared> {
    require("title", &new.title)?;
    require("content", &new.content)?;
    let title = text::fit_content("title", new.title.lines().next().unwrap_or_default().trim(), MAX_TITLE_BYTES)?.text;
    let fitted = text::fit_content("content", &new.content, MAX_CONTENT_BYTES)?;
    let kind = normalize_kind(new.kind.as_deref())?;
    let topic_key = new.topic_key.as_deref().and_then(normalize_topic_key);
    let tool_name = new.tool_name.clone().filter(|t| !t.trim().is_empty());
    Ok(Prepared {
        kind,
        hash: normalized_hash(&fitted.text),
        title,
        content: fitted.text,
        tool_name,
        topic_key,
        scope: new.scope.as_deref().map_or(Scope::Project, Scope::parse),
        truncated_from: fitted.truncated_from,
        redacted,
    })
}

/// Types are identifiers: trimmed, lowercase, short, `manual` when absent.
fn normalize_kind(raw: Option<&str>) -> Result<String> {
    let kind = raw.map(str::trim).filter(|k| !k.is_empty()).unwrap_or(DEFAULT_TYPE).to_lowercase();
    if kind.len() > 64 || kind.chars().any(char::is_control) {
        return Err(CairnError::invalid("type must be at most 64 bytes with no control characters"));
    }
    Ok(kind)
}

/// The project a save lands in: the explicit one, else the session's (`session_project`, as
/// stored), else none. An explicit project that contradicts an existing session's project is
/// refused rather than guessed.
pub(crate) fn choose_project(
    session_id: Option<&str>,
    explicit: Option<&str>,
    session_project: Option<String>,
) -> Result<String> {
    match (explicit, session_project) {
        (Some(p), Some(sp)) if !sp.is_empty() && !p.is_empty() && p != sp => Err(CairnError::new(
            ErrorCode::SessionProjectMismatch,
            format!("session {:?} belongs to project {sp:?}, not {p:?}", session_id.unwrap_or_default()),
        )
        .with_hint("omit the project to use the session's, or start a session for the other project")),
        (Some(p), _) => Ok(p.to_owned()),
        (None, Some(sp)) => Ok(sp),
        (None, None) => Ok(String::new()),
    }
}

/// On the first memory of a project (no live memory holds it yet), name an existing project of
/// `candidates` (name, live memories) it probably meant (engram #171: one repo ended up under
/// five spellings).
pub(crate) fn similar_project_warning(project: &str, candidates: Vec<(String, i64)>) -> Option<String> {
    let best = candidates
        .into_iter()
        .filter_map(|(name, count)| similarity_rank(project, &name).map(|rank| (rank, name, count)))
        .min_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)));
    best.map(|(_, name, count)| {
        format!(
            "project {project:?} has no memories yet; a similar project exists: {name:?} ({count} memories). \
             If you meant it, save with project {name:?}"
        )
    })
}

/// Lower is more similar; `None` when the names are unrelated.
fn similarity_rank(a: &str, b: &str) -> Option<usize> {
    if a == b {
        return None;
    }
    let (a, b) = (a.to_lowercase(), b.to_lowercase());
    let strip = |s: &str| s.replace(['-', '_', ' ', '.'], "");
    if a == b || strip(&a) == strip(&b) {
        return Some(0);
    }
    if a.len() >= 3 && b.len() >= 3 && (a.contains(&b) || b.contains(&a)) {
        return Some(1);
    }
    let distance = text::levenshtein(&a, &b);
    let limit = 3.min(a.chars().count().min(b.chars().count()) / 2);
    (distance <= limit).then_some(2 + distance)
}

/// Decisions, policies and preferences age: after this they should be reviewed (engram §4.7).
pub(crate) fn review_after_for(kind: &str, now: time::OffsetDateTime) -> Option<String> {
    let days = match kind {
        "decision" => 182,
        "policy" => 365,
        "preference" => 91,
        _ => return None,
    };
    Some(format_ts(now + Duration::days(days)))
}

pub(crate) fn apply_patch(current: &Observation, patch: &ObservationPatch) -> Result<Observation> {
    let mut next = current.clone();
    if let Some(kind) = &patch.kind {
        next.kind = normalize_kind(Some(kind))?;
    }
    if let Some(title) = &patch.title {
        require("title", title)?;
        next.title =
            text::fit_content("title", redact(title).0.lines().next().unwrap_or_default().trim(), MAX_TITLE_BYTES)?
                .text;
    }
    if let Some(content) = &patch.content {
        require("content", content)?;
        next.content = text::fit_content("content", &redact(content).0, MAX_CONTENT_BYTES)?.text;
    }
    if let Some(project) = &patch.project {
        next.project = normalize_project(project).0;
    }
    if let Some(scope) = &patch.scope {
        next.scope = Scope::parse(scope);
    }
    if let Some(key) = &patch.topic_key {
        next.topic_key = normalize_topic_key(&redact(key).0);
    }
    if let Some(tool) = &patch.tool_name {
        next.tool_name = Some(redact(tool).0).filter(|t| !t.trim().is_empty());
    }
    Ok(next)
}

/// Whether a memory's review date has passed (surfaced in listings as `needs_review`).
pub fn needs_review(obs: &Observation, now: time::OffsetDateTime) -> bool {
    obs.review_after.as_deref().and_then(parse_ts).is_some_and(|t| t <= now)
}
