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
            stats.embeddings_pending = self.store.count_pending_embeddings(model)?;
            stats.embeddings_stored = self.store.count_embeddings(model)?;
            stats.semantic_search = semantic.status();
        }
        Ok(stats)
    }
}
