//! The SQL of export and import (`crate::transfer` holds the records and their rules): every
//! row of a project read out, imported rows merged in by sync id; sync applies other stores'
//! memories with the same whole-row statements.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;
use crate::model::{
    OBSERVATION_COLUMNS, Observation, PROMPT_COLUMNS, Prompt, RELATION_COLUMNS, Relation, SESSION_COLUMNS, Session,
};
use crate::store::Store;
use crate::text::{Scope, normalized_hash};

/// Every row of an export, as stored.
pub(crate) struct ExportRows {
    pub sessions: Vec<Session>,
    pub observations: Vec<Observation>,
    pub prompts: Vec<Prompt>,
    pub relations: Vec<Relation>,
}

impl Store {
    /// Every session, memory (deleted ones too), prompt and relation; with a (normalized)
    /// project, that project's, and the relations that touch one of its memories.
    pub(crate) fn export_rows(&self, project: Option<&str>) -> Result<ExportRows> {
        Ok(ExportRows {
            sessions: self.collect(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions s WHERE ?1 IS NULL OR s.project = ?1 ORDER BY s.started_at, s.id"
                ),
                project,
                Session::from_row,
            )?,
            observations: self.collect(
                &format!(
                    "SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE ?1 IS NULL OR o.project = ?1 ORDER BY o.id"
                ),
                project,
                Observation::from_row,
            )?,
            prompts: self.collect(
                &format!("SELECT {PROMPT_COLUMNS} FROM prompts p WHERE ?1 IS NULL OR p.project = ?1 ORDER BY p.id"),
                project,
                Prompt::from_row,
            )?,
            relations: self.collect(
                &format!(
                    "SELECT {RELATION_COLUMNS} FROM relations r WHERE ?1 IS NULL OR EXISTS (
                        SELECT 1 FROM observations o WHERE o.project = ?1 AND o.sync_id IN (r.source_id, r.target_id))
                     ORDER BY r.id"
                ),
                project,
                Relation::from_row,
            )?,
        })
    }

    fn collect<T>(
        &self,
        sql: &str,
        project: Option<&str>,
        map: fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let mut stmt = self.conn().prepare(sql)?;
        let rows = stmt.query_map([project], map)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// An imported session, cleaned.
pub(crate) struct CleanSession<'a> {
    pub id: &'a str,
    pub project: String,
    pub directory: String,
    pub agent: String,
    pub parent_id: Option<&'a str>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub summary: Option<String>,
}

/// Whether session `id` exists.
pub(crate) fn session_exists(tx: &Connection, id: &str) -> Result<bool> {
    Ok(tx.query_row("SELECT EXISTS(SELECT 1 FROM sessions WHERE id = ?1)", [id], |r| r.get(0))?)
}

/// Insert an imported session, or fill in what the stored one lacks (nothing it has changes).
pub(crate) fn merge_session(tx: &Connection, s: &CleanSession<'_>) -> Result<()> {
    tx.execute(
        "INSERT INTO sessions (id, project, directory, agent, parent_id, started_at, ended_at, summary)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(id) DO UPDATE SET
            project   = CASE WHEN sessions.project = '' THEN excluded.project ELSE sessions.project END,
            directory = CASE WHEN sessions.directory = '' THEN excluded.directory ELSE sessions.directory END,
            agent     = CASE WHEN sessions.agent = '' THEN excluded.agent ELSE sessions.agent END,
            parent_id = COALESCE(sessions.parent_id, excluded.parent_id),
            ended_at  = COALESCE(sessions.ended_at, excluded.ended_at),
            summary   = COALESCE(sessions.summary, excluded.summary)",
        params![s.id, s.project, s.directory, s.agent, s.parent_id, s.started_at, s.ended_at, s.summary],
    )?;
    Ok(())
}

/// Create session `id` of `project` as a stub (no directory) when it does not exist.
pub(crate) fn ensure_stub_session(tx: &Connection, id: &str, project: &str, now: &str) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO sessions (id, project, directory, started_at) VALUES (?1, ?2, '', ?3)",
        params![id, project, now],
    )?;
    Ok(())
}

