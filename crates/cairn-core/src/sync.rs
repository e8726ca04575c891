//! Sync between stores: the change journal, the version order that makes every store converge
//! on the same winner, and git sync through chunks committed to the repository ([`git`]).
//!
//! The journal (`sync_journal`) is appended by triggers (migration `0009_sync_journal.sql`) in
//! the transaction of every write to a project that syncs (`sync_projects`). A target (a git
//! folder and project, a hub) reads it from its own high-water mark (`sync_targets`) with
//! [`Store::sync_pending`] and moves the mark with [`Store::sync_ack`] once the other side has
//! what it was sent. Mutations coming back are applied with [`Store::apply_mutations`]: last
//! writer wins by a hybrid logical clock stamp ([`Version`]), the losing text stays as a
//! revision, and edits that raced are flagged as a pending (contested) relation.

mod apply;
pub mod git;
pub mod remote;
mod status;
mod version;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use apply::{ApplyReport, DEFERRED_TRIES};
pub use status::{SyncStatus, TargetStatus};
pub use version::Version;

use crate::error::{CairnError, Result};
use crate::store::Store;
use crate::text::{RedactFields, Redaction, normalize_project};

/// Source recorded for the store's own writes.
pub const LOCAL_SOURCE: &str = "local";

/// Who wrote a chunk or a push: `$USER`, `$USERNAME`, the host name, else `unknown` (engram's
/// rule).
pub fn created_by() -> String {
    ["USER", "USERNAME", "HOSTNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}

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

/// What enrolling a project did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Enrolment {
    pub project: String,
    /// First enrolment: everything the project already holds was journaled as a snapshot.
    pub first_time: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub snapshot_entries: usize,
}

impl Store {
    /// Start journaling a project's writes. The first time, the project's sessions, memories
    /// (deleted ones too), prompts and relations are journaled as they are, so the first export
    /// carries everything. Enrolling again changes nothing.
    pub fn sync_enrol(&mut self, project: &str) -> Result<Enrolment> {
        let project = normalize_project(project).0;
        if project.is_empty() {
            return Err(CairnError::invalid("a project to sync needs a name").with_hint("pass --project NAME"));
        }
        let now = self.now();
        self.write(|tx| {
            let inserted = tx.execute(
                "INSERT OR IGNORE INTO sync_projects (project, enrolled_at) VALUES (?1, ?2)",
                params![project, now],
            )?;
            if inserted == 0 {
                return Ok(Enrolment { project: project.clone(), first_time: false, snapshot_entries: 0 });
            }
            let mut entries = 0;
            entries += tx.execute(
                "INSERT INTO sync_journal (project, entity, entity_key, op, payload, source, occurred_at)
                 SELECT project, 'session', id, 'upsert', payload, 'local', started_at
                 FROM sync_session_payloads WHERE project = ?1 ORDER BY started_at, id",
                [&project],
            )?;
            entries += tx.execute(
                "INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
                 SELECT project, 'observation', sync_id, op, payload, hlc, 'local', updated_at
                 FROM sync_observation_payloads WHERE project = ?1 ORDER BY id",
                [&project],
            )?;
            entries += tx.execute(
                "INSERT INTO sync_journal (project, entity, entity_key, op, payload, source, occurred_at)
                 SELECT project, 'prompt', sync_id, 'upsert', payload, 'local', created_at
                 FROM sync_prompt_payloads WHERE project = ?1 ORDER BY id",
                [&project],
            )?;
            entries += tx.execute(
                "INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
                 SELECT project, 'relation', sync_id, 'upsert', payload, hlc, 'local', updated_at
                 FROM sync_relation_payloads WHERE project = ?1 ORDER BY id",
                [&project],
            )?;
            Ok(Enrolment { project: project.clone(), first_time: true, snapshot_entries: entries })
        })
    }

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

    /// Journal entries `target_key` has not acknowledged, oldest first: of one project, or of
    /// every project that syncs. A target key `name#project` never receives what was applied
    /// from `name` (a chunk folder or a hub does not get its own mutations back).
    pub fn sync_pending(&self, target_key: &str, project: Option<&str>, limit: usize) -> Result<Vec<Mutation>> {
        let after = self.sync_exported_seq(target_key)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let origin = target_origin(target_key);
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
                .query_map(params![normalize_project(project).0, after, origin, limit], map)?
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
                let mut mutation = Mutation { seq, project, entity, entity_key, op, payload };
                // What is pending goes out (a git chunk, a hub push): redacted whatever the
                // save setting, and whatever was stored before redaction.
                mutation.redact_fields(Redaction::OUTBOUND);
                Ok(mutation)
            })
            .collect()
    }

    /// How many journal entries `target_key` has not acknowledged.
    pub fn sync_pending_count(&self, target_key: &str, project: Option<&str>) -> Result<i64> {
        let after = self.sync_exported_seq(target_key)?;
        let origin = target_origin(target_key);
        Ok(match project {
            Some(project) => self.conn().query_row(
                "SELECT count(*) FROM sync_journal WHERE project = ?1 AND seq > ?2 AND source != ?3",
                params![normalize_project(project).0, after, origin],
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

    /// Apply mutations from `source` (a chunk folder, a hub) in one transaction: see
    /// [`apply`](self) for the rules. Applying the same mutations again changes nothing.
    pub fn apply_mutations(&mut self, source: &str, mutations: &[Mutation]) -> Result<ApplyReport> {
        self.apply_mutations_then(source, mutations, |_| Ok(()))
    }

    /// [`Store::apply_mutations`], then `then` in the same transaction (a chunk records that it
    /// was applied, atomically with its rows).
    pub(crate) fn apply_mutations_then(
        &mut self,
        source: &str,
        mutations: &[Mutation],
        then: impl FnOnce(&rusqlite::Connection) -> Result<()>,
    ) -> Result<ApplyReport> {
        // Another store's records are stored by this store's rules, like a local save.
        let mutations: Vec<Mutation> = mutations.iter().map(|m| self.redacted(m).0).collect();
        let now = self.now();
        self.write(|tx| {
            tx.execute("UPDATE sync_clock SET applying = ?1", [source])?;
            let report = apply::apply_all(tx, source, &mutations, &now)?;
            then(tx)?;
            tx.execute("UPDATE sync_clock SET applying = NULL", [])?;
            Ok(report)
        })
    }
}

/// Move `target_key`'s mark to `seq` (never back) and clear its last error, in `tx`.
pub(crate) fn record_ack(tx: &rusqlite::Connection, target_key: &str, seq: i64, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO sync_targets (target_key, last_exported_seq, last_run_at, last_error) VALUES (?1, ?2, ?3, NULL)
         ON CONFLICT (target_key) DO UPDATE SET
            last_exported_seq = max(last_exported_seq, excluded.last_exported_seq),
            last_run_at = excluded.last_run_at, last_error = NULL",
        params![target_key, seq, now],
    )?;
    Ok(())
}

/// What a target never receives: mutations applied from the part of its key before `#`.
fn target_origin(target_key: &str) -> &str {
    target_key.split('#').next().unwrap_or(target_key)
}
