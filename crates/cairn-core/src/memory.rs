//! The memory model (engram §4, done right): save with topic revision and dedupe, partial
//! update, soft and hard delete, pinning, reads that never show deleted memories.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use time::Duration;

use crate::clock::{format_ts, parse_ts};
use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{OBSERVATION_COLUMNS, Observation, Revision, new_sync_id};
use crate::sessions::{NewSession, default_session_id, ensure_session, validate_session_id};
use crate::store::Store;
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

/// The result of a save (`Store::save`).
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
struct Prepared {
    kind: String,
    title: String,
    content: String,
    hash: String,
    tool_name: Option<String>,
    topic_key: Option<String>,
    scope: Scope,
    truncated_from: Option<usize>,
    redacted: bool,
}

impl Store {
    /// Save a memory: revise the topic it names, count a duplicate, or create it.
    pub fn save(&mut self, new: &NewObservation) -> Result<SaveOutcome> {
        self.save_then(new, |_, _| Ok(()))
    }

    /// Save an agent's end-of-session summary: a `session_summary` memory keyed by the session
    /// (so a repeated summary revises it instead of piling up: engram #710), also set as the
    /// session's summary for context. One transaction: both are written, or neither.
    pub fn save_session_summary(
        &mut self,
        session_id: Option<&str>,
        project: Option<&str>,
        content: &str,
    ) -> Result<SaveOutcome> {
        require("content", content)?;
        // Redacted first: the session id and project name go into the title and the session row.
        let with = self.redaction();
        let content = with.apply(content).0.into_owned();
        let project = project.map(|p| with.apply(p).0.into_owned());
        let project_name = project.as_deref().map(|p| normalize_project(p).0).unwrap_or_default();
        let session_id =
            session_id.map_or_else(|| default_session_id(&project_name), |id| with.apply(id).0.into_owned());
        let title = if project_name.is_empty() {
            format!("Session summary ({session_id})")
        } else {
            format!("Session summary: {project_name} ({session_id})")
        };
        let new = NewObservation {
            title,
            content: content.clone(),
            kind: Some("session_summary".into()),
            session_id: Some(session_id.clone()),
            project,
            topic_key: Some(format!("session/{session_id}")),
            ..NewObservation::default()
        };
        let summary = content;
        self.save_then(&new, |tx, _| {
            tx.execute("UPDATE sessions SET summary = ?2 WHERE id = ?1", params![session_id, summary])?;
            Ok(())
        })
    }

    /// [`Store::save`], then `then` in the same transaction (rolled back together).
    pub(crate) fn save_then(
        &mut self,
        new: &NewObservation,
        then: impl FnOnce(&Connection, &SaveOutcome) -> Result<()>,
    ) -> Result<SaveOutcome> {
        let (new, redacted) = self.redacted(new);
        let new = &new;
        let prepared = prepare(new, redacted)?;
        let mut warnings = Vec::new();
        let explicit_project = new.project.as_deref().map(|raw| {
            let (name, changed) = normalize_project(raw);
            if changed {
                warnings.push(format!("project name normalized from {raw:?} to {name:?}"));
            }
            name
        });
        let now = self.now();
        let window_start = format_ts(self.clock().now() - DEDUPE_WINDOW);
        let review_after = review_after_for(&prepared.kind, self.clock().now());
        self.write(|tx| {
            let project = resolve_project(tx, new.session_id.as_deref(), explicit_project.as_deref())?;
            let session_id = new.session_id.clone().unwrap_or_else(|| default_session_id(&project));
            validate_session_id(&session_id)?;
            let session = NewSession {
                id: session_id.clone(),
                project: Some(project.clone()),
                directory: new.directory.clone(),
                ..NewSession::default()
            };
            ensure_session(tx, &session, &now)?;
            warnings.extend(similar_project_warning(tx, &project)?);
            let ctx = SaveContext { project: &project, session_id: &session_id, now: &now };
            let (id, action) = if let Some(found) = find_topic(tx, &prepared, &project)? {
                (Inserted::Existing(found), revise_or_count(tx, found, &prepared, &now)?)
            } else if let Some(found) = find_duplicate(tx, &prepared, &project, &window_start)? {
                bump_duplicate(tx, found, &now)?;
                (Inserted::Existing(found), SaveAction::Duplicate)
            } else {
                (insert(tx, &prepared, &ctx, new.pinned, review_after.as_deref())?, SaveAction::Created)
            };
            let (sync_id, revision_count, duplicate_count) = match &id {
                // A new memory: its counters start at one (the schema's defaults, engram's
                // convention) and its sync id was just made.
                Inserted::New { sync_id, .. } => (sync_id.clone(), 1, 1),
                Inserted::Existing(id) => tx
                    .prepare_cached("SELECT sync_id, revision_count, duplicate_count FROM observations WHERE id = ?1")?
                    .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?,
            };
            let id = id.id();
            let outcome = SaveOutcome {
                id,
                sync_id,
                action,
                project: project.clone(),
                session_id: session_id.clone(),
                title: prepared.title.clone(),
                kind: prepared.kind.clone(),
                topic_key: prepared.topic_key.clone(),
                suggested_topic_key: prepared
                    .topic_key
                    .is_none()
                    .then(|| crate::topic::suggest_topic_key(Some(&prepared.kind), &prepared.title, &prepared.content)),
                revision_count,
                duplicate_count,
                truncated_from: prepared.truncated_from,
                redacted: prepared.redacted,
                warnings: std::mem::take(&mut warnings),
            };
            then(tx, &outcome)?;
            Ok(outcome)
        })
    }

