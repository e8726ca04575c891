//! Where the bytes of a data dir are (`cairn stats`, `GET /stats`, the web page): the memory
//! store split by part, and the files beside it.
//!
//! The split of `cairn.db` comes from SQLite's `dbstat` table (compiled into the bundled
//! SQLite): the exact size of the pages of each table and index, mapped to a part by table
//! name. `dbstat` reads every page (384 to 686 ms at 100k memories with vectors, a 700 MB
//! file), so its answer is kept per database and re-used, scaled to the file's current page
//! count. A request walks the pages only when there is no measure yet or it is older than
//! [`REMEASURE_AFTER`] (10 minutes): at most once per 10 minutes, whatever the file does. The
//! daemon re-measures in the background more often than that (its checkpointer, every 5
//! minutes: [`Store::disk_use_remeasured`]), so past its first minute no request of a daemon
//! walks. Each measure is also kept in the data dir ([`SPLIT_FILE`]), and a process with no
//! measure of its own takes that one while it is younger than [`PERSISTED_FOR`]: a restarted
//! daemon's first dashboard does not walk a large file (4 to 6 s at 1M memories) before its
//! own background measure. A daemon's requests never walk at all
//! ([`Store::leave_disk_walks_to_background`]): on a store measured by no process yet (the first
//! start after an upgrade or an import) its background thread measures at once, and a request
//! before it finishes counts `cairn.db`'s used pages whole, as `unsplit_bytes`. Files (the
//! archive, its index, the WALs, the spool, the models) are measured on every call.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Store;
use crate::Result;

/// Bytes per part of a data dir.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DiskUse {
    /// Everything below, added up.
    pub total_bytes: u64,
    /// Memories, sessions, prompts, relations, revisions and their indexes in `cairn.db`.
    pub memories_bytes: u64,
    /// The `embeddings` table: one vector per memory and model.
    pub vectors_bytes: u64,
    /// The full-text indexes of memories and prompts (FTS5 tables in `cairn.db`).
    pub search_index_bytes: u64,
    /// The sync journal, tombstones and cursors, the applied-spool ledger (in `cairn.db`) and
    /// the spool files waiting for the daemon.
    pub sync_bytes: u64,
    /// Free pages of `cairn.db`: `cairn gc` gives them back.
    pub free_bytes: u64,
    /// `cairn.db`'s used pages not split yet: a daemon's request on a store no process has
    /// measured, while its background measure runs (0 otherwise).
    #[serde(default)]
    pub unsplit_bytes: u64,
    /// Write-ahead logs and shared-memory files of every database of the data dir.
    pub wal_bytes: u64,
    /// The conversation archive (`history.db`).
    pub history_bytes: u64,
    /// The archive's full-text index (`history-fts.db`).
    pub history_index_bytes: u64,
    /// Installed embedding and LLM models (`models/`).
    pub models_bytes: u64,
    /// How the split of `cairn.db` was measured.
    pub method: String,
    /// Caps at 90 % or more of their size (`crate::disk_caps` fills them in).
    #[serde(default)]
    pub warnings: Vec<DiskWarning>,
}

/// A size cap nearly reached (or passed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DiskWarning {
    /// The setting that sets the cap (`history.max_bytes`).
    pub cap: String,
    pub used_bytes: u64,
    pub cap_bytes: u64,
    /// `used_bytes` as a percentage of `cap_bytes`, rounded down.
    pub percent: u64,
    pub message: String,
    pub hint: String,
}

/// The parts a table of `cairn.db` can belong to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct DbSplit {
    memories: u64,
    vectors: u64,
    search_index: u64,
    sync: u64,
}

impl DbSplit {
    fn add(&mut self, table: &str, bytes: u64) {
        let slot = match table {
            "embeddings" => &mut self.vectors,
            t if t.starts_with("observations_fts") || t.starts_with("prompts_fts") => &mut self.search_index,
            t if t.starts_with("sync_") || t.starts_with("spool_") => &mut self.sync,
            _ => &mut self.memories,
        };
        *slot += bytes;
    }

    fn total(self) -> u64 {
        self.memories + self.vectors + self.search_index + self.sync
    }

    /// This split stretched to `bytes` in all (the file grew a little since it was measured).
    fn scaled_to(self, bytes: u64) -> DbSplit {
        let total = self.total();
        if total == 0 || total == bytes {
            return self;
        }
        let scale = |part: u64| u64::try_from(u128::from(part) * u128::from(bytes) / u128::from(total)).unwrap_or(part);
        DbSplit {
            memories: scale(self.memories),
            vectors: scale(self.vectors),
            search_index: scale(self.search_index),
            sync: scale(self.sync),
        }
    }
}

/// A measured split, and when.
#[derive(Clone, Copy)]
struct Measured {
    split: DbSplit,
    at: Instant,
}

