//! A disk with no room left, made faithfully without root: the daemon's own file size limit
//! (RLIMIT_FSIZE, set on the running process with `prlimit --pid`). Past it the kernel fails
//! each write with EFBIG (the daemon handles SIGXFSZ, which would otherwise end it), which is
//! what a full disk does to SQLite. A write that does not fit is refused with `disk_full`
//! (HTTP 507, the CLI's exit code 6), nothing acknowledged is lost, reads go on, and the next
//! write after space is back succeeds without a restart.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cairn_core::spool::Spool;
use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http, read_request};

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

fn has_prlimit() -> bool {
    let there = Command::new("prlimit").arg("--version").output().is_ok();
    if !there {
        eprintln!("skipped: no prlimit (util-linux)");
    }
    there
}

fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn op(daemon: &Daemon, name: &str, args: Value) -> (u16, Value) {
    http(daemon.addr, "POST", "/v1/op", Some(&json!({"op": name, "args": args})))
}

/// The archived sessions, sub-agents' included (as JSON text).
fn archived_sessions(daemon: &Daemon) -> String {
    let (status, sessions) = op(daemon, "history_sessions", json!({"include_children": true}));
    assert_eq!(status, 200, "{sessions}");
    sessions.to_string()
}

fn worker_state(daemon: &Daemon, name: &str) -> Value {
    let (status, health) = http(daemon.addr, "GET", "/health", None);
    assert_eq!(status, 200, "{health}");
    health["workers"].as_array().unwrap().iter().find(|w| w["name"] == name).map_or(Value::Null, |w| w["state"].clone())
}

/// The daemon archiving a host's transcripts with no room left: a poke is refused with
/// `disk_full`, what was archived before is all there and readable, and the archive catches up
/// by itself (the periodic scan) once space is back.
#[test]
#[cfg(target_os = "linux")]
fn history_ingest_on_a_full_disk_is_refused_and_resumes_by_itself() {
    const SESSION: &str = "3f0c2a4e-9b1d-4c55-8a77-0d2e6f1b9c01";
    const SUBAGENT: &str = "agent-a249ec580bfee3679";
    if !has_prlimit() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (data, claude) = (tmp.path().join("data"), tmp.path().join("claude"));
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cairn-history/tests/fixtures/history/claude/-nonexistent-sandbox-cc-history-project");
    let project = claude.join("projects").join("-nonexistent-sandbox-cc-history-project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(fixture.join(format!("{SESSION}.jsonl")), project.join(format!("{SESSION}.jsonl"))).unwrap();
    let claude_dir = claude.display().to_string();
    let daemon = Daemon::start_with(
        &data,
        &[("CLAUDE_CONFIG_DIR", &claude_dir), ("CAIRN_HISTORY_SCAN_INTERVAL_SECS", "1"), ("CAIRN_EMBEDDER", "none")],
        std::process::Stdio::null(),
    );
    wait_until("the backfill", 30, || archived_sessions(&daemon).contains(SESSION));
    let before = archived_sessions(&daemon);

    // A sub-agent's transcript appears while there is no room to archive it.
    limit_file_size(&daemon, Some(1));
    let subagents = project.join(SESSION).join("subagents");
    std::fs::create_dir_all(&subagents).unwrap();
    let name = format!("{SUBAGENT}.jsonl");
    std::fs::copy(fixture.join(SESSION).join("subagents").join(&name), subagents.join(&name)).unwrap();
    let (status, refused) =
        op(&daemon, "history_ingest", json!({"host": "claude-code", "path": subagents.join(&name)}));
    assert_eq!(status, 507, "{refused}");
    assert!(refused.to_string().contains("disk_full"), "{refused}");
    // Reads go on, and nothing archived before is lost; the worker keeps going.
    std::thread::sleep(Duration::from_secs(2)); // a periodic scan or two fail meanwhile
    assert_eq!(archived_sessions(&daemon), before);
    assert_eq!(worker_state(&daemon, "cairn-history"), "running");

    limit_file_size(&daemon, None);
    wait_until("the scan to archive the sub-agent", 60, || archived_sessions(&daemon).contains(SUBAGENT));
    assert!(archived_sessions(&daemon).contains(SESSION));
}

/// A loopback OpenAI-compatible `/embeddings` endpoint: every text gets the same unit vector;
/// it answers 503 while `open` is false. Counts the requests it answered with vectors.
fn serve_embeddings(open: Arc<AtomicBool>, answered: Arc<AtomicUsize>) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (_, body) = read_request(&stream);
            let answer = if open.load(Ordering::SeqCst) {
                let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let texts = request["input"].as_array().map_or(0, Vec::len);
                let data: Vec<Value> =
                    (0..texts).map(|i| json!({"index": i, "embedding": [1.0, 0.0, 0.0, 0.0]})).collect();
                answered.fetch_add(1, Ordering::SeqCst);
                let body = json!({"data": data}).to_string();
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                )
            } else {
                "HTTP/1.1 503 Busy\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_owned()
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    addr
}

fn stats(daemon: &Daemon) -> Value {
    let (status, stats) = http(daemon.addr, "GET", "/stats", None);
    assert_eq!(status, 200, "{stats}");
    stats
}

