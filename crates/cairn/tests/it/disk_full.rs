//! A disk with no room left, made faithfully without root: the daemon's own file size limit
//! (RLIMIT_FSIZE, set on the running process with `prlimit --pid`). Past it the kernel fails
//! each write with EFBIG (the daemon handles SIGXFSZ, which would otherwise end it), which is
//! what a full disk does to SQLite. A write that does not fit is refused with `disk_full`
//! (HTTP 507, the CLI's exit code 6), nothing acknowledged is lost, reads go on, and the next
//! write after space is back succeeds without a restart.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http};

/// Set the daemon's file size limit, in bytes; `None` lifts it. The soft limit only: raising
/// a hard limit again takes a privilege a test does not have.
fn limit_file_size(daemon: &Daemon, bytes: Option<u64>) {
    let value = bytes.map_or_else(|| "unlimited".to_owned(), |b| b.to_string());
    let status = Command::new("prlimit")
        .args(["--pid", &daemon.pid().to_string(), &format!("--fsize={value}:")])
        .status()
        .expect("run prlimit (util-linux)");
    assert!(status.success(), "prlimit failed");
}

fn save(daemon: &Daemon, title: &str) -> (u16, Value) {
    let body = json!({"title": title, "content": format!("{title}: content long enough to need a page of its own {}", "x".repeat(3000)), "project": "full"});
    http(daemon.addr, "POST", "/observations", Some(&body))
}

/// The live memories' titles, read from the file beside the daemon (WAL: a reader sees every
/// commit).
fn titles(dir: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open_with_flags(dir.join("cairn.db"), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let mut stmt = conn.prepare("SELECT title FROM observations WHERE deleted_at IS NULL ORDER BY title").unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
}

#[test]
#[cfg(target_os = "linux")]
fn a_write_that_does_not_fit_is_refused_reads_go_on_and_writes_come_back_with_space() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: no prlimit (util-linux)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), &[("CAIRN_EMBEDDER", "none")], std::process::Stdio::null());
    let mut acked = Vec::new();
    for i in 0..5 {
        let title = format!("kept {i}");
        assert_eq!(save(&daemon, &title).0, 201);
        acked.push(title);
    }

    // No room: every write past the first byte of any file fails.
    limit_file_size(&daemon, Some(1));
    let (status, refused) = save(&daemon, "does not fit");
    assert_eq!(status, 507, "{refused}");
    assert!(refused.to_string().contains("disk_full"), "{refused}");
    // The CLI through the daemon: the same code, exit code 6.
    let out = cairn()
        .args(["save", "cli does not fit", "neither does this", "--project", "full"])
        .env("CAIRN_DATA_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("disk is full"), "{}", String::from_utf8_lossy(&out.stderr));
    // Reads go on.
    let (status, health) = http(daemon.addr, "GET", "/health", None);
    assert_eq!(status, 200, "{health}");
    let (status, stats) = http(daemon.addr, "GET", "/stats", None);
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["total_observations"], 5, "{stats}");
    assert_eq!(titles(dir.path()), acked);

    // Space is back: the next write succeeds, without a restart.
    limit_file_size(&daemon, None);
    let (status, saved) = save(&daemon, "after space came back");
    assert_eq!(status, 201, "{saved}");
    acked.push("after space came back".to_owned());
    acked.sort();
    assert_eq!(titles(dir.path()), acked, "every acknowledged write, and only those");
    let (_, stats) = http(daemon.addr, "GET", "/stats", None);
    assert_eq!(stats["total_observations"], 6, "{stats}");
}
