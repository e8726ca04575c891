//! The SQL of applying other stores' mutations (`crate::sync::apply` holds the rules: who wins,
//! what is kept, what waits): sessions filled in, memories' versions and tombstones, the
//! store's clock, revisions kept, contested relations, relations that wait (a relation that
//! travelled is written by `store::transfer::write_relation`, which imports share).

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;
use crate::store::transfer::CleanSession;

/// Insert a session that travelled, unless one has its id; rows inserted.
pub(crate) fn insert_session_if_new(tx: &Connection, s: &CleanSession<'_>) -> Result<usize> {
    Ok(tx.execute(
        "INSERT OR IGNORE INTO sessions (id, project, directory, agent, parent_id, started_at, ended_at, summary)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![s.id, s.project, s.directory, s.agent, s.parent_id, s.started_at, s.ended_at, s.summary],
    )?)
}

/// Fill in what the stored session lacks (its project, its directory when empty or a stub's
/// `stub_directory`, its end, its summary) from `s`, only when something is missing: a no-op
/// update would be journaled again. Rows changed.
pub(crate) fn fill_session(tx: &Connection, s: &CleanSession<'_>, stub_directory: &str) -> Result<usize> {
    Ok(tx.execute(
        "UPDATE sessions SET
            project = CASE WHEN project = '' THEN ?2 ELSE project END,
            directory = CASE WHEN directory IN ('', ?6) AND ?3 != '' THEN ?3 ELSE directory END,
            ended_at = coalesce(ended_at, ?4),
            summary = coalesce(summary, ?5)
         WHERE id = ?1 AND ((project = '' AND ?2 != '') OR (directory IN ('', ?6) AND ?3 NOT IN ('', directory))
            OR (ended_at IS NULL AND ?4 IS NOT NULL) OR (summary IS NULL AND ?5 IS NOT NULL))",
        params![s.id, s.project, s.directory, s.ended_at, s.summary, stub_directory],
    )?)
}

/// Create session `id` of `project` as a stub in `directory`, when it does not exist.
pub(crate) fn ensure_recovered_session(tx: &Connection, id: &str, project: &str, directory: &str) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO sessions (id, project, directory, started_at) VALUES (?1, ?2, ?3, '1970-01-01T00:00:00.000Z')",
    )?
    .execute(params![id, project, directory])?;
    Ok(())
}

/// Delete the prompt with `sync_id`; rows deleted.
pub(crate) fn delete_prompt(tx: &Connection, sync_id: &str) -> Result<usize> {
    Ok(tx.execute("DELETE FROM prompts WHERE sync_id = ?1", [sync_id])?)
}

/// A memory as stored, for comparing with an incoming version.
pub(crate) struct LocalMemory {
    pub id: i64,
    pub hlc: Option<String>,
    pub updated_at: String,
    pub kind: String,
    pub title: String,
    pub content: String,
    pub deleted: bool,
}

/// The memory with `sync_id`, deleted or not.
pub(crate) fn local_memory(tx: &Connection, sync_id: &str) -> Result<Option<LocalMemory>> {
    Ok(tx
        .prepare_cached(
            "SELECT id, hlc, updated_at, type, title, content, deleted_at IS NOT NULL FROM observations WHERE sync_id = ?1",
        )?
        .query_row([sync_id], |r| {
            Ok(LocalMemory {
                id: r.get(0)?,
                hlc: r.get(1)?,
                updated_at: r.get(2)?,
                kind: r.get(3)?,
                title: r.get(4)?,
                content: r.get(5)?,
                deleted: r.get(6)?,
            })
        })
        .optional()?)
}

/// The stamp of the hard delete of `sync_id`, if it was hard deleted.
pub(crate) fn tombstone_stamp(tx: &Connection, sync_id: &str) -> Result<Option<String>> {
    Ok(tx
        .prepare_cached("SELECT hlc FROM sync_tombstones WHERE entity_key = ?1")?
        .query_row([sync_id], |r| r.get(0))
        .optional()?)
}

/// Move this store's clock past a stamp's wall time and counter.
pub(crate) fn observe_clock(tx: &Connection, wall_ms: i64, counter: i64) -> Result<()> {
    tx.prepare_cached(
        "UPDATE sync_clock SET
            counter = CASE WHEN ?1 > wall_ms THEN ?2 WHEN ?1 = wall_ms THEN max(counter, ?2) ELSE counter END,
            wall_ms = max(wall_ms, ?1)",
    )?
    .execute(params![wall_ms, counter])?;
    Ok(())
}

/// Record (or move) `sync_id`'s tombstone: its delete's stamp and time.
pub(crate) fn write_tombstone(tx: &Connection, sync_id: &str, stamp: &str, deleted_at: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO sync_tombstones (entity_key, hlc, deleted_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (entity_key) DO UPDATE SET hlc = excluded.hlc, deleted_at = excluded.deleted_at",
        params![sync_id, stamp, deleted_at],
    )?;
    Ok(())
}

/// Mark memory `id` deleted at `when`, with the delete's stamp.
pub(crate) fn soft_delete_memory(tx: &Connection, id: i64, when: &str, hlc: Option<&str>) -> Result<()> {
    tx.execute(
        "UPDATE observations SET deleted_at = ?2, updated_at = ?2, hlc = ?3 WHERE id = ?1",
        params![id, when, hlc],
    )?;
    Ok(())
}

/// Delete memory `id`'s row.
pub(crate) fn hard_delete_memory(tx: &Connection, id: i64) -> Result<()> {
    tx.execute("DELETE FROM observations WHERE id = ?1", [id])?;
    Ok(())
}