/// Background embedding with no room for the vectors: they are tried again (the worker keeps
/// running, nothing crashes), and stored once space is back.
#[test]
#[cfg(target_os = "linux")]
fn embedding_on_a_full_disk_is_retried_and_stored_with_space() {
    if !has_prlimit() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (open, answered) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicUsize::new(0)));
    let endpoint = format!("http://{}/v1", serve_embeddings(Arc::clone(&open), Arc::clone(&answered)));
    let daemon = Daemon::start_with(
        dir.path(),
        &[("CAIRN_EMBEDDER", "http"), ("CAIRN_EMBED_URL", &endpoint), ("CAIRN_EMBED_MODEL", "fake")],
        std::process::Stdio::null(),
    );
    assert_eq!(save(&daemon, "embedded before").0, 201);
    wait_until("the first vector", 60, || stats(&daemon)["embeddings_pending"] == 0);

    // Saved while the endpoint is down, embedded once the disk is full.
    open.store(false, Ordering::SeqCst);
    for i in 0..3 {
        assert_eq!(save(&daemon, &format!("waiting {i}")).0, 201);
    }
    limit_file_size(&daemon, Some(1));
    let before = answered.load(Ordering::SeqCst);
    open.store(true, Ordering::SeqCst);
    wait_until("the vectors computed twice (a retry)", 60, || answered.load(Ordering::SeqCst) >= before + 2);
    let stats_full = stats(&daemon);
    assert_eq!(stats_full["embeddings_pending"], 3, "{stats_full}");
    assert_eq!(worker_state(&daemon, "cairn-embed"), "running");

    limit_file_size(&daemon, None);
    wait_until("the vectors stored", 120, || stats(&daemon)["embeddings_pending"] == 0);
    assert_eq!(worker_state(&daemon, "cairn-embed"), "running");
    let stored = stats(&daemon);
    assert_eq!(stored["embeddings_stored"], 4, "{stored}");
}

/// Run `cairn hook <event>` for `data` (limited to `fsize` bytes per file when given, as a
/// full disk would), with a Claude Code payload; returns its output.
fn hook(data: &Path, cwd: &Path, event: &str, payload: &Value, fsize: Option<u64>) -> std::process::Output {
    let mut command = match fsize {
        Some(bytes) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--fsize={bytes}")).arg("--").arg(env!("CARGO_BIN_EXE_cairn"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_cairn")),
    };
    let mut child = command
        .args(["hook", event])
        .env("CAIRN_DATA_DIR", data)
        .env("CAIRN_AUTOSTART", "never")
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn prompt_payload(dir: &Path, session: &str, prompt: &str) -> Value {
    json!({"session_id": session, "cwd": dir, "transcript_path": dir.join("none.jsonl"),
           "hook_event_name": "UserPromptSubmit", "prompt": prompt})
}

fn prompts(daemon: &Daemon) -> String {
    let (status, prompts) = op(daemon, "recent_prompts", json!({"limit": 50}));
    assert_eq!(status, 200, "{prompts}");
    prompts.to_string()
}

/// A hook whose write the daemon has no room for: the hook answers (exit 0), its event waits in
/// the spool, and the daemon applies it once space is back (its drain, no restart), once. With
/// `CAIRN_AUTOSTART=never` (a daemon the user runs): such a hook once ran the write without the
/// spool and lost it on the `disk_full` answer.
#[test]
#[cfg(target_os = "linux")]
fn a_hook_event_the_daemon_has_no_room_for_waits_in_the_spool() {
    if !has_prlimit() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let daemon = Daemon::start_with(&data, &[("CAIRN_EMBEDDER", "none")], std::process::Stdio::null());
    limit_file_size(&daemon, Some(1));
    let payload = prompt_payload(tmp.path(), "full-1", "why does the checkout retry payments three times?");
    let out = hook(&data, tmp.path(), "UserPromptSubmit", &payload, None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(Spool::in_data_dir(&data).pending().len(), 1, "the event is kept for the daemon");
    assert!(!prompts(&daemon).contains("retry payments"));

    limit_file_size(&daemon, None);
    wait_until("the spool drained", 60, || Spool::in_data_dir(&data).pending().is_empty());
    assert_eq!(prompts(&daemon).matches("retry payments three times").count(), 1);
}

/// The same with the spool on the full disk too (the hook cannot keep its event either): the
/// hook still answers in its budget with exit 0, and the daemon and the store are unharmed.
#[test]
#[cfg(target_os = "linux")]
fn a_hook_with_its_spool_on_the_full_disk_fails_open() {
    if !has_prlimit() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let daemon = Daemon::start_with(&data, &[("CAIRN_EMBEDDER", "none")], std::process::Stdio::null());
    limit_file_size(&daemon, Some(1));
    let payload = prompt_payload(tmp.path(), "full-2", "where is the retry budget configured?");
    let started = Instant::now();
    let out = hook(&data, tmp.path(), "UserPromptSubmit", &payload, Some(1));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < Duration::from_secs(5), "the hook took {:?}", started.elapsed());
    assert_eq!(Spool::in_data_dir(&data).pending().len(), 0);

    limit_file_size(&daemon, None);
    assert_eq!(save(&daemon, "after space came back").0, 201);
    assert_eq!(worker_state(&daemon, "cairn-writer"), "running");
}