/// The local id and `updated_at` of the memory with `sync_id`, deleted or not.
pub(crate) fn observation_version(tx: &Connection, sync_id: &str) -> Result<Option<(i64, String)>> {
    Ok(tx
        .query_row("SELECT id, updated_at FROM observations WHERE sync_id = ?1", [sync_id], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .optional()?)
}

/// Whether a memory has local id `id`.
pub(crate) fn observation_id_taken(tx: &Connection, id: i64) -> Result<bool> {
    Ok(tx.query_row("SELECT EXISTS(SELECT 1 FROM observations WHERE id = ?1)", [id], |x| x.get::<_, bool>(0))?)
}

/// An import row after the same rules a save applies (redaction, limits, normalisation).
pub(crate) struct CleanObservation {
    pub(crate) sync_id: String,
    pub(crate) session_id: String,
    pub(crate) kind: String,
    pub(crate) title: String,
    pub(crate) content: String,
    pub(crate) tool_name: Option<String>,
    pub(crate) project: String,
    pub(crate) scope: Scope,
    pub(crate) topic_key: Option<String>,
    pub(crate) revision_count: i64,
    pub(crate) duplicate_count: i64,
    pub(crate) pinned: bool,
    pub(crate) last_seen_at: Option<String>,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
    pub(crate) deleted_at: Option<String>,
    pub(crate) review_after: Option<String>,
}

/// Insert a memory as given: under `id` (a free one, else the next), with a version stamp
/// when it came from another store (`None`: the journal trigger stamps a local write). The
/// one statement for whole rows that imports and sync share.
pub(crate) fn write_new_observation(
    tx: &Connection,
    id: Option<i64>,
    r: &CleanObservation,
    hlc: Option<&str>,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO observations (id, sync_id, session_id, type, title, content, tool_name, project, scope,
            topic_key, normalized_hash, revision_count, duplicate_count, pinned, last_seen_at, created_at,
            updated_at, deleted_at, review_after, hlc)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
    )?
    .execute(params![
        id,
        r.sync_id,
        r.session_id,
        r.kind,
        r.title,
        r.content,
        r.tool_name,
        r.project,
        r.scope.as_str(),
        r.topic_key,
        normalized_hash(&r.content),
        r.revision_count,
        r.duplicate_count,
        r.pinned,
        r.last_seen_at,
        r.created_at,
        r.updated_at,
        r.deleted_at,
        r.review_after,
        hlc
    ])?;
    Ok(())
}

/// Where the version stamp of an overwritten memory comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stamp<'a> {
    /// A local write (an import): the row keeps its session, and the journal trigger stamps it.
    Local,
    /// Another store's version, applied as it is (its session, its stamp, or none).
    Remote(Option<&'a str>),
}

/// Overwrite a memory's fields with `r` in one statement, so the journal trigger fires once.
/// Counts only grow.
pub(crate) fn overwrite_observation(tx: &Connection, id: i64, r: &CleanObservation, stamp: Stamp<'_>) -> Result<()> {
    let (remote, hlc) = match stamp {
        Stamp::Local => (false, None),
        Stamp::Remote(hlc) => (true, hlc),
    };
    tx.prepare_cached(
        "UPDATE observations SET session_id = CASE WHEN ?19 THEN ?2 ELSE session_id END, type = ?3, title = ?4,
            content = ?5, tool_name = ?6, project = ?7, scope = ?8, topic_key = ?9, normalized_hash = ?10,
            revision_count = max(revision_count, ?11), duplicate_count = max(duplicate_count, ?12), pinned = ?13,
            last_seen_at = ?14, updated_at = ?15, deleted_at = ?16, review_after = ?17,
            hlc = CASE WHEN ?19 THEN ?18 ELSE hlc END
         WHERE id = ?1",
    )?
    .execute(params![
        id,
        r.session_id,
        r.kind,
        r.title,
        r.content,
        r.tool_name,
        r.project,
        r.scope.as_str(),
        r.topic_key,
        normalized_hash(&r.content),
        r.revision_count,
        r.duplicate_count,
        r.pinned,
        r.last_seen_at,
        r.updated_at,
        r.deleted_at,
        r.review_after,
        hlc,
        remote
    ])?;
    Ok(())
}