/// Mark the relations of the memory with `sync_id` orphaned (not already so).
pub(crate) fn orphan_relations(tx: &Connection, sync_id: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE relations SET judgment_status = 'orphaned', updated_at = ?2
         WHERE (source_id = ?1 OR target_id = ?1) AND judgment_status != 'orphaned'",
        params![sync_id, now],
    )?;
    Ok(())
}

/// Whether this text is already one of memory `id`'s revisions.
pub(crate) fn revision_exists(tx: &Connection, id: i64, kind: &str, title: &str, content: &str) -> Result<bool> {
    Ok(tx
        .prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM observation_revisions
             WHERE observation_id = ?1 AND type = ?2 AND title = ?3 AND content = ?4)",
        )?
        .query_row(params![id, kind, title, content], |x| x.get(0))?)
}

/// Keep a text as memory `id`'s newest revision, unless it is one already.
pub(crate) fn keep_revision(tx: &Connection, id: i64, kind: &str, title: &str, content: &str, now: &str) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO observation_revisions (observation_id, revision, type, title, content, replaced_at)
         SELECT ?1, coalesce((SELECT max(revision) FROM observation_revisions WHERE observation_id = ?1), 0) + 1,
            ?2, ?3, ?4, ?5
         WHERE NOT EXISTS (SELECT 1 FROM observation_revisions
            WHERE observation_id = ?1 AND type = ?2 AND title = ?3 AND content = ?4)",
    )?
    .execute(params![id, kind, title, content, now])?;
    Ok(())
}

/// A pending relation `relation_id` of the memory with `sync_id` with itself, marked by sync
/// (once: an existing one stays).
pub(crate) fn insert_contested(
    tx: &Connection,
    relation_id: &str,
    sync_id: &str,
    reason: &str,
    now: &str,
) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR IGNORE INTO relations (sync_id, source_id, target_id, relation, reason, judgment_status,
            marked_by_actor, marked_by_kind, created_at, updated_at)
         VALUES (?1, ?2, ?2, 'pending', ?3, 'pending', 'cairn sync', 'sync', ?4, ?4)",
    )?
    .execute(params![relation_id, sync_id, reason, now])?;
    Ok(())
}

/// Whether a memory (deleted or not) has `sync_id`.
pub(crate) fn memory_exists(tx: &Connection, sync_id: &str) -> Result<bool> {
    Ok(tx
        .prepare_cached("SELECT EXISTS(SELECT 1 FROM observations WHERE sync_id = ?1)")?
        .query_row([sync_id], |r| r.get(0))?)
}

/// A relation's version as stored: its stamp, and what decides between equal stamps.
pub(crate) struct RelationVersion {
    pub hlc: Option<String>,
    pub updated_at: String,
    pub relation: String,
    pub status: String,
}

/// The stored relation `sync_id`'s version.
pub(crate) fn relation_version(tx: &Connection, sync_id: &str) -> Result<Option<RelationVersion>> {
    Ok(tx
        .prepare_cached("SELECT hlc, updated_at, relation, judgment_status FROM relations WHERE sync_id = ?1")?
        .query_row([sync_id], |x| {
            Ok(RelationVersion { hlc: x.get(0)?, updated_at: x.get(1)?, relation: x.get(2)?, status: x.get(3)? })
        })
        .optional()?)
}

/// Keep relation `sync_id` (its `payload`, JSON) waiting for its memories, its tries reset.
pub(crate) fn defer_relation(tx: &Connection, source: &str, sync_id: &str, payload: &str, now: &str) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO sync_deferred (sync_id, entity, payload, source, created_at, updated_at)
         VALUES (?1, 'relation', ?2, ?3, ?4, ?4)
         ON CONFLICT (sync_id) DO UPDATE SET payload = excluded.payload, source = excluded.source,
            status = 'pending', attempts = 0, updated_at = excluded.updated_at",
    )?
    .execute(params![sync_id, payload, source, now])?;
    Ok(())
}

/// The relations waiting (`(sync_id, payload)`), oldest first.
pub(crate) fn pending_deferred(tx: &Connection) -> Result<Vec<(String, String)>> {
    Ok(tx
        .prepare_cached("SELECT sync_id, payload FROM sync_deferred WHERE status = 'pending' ORDER BY created_at")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?)
}

/// Give up on waiting relation `sync_id`, for `why`.
pub(crate) fn bury_deferred(tx: &Connection, sync_id: &str, why: &str, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE sync_deferred SET status = 'dead', last_error = ?3, updated_at = ?2 WHERE sync_id = ?1",
        params![sync_id, now, why],
    )?;
    Ok(())
}

/// Forget waiting relation `sync_id` (applied).
pub(crate) fn drop_deferred(tx: &Connection, sync_id: &str) -> Result<()> {
    tx.execute("DELETE FROM sync_deferred WHERE sync_id = ?1", [sync_id])?;
    Ok(())
}

/// Count a failed try of waiting relation `sync_id`, for `why`: given up (`dead`) at `max_tries`.
pub(crate) fn count_deferred_try(tx: &Connection, sync_id: &str, why: &str, max_tries: i64, now: &str) -> Result<()> {
    tx.execute(
        "UPDATE sync_deferred SET attempts = attempts + 1,
            status = CASE WHEN attempts + 1 >= ?3 THEN 'dead' ELSE 'pending' END,
            last_error = ?4, updated_at = ?2
         WHERE sync_id = ?1",
        params![sync_id, now, max_tries, why],
    )?;
    Ok(())
}
