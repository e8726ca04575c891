//! Read-only views: timeline around a memory, store statistics. Their types and SQL are in
//! `crate::store::views`; the semantic half of the statistics is the context's.

use crate::error::Result;
pub use crate::store::views::{DayCount, MAX_CHART_DAYS, MemoriesPerDay, ProjectStats, Stats, Timeline, TimelineEntry};

impl crate::Core {
    /// The store's counts and the state of semantic search in this context.
    pub fn stats(&self) -> Result<Stats> {
        let mut stats = self.store.stats()?;
        stats.disk.warnings = crate::disk_caps::cap_warnings(&stats.disk, &self.settings.history);
        if let Some(semantic) = &self.semantic {
            let model = semantic.model_id();
            stats.embedding_model = Some(model.to_owned());
            // A memory holds one vector at most, and only while live (the vectors' triggers
            // drop it on a delete or an edit): what is not stored is pending.
            stats.embeddings_stored = self.store.kept_vector_count(model)?;
            stats.embeddings_pending = (stats.total_observations - stats.embeddings_stored).max(0);
            stats.semantic_search = semantic.status();
        }
        Ok(stats)
    }
}