    /// A live (not deleted) memory.
    pub fn get(&self, id: i64) -> Result<Observation> {
        live(self.conn(), id)
    }

    /// Earlier versions of a memory, oldest first.
    pub fn revisions(&self, id: i64) -> Result<Vec<Revision>> {
        self.get(id)?;
        let mut stmt = self.conn().prepare_cached(
            "SELECT revision, type, title, content, replaced_at FROM observation_revisions
             WHERE observation_id = ?1 ORDER BY revision",
        )?;
        let rows = stmt.query_map([id], |r| {
            Ok(Revision {
                revision: r.get(0)?,
                kind: r.get(1)?,
                title: r.get(2)?,
                content: r.get(3)?,
                replaced_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Apply a partial update; the replaced version is kept in the revision history.
    pub fn update(&mut self, id: i64, patch: &ObservationPatch) -> Result<Observation> {
        if patch.is_empty() {
            return Err(CairnError::invalid("nothing to update: give at least one field")
                .with_hint("fields: type, title, content, project, scope, topic_key, tool_name"));
        }
        let (patch, _) = self.redacted(patch);
        let patch = &patch;
        let now = self.now();
        self.write(|tx| {
            // Read inside the write transaction: read before it, another process's update
            // committed in between would be overwritten and missing from the revisions.
            let current = live(tx, id)?;
            let next = apply_patch(&current, patch)?;
            keep_revision(tx, &current, &now)?;
            tx.execute(
                "UPDATE observations SET type = ?2, title = ?3, content = ?4, project = ?5, scope = ?6,
                    topic_key = ?7, tool_name = ?8, normalized_hash = ?9,
                    revision_count = revision_count + 1, updated_at = ?10
                 WHERE id = ?1 AND deleted_at IS NULL",
                params![
                    id,
                    next.kind,
                    next.title,
                    next.content,
                    next.project,
                    next.scope.as_str(),
                    next.topic_key,
                    next.tool_name,
                    normalized_hash(&next.content),
                    now
                ],
            )?;
            live(tx, id)
        })
    }

    /// Soft delete (hidden from every read) or hard delete (row gone; relations orphaned).
    pub fn delete(&mut self, id: i64, hard: bool) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            let found: Option<(String, Option<String>)> = tx
                .query_row("SELECT sync_id, deleted_at FROM observations WHERE id = ?1", [id], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()?;
            let Some((sync_id, deleted_at)) = found else {
                return Err(CairnError::observation_not_found(id));
            };
            if !hard {
                if deleted_at.is_some() {
                    return Err(CairnError::observation_not_found(id));
                }
                tx.execute("UPDATE observations SET deleted_at = ?2, updated_at = ?2 WHERE id = ?1", params![id, now])?;
                return Ok(());
            }
            // A hard delete also erases a soft-deleted row: that is how a user purges it.
            tx.execute("DELETE FROM observations WHERE id = ?1", [id])?;
            tx.execute(
                "UPDATE relations SET judgment_status = 'orphaned', updated_at = ?2
                 WHERE source_id = ?1 OR target_id = ?1",
                params![sync_id, now],
            )?;
            Ok(())
        })
    }

    /// Pin or unpin: pinned memories lead the context of their project.
    pub fn set_pinned(&mut self, id: i64, pinned: bool) -> Result<Observation> {
        self.get(id)?;
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "UPDATE observations SET pinned = ?2, updated_at = ?3 WHERE id = ?1 AND deleted_at IS NULL",
                params![id, pinned, now],
            )?;
            Ok(())
        })?;
        self.get(id)
    }

