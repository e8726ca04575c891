//! The daemon's hold on the store: one writer connection (writes are serialised in-process,
//! so agents never race each other for SQLite's lock) and a small pool of reader connections
//! (WAL lets reads run beside the writer). Work runs on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_core::ops::{self, Op};
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
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Db {
    /// Open the database file (migrating it once) for the daemon.
    pub fn open(path: &Path) -> Result<Arc<Db>> {
        let writer = Store::open(path)?;
        Ok(Arc::new(Db { writer: Mutex::new(writer), readers: Mutex::new(Vec::new()), path: Some(path.to_owned()) }))
    }

    /// A private in-memory store (tests).
    pub fn in_memory() -> Result<Arc<Db>> {
        Ok(Arc::new(Db { writer: Mutex::new(Store::open_in_memory()?), readers: Mutex::new(Vec::new()), path: None }))
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
            None => Store::open(self.path.as_deref().expect("readers only for file stores")),
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
