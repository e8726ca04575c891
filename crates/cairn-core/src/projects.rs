//! Project maintenance: rename one project into another (`POST /projects/migrate`, used by
//! plugins when detection changes a name) and merge several spellings into one.

use serde::{Deserialize, Serialize};

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