    /// Bring a soft-deleted memory back, as it was (its search entry returns at once, its
    /// vector with the next embedding pass). A hard-deleted one is gone for good; a live one is
    /// answered as it is (a retried restore succeeds).
    pub fn restore(&mut self, id: i64) -> Result<Observation> {
        let now = self.now();
        self.write(|tx| {
            let deleted_at: Option<Option<String>> =
                tx.query_row("SELECT deleted_at FROM observations WHERE id = ?1", [id], |r| r.get(0)).optional()?;
            match deleted_at {
                None => Err(CairnError::observation_not_found(id)),
                Some(None) => live(tx, id),
                Some(Some(_)) => {
                    tx.execute(
                        "UPDATE observations SET deleted_at = NULL, updated_at = ?2 WHERE id = ?1",
                        params![id, now],
                    )?;
                    live(tx, id)
                }
            }
        })
    }

    /// Live memories, newest first; or the trash (`filter.deleted`), latest deletion first.
    pub fn list(&self, filter: &ListFilter) -> Result<Vec<Observation>> {
        let live_or_trash = if filter.deleted { "IS NOT NULL" } else { "IS NULL" };
        let mut sql = format!("SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE o.deleted_at {live_or_trash}");
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        // Conditions are added only when set, so SQLite can use the project index (an
        // `?1 IS NULL OR project = ?1` form would scan).
        if let Some(project) = &filter.project {
            sql.push_str(" AND o.project = ?");
            args.push(normalize_project(project).0.into());
        }
        if let Some(scope) = filter.scope {
            sql.push_str(" AND o.scope = ?");
            args.push(scope.as_str().to_owned().into());
        }
        if let Some(kind) = &filter.kind {
            sql.push_str(" AND o.type = ?");
            args.push(kind.clone().into());
        }
        sql.push_str(if filter.deleted {
            " ORDER BY o.deleted_at DESC, o.id DESC LIMIT ? OFFSET ?"
        } else {
            " ORDER BY o.created_at DESC, o.id DESC LIMIT ? OFFSET ?"
        });
        // `as i64` would wrap a huge offset to a negative one, which SQLite reads as 0: the
        // first page instead of an empty one.
        args.push(i64::try_from(filter.limit).unwrap_or(i64::MAX).into());
        args.push(i64::try_from(filter.offset).unwrap_or(i64::MAX).into());
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args), Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// A live (not deleted) memory, read on `conn` (inside a write: in its transaction).
fn live(conn: &Connection, id: i64) -> Result<Observation> {
    conn.query_row(
        &format!("SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE o.id = ?1 AND o.deleted_at IS NULL"),
        [id],
        Observation::from_row,
    )
    .optional()?
    .ok_or_else(|| CairnError::observation_not_found(id))
}

/// The memory a save landed on.
enum Inserted {
    New { id: i64, sync_id: String },
    Existing(i64),
}

impl Inserted {
    fn id(&self) -> i64 {
        match self {
            Inserted::New { id, .. } | Inserted::Existing(id) => *id,
        }
    }
}

struct SaveContext<'a> {
    project: &'a str,
    session_id: &'a str,
    now: &'a str,
}

