//! The store stays bounded: `[history]` retention keys in `cairn config`, `cairn gc` (dry run,
//! then for real), a cap warning in `cairn stats` and `cairn doctor`, and a prune or a gc
//! killed half-way (SIGKILL) leaving whole sessions and a searchable archive.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_core::history::model::*;
use cairn_core::history::store::SourceRef;
use cairn_core::history::{HISTORY_DB_FILE, HistoryDb};

fn cmd(data: &Path, args: &[&str]) -> Command {
    let mut cmd = crate::support::cairn();
    cmd.args(args).env("CAIRN_DATA_DIR", data).env("CAIRN_EMBEDDER", "none").stdin(Stdio::null());
    cmd
}

fn ok(data: &Path, args: &[&str]) -> String {
    let out: Output = cmd(data, args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (r"\d+(\.\d)? (B|KB|MB|GB)", "[BYTES]"),
            (r"\(\d+ of \d+ bytes", "([N] of [N] bytes"),
            (r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

/// `count` sessions of `parts` text parts each into `data`'s archive, session i last updated
/// on 2020-01-01 plus i minutes (all old), one batch per 500 sessions.
fn archive(data: &Path, count: usize, parts: usize) {
    std::fs::create_dir_all(data).unwrap();
    let mut db = HistoryDb::open(&data.join(HISTORY_DB_FILE)).unwrap();
    for (chunk, ids) in (0..count).collect::<Vec<_>>().chunks(500).enumerate() {
        let mut batch = IngestBatch::default();
        for i in ids {
            let (id, at) = (format!("ses_{i:06}"), format!("2020-01-01T{:02}:{:02}:00.000Z", i / 60 % 24, i % 60));
            let user = HistoryMessage::new(&id, "msg_1", HistoryRole::User, 1, &at);
            for p in 0..parts {
                batch.parts.push(HistoryPart {
                    text: Some(format!("session {i} talks about the flaky login test, part {p}")),
                    ..HistoryPart::new(&id, &user.id, &format!("prt_{p}"), p as i64, PartKind::Text)
                });
            }
            batch.messages.push(user);
            batch.sessions.push(HistorySession {
                id,
                host: HistoryHost::OpenCode,
                project: Some("billing".into()),
                directory: None,
                parent_id: None,
                title: None,
                agent: None,
                model: None,
                created_at: at.clone(),
                updated_at: at,
            });
        }
        let source = SourceRef { key: format!("opencode.db#chunk{chunk}"), host: HistoryHost::OpenCode };
        let next = Cursor { offset: 0, size: 0, mtime_ms: 1, watermark: None };
        db.apply(&source, None, &batch, &next).unwrap();
    }
}

fn count(data: &Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(data.join(HISTORY_DB_FILE)).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Sessions with a part of another session's id, or parts without their session.
fn broken_sessions(data: &Path) -> i64 {
    count(
        data,
        "SELECT (SELECT count(*) FROM history_parts WHERE session_id NOT IN (SELECT id FROM history_sessions))
              + (SELECT count(*) FROM history_messages WHERE session_id NOT IN (SELECT id FROM history_sessions))
              + (SELECT count(*) FROM history_sessions s WHERE (SELECT count(*) FROM history_parts p WHERE p.session_id = s.id) != 4)",
    )
}

#[test]
fn config_lists_the_history_keys_and_refuses_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("config.toml"), "[history]\nkeep_days = 90\n").unwrap();
    let text =
        String::from_utf8(cmd(&data, &["config"]).env("CAIRN_HISTORY_MAX_BYTES", "2GB").output().unwrap().stdout)
            .unwrap();
    let history = &text[text.find("History ([history]").unwrap()..text.find("Environment variables").unwrap()];
    snap!("config_history_settings", history);
    assert!(text.contains("CAIRN_HISTORY_KEEP_DAYS"), "the variable is listed");

    std::fs::write(data.join("config.toml"), "[history]\nkeep_days = -3\n").unwrap();
    let bad = cmd(&data, &["config"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && stderr.contains("invalid_config") && stderr.contains("history.keep_days"),
        "{stderr}"
    );
}

#[test]
fn gc_dry_run_changes_nothing_then_gc_drops_the_old_models_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for i in 0..40 {
        ok(&data, &["save", &format!("memory {i}"), &format!("what memory {i} says")]);
    }
    let conn = rusqlite::Connection::open(data.join("cairn.db")).unwrap();
    let vector = vec![0_u8; 384 * 4];
    conn.execute(
        "INSERT INTO embeddings (observation_id, model, dims, vector, created_at)
         SELECT id, CASE WHEN id % 2 = 0 THEN 'http:old-model' ELSE 'http:new-model' END, 384, ?1, '2026-01-01T00:00:00.000Z'
         FROM observations",
        [&vector],
    )
    .unwrap();
    let vectors = |model: &str| -> i64 {
        conn.query_row("SELECT count(*) FROM embeddings WHERE model = ?1", [model], |r| r.get(0)).unwrap()
    };
    let http = |args: &[&str]| {
        let out = cmd(&data, args)
            .env("CAIRN_EMBEDDER", "http")
            .env("CAIRN_EMBED_URL", "http://127.0.0.1:9/v1")
            .env("CAIRN_EMBED_MODEL", "new-model")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };

    let dry = http(&["gc", "--dry-run"]);
    snap!("gc_dry_run", dry);
    assert_eq!((vectors("http:old-model"), vectors("http:new-model")), (20, 20), "a dry run drops nothing");

    let json: serde_json::Value = serde_json::from_str(&http(&["gc", "--json"])).unwrap();
    assert_eq!(json["old_model_vectors"]["rows"], 20);
    assert_eq!(json["memory_store"]["vacuumed"], true);
    assert_eq!((vectors("http:old-model"), vectors("http:new-model")), (0, 20), "the model in use keeps its own");
    snap!("gc_after", http(&["gc"]));
}

/// `bytes` of file parts (kept, not indexed) in sessions of 256 parts of 4 KB, into `data`'s
/// archive: a large `history.db` made quickly.
fn archive_of_files(data: &Path, bytes: usize) {
    std::fs::create_dir_all(data).unwrap();
    let mut db = HistoryDb::open(&data.join(HISTORY_DB_FILE)).unwrap();
    let body: String = (0..4096).map(|i| char::from(b'a' + (i * 7 % 26) as u8)).collect();
    for s in 0..bytes.div_ceil(256 * 4096) {
        let (id, at) = (format!("ses_{s:04}"), "2026-01-01T00:00:00.000Z");
        let user = HistoryMessage::new(&id, "msg_1", HistoryRole::User, 1, at);
        let parts = (0..256).map(|p| HistoryPart {
            text: Some(format!("{s}:{p}:{body}")),
            ..HistoryPart::new(&id, &user.id, &format!("prt_{p}"), p, PartKind::File)
        });
        let batch = IngestBatch {
            sessions: vec![HistorySession::new(&id, HistoryHost::OpenCode, at, at)],
            messages: vec![user.clone()],
            parts: parts.collect(),
            ..IngestBatch::default()
        };
        let source = SourceRef { key: format!("opencode.db#{s}"), host: HistoryHost::OpenCode };
        db.apply(&source, None, &batch, &Cursor { offset: 0, size: 0, mtime_ms: 1, watermark: None }).unwrap();
    }
}

/// The most anonymous memory (`RssAnon`: the heap, not the mapped files) `cmd` held, polled
/// until it exits; it must succeed.
fn peak_anon_kb(mut cmd: Command) -> u64 {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        let anon = std::fs::read_to_string(&status).ok().and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("RssAnon:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        });
        peak = peak.max(anon.unwrap_or(0));
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    peak
}

/// `cairn gc` rebuilds a large archive with SQLite's copy on disk: its heap stays far below the
/// file's size. (The connections keep temporary storage in memory, where the copy of a 20 GB
/// archive would take 20 GB of RAM in the daemon.)
#[test]
fn gc_rebuilds_a_large_archive_without_holding_it_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    archive_of_files(&data, 64 << 20);
    let file_kb = std::fs::metadata(data.join(HISTORY_DB_FILE)).unwrap().len() / 1024;
    assert!(file_kb > 60 << 10, "the archive holds {file_kb} KB");
    let idle = peak_anon_kb(cmd(&data, &["gc", "--dry-run"]));
    let rebuilding = peak_anon_kb(cmd(&data, &["gc"]));
    assert!(
        rebuilding < idle + file_kb / 4,
        "gc held {rebuilding} KB of heap at most, a dry run {idle} KB, for a file of {file_kb} KB"
    );
    assert_eq!(count(&data, "SELECT count(*) FROM history_parts"), 256 * 64);
}

#[test]
fn stats_and_doctor_warn_near_the_archive_cap() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ok(&data, &["save", "a memory", "so the store exists"]);
    archive(&data, 20, 4);
    let cap = "CAIRN_HISTORY_MAX_BYTES";
    let stats = String::from_utf8(cmd(&data, &["stats"]).env(cap, "1000").output().unwrap().stdout).unwrap();
    let warning = stats.lines().find(|l| l.contains("warning:")).expect("a warning line").trim().to_owned();
    snap!("stats_cap_warning", warning.split(" % ").nth(1).unwrap());
    let json: serde_json::Value =
        serde_json::from_slice(&cmd(&data, &["stats", "--json"]).env(cap, "1000").output().unwrap().stdout).unwrap();
    assert_eq!(json["disk"]["warnings"][0]["cap"], "history.max_bytes");
    let doctor = String::from_utf8(cmd(&data, &["doctor"]).env(cap, "1000").output().unwrap().stdout).unwrap();
    assert!(doctor.contains("history archive is at"), "{doctor}");
    let far = String::from_utf8(cmd(&data, &["stats"]).env(cap, "1TB").output().unwrap().stdout).unwrap();
    assert!(!far.contains("warning:"), "{far}");
}

/// Start `args`, wait until `moved` says it is under way, SIGKILL it.
fn kill_mid_way(data: &Path, args: &[&str], moved: impl Fn() -> bool) -> std::process::ExitStatus {
    let mut child = cmd(data, args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !moved() {
        assert!(child.try_wait().unwrap().is_none(), "{args:?} ended before it could be killed mid-way");
        assert!(Instant::now() < deadline, "{args:?} never got under way");
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap();
    child.wait().unwrap()
}

#[test]
fn a_prune_killed_half_way_leaves_whole_sessions_and_a_searchable_archive() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let total: i64 = 20_000;
    archive(&data, 20_000, 4);
    let sessions = || count(&data, "SELECT count(*) FROM history_sessions");
    let status = kill_mid_way(&data, &["history", "prune", "--older-than", "30"], || sessions() < total);
    assert!(!status.success(), "killed, not finished");
    let left = sessions();
    assert!(left > 0 && left < total, "killed between batches: {left} of {total} left");
    assert_eq!(left % 50, 0, "whole batches of 50 sessions went");
    assert_eq!(broken_sessions(&data), 0, "every remaining session is whole");
    let found = ok(&data, &["history", "search", "flaky", "login", "--json"]);
    let found: serde_json::Value = serde_json::from_str(&found).unwrap();
    assert!(!found["messages"].as_array().unwrap().is_empty(), "the archive still answers searches");

    // A gc killed while it rebuilds leaves both files whole.
    let before = sessions();
    ok(&data, &["save", "a memory", "so the store exists"]);
    let started = Instant::now();
    let _ = kill_mid_way(&data, &["gc"], || started.elapsed() > Duration::from_millis(30));
    assert_eq!(sessions(), before, "gc removes no session");
    assert_eq!(broken_sessions(&data), 0);
    assert!(
        ok(&data, &["history", "search", "flaky", "--json"]).contains("ses_"),
        "still searchable after a killed gc"
    );
    assert!(ok(&data, &["search", "memory"]).contains("a memory"), "the memory store is whole");
    let check = count(&data, "SELECT count(*) FROM pragma_integrity_check WHERE integrity_check != 'ok'");
    assert_eq!(check, 0);
}
