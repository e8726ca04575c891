//! The core's context: the owners an operation runs against, handed in whole to
//! [`crate::ops::execute`]. The memory store and the history archive each have their own owner
//! here; neither holds the other.

use crate::error::Result;
use crate::history::HistoryArchive;
use crate::store::Store;

/// The memory store and the history archive of one data dir (one per connection: the daemon's
/// writer and each of its readers has its own, as a process without a daemon does).
#[derive(Debug)]
pub struct Core {
    /// The memory store (memories, sessions, prompts, search; the settings the rules read).
    pub store: Store,
    /// The conversation-history archive beside it (`history.db`, opened at first use).
    pub history: HistoryArchive,
}

impl Core {
    /// The context of `store`: its archive is the one in the same data dir (in memory for an
    /// in-memory store).
    pub fn new(store: Store) -> Core {
        let history = HistoryArchive::in_data_dir(store.data_dir());
        Core { store, history }
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