/// The fields of `new`, already redacted (`redacted`: whether anything was), checked and
/// normalised.
fn prepare(new: &NewObservation, redacted: bool) -> Result<Prepared> {
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

/// The project a save lands in: the explicit one, else the session's, else none. An explicit
/// project that contradicts an existing session's project is refused rather than guessed.
fn resolve_project(tx: &Connection, session_id: Option<&str>, explicit: Option<&str>) -> Result<String> {
    let session_project: Option<String> = match session_id {
        Some(id) => {
            tx.prepare_cached("SELECT project FROM sessions WHERE id = ?1")?.query_row([id], |r| r.get(0)).optional()?
        }
        None => None,
    };
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

/// On the first memory of a project, name an existing project it probably meant (engram #171:
/// one repo ended up under five spellings).
fn similar_project_warning(tx: &Connection, project: &str) -> Result<Option<String>> {
    if project.is_empty() {
        return Ok(None);
    }
    let exists: bool = tx
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM observations WHERE project = ?1 AND deleted_at IS NULL)")?
        .query_row([project], |r| r.get(0))?;
    if exists {
        return Ok(None);
    }
    let mut stmt = tx.prepare_cached(
        "SELECT project, count(*) FROM observations WHERE deleted_at IS NULL AND project != '' GROUP BY project",
    )?;
    let candidates = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let best = candidates
        .into_iter()
        .filter_map(|(name, count)| similarity_rank(project, &name).map(|rank| (rank, name, count)))
        .min_by(|a, b| a.0.cmp(&b.0).then(b.2.cmp(&a.2)));
    Ok(best.map(|(_, name, count)| {
        format!(
            "project {project:?} has no memories yet; a similar project exists: {name:?} ({count} memories). \
             If you meant it, save with project {name:?}"
        )
    }))
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

fn find_topic(tx: &Connection, p: &Prepared, project: &str) -> Result<Option<i64>> {
    let Some(key) = &p.topic_key else { return Ok(None) };
    Ok(tx
        .prepare_cached(
            "SELECT id FROM observations
             WHERE topic_key = ?1 AND project = ?2 AND scope = ?3 AND deleted_at IS NULL
             ORDER BY updated_at DESC, id DESC LIMIT 1",
        )?
        .query_row(params![key, project, p.scope.as_str()], |r| r.get(0))
        .optional()?)
}

/// A topic save with the very same title and content is a duplicate, not a new revision.
fn revise_or_count(tx: &Connection, id: i64, p: &Prepared, now: &str) -> Result<SaveAction> {
    let current = tx
        .prepare_cached(&format!("SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE o.id = ?1"))?
        .query_row([id], Observation::from_row)?;
    if normalized_hash(&current.content) == p.hash && current.title == p.title && current.kind == p.kind {
        bump_duplicate(tx, id, now)?;
        return Ok(SaveAction::Duplicate);
    }
    keep_revision(tx, &current, now)?;
    tx.prepare_cached(
        "UPDATE observations SET type = ?2, title = ?3, content = ?4, tool_name = ?5, normalized_hash = ?6,
            revision_count = revision_count + 1, last_seen_at = ?7, updated_at = ?7
         WHERE id = ?1",
    )?
    .execute(params![id, p.kind, p.title, p.content, p.tool_name, p.hash, now])?;
    Ok(SaveAction::Revised)
}

fn keep_revision(tx: &Connection, current: &Observation, now: &str) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO observation_revisions (observation_id, revision, type, title, content, replaced_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![current.id, current.revision_count, current.kind, current.title, current.content, now])?;
    Ok(())
}

fn find_duplicate(tx: &Connection, p: &Prepared, project: &str, window_start: &str) -> Result<Option<i64>> {
    Ok(tx
        .prepare_cached(
            "SELECT id FROM observations
             WHERE normalized_hash = ?1 AND project = ?2 AND scope = ?3 AND type = ?4 AND title = ?5
               AND created_at >= ?6 AND deleted_at IS NULL
             ORDER BY created_at DESC, id DESC LIMIT 1",
        )?
        .query_row(params![p.hash, project, p.scope.as_str(), p.kind, p.title, window_start], |r| r.get(0))
        .optional()?)
}

fn bump_duplicate(tx: &Connection, id: i64, now: &str) -> Result<()> {
    tx.prepare_cached(
        "UPDATE observations SET duplicate_count = duplicate_count + 1, last_seen_at = ?2, updated_at = ?2 WHERE id = ?1",
    )?
    .execute(params![id, now])?;
    Ok(())
}

fn insert(
    tx: &Connection,
    p: &Prepared,
    ctx: &SaveContext<'_>,
    pinned: bool,
    review_after: Option<&str>,
) -> Result<Inserted> {
    let sync_id = new_sync_id();
    // Cached: preparing this INSERT also compiles its triggers (FTS, change log, session
    // activity), which cost more than the insert itself.
    tx.prepare_cached(
        "INSERT INTO observations (sync_id, session_id, type, title, content, tool_name, project, scope,
            topic_key, normalized_hash, pinned, last_seen_at, created_at, updated_at, review_after)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?12, ?13)",
    )?
    .execute(params![
        sync_id,
        ctx.session_id,
        p.kind,
        p.title,
        p.content,
        p.tool_name,
        ctx.project,
        p.scope.as_str(),
        p.topic_key,
        p.hash,
        pinned,
        ctx.now,
        review_after
    ])?;
    Ok(Inserted::New { id: tx.last_insert_rowid(), sync_id })
}

/// Decisions, policies and preferences age: after this they should be reviewed (engram §4.7).
fn review_after_for(kind: &str, now: time::OffsetDateTime) -> Option<String> {
    let days = match kind {
        "decision" => 182,
        "policy" => 365,
        "preference" => 91,
        _ => return None,
    };
    Some(format_ts(now + Duration::days(days)))
}

fn apply_patch(current: &Observation, patch: &ObservationPatch) -> Result<Observation> {
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
