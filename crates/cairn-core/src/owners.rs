//! `Core`, the owners an operation runs against, handed in whole to
//! [`crate::ops::execute`]. The memory store and the history archive each have their own owner
//! here; neither holds the other.

use std::sync::Arc;

use crate::error::Result;
use crate::history::HistoryArchive;
use crate::index::SharedIndex;
use crate::semantic::Semantic;
use crate::settings::RuleSettings;
use crate::store::Store;
use crate::text::Redaction;

/// What an operation runs against, for one data dir: one per connection (the daemon's writer
/// and each of its readers has its own, as a process without a daemon does). The search index
/// and the vectors are shared between the daemon's contexts; each context holds them, the store
/// knows nothing of them.
#[derive(Debug)]
pub struct Core {
    /// The memory store (memories, sessions, prompts; their full-text tables).
    pub store: Store,
    /// The conversation-history archive beside it (`history.db`, opened at first use).
    pub history: HistoryArchive,
    /// The daemon's in-memory search index; without one, lexical search runs on FTS5.
    pub index: Option<Arc<SharedIndex>>,
    /// The embedding model and its vectors, when semantic search is configured.
    pub semantic: Option<Arc<Semantic>>,
    /// The settings the rules read, handed in by the door that loaded them.
    pub settings: Arc<RuleSettings>,
}

impl Core {
    /// The context of `store` with the default settings, no index and no model: its archive is
    /// the one in the same data dir (in memory for an in-memory store).
    pub fn new(store: Store) -> Core {
        let history = HistoryArchive::in_data_dir(store.data_dir());
        Core { store, history, index: None, semantic: None, settings: Arc::default() }
    }

    /// Search through a shared in-memory index (the daemon holds one).
    #[must_use]
    pub fn with_index(self, index: Arc<SharedIndex>) -> Core {
        Core { index: Some(index), ..self }
    }

    /// Search semantically too, with this model and its vectors (`None`: lexical only).
    #[must_use]
    pub fn with_semantic(self, semantic: Option<Arc<Semantic>>) -> Core {
        Core { semantic, ..self }
    }

    /// Run the rules under these settings.
    #[must_use]
    pub fn with_settings(mut self, settings: Arc<RuleSettings>) -> Core {
        self.store.set_redaction(Redaction { secrets: settings.privacy.redact_secrets });
        Core { settings, ..self }
    }

    /// Group commit over the memory store, each job with the whole context (see
    /// [`Store::batch`]: the same transaction and the same fallback to one job at a time).
    pub fn batch<T: Clone, R>(
        &mut self,
        jobs: Vec<T>,
        run: impl FnMut(&mut Core, T) -> Result<R>,
    ) -> Result<Vec<Result<R>>> {
        crate::store::batch(self, jobs, run)
    }
}

impl From<Store> for Core {
    fn from(store: Store) -> Core {
        Core::new(store)
    }
}

impl AsMut<Store> for Core {
    fn as_mut(&mut self) -> &mut Store {
        &mut self.store
    }
}
