//! The SQL of the read-only views (`crate::views` re-exports them): a timeline around a
//! memory, the store's statistics, memories per day. The view types live here so the store
//! names no module above it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::{OBSERVATION_COLUMNS, Observation, Session};
use crate::store::Store;
use crate::store::stats_counts::StatsCounts;

/// A memory in a timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TimelineEntry {
    #[serde(flatten)]
    pub observation: Observation,
    pub is_focus: bool,
}

/// What happened around a memory in its session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Timeline {
    pub focus: TimelineEntry,
    /// Oldest first.
    pub before: Vec<TimelineEntry>,
    /// Oldest first.
    pub after: Vec<TimelineEntry>,
    pub session_info: Option<Session>,
    /// Live memories in the session.
    pub total_in_range: i64,
}

/// Live memories created on one UTC day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DayCount {
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    pub memories: i64,
}

/// Live memories per day over the last days, for charts (`memories_per_day`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoriesPerDay {
    /// Every day of the window, oldest first, days without a memory included (count 0).
    pub days: Vec<DayCount>,
}

/// The longest window `memories_per_day` answers, in days.
pub const MAX_CHART_DAYS: usize = 366;

/// Counts per project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProjectStats {
    pub project: String,
    pub observations: i64,
    pub sessions: i64,
    pub prompts: i64,
    pub last_activity_at: Option<String>,
}

/// The shape of the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Stats {
    pub total_sessions: i64,
    /// Live memories.
    pub total_observations: i64,
    pub total_prompts: i64,
    pub total_relations: i64,
    pub deleted_observations: i64,
    pub pinned_observations: i64,
    /// Project names, most recently active first.
    pub projects: Vec<String>,
    pub by_project: Vec<ProjectStats>,
    pub by_type: BTreeMap<String, i64>,
    pub schema_version: i64,
    pub db_path: Option<String>,
    /// Database plus WAL, in bytes.
    pub db_bytes: u64,
    /// The model whose vectors semantic search uses (`None`: semantic search is off).
    pub embedding_model: Option<String>,
    /// Live memories still waiting for their vector (0 when semantic search is off: nothing
    /// is queued). Poll until 0 to know background indexing has finished.
    pub embeddings_pending: i64,
    /// Stored vectors of the current model.
    pub embeddings_stored: i64,
    /// `ready`, or why semantic search is not answering.
    pub semantic_search: String,
    /// Where the bytes of the data dir are (memories, vectors, indexes, archive, WAL, models).
    #[serde(default)]
    pub disk: crate::store::disk_use::DiskUse,
}

impl Store {
    /// The memories before and after `id` in its session.
    pub fn timeline(&self, id: i64, before: usize, after: usize) -> Result<Timeline> {
        let focus = self.get(id)?;
        let before_rows = self.session_neighbours(&focus, "<", "DESC", before)?;
        let after_rows = self.session_neighbours(&focus, ">", "ASC", after)?;
        let session_info = self.get_session(&focus.session_id).ok();
        let total_in_range = self
            .optional_i64(
                "SELECT count(*) FROM observations WHERE session_id = ?1 AND deleted_at IS NULL",
                [&focus.session_id],
            )?
            .unwrap_or(0);
        let entry = |observation, is_focus| TimelineEntry { observation, is_focus };
        Ok(Timeline {
            before: before_rows.into_iter().rev().map(|o| entry(o, false)).collect(),
            after: after_rows.into_iter().map(|o| entry(o, false)).collect(),
            focus: entry(focus, true),
            session_info,
            total_in_range,
        })
    }

    fn session_neighbours(&self, focus: &Observation, op: &str, order: &str, limit: usize) -> Result<Vec<Observation>> {
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.session_id = ?1 AND o.id {op} ?2 AND o.deleted_at IS NULL
             ORDER BY o.id {order} LIMIT ?3"
        ))?;
        let rows =
            stmt.query_map(rusqlite::params![focus.session_id, focus.id, limit as i64], Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The store's counts; the semantic fields say "off" (the model is the context's: see
    /// [`crate::Core::stats`]). The counts are the ones the triggers keep
    /// (`store::stats_counts`), never a count of the rows.
    pub fn stats(&self) -> Result<Stats> {
        let counts = self.kept_stats_figures()?;
        let by_project = self.project_stats(&counts)?;
        let by_type = counts.of_kind("type").map(|(kind, n)| (kind.to_owned(), n)).collect();
        Ok(Stats {
            total_sessions: counts.get("sessions", ""),
            total_observations: counts.get("memories", ""),
            total_prompts: counts.get("prompts", ""),
            total_relations: counts.get("relations", ""),
            deleted_observations: counts.get("deleted", ""),
            pinned_observations: counts.get("pinned", ""),
            projects: by_project.iter().map(|p| p.project.clone()).collect(),
            by_project,
            by_type,
            schema_version: self.schema_version()?,
            db_path: self.path().map(|p| p.display().to_string()),
            db_bytes: self.disk_bytes(),
            embedding_model: None,
            embeddings_pending: 0,
            embeddings_stored: 0,
            semantic_search: SEMANTIC_OFF.to_owned(),
            disk: self.disk_use()?,
        })
    }

    /// Projects with a live memory or a session, most recently active first.
    fn project_stats(&self, counts: &StatsCounts) -> Result<Vec<ProjectStats>> {
        let names: BTreeSet<&str> = counts
            .of_kind("project_memories")
            .chain(counts.of_kind("project_sessions"))
            .map(|(project, _)| project)
            .filter(|project| !project.is_empty())
            .collect();
        let mut projects = names
            .into_iter()
            .map(|project| {
                Ok(ProjectStats {
                    project: project.to_owned(),
                    observations: counts.get("project_memories", project),
                    sessions: counts.get("project_sessions", project),
                    prompts: counts.get("project_prompts", project),
                    last_activity_at: self.project_last_activity(project)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Newest first, then by name (`None` sorts last, as the empty activity did).
        projects.sort_by(|a, b| b.last_activity_at.cmp(&a.last_activity_at).then_with(|| a.project.cmp(&b.project)));
        Ok(projects)
    }

    /// Size of the database file and its WAL.
    pub fn disk_bytes(&self) -> u64 {
        let Some(path) = self.path() else { return 0 };
        let wal = path.with_extension("db-wal");
        [path.to_owned(), wal].iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
    }

    /// Live memories created per UTC day over the last `days` days (today included), every
    /// day listed so a chart needs no gap filling. One range of the per-day counts the
    /// triggers keep (`store::stats_counts`): at most a row a day.
    pub fn memories_per_day(&self, project: Option<&str>, days: usize) -> Result<MemoriesPerDay> {
        let days = days.clamp(1, MAX_CHART_DAYS);
        let today = self.clock().now().date();
        let first = today - time::Duration::days(days as i64 - 1);
        let counts = self.kept_memories_per_day(project, &first.to_string())?;
        let days = (0..days as i64)
            .map(|offset| {
                let day = (first + time::Duration::days(offset)).to_string();
                let memories = counts.get(&day).copied().unwrap_or(0);
                DayCount { day, memories }
            })
            .collect();
        Ok(MemoriesPerDay { days })
    }
}

/// What `stats` says of semantic search without a model.
const SEMANTIC_OFF: &str = "off (no embedding model: run `cairn model install`)";
