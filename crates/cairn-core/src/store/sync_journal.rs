//! The SQL of the sync journal (`crate::sync` holds the rules): enrolled projects, journal
//! entries, each target's high-water mark and last error, and the store's node id.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{CairnError, Result};
use crate::store::Store;

/// One change as it travels: engram's mutation wire entry `{project, entity, entity_key, op,
/// payload}` (with the journal's `seq` when read from a journal or a hub).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Mutation {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub seq: i64,
    #[serde(default)]
    pub project: String,
    /// `session`, `observation`, `prompt` or `relation`.
    pub entity: String,
    pub entity_key: String,
    /// `upsert` or `delete`.
    pub op: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub payload: Value,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One export target's row of `sync_targets`.
pub(crate) struct TargetRow {
    pub target_key: String,
    pub last_exported_seq: i64,
    pub last_run_at: Option<String>,
    pub last_error: Option<String>,
}

impl Store {
    /// Every project with a non-empty name that holds memories (what `--all` enrols).
    pub fn sync_known_projects(&self) -> Result<Vec<String>> {
        let mut stmt =
            self.conn().prepare("SELECT DISTINCT project FROM observations WHERE project != '' ORDER BY project")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The projects that sync.
    pub fn sync_projects(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn().prepare("SELECT project FROM sync_projects ORDER BY project")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Journal entries after `after`, oldest first, none applied from `origin`: of one
    /// (normalized) project, or of every project that syncs. Payloads as stored.
    pub(crate) fn sync_journal_after(
        &self,
        after: i64,
        origin: &str,
        project: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Mutation>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let map = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(i64, String, String, String, String, String)> {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))
        };
        let rows: Vec<_> = match project {
            Some(project) => self
                .conn()
                .prepare_cached(
                    "SELECT seq, project, entity, entity_key, op, payload FROM sync_journal
                     WHERE project = ?1 AND seq > ?2 AND source != ?3 ORDER BY seq LIMIT ?4",
                )?
                .query_map(params![project, after, origin, limit], map)?
                .collect::<rusqlite::Result<_>>()?,
            None => self
                .conn()
                .prepare_cached(
                    "SELECT seq, project, entity, entity_key, op, payload FROM sync_journal
                     WHERE seq > ?1 AND source != ?2 AND project IN (SELECT project FROM sync_projects)
                     ORDER BY seq LIMIT ?3",
                )?
                .query_map(params![after, origin, limit], map)?
                .collect::<rusqlite::Result<_>>()?,
        };
        rows.into_iter()
            .map(|(seq, project, entity, entity_key, op, payload)| {
                let payload = serde_json::from_str(&payload)
                    .map_err(|e| CairnError::internal(format!("journal entry {seq} is not JSON: {e}")))?;
                Ok(Mutation { seq, project, entity, entity_key, op, payload })
            })
            .collect()
    }

    /// How many journal entries after `after` were not applied from `origin`: of one
    /// (normalized) project, or of every project that syncs.
    pub(crate) fn sync_journal_count_after(&self, after: i64, origin: &str, project: Option<&str>) -> Result<i64> {
        Ok(match project {
            Some(project) => self.conn().query_row(
                "SELECT count(*) FROM sync_journal WHERE project = ?1 AND seq > ?2 AND source != ?3",
                params![project, after, origin],
                |r| r.get(0),
            )?,
            None => self.conn().query_row(
                "SELECT count(*) FROM sync_journal
                 WHERE seq > ?1 AND source != ?2 AND project IN (SELECT project FROM sync_projects)",
                params![after, origin],
                |r| r.get(0),
            )?,
        })
    }

    /// The last journal seq `target_key` acknowledged (0: none).
    pub fn sync_exported_seq(&self, target_key: &str) -> Result<i64> {
        Ok(self
            .conn()
            .query_row("SELECT last_exported_seq FROM sync_targets WHERE target_key = ?1", [target_key], |r| r.get(0))
            .optional()?
            .unwrap_or(0))
    }

    /// `target_key` has every entry up to `seq`: its mark only moves forward (a late or
    /// repeated acknowledgement changes nothing).
    pub fn sync_ack(&mut self, target_key: &str, seq: i64) -> Result<()> {
        let now = self.now();
        self.write(|tx| record_ack(tx, target_key, seq, &now))
    }