/// Whether a prompt has `sync_id`.
pub(crate) fn prompt_exists(tx: &Connection, sync_id: &str) -> Result<bool> {
    Ok(tx.query_row("SELECT EXISTS(SELECT 1 FROM prompts WHERE sync_id = ?1)", [sync_id], |r| r.get(0))?)
}

/// Whether a prompt has local id `id`.
pub(crate) fn prompt_id_taken(tx: &Connection, id: i64) -> Result<bool> {
    Ok(tx.query_row("SELECT EXISTS(SELECT 1 FROM prompts WHERE id = ?1)", [id], |r| r.get::<_, bool>(0))?)
}

/// Insert an imported prompt, under `id` (a free one, else the next).
pub(crate) fn insert_prompt(
    tx: &Connection,
    id: Option<i64>,
    sync_id: &str,
    session_id: &str,
    content: &str,
    project: &str,
    created_at: &str,
) -> Result<()> {
    tx.execute(
        "INSERT INTO prompts (id, sync_id, session_id, content, project, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![id, sync_id, session_id, content, project, created_at],
    )?;
    Ok(())
}

/// An imported relation, cleaned.
pub(crate) struct CleanRelation<'a> {
    pub sync_id: &'a str,
    pub source_id: &'a str,
    pub target_id: &'a str,
    pub relation: &'a str,
    pub reason: Option<String>,
    pub evidence: Option<String>,
    pub confidence: Option<f64>,
    pub judgment_status: &'a str,
    pub marked_by_actor: Option<String>,
    pub marked_by_kind: Option<String>,
    pub marked_by_model: Option<String>,
    pub session_id: Option<&'a str>,
    pub created_at: &'a str,
    pub updated_at: &'a str,
}

/// `updated_at` of the relation with `sync_id`, if there is one.
pub(crate) fn relation_updated_at(tx: &Connection, sync_id: &str) -> Result<Option<String>> {
    Ok(tx.query_row("SELECT updated_at FROM relations WHERE sync_id = ?1", [sync_id], |x| x.get(0)).optional()?)
}

/// Insert a relation, or replace the stored one, in one statement (imports and sync share
/// it, as they share [`overwrite_observation`]). Its creation time stays. A local write (an
/// import) replaces the verdict only: the stored relation keeps its ends, and the journal
/// trigger stamps it. Another store's version replaces the row whole, its ends too, with its
/// stamp.
pub(crate) fn write_relation(tx: &Connection, r: &CleanRelation<'_>, stamp: Stamp<'_>) -> Result<()> {
    let (remote, hlc) = match stamp {
        Stamp::Local => (false, None),
        Stamp::Remote(hlc) => (true, hlc),
    };
    tx.prepare_cached(
        "INSERT INTO relations (sync_id, source_id, target_id, relation, reason, evidence, confidence,
            judgment_status, marked_by_actor, marked_by_kind, marked_by_model, session_id, created_at, updated_at, hlc)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
         ON CONFLICT(sync_id) DO UPDATE SET
            source_id = CASE WHEN ?16 THEN excluded.source_id ELSE relations.source_id END,
            target_id = CASE WHEN ?16 THEN excluded.target_id ELSE relations.target_id END,
            relation = excluded.relation, reason = excluded.reason,
            evidence = excluded.evidence, confidence = excluded.confidence,
            judgment_status = excluded.judgment_status, marked_by_actor = excluded.marked_by_actor,
            marked_by_kind = excluded.marked_by_kind, marked_by_model = excluded.marked_by_model,
            session_id = excluded.session_id, updated_at = excluded.updated_at,
            hlc = CASE WHEN ?16 THEN excluded.hlc ELSE relations.hlc END",
    )?
    .execute(params![
        r.sync_id,
        r.source_id,
        r.target_id,
        r.relation,
        r.reason,
        r.evidence,
        r.confidence,
        r.judgment_status,
        r.marked_by_actor,
        r.marked_by_kind,
        r.marked_by_model,
        r.session_id,
        r.created_at,
        r.updated_at,
        hlc,
        remote
    ])?;
    Ok(())
}
