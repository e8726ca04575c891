//! The SQL of project maintenance (`crate::projects` holds the outcome type): rename one
//! project into another across memories, sessions and prompts, merge several into one.

use rusqlite::params;

use crate::error::{CairnError, Result};
use crate::projects::MigrateOutcome;
use crate::store::Store;
use crate::text::normalize_project;

impl Store {
    /// Move everything of `old` into `new`, in one transaction.
    pub fn migrate_project(&mut self, old: &str, new: &str) -> Result<MigrateOutcome> {
        let (old_n, new_n) = (normalize_project(old).0, normalize_project(new).0);
        if old_n.is_empty() || new_n.is_empty() {
            return Err(CairnError::empty(if old_n.is_empty() { "old_project" } else { "new_project" }));
        }
        let mut outcome =
            MigrateOutcome { old_project: old_n.clone(), new_project: new_n.clone(), ..Default::default() };
        if old_n == new_n {
            outcome.status = "skipped".into();
            outcome.reason = Some("the names are the same".into());
            return Ok(outcome);
        }
        let (o, s, p) = self.write(|tx| {
            Ok((
                tx.execute("UPDATE observations SET project = ?2 WHERE project = ?1", params![old_n, new_n])?,
                tx.execute("UPDATE sessions SET project = ?2 WHERE project = ?1", params![old_n, new_n])?,
                tx.execute("UPDATE prompts SET project = ?2 WHERE project = ?1", params![old_n, new_n])?,
            ))
        })?;
        outcome.observations = o;
        outcome.sessions = s;
        outcome.prompts = p;
        if o + s + p == 0 {
            outcome.status = "skipped".into();
            outcome.reason = Some(format!("project {old_n:?} has nothing to migrate"));
        } else {
            outcome.status = "migrated".into();
        }
        Ok(outcome)
    }

    /// Merge several projects into `canonical`.
    pub fn merge_projects(&mut self, sources: &[String], canonical: &str) -> Result<Vec<MigrateOutcome>> {
        if sources.iter().all(|s| s.trim().is_empty()) {
            return Err(CairnError::empty("from"));
        }
        sources.iter().filter(|s| !s.trim().is_empty()).map(|s| self.migrate_project(s, canonical)).collect()
    }
}
