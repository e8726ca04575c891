//! The daemon's hold on the store: one writer connection (writes are serialised in-process,
//! so agents never race each other for SQLite's lock) and a small pool of reader connections
//! (WAL lets reads run beside the writer). Work runs on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use cairn_core::ops::{self, Op};
use cairn_core::search::index::SharedIndex;
use cairn_core::{CairnError, Result, Store};
use serde_json::Value;

/// Readers kept open: enough for 2 cores plus a request waiting on I/O.
const MAX_IDLE_READERS: usize = 4;

/// Shared access to one store.
pub struct Db {
    writer: Mutex<Store>,
    readers: Mutex<Vec<Store>>,
    /// `None` for an in-memory store (tests), where everything goes through the writer.
    path: Option<PathBuf>,
    /// When the store was opened, and milliseconds after that of the last operation: an
    /// auto-started daemon leaves when nobody has used it for a while.
    opened: Instant,
    last_used_ms: AtomicU64,
    /// In-memory search index shared by every connection (built in the background at open).
    index: Arc<SharedIndex>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Db {
    /// Open the database file (migrating it once) for the daemon, and start building the
    /// search index; until it is ready, searches use FTS5.
    pub fn open(path: &Path) -> Result<Arc<Db>> {
        let writer = Store::open(path)?;
        let db = Arc::new(Db::new(writer, Some(path.to_owned())));
        let index = Arc::clone(&db.index);
        let path = path.to_owned();
        std::thread::spawn(move || {
            let started = Instant::now();
            match Store::open(&path).and_then(|s| s.build_index()) {
                Ok(built) => {
                    tracing::info!(memories = built.len(), elapsed = ?started.elapsed(), "search index ready");
                    index.set(built);
                }
                Err(e) => tracing::warn!(error = %e, "could not build the search index; using FTS5"),
            }
        });
        Ok(db)
    }

    /// Whether the in-memory search index is built.
    pub fn index_ready(&self) -> bool {
        self.index.is_ready()
    }

    /// A private in-memory store (tests).
    pub fn in_memory() -> Result<Arc<Db>> {
        Ok(Arc::new(Db::new(Store::open_in_memory()?, None)))
    }

    fn new(mut writer: Store, path: Option<PathBuf>) -> Db {
        let index = Arc::new(SharedIndex::default());
        if path.is_some() {
            writer.attach_index(Arc::clone(&index));
        }
        Db {
            index,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
            path,
            opened: Instant::now(),
            last_used_ms: AtomicU64::new(0),
        }
    }

    /// Time since the last operation.
    pub fn idle_for(&self) -> Duration {
        let now = self.opened.elapsed();
        now.saturating_sub(Duration::from_millis(self.last_used_ms.load(Ordering::Relaxed)))
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_used_ms.store(ms, Ordering::Relaxed);
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Run an operation off the async runtime.
    pub async fn execute(self: &Arc<Self>, op: Op) -> Result<Value> {
        let db = Arc::clone(self);
        tokio::task::spawn_blocking(move || db.execute_blocking(op))
            .await
            .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
    }

    /// Run an operation on the calling thread.
    pub fn execute_blocking(&self, op: Op) -> Result<Value> {
        self.touch();
        if op.is_write() || self.path.is_none() {
            return ops::execute(&mut self.lock_writer(), op);
        }
        let mut reader = self.take_reader()?;
        let result = ops::execute(&mut reader, op);
        self.return_reader(reader);
        result
    }

    /// Direct access to the writer, for work that is not an [`Op`] (health checks).
    pub fn with_writer<T>(&self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        f(&mut self.lock_writer())
    }

    fn lock_writer(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock leaves the connection itself intact (SQLite rolls
        // back the open transaction), so keep serving.
        self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn take_reader(&self) -> Result<Store> {
        let pooled = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        match pooled {
            Some(store) => Ok(store),
            None => {
                let mut store = Store::open(self.path.as_deref().expect("readers only for file stores"))?;
                store.attach_index(Arc::clone(&self.index));
                Ok(store)
            }
        }
    }

    fn return_reader(&self, store: Store) {
        let mut pool = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < MAX_IDLE_READERS {
            pool.push(store);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_and_reads_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&dir.path().join("cairn.db")).unwrap();
        let mut tasks = Vec::new();
        for t in 0..8 {
            let db = Arc::clone(&db);
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    let save = Op::from_value(serde_json::json!({"op": "save", "args": {
                        "title": format!("t{t}-{i}"), "content": format!("content {t} {i}"), "project": "p"}}))
                    .unwrap();
                    db.execute(save).await.unwrap();
                    db.execute(Op::Stats).await.unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let stats = db.execute(Op::Stats).await.unwrap();
        assert_eq!(stats["total_observations"], 200);
    }
}
