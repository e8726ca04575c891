//! The SQL of memories (`crate::memory` holds the rules): save (topic revision, dedupe,
//! insert), partial update, soft and hard delete, pinning, restore, reads of live memories.

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use crate::clock::format_ts;
use crate::error::{CairnError, Result};
use crate::memory::{
    DEDUPE_WINDOW, ListFilter, NewObservation, ObservationPatch, Prepared, SaveAction, SaveOutcome, apply_patch,
    choose_project, prepare, review_after_for, similar_project_warning,
};
use crate::model::{OBSERVATION_COLUMNS, Observation, Revision, new_sync_id};
use crate::sessions::{NewSession, default_session_id, validate_session_id};
use crate::store::Store;
use crate::store::sessions::ensure_session;
use crate::text::{normalize_project, normalized_hash, require};

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
            let project = project_of_save(tx, new.session_id.as_deref(), explicit_project.as_deref())?;
            let session_id = new.session_id.clone().unwrap_or_else(|| default_session_id(&project));
            validate_session_id(&session_id)?;
            let session = NewSession {
                id: session_id.clone(),
                project: Some(project.clone()),
                directory: new.directory.clone(),
                ..NewSession::default()
            };
            ensure_session(tx, &session, &now)?;
            warnings.extend(similar_project(tx, &project)?);
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

/// The project a save lands in (`choose_project`), given the session's as stored.
fn project_of_save(tx: &Connection, session_id: Option<&str>, explicit: Option<&str>) -> Result<String> {
    let session_project: Option<String> = match session_id {
        Some(id) => {
            tx.prepare_cached("SELECT project FROM sessions WHERE id = ?1")?.query_row([id], |r| r.get(0)).optional()?
        }
        None => None,
    };
    choose_project(session_id, explicit, session_project)
}

/// On the first memory of a project, the warning naming a similar existing one, if any.
fn similar_project(tx: &Connection, project: &str) -> Result<Option<String>> {
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
    Ok(similar_project_warning(project, candidates))
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
    if p.repeats(&current) {
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

impl Store {
    /// Whether a live memory of `project` (any project: `None`) holds this text already
    /// (passive capture skips it).
    pub(crate) fn known_in_project(&self, project: Option<&str>, content: &str) -> Result<bool> {
        let hash = normalized_hash(content);
        let found = self
            .conn()
            .query_row(
                "SELECT 1 FROM observations WHERE normalized_hash = ?1 AND project = COALESCE(?2, project)
                 AND deleted_at IS NULL LIMIT 1",
                rusqlite::params![hash, project],
                |_| Ok(()),
            )
            .optional()?;
        Ok(found.is_some())
    }

    /// Live memories by id, in one query (hydrating a page of hits).
    pub(crate) fn get_many(
        &self,
        ids: impl Iterator<Item = i64>,
    ) -> Result<std::collections::HashMap<i64, Observation>> {
        let ids: Vec<i64> = ids.collect();
        if ids.is_empty() {
            return Ok(std::collections::HashMap::new());
        }
        let placeholders = vec!["?"; ids.len()].join(",");
        // Cached: a page of hits has the same length every time, so the same text.
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE o.deleted_at IS NULL AND o.id IN ({placeholders})"
        ))?;
        let rows = stmt.query_map(params_from_iter(ids), Observation::from_row)?;
        rows.map(|r| r.map(|o| (o.id, o)).map_err(Into::into)).collect()
    }
}
