//! Room on disk for a rebuild (`VACUUM`, `cairn gc`). SQLite writes a copy of the file to its
//! temp dir, then every page of the copy through the WAL beside the file: each needs about the
//! file's live bytes free. A rebuild that runs out of room fails half-way with the disk full
//! for everything else on it (the daemon's own writes, the host's), so `gc` refuses it before
//! it changes anything, and its dry run says so.

use std::path::{Path, PathBuf};

use crate::{CairnError, ErrorCode};

/// Free bytes where a rebuild writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    /// Free on the data dir's file system (the WAL).
    pub data_free: u64,
    /// SQLite's temp dir (the copy), and what is free there.
    pub temp_dir: PathBuf,
    pub temp_free: u64,
    /// Both on one file system: the copy and the WAL share `data_free`.
    pub same_disk: bool,
}

/// Beyond the live bytes and a sixteenth (the WAL's frame headers, pages written twice): a
/// little, so a nearly full disk can still rebuild a small store, which is when a user runs gc.
const MARGIN_BYTES: u64 = 8 << 20;

/// What each of the copy and the WAL needs free to rebuild a file of `live` bytes.
#[must_use]
pub fn needed_for(live: u64) -> u64 {
    live + live / 16 + MARGIN_BYTES
}

/// Why a rebuild of a file of `live` bytes does not fit in `room`, or `None` when it does.
#[must_use]
pub fn shortfall(live: u64, room: &Room) -> Option<String> {
    let each = needed_for(live);
    let gb = |bytes: u64| format!("{:.1} GB", bytes as f64 / 1e9);
    if room.same_disk {
        let needed = each.saturating_mul(2);
        (room.data_free < needed).then(|| {
            format!(
                "needs about {} free on the data dir's disk (a copy in {} and the WAL, {} each) and has {}",
                gb(needed),
                room.temp_dir.display(),
                gb(each),
                gb(room.data_free)
            )
        })
    } else if room.data_free < each || room.temp_free < each {
        Some(format!(
            "needs about {} free beside the file (the WAL) and {} in {} (the copy), and has {} and {}",
            gb(each),
            gb(each),
            room.temp_dir.display(),
            gb(room.data_free),
            gb(room.temp_free)
        ))
    } else {
        None
    }
}

/// The room a rebuild of a file in `data_dir` has; `None` where it cannot be measured.
#[must_use]
pub fn room_for(data_dir: &Path) -> Option<Room> {
    measure(data_dir, sqlite_temp_dir()?)
}

/// The refusal of a rebuild that does not fit: nothing was changed.
#[must_use]
pub fn no_room(file: &str, why: &str) -> CairnError {
    CairnError::new(
        ErrorCode::DiskFull,
        format!("not enough free space to rebuild {file}: it {why}; nothing was changed"),
    )
    .with_hint(
        "free space on that disk, or point SQLITE_TMPDIR at a disk with room, then run `cairn gc` again \
             (`cairn gc --dry-run` shows the sizes)",
    )
}

/// Where SQLite puts a temporary file on Unix: `SQLITE_TMPDIR`, `TMPDIR`, `/var/tmp`,
/// `/usr/tmp`, `/tmp`, the first that is a directory.
fn sqlite_temp_dir() -> Option<PathBuf> {
    let from_env = ["SQLITE_TMPDIR", "TMPDIR"].into_iter().filter_map(std::env::var_os).map(PathBuf::from);
    let fixed = ["/var/tmp", "/usr/tmp", "/tmp"].into_iter().map(PathBuf::from);
    from_env.chain(fixed).find(|dir| dir.is_dir())
}

/// A file system whose free space cannot be read (statvfs refused) is not measured: the rebuild
/// runs as it did before the check, and a disk that fills fails it with `disk_full`.
#[cfg(unix)]
fn measure(data_dir: &Path, temp_dir: PathBuf) -> Option<Room> {
    use std::os::unix::fs::MetadataExt;
    let free = |dir: &Path| rustix::fs::statvfs(dir).ok().map(|s| s.f_bavail.saturating_mul(s.f_frsize));
    let device = |dir: &Path| std::fs::metadata(dir).map(|m| m.dev()).ok();
    let (data_free, temp_free) = (free(data_dir)?, free(&temp_dir)?);
    let same_disk = device(data_dir).is_some() && device(data_dir) == device(&temp_dir);
    Some(Room { data_free, temp_dir, temp_free, same_disk })
}

#[cfg(not(unix))]
fn measure(_data_dir: &Path, _temp_dir: PathBuf) -> Option<Room> {
    None
}

#[cfg(test)]
#[path = "room_tests.rs"]
mod tests;
