//! The spool: write operations a host door (a Claude Code hook, the OpenCode plugin) could not
//! deliver because no daemon answered in time, kept on disk in order until the daemon applies
//! them, each exactly once.
//!
//! Layout: `<data dir>/spool/<event id>.json`, one file per event. The event id is a UUID v7,
//! so the file names sort in time order (and a process's own ids are strictly increasing). A
//! writer puts the record in a dot-named temporary file and renames it into place: a reader
//! never sees half a record, and two hosts spooling at once never touch the same file.
//!
//! Record (version 1): `{"v": 1, "id": "<uuid v7>", "at": "<RFC 3339>", "source": "claude-code",
//! "request": {"op": NAME, "args": {...}}}`. The plugin writes the same shape from Node.
//!
//! Exactly once: the daemon applies an event's operation and records its id in the same store
//! transaction (`Core::run_event`, in `ops`), and only then deletes the file. A crash between the
//! commit and the delete leaves the file: the next drain finds the id known and skips it.
//!
//! Bounded: at most [`MAX_EVENTS`] files and [`MAX_BYTES`] bytes. A full spool refuses the new
//! event (the oldest are kept: they register the sessions later events belong to, and the
//! spool then holds a gap-free prefix of what happened). Every refused event appends one byte
//! to the `dropped` file (a counter several processes can bump without a lock); the daemon
//! folds it into the store, so the count survives restarts and shows in `cairn doctor` and
//! `/health`. Unreadable records (truncated, corrupt, from a newer cairn) are counted and
//! deleted; the rest is delivered.
//!
//! Never stuck: an event the store refuses (bad arguments) is counted and deleted. One that
//! fails for another reason (a bug) while the store itself is fine is tried again at the next
//! drains (the groups after it wait); after [`MAX_EVENT_FAILURES`] failures it is moved to
//! `spool/failed/` (kept for a bug report, counted as `failed`) and the rest goes through. A
//! store that cannot write at all (busy, disk full) fails nobody's event: the drain waits.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;
/// The spool keys its records by event id (an op's outcome names a duplicate by its id).
pub use crate::event_id::EventId;
use crate::store::Store;

pub use crate::settings::SPOOL_DIR;
/// The record format this build writes and reads.
pub const RECORD_VERSION: u64 = 1;
/// Most events kept.
pub const MAX_EVENTS: usize = 10_000;
/// Most bytes kept, all records together.
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Largest record: a hook's biggest write is a passive capture of one long answer.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;
/// One byte per event refused (full spool, record too large, disk full).
pub const DROPPED_FILE: &str = "dropped";
/// Where events that kept failing are moved, out of the way of the ones behind them.
pub const FAILED_DIR: &str = "failed";
/// Failures of one event (not of the store) before it is moved to [`FAILED_DIR`].
pub const MAX_EVENT_FAILURES: u64 = 3;
/// A temporary file older than this was left by a writer that died mid-write.
const STALE_TMP: Duration = Duration::from_secs(600);
/// How long the store remembers an applied event id: far longer than a spool file can wait
/// between its commit and its delete, or a plugin between two tries of one call.
pub const REMEMBER_APPLIED: Duration = Duration::from_secs(30 * 24 * 3600);

/// One spooled event as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub v: u64,
    pub id: String,
    pub at: String,
    pub source: String,
    pub request: Value,
}

/// What became of an event handed to [`Spool::push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    Kept,
    /// Refused and counted: the reason, for the door's one log line.
    Dropped(String),
}

/// An event file waiting in the spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub id: EventId,
    pub path: PathBuf,
}

/// The spool's state now: what waits on disk and what was refused but not yet counted in the
/// store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpoolStatus {
    /// Events waiting for the daemon.
    pub pending: u64,
    /// Their bytes on disk.
    pub bytes: u64,
    /// Events refused since the store last counted them (spool full, disk full).
    pub dropped_uncounted: u64,
}

/// Counters the store keeps across restarts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpoolCounts {
    /// Events refused because the spool was full, a record too large or the disk full.
    pub dropped: u64,
    /// Records found unreadable (truncated, corrupt, from a newer cairn) and skipped.
    pub corrupt: u64,
    /// Events the store refused when applied (bad arguments): delivered, and answered no.
    pub rejected: u64,
    /// Events that failed [`MAX_EVENT_FAILURES`] times for another reason, moved to
    /// `spool/failed/`.
    #[serde(default)]
    pub failed: u64,
}

impl SpoolCounts {
    pub(crate) fn is_zero(self) -> bool {
        self == SpoolCounts::default()
    }
}