    /// Remember the last failure of a target (shown by the sync status).
    pub fn sync_record_error(&mut self, target_key: &str, error: &str) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO sync_targets (target_key, last_run_at, last_error) VALUES (?1, ?2, ?3)
                 ON CONFLICT (target_key) DO UPDATE SET last_run_at = excluded.last_run_at, last_error = excluded.last_error",
                params![target_key, now, error],
            )?;
            Ok(())
        })
    }

    /// This store's node id in version stamps (random, made with the schema).
    pub fn sync_node_id(&self) -> Result<String> {
        Ok(self.conn().query_row("SELECT node_id FROM sync_clock", [], |r| r.get(0))?)
    }

    /// Export target `target_key`'s row, if it ran once.
    pub(crate) fn sync_target_row(&self, target_key: &str) -> Result<Option<TargetRow>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT target_key, last_exported_seq, last_run_at, last_error FROM sync_targets WHERE target_key = ?1",
                [target_key],
                |r| {
                    Ok(TargetRow {
                        target_key: r.get(0)?,
                        last_exported_seq: r.get(1)?,
                        last_run_at: r.get(2)?,
                        last_error: r.get(3)?,
                    })
                },
            )
            .optional()?)
    }

    /// Every export target's row, by key.
    pub(crate) fn sync_target_rows(&self) -> Result<Vec<TargetRow>> {
        let mut stmt = self.conn().prepare(
            "SELECT target_key, last_exported_seq, last_run_at, last_error FROM sync_targets ORDER BY target_key",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(TargetRow {
                target_key: r.get(0)?,
                last_exported_seq: r.get(1)?,
                last_run_at: r.get(2)?,
                last_error: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// How many deferred relations have `status` (`pending`, `dead`).
    pub(crate) fn sync_deferred_count(&self, status: &str) -> Result<i64> {
        Ok(self.conn().query_row("SELECT count(*) FROM sync_deferred WHERE status = ?1", [status], |r| r.get(0))?)
    }

    /// The journal's last seq (0: empty).
    pub(crate) fn sync_journal_seq(&self) -> Result<i64> {
        Ok(self.conn().query_row("SELECT coalesce(max(seq), 0) FROM sync_journal", [], |r| r.get(0))?)
    }
}

/// Enrol `project` in `tx`; the first time, journal everything it already holds (sessions,
/// memories deleted ones too, prompts, relations) as a snapshot. `None` when it was enrolled
/// already, else how many entries the snapshot journaled.
pub(crate) fn enrol_with_snapshot(tx: &Connection, project: &str, now: &str) -> Result<Option<usize>> {
    let inserted = tx
        .execute("INSERT OR IGNORE INTO sync_projects (project, enrolled_at) VALUES (?1, ?2)", params![project, now])?;
    if inserted == 0 {
        return Ok(None);
    }
    let mut entries = 0;
    entries += tx.execute(
        "INSERT INTO sync_journal (project, entity, entity_key, op, payload, source, occurred_at)
         SELECT project, 'session', id, 'upsert', payload, 'local', started_at
         FROM sync_session_payloads WHERE project = ?1 ORDER BY started_at, id",
        [project],
    )?;
    entries += tx.execute(
        "INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
         SELECT project, 'observation', sync_id, op, payload, hlc, 'local', updated_at
         FROM sync_observation_payloads WHERE project = ?1 ORDER BY id",
        [project],
    )?;
    entries += tx.execute(
        "INSERT INTO sync_journal (project, entity, entity_key, op, payload, source, occurred_at)
         SELECT project, 'prompt', sync_id, 'upsert', payload, 'local', created_at
         FROM sync_prompt_payloads WHERE project = ?1 ORDER BY id",
        [project],
    )?;
    entries += tx.execute(
        "INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
         SELECT project, 'relation', sync_id, 'upsert', payload, hlc, 'local', updated_at
         FROM sync_relation_payloads WHERE project = ?1 ORDER BY id",
        [project],
    )?;
    Ok(Some(entries))
}

/// Mark (or with `None` unmark) the writes of `tx` as applied from `source`: the journal's
/// triggers record it, so the mutations never go back where they came from.
pub(crate) fn set_applying(tx: &Connection, source: Option<&str>) -> Result<()> {
    tx.execute("UPDATE sync_clock SET applying = ?1", [source])?;
    Ok(())
}

/// Move `target_key`'s mark to `seq` (never back) and clear its last error, in `tx`.
pub(crate) fn record_ack(tx: &Connection, target_key: &str, seq: i64, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO sync_targets (target_key, last_exported_seq, last_run_at, last_error) VALUES (?1, ?2, ?3, NULL)
         ON CONFLICT (target_key) DO UPDATE SET
            last_exported_seq = max(last_exported_seq, excluded.last_exported_seq),
            last_run_at = excluded.last_run_at, last_error = NULL",
        params![target_key, seq, now],
    )?;
    Ok(())
}