/// How long a request re-uses a measure (scaled to the file's size) before it walks again.
pub const REMEASURE_AFTER: Duration = Duration::from_secs(600);

/// Measures per database file (in-memory stores are measured every time: they are small).
static MEASURED: Mutex<Option<HashMap<PathBuf, Measured>>> = Mutex::new(None);

/// Database files whose requests never walk: a daemon measures them on a thread of its own.
static MEASURED_IN_BACKGROUND: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Where a split came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Source {
    /// Walked now.
    Now,
    /// An earlier measure (this process's or the data dir's kept one), scaled.
    Earlier,
    /// None yet, and this request may not walk: the used pages are counted whole.
    Pending,
}

/// The last measure of a data dir's `cairn.db`, kept beside it for the next process.
pub const SPLIT_FILE: &str = "disk-split.json";

/// How long a kept measure stands in for a walk in a process that has none of its own.
pub const PERSISTED_FOR: Duration = Duration::from_secs(24 * 3600);

/// A measure as kept in [`SPLIT_FILE`]: the split and when it was taken (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct KeptSplit {
    measured_at: u64,
    #[serde(flatten)]
    split: DbSplit,
}

impl Store {
    /// Where the bytes of this store's data dir are.
    pub fn disk_use(&self) -> Result<DiskUse> {
        self.disk_use_measured(false)
    }

    /// [`Store::disk_use`] measured now, whatever was measured before (after `cairn gc`, and
    /// the daemon's background measure).
    pub fn disk_use_remeasured(&self) -> Result<DiskUse> {
        self.disk_use_measured(true)
    }

    /// From now on this store's requests never walk its pages: the caller (the daemon)
    /// measures them in the background with [`Store::disk_use_remeasured`], and a request
    /// before its first measure counts the used pages whole (`unsplit_bytes`).
    pub fn leave_disk_walks_to_background(&self) {
        if let Some(path) = self.path() {
            MEASURED_IN_BACKGROUND
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_or_insert_with(HashSet::new)
                .insert(path.to_path_buf());
        }
    }

    /// Whether a measure of this store is known, in this process or kept in the data dir
    /// (young enough to stand in for a walk).
    #[must_use]
    pub fn has_disk_measure(&self) -> bool {
        let Some(path) = self.path() else { return true };
        let known = MEASURED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|map| map.contains_key(path));
        known || self.data_dir().and_then(read_kept).is_some()
    }

    fn disk_use_measured(&self, walk: bool) -> Result<DiskUse> {
        let page_size = self.pragma_u64("page_size")?;
        let used_bytes = page_size * (self.pragma_u64("page_count")? - self.pragma_u64("freelist_count")?);
        let (split, source) = if walk { (self.walk_split()?, Source::Now) } else { self.db_split(used_bytes)? };
        let mut disk = DiskUse {
            memories_bytes: split.memories,
            vectors_bytes: split.vectors,
            search_index_bytes: split.search_index,
            sync_bytes: split.sync,
            free_bytes: page_size * self.pragma_u64("freelist_count")?,
            unsplit_bytes: if source == Source::Pending { used_bytes } else { 0 },
            method: match source {
                Source::Now => "dbstat: the pages of each table and index, measured now",
                Source::Earlier => {
                    "dbstat: the pages of each table and index, measured earlier and scaled to the file's size now"
                }
                Source::Pending => {
                    "pending: the daemon is measuring the pages of each table and index in the background; \
                     cairn.db's used pages are counted whole until then"
                }
            }
            .to_owned(),
            ..DiskUse::default()
        };
        if let Some(dir) = self.data_dir() {
            add_files(&mut disk, dir);
        }
        disk.total_bytes = disk.memories_bytes
            + disk.vectors_bytes
            + disk.search_index_bytes
            + disk.sync_bytes
            + disk.free_bytes
            + disk.unsplit_bytes
            + disk.wal_bytes
            + disk.history_bytes
            + disk.history_index_bytes
            + disk.models_bytes;
        Ok(disk)
    }

    /// The split of `cairn.db`'s used pages, re-used (scaled to `used_bytes`) while younger
    /// than [`REMEASURE_AFTER`], or the data dir's kept one when this process has none; walked
    /// now when neither is, unless the daemon measures this store in the background.
    fn db_split(&self, used_bytes: u64) -> Result<(DbSplit, Source)> {
        let key = self.path().map(Path::to_path_buf);
        if let Some(key) = &key {
            let mut measured = MEASURED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let map = measured.get_or_insert_with(HashMap::new);
            if !map.contains_key(key)
                && let Some(kept) = self.data_dir().and_then(read_kept)
            {
                map.insert(key.clone(), kept);
            }
            if let Some(known) = map.get(key) {
                // A daemon's request takes its background measure however old: the next one
                // replaces it within `disk_use::EVERY`.
                if known.at.elapsed() < REMEASURE_AFTER || measured_in_background(key) {
                    return Ok((known.split.scaled_to(used_bytes), Source::Earlier));
                }
            } else if measured_in_background(key) {
                return Ok((DbSplit::default(), Source::Pending));
            }
        }
        Ok((self.walk_split()?, Source::Now))
    }

    /// The split measured now, kept for this process's next requests and the next process.
    fn walk_split(&self) -> Result<DbSplit> {
        let split = self.measure_split()?;
        if let Some(key) = self.path() {
            MEASURED
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_or_insert_with(HashMap::new)
                .insert(key.to_path_buf(), Measured { split, at: Instant::now() });
            if let Some(dir) = self.data_dir() {
                keep(dir, split);
            }
        }
        Ok(split)
    }

    /// One walk of every page with `dbstat`, summed per part by the table a b-tree serves.
    fn measure_split(&self) -> Result<DbSplit> {
        let mut stmt = self.conn().prepare(
            "SELECT COALESCE(s.tbl_name, d.name), d.pgsize
             FROM dbstat AS d LEFT JOIN sqlite_schema AS s ON s.name = d.name
             WHERE d.aggregate = TRUE",
        )?;
        let mut split = DbSplit::default();
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let (table, bytes): (String, i64) = (row.get(0)?, row.get(1)?);
            split.add(&table, u64::try_from(bytes).unwrap_or(0));
        }
        Ok(split)
    }

    fn pragma_u64(&self, name: &str) -> Result<u64> {
        let value: i64 = self.conn().query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))?;
        Ok(u64::try_from(value).unwrap_or(0))
    }
}