/// What one drain did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrainReport {
    /// Events applied now.
    pub applied: u64,
    /// Events found already applied (a drain that stopped between commit and delete).
    pub duplicates: u64,
    pub rejected: u64,
    pub corrupt: u64,
    /// Events moved to `spool/failed/` after failing too often.
    #[serde(default)]
    pub failed: u64,
    /// Refused events folded into the store's count.
    pub dropped: u64,
    /// Events still waiting (the store was busy, or they arrived during the drain).
    pub pending: u64,
}

/// The spool directory of a data dir.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
    max_events: usize,
    max_bytes: u64,
}

impl Spool {
    pub fn in_data_dir(data_dir: &Path) -> Spool {
        Spool { dir: data_dir.join(SPOOL_DIR), max_events: MAX_EVENTS, max_bytes: MAX_BYTES }
    }

    /// The same spool with other bounds (tests).
    #[must_use]
    pub fn with_bounds(mut self, max_events: usize, max_bytes: u64) -> Spool {
        self.max_events = max_events;
        self.max_bytes = max_bytes;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keep `request` (an op, `{"op": NAME, "args": {...}}`, named `name` in what is said) for
    /// the daemon under `id`. Never an error: a refusal is counted and said.
    pub fn push(&self, id: &EventId, source: &str, name: &str, request: &impl Serialize) -> Pushed {
        let request = match serde_json::to_value(request) {
            Ok(request) => request,
            Err(e) => return self.drop_one(format!("cannot encode {name}: {e}")),
        };
        let record = Record {
            v: RECORD_VERSION,
            id: id.as_str().to_owned(),
            at: crate::clock::now_ts(),
            source: source.to_owned(),
            request,
        };
        let bytes = match serde_json::to_vec(&record) {
            Ok(bytes) => bytes,
            Err(e) => return self.drop_one(format!("cannot encode {name}: {e}")),
        };
        if bytes.len() > MAX_RECORD_BYTES {
            return self.drop_one(format!("{name} is {} bytes, over the {MAX_RECORD_BYTES} of a record", bytes.len()));
        }
        if let Err(e) = fs::create_dir_all(&self.dir) {
            return self.drop_one(format!("cannot create {}: {e}", self.dir.display()));
        }
        let status = self.status();
        if status.pending >= self.max_events as u64 || status.bytes + bytes.len() as u64 > self.max_bytes {
            return self.drop_one(format!(
                "the spool is full ({} events, {} bytes); the daemon has not drained it",
                status.pending, status.bytes
            ));
        }
        match self.write_record(id, &bytes) {
            Ok(()) => Pushed::Kept,
            Err(e) => self.drop_one(format!("cannot write to {}: {e}", self.dir.display())),
        }
    }

    fn write_record(&self, id: &EventId, bytes: &[u8]) -> std::io::Result<()> {
        let tmp = self.dir.join(format!(".{id}.{}.tmp", std::process::id()));
        let written = fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes));
        if let Err(e) = written.and_then(|()| fs::rename(&tmp, self.record_path(id))) {
            // A disk that filled up mid-write leaves nothing behind.
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(())
    }

    fn record_path(&self, id: &EventId) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Count one refused event (a byte appended: atomic between processes, no lock).
    fn drop_one(&self, why: String) -> Pushed {
        let counted = fs::create_dir_all(&self.dir).and_then(|()| {
            fs::OpenOptions::new().create(true).append(true).open(self.dir.join(DROPPED_FILE))?.write_all(b"x")
        });
        if let Err(e) = counted {
            return Pushed::Dropped(format!("{why} (and it could not be counted: {e})"));
        }
        Pushed::Dropped(why)
    }

