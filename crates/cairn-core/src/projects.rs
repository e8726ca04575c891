//! Project maintenance: rename one project into another (`POST /projects/migrate`, used by
//! plugins when detection changes a name) and merge several spellings into one.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use crate::error::{CairnError, Result};
use crate::store::Store;
use crate::text::normalize_project;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigrateOutcome {
    /// `migrated` or `skipped`.
    pub status: String,
    pub old_project: String,
    pub new_project: String,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub observations: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub sessions: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub prompts: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

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

#[cfg(test)]
mod tests {
    use crate::testutil::{obs, store_with_clock};

    #[test]
    fn migrate_and_merge() {
        let (mut s, _) = store_with_clock();
        s.save(&obs("old-name", "a", "b")).unwrap();
        s.save(&obs("Old_Name", "c", "d")).unwrap();
        let out = s.migrate_project("old-name", "new-name").unwrap();
        assert_eq!((out.status.as_str(), out.observations, out.sessions), ("migrated", 1, 1));
        let merged = s.merge_projects(&["old_name".into(), " ".into()], "new-name").unwrap();
        assert_eq!(merged.len(), 1);
        assert_eq!(s.stats().unwrap().projects, vec!["new-name"]);
        assert_eq!(s.migrate_project("ghost", "x").unwrap().status, "skipped");
    }
}