fn measured_in_background(db: &Path) -> bool {
    MEASURED_IN_BACKGROUND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .is_some_and(|paths| paths.contains(db))
}

/// The data dir's kept measure as this process's own, aged as it is (so a request takes it
/// only while it is younger than [`REMEASURE_AFTER`], and the daemon's next measure replaces
/// it); `None` when there is none, it is unreadable, or older than [`PERSISTED_FOR`].
fn read_kept(dir: &Path) -> Option<Measured> {
    let kept: KeptSplit = serde_json::from_slice(&std::fs::read(dir.join(SPLIT_FILE)).ok()?).ok()?;
    let age = Duration::from_secs(unix_now().checked_sub(kept.measured_at)?);
    if age >= PERSISTED_FOR {
        return None;
    }
    // Stands in for a measure taken now when the kept one is young enough for a request: the
    // daemon's background measure replaces it, a one-shot process uses it once.
    let at = Instant::now().checked_sub(age.min(REMEASURE_AFTER / 2)).unwrap_or_else(Instant::now);
    Some(Measured { split: kept.split, at })
}

/// Keep a measure in the data dir for the next process: written whole to a temporary file,
/// then renamed over the last. Best effort: a data dir that cannot take it only costs the next
/// process a walk.
fn keep(dir: &Path, split: DbSplit) {
    let kept = KeptSplit { measured_at: unix_now(), split };
    // One temporary name per process: the daemon and a CLI command may keep one at once.
    let (path, temporary) = (dir.join(SPLIT_FILE), dir.join(format!("{SPLIT_FILE}.{}.tmp", std::process::id())));
    let written = serde_json::to_vec(&kept)
        .map_err(std::io::Error::other)
        .and_then(|bytes| std::fs::write(&temporary, bytes))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if let Err(e) = written {
        tracing::debug!(error = %e, "the disk measure is not kept for the next process");
    }
}

/// Forget this process's measure of `db`, as a new process starts without one (tests).
#[cfg(test)]
fn forget_in_process(db: &Path) {
    if let Some(map) = MEASURED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_mut() {
        map.remove(db);
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The files of the data dir beside `cairn.db`.
fn add_files(disk: &mut DiskUse, dir: &Path) {
    let history = dir.join(cairn_history::HISTORY_DB_FILE);
    let history_index = cairn_history::index::fts_path(&history);
    disk.history_bytes = file_bytes(&history);
    disk.history_index_bytes = file_bytes(&history_index);
    disk.wal_bytes = [dir.join("cairn.db"), history, history_index, dir.join("llm-usage.db")]
        .iter()
        .flat_map(|db| ["-wal", "-shm"].map(|suffix| file_bytes(&with_suffix(db, suffix))))
        .sum();
    disk.sync_bytes += tree_bytes(&dir.join(crate::settings::SPOOL_DIR));
    disk.models_bytes = tree_bytes(&dir.join("models"));
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn file_bytes(path: &Path) -> u64 {
    std::fs::symlink_metadata(path).map_or(0, |m| if m.is_file() { m.len() } else { 0 })
}

/// Bytes of the files under `dir`, links not followed (a model linked from elsewhere is not
/// this data dir's).
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_bytes(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
#[path = "disk_use_tests.rs"]
mod tests;