    /// Every event file, oldest first.
    pub fn pending(&self) -> Vec<Pending> {
        let Ok(entries) = fs::read_dir(&self.dir) else { return Vec::new() };
        let mut pending: Vec<Pending> = entries
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let name = entry.file_name();
                let id = EventId::parse(name.to_str()?.strip_suffix(".json")?).ok()?;
                Some(Pending { id, path: entry.path() })
            })
            .collect();
        pending.sort_by(|a, b| a.id.cmp(&b.id));
        pending
    }

    /// What waits now and what was refused since the store last counted.
    pub fn status(&self) -> SpoolStatus {
        let mut status = SpoolStatus::default();
        let Ok(entries) = fs::read_dir(&self.dir) else { return status };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let len = entry.metadata().map_or(0, |m| m.len());
            if name == DROPPED_FILE {
                status.dropped_uncounted += len;
            } else if name.ends_with(".json") || name.ends_with(".tmp") {
                status.pending += u64::from(name.ends_with(".json"));
                status.bytes += len;
            }
        }
        status
    }

    /// Read one event's request as it was written. `Err` when it is unreadable: it is then
    /// counted and deleted.
    pub fn read(&self, pending: &Pending) -> std::result::Result<Value, String> {
        let bytes = fs::read(&pending.path).map_err(|e| format!("cannot read: {e}"))?;
        let record: Record = serde_json::from_slice(&bytes).map_err(|e| format!("not a spool record: {e}"))?;
        if record.v != RECORD_VERSION {
            return Err(format!("record version {} (this cairn reads {RECORD_VERSION})", record.v));
        }
        if record.id != pending.id.as_str() {
            return Err(format!("its id {:?} is not its file name's", record.id));
        }
        Ok(record.request)
    }

    /// Note one more failure of `pending`; its failures so far (a sidecar file that grows one
    /// byte per failure, like the `dropped` counter).
    pub(crate) fn note_failure(&self, pending: &Pending) -> u64 {
        let marks = self.failures_path(&pending.id);
        let noted = fs::OpenOptions::new().create(true).append(true).open(&marks).and_then(|mut f| f.write_all(b"x"));
        if let Err(e) = noted {
            tracing::warn!(path = %marks.display(), error = %e, "could not note a spooled event's failure");
        }
        fs::metadata(&marks).map_or(0, |m| m.len())
    }

    fn failures_path(&self, id: &EventId) -> PathBuf {
        self.dir.join(format!("{}.failures", id.as_str()))
    }

    /// Move an event that keeps failing to `failed/`, out of the way of the ones behind it.
    pub(crate) fn set_aside(&self, pending: &Pending) {
        let failed = self.dir.join(FAILED_DIR);
        let moved = fs::create_dir_all(&failed)
            .and_then(|()| fs::rename(&pending.path, failed.join(format!("{}.json", pending.id.as_str()))));
        if let Err(e) = moved {
            tracing::warn!(path = %pending.path.display(), error = %e, "could not set a failing event aside; deleting it");
            self.remove(pending);
        }
        let _ = fs::remove_file(self.failures_path(&pending.id));
    }

    /// Forget an event (applied, known, refused or unreadable).
    pub fn remove(&self, pending: &Pending) {
        if let Err(e) = fs::remove_file(&pending.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %pending.path.display(), error = %e, "could not remove a spooled event");
        }
        let _ = fs::remove_file(self.failures_path(&pending.id));
    }

    /// Take the refused events' count out of the `dropped` file (renamed aside first, so a
    /// byte appended meanwhile lands in a new file and is counted next time).
    pub(crate) fn take_dropped(&self) -> u64 {
        let file = self.dir.join(DROPPED_FILE);
        let taken = self.dir.join(format!(".{DROPPED_FILE}.{}.taken", std::process::id()));
        if fs::rename(&file, &taken).is_err() {
            return 0;
        }
        let n = fs::metadata(&taken).map_or(0, |m| m.len());
        let _ = fs::remove_file(&taken);
        n
    }

    /// Temporary files of writers that died mid-write: unreadable events.
    pub(crate) fn take_stale_tmp(&self) -> u64 {
        let Ok(entries) = fs::read_dir(&self.dir) else { return 0 };
        let now = SystemTime::now();
        let mut n = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is_tmp = name.to_str().is_some_and(|n| n.starts_with('.') && n.ends_with(".tmp"));
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > STALE_TMP);
            if is_tmp && old && fs::remove_file(entry.path()).is_ok() {
                n += 1;
            }
        }
        n
    }
}

/// The store keeps the spool's counters (migration `spool_events`).
impl Store {
    /// The spool's counters kept in the store.
    pub fn spool_counts(&self) -> Result<SpoolCounts> {
        let mut counts = SpoolCounts::default();
        for (name, value) in self.spool_counter_rows()? {
            let value = u64::try_from(value).unwrap_or(0);
            match name.as_str() {
                "dropped" => counts.dropped = value,
                "corrupt" => counts.corrupt = value,
                "rejected" => counts.rejected = value,
                "failed" => counts.failed = value,
                _ => {}
            }
        }
        Ok(counts)
    }

    /// Add to the spool's counters.
    pub fn add_spool_counts(&mut self, add: SpoolCounts) -> Result<()> {
        let named =
            [("dropped", add.dropped), ("corrupt", add.corrupt), ("rejected", add.rejected), ("failed", add.failed)];
        let named: Vec<(&str, i64)> = named
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| (name, i64::try_from(n).unwrap_or(i64::MAX)))
            .collect();
        self.add_spool_counters(&named)
    }

    /// Forget event ids applied longer ago than [`REMEMBER_APPLIED`].
    pub fn prune_spool_events(&mut self) -> Result<usize> {
        let cutoff = self.clock().now() - REMEMBER_APPLIED;
        let cutoff = crate::clock::format_ts(cutoff);
        self.delete_spool_events_before(&cutoff)
    }
}

#[cfg(test)]
#[path = "spool_tests.rs"]
mod tests;
