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
mod provenance;
pub mod remote;
mod status;
mod version;

use serde::{Deserialize, Serialize};

pub use apply::{ApplyReport, DEFERRED_TRIES};
pub use status::{SyncStatus, TargetStatus};
pub use version::Version;

pub use crate::store::sync_journal::Mutation;

use crate::error::{CairnError, Result};
use crate::store::{Store, sync_journal};
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
        let snapshot = self.write(|tx| sync_journal::enrol_with_snapshot(tx, &project, &now))?;
        Ok(Enrolment { project, first_time: snapshot.is_some(), snapshot_entries: snapshot.unwrap_or(0) })
    }

    /// Journal entries `target_key` has not acknowledged, oldest first: of one project, or of
    /// every project that syncs. A target key `name#project` never receives what was applied
    /// from `name` (a chunk folder or a hub does not get its own mutations back).
    pub fn sync_pending(&self, target_key: &str, project: Option<&str>, limit: usize) -> Result<Vec<Mutation>> {
        let after = self.sync_exported_seq(target_key)?;
        let project = project.map(|p| normalize_project(p).0);
        let mut pending = self.sync_journal_after(after, target_origin(target_key), project.as_deref(), limit)?;
        for mutation in &mut pending {
            // What is pending goes out (a git chunk, a hub push): redacted whatever the
            // save setting, and whatever was stored before redaction.
            mutation.redact_fields(Redaction::OUTBOUND);
        }
        Ok(pending)
    }

    /// How many journal entries `target_key` has not acknowledged.
    pub fn sync_pending_count(&self, target_key: &str, project: Option<&str>) -> Result<i64> {
        let after = self.sync_exported_seq(target_key)?;
        let project = project.map(|p| normalize_project(p).0);
        self.sync_journal_count_after(after, target_origin(target_key), project.as_deref())
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
            sync_journal::set_applying(tx, Some(source))?;
            let report = apply::apply_all(tx, source, &mutations, &now)?;
            then(tx)?;
            sync_journal::set_applying(tx, None)?;
            Ok(report)
        })
    }
}

/// What a target never receives: mutations applied from the part of its key before `#`.
fn target_origin(target_key: &str) -> &str {
    target_key.split('#').next().unwrap_or(target_key)
}
