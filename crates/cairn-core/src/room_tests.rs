//! The room a rebuild needs, and a real directory measured.

use super::*;

const GB: u64 = 1_000_000_000;

fn room(data_free: u64, temp_free: u64, same_disk: bool) -> Room {
    Room { data_free, temp_free, temp_dir: PathBuf::from("/var/tmp"), same_disk }
}

/// A 20 GB archive on one disk needs the copy and the WAL there: ~42.5 GB, not 29.
#[test]
fn a_rebuild_on_one_disk_needs_room_for_the_copy_and_the_wal() {
    let live = 20 * GB;
    let why = shortfall(live, &room(29 * GB, 29 * GB, true)).expect("29 GB is short of two copies");
    assert!(why.contains("42.5 GB") && why.contains("has 29.0 GB"), "{why}");
    assert_eq!(shortfall(live, &room(43 * GB, 43 * GB, true)), None);
}

/// On two disks each needs one copy's room; either short refuses.
#[test]
fn a_rebuild_across_two_disks_needs_room_on_each() {
    let live = 10 * GB;
    assert_eq!(shortfall(live, &room(11 * GB, 11 * GB, false)), None);
    assert!(shortfall(live, &room(11 * GB, 9 * GB, false)).is_some(), "the temp dir short");
    assert!(shortfall(live, &room(9 * GB, 50 * GB, false)).is_some(), "the data dir short");
}

/// A small store needs little more than itself: a nearly full disk can still rebuild it.
#[test]
fn a_small_file_needs_the_margin() {
    assert_eq!(needed_for(0), MARGIN_BYTES);
    assert!(shortfall(1 << 20, &room(10 << 20, 10 << 20, true)).is_some(), "2 × 9 MiB > 10 MiB");
    assert_eq!(shortfall(1 << 20, &room(30 << 20, 30 << 20, true)), None);
}

/// This machine's temp dir and data dir are measured (a real statvfs).
#[cfg(unix)]
#[test]
fn the_room_of_a_real_dir_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let room = room_for(dir.path()).expect("unix measures");
    assert!(room.data_free > 0 && room.temp_free > 0, "{room:?}");
}
