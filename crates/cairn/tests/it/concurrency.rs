//! Many agents at once on one store (engram #125, #1182): MCP, HTTP and CLI writers in
//! separate processes — most through the daemon, some straight to SQLite beside it — for a
//! sustained period. Every acknowledged write must be stored; no write may fail.
//!
//! Each CLI write checks, from the client's own debug line, that it went where it should: the
//! daemon, or (CAIRN_DIRECT=1) the file.
//!
//! Duration: CAIRN_CONCURRENCY_SECS (default 60).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::support::{Daemon, McpChild, cairn, http};

#[derive(Default)]
struct Tally {
    acked: HashSet<String>,
    errors: Vec<String>,
}

fn duration() -> Duration {
    let secs = std::env::var("CAIRN_CONCURRENCY_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    Duration::from_secs(secs)
}

#[test]
fn eight_writers_for_a_minute_lose_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let work = tmp.path().join("conc");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    let daemon = Daemon::start(&data);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally::default()));
    let mut threads = Vec::new();

    for w in 0..3 {
        let (data, work, stop, tally) = (data.clone(), work.clone(), Arc::clone(&stop), Arc::clone(&tally));
        threads.push(std::thread::spawn(move || {
            // The third MCP process bypasses the daemon: SQLite's own locking must hold too.
            let env: &[(&str, &str)] = if w == 2 { &[("CAIRN_DIRECT", "1")] } else { &[] };
            let mut mcp = McpChild::spawn(&data, &work, env);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let title = format!("mcp-{w}-{i}");
                let args = json!({"title": title, "content": format!("written by mcp writer {w}, number {i}"), "type": "discovery"});
                let result = mcp.call("mem_save", args);
                record(&tally, title, result.map(|_| ()));
                i += 1;
            }
        }));
    }
    for w in 0..2 {
        let (addr, stop, tally) = (daemon.addr, Arc::clone(&stop), Arc::clone(&tally));
        threads.push(std::thread::spawn(move || {
            let session = format!("http-{w}");
            http(addr, "POST", "/sessions", Some(&json!({"id": session, "project": "conc", "directory": "/conc"})));
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let title = format!("http-{w}-{i}");
                let body = json!({"session_id": session, "title": title, "content": format!("written over HTTP by {w}, number {i}"), "type": "config", "project": "conc"});
                let (status, value) = http(addr, "POST", "/observations", Some(&body));
                let result = if status == 201 { Ok(()) } else { Err(format!("{status}: {value}")) };
                record(&tally, title, result);
                i += 1;
            }
        }));
    }
    for w in 0..3 {
        let (data, work, stop, tally) = (data.clone(), work.clone(), Arc::clone(&stop), Arc::clone(&tally));
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let title = format!("cli-{w}-{i}");
                let mut cmd = cairn();
                cmd.args(["save", &title, &format!("written by CLI writer {w}, number {i}"), "--type", "pattern"])
                    .current_dir(&work)
                    .env("CAIRN_DATA_DIR", &data);
                if w == 2 {
                    cmd.env("CAIRN_DIRECT", "1");
                }
                // The client says where it went: prove the direct writer never used the daemon
                // and the others always did.
                cmd.env("CAIRN_LOG", "warn,cairn_client=debug");
                let out = cmd.output().unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                let went_direct = stderr.contains("opened the database file in this process");
                let used_daemon = stderr.contains("using the running daemon");
                let result = if !out.status.success() {
                    Err(stderr)
                } else if (w == 2) != went_direct || (w == 2) == used_daemon {
                    Err(format!(
                        "CLI writer {w} went the wrong way (direct {went_direct}, daemon {used_daemon}): {stderr}"
                    ))
                } else {
                    Ok(())
                };
                record(&tally, title, result);
                i += 1;
            }
        }));
    }

    std::thread::sleep(duration());
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    drop(daemon);

    let tally = tally.lock().unwrap();
    let by_door = |prefix: &str| tally.acked.iter().filter(|t| t.starts_with(prefix)).count();
    eprintln!(
        "acknowledged writes in {:?}: mcp {}, http {}, cli {}; errors {}",
        duration(),
        by_door("mcp-"),
        by_door("http-"),
        by_door("cli-"),
        tally.errors.len()
    );
    assert!(
        tally.errors.is_empty(),
        "{} writes failed, first: {:?}",
        tally.errors.len(),
        &tally.errors[..tally.errors.len().min(3)]
    );
    let conn = rusqlite::Connection::open(data.join("cairn.db")).unwrap();
    let mut stmt = conn.prepare("SELECT title FROM observations WHERE deleted_at IS NULL").unwrap();
    let stored: HashSet<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let missing: Vec<_> = tally.acked.difference(&stored).take(5).collect();
    assert!(missing.is_empty(), "acknowledged but not stored: {missing:?}");
    assert_eq!(stored.len(), tally.acked.len(), "stored rows equal acknowledged writes");
    for kind in ["mcp-", "http-", "cli-"] {
        assert!(tally.acked.iter().any(|t| t.starts_with(kind)), "no {kind} writes got through");
    }
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(integrity, "ok");
}

fn record(tally: &Mutex<Tally>, title: String, result: Result<(), String>) {
    let mut t = tally.lock().unwrap();
    match result {
        Ok(()) => {
            t.acked.insert(title);
        }
        Err(e) => t.errors.push(format!("{title}: {e}")),
    }
}
