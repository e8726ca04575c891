//! The index file (`index.rs`): rebuilt when missing, foreign or of the old layout; caught up
//! after a kill; a scan's indexer leaves every part indexed exactly once.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

use super::index::fts_path;
use super::ingest;
use super::query::{SearchRequest, search};
use super::store::HistoryDb;
use cairn_base::settings::HistorySettings;

/// Sessions found by a search over every session.
fn sessions_found(db: &HistoryDb, q: &str) -> BTreeSet<String> {
    let req = SearchRequest {
        query: q.into(),
        session_id: None,
        project: None,
        literal: false,
        kinds: None,
        caller_session_id: None,
    };
    search(db, &req, &HistorySettings::default()).unwrap().messages.into_iter().map(|m| m.session_id).collect()
}

/// Every indexed rowid once, and exactly the parts that have something to index.
fn assert_index_matches_rows(db: &HistoryDb) {
    let indexed: Vec<i64> = {
        let mut stmt = db.fts().prepare("SELECT rowid FROM history_fts ORDER BY rowid").unwrap();
        stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
    };
    let unique: BTreeSet<i64> = indexed.iter().copied().collect();
    assert_eq!(unique.len(), indexed.len(), "a part indexed twice");
    let parts: BTreeSet<i64> = {
        let mut stmt = db
            .conn()
            .prepare(
                "SELECT rowid FROM history_parts WHERE kind IN ('text', 'subtask', 'reasoning', 'tool') AND injected = 0
                   AND length(coalesce(text, '') || coalesce(tool, '') || coalesce(input, '') || coalesce(output, '')) > 0",
            )
            .unwrap();
        stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
    };
    assert_eq!(unique, parts);
    db.fts().execute("INSERT INTO history_fts (history_fts) VALUES ('integrity-check')", []).unwrap();
}

/// Claude Code transcripts under `<home>/.claude/projects/-p/`: `sessions` files of `turns`
/// turns; each turn's prompt holds the word `w<session>x<turn>`, its answer `marker<session>`.
fn write_corpus(home: &Path, sessions: usize, turns: usize) -> Vec<PathBuf> {
    let dir = home.join(".claude/projects/-p");
    std::fs::create_dir_all(&dir).unwrap();
    let padding = "lorem ipsum dolor sit amet ".repeat(20);
    (0..sessions)
        .map(|s| {
            let id = format!("00000000-0000-4000-8000-{s:012}");
            let path = dir.join(format!("{id}.jsonl"));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            for t in 0..turns {
                let ts = format!("2026-01-01T00:{:02}:{:02}.000Z", (t / 60) % 60, t % 60);
                let user = serde_json::json!({"type": "user", "uuid": format!("u-{s}-{t}"), "sessionId": id,
                    "timestamp": ts, "cwd": "/p",
                    "message": {"role": "user", "content": format!("prompt w{s}x{t} {padding}")}});
                let answer = serde_json::json!({"type": "assistant", "uuid": format!("a-{s}-{t}"), "sessionId": id,
                    "timestamp": ts, "cwd": "/p",
                    "message": {"id": format!("msg-{s}-{t}"), "role": "assistant", "model": "m",
                        "content": [{"type": "text", "text": format!("answer marker{s} {padding}")}]}});
                writeln!(out, "{user}").unwrap();
                writeln!(out, "{answer}").unwrap();
            }
            out.flush().unwrap();
            path
        })
        .collect()
}

fn env_for(home: &Path) -> impl Fn(&str) -> Option<String> + use<> {
    let home = home.to_path_buf();
    move |name| match name {
        "HOME" => Some(home.display().to_string()),
        "XDG_DATA_HOME" => Some(home.join("xdg-data").display().to_string()),
        _ => None,
    }
}

fn remove_index_file(db_path: &Path) {
    let fts = fts_path(db_path);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", fts.display()));
    }
}

#[test]
fn the_index_file_sits_beside_the_archive() {
    assert_eq!(fts_path(Path::new("/d/history.db")), PathBuf::from("/d/history-fts.db"));
}

#[test]
fn a_scan_indexes_every_part_once_and_a_missing_index_file_is_rebuilt() {
    let home = tempfile::tempdir().unwrap();
    write_corpus(home.path(), 4, 40);
    let db_path = home.path().join("history.db");
    let mut db = HistoryDb::open(&db_path).unwrap();
    ingest::scan(&mut db, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_index_matches_rows(&db);
    assert_eq!(sessions_found(&db, "w2x39").len(), 1, "searchable when the scan returns");
    drop(db);

    remove_index_file(&db_path);
    let db = HistoryDb::open(&db_path).unwrap();
    assert_index_matches_rows(&db);
    assert_eq!(sessions_found(&db, "marker3").len(), 1);
}

#[test]
fn an_index_file_left_by_another_archive_is_rebuilt() {
    let home = tempfile::tempdir().unwrap();
    write_corpus(home.path(), 2, 5);
    let db_path = home.path().join("history.db");
    let mut db = HistoryDb::open(&db_path).unwrap();
    ingest::scan(&mut db, &env_for(home.path()), &mut |_| {}).unwrap();
    drop(db);
    // history.db deleted, its index file left: a new archive must not read the old index.
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db_path.display()));
    }
    let mut db = HistoryDb::open(&db_path).unwrap();
    assert!(sessions_found(&db, "marker1").is_empty());
    std::fs::remove_file(home.path().join(".claude/projects/-p/00000000-0000-4000-8000-000000000000.jsonl")).unwrap();
    ingest::scan(&mut db, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_index_matches_rows(&db);
    assert_eq!(sessions_found(&db, "marker1").len(), 1);
    assert!(sessions_found(&db, "marker0").is_empty());
}

/// An index file made before the trigram index (layout 1: no `history_cjk`, user_version 0) is
/// rebuilt at open, so Chinese and Japanese searches find what was archived before.
#[test]
fn an_index_file_without_the_trigram_index_is_rebuilt() {
    let home = tempfile::tempdir().unwrap();
    write_corpus(home.path(), 2, 5);
    let session = "00000000-0000-4000-8000-0000000000cc";
    let record = serde_json::json!({
        "type": "user", "uuid": "00000000-0000-4000-8000-00000000c0de", "parentUuid": null, "sessionId": session,
        "timestamp": "2026-11-25T04:36:17.425Z", "cwd": "/nonexistent/p",
        "message": {"role": "user", "content": "我们修复了数据库连接错误"},
    });
    std::fs::write(home.path().join(format!(".claude/projects/-p/{session}.jsonl")), format!("{record}\n")).unwrap();
    let db_path = home.path().join("history.db");
    let mut db = HistoryDb::open(&db_path).unwrap();
    ingest::scan(&mut db, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!(sessions_found(&db, "数据库连接"), BTreeSet::from([session.to_owned()]));
    drop(db);
    let fts = Connection::open(fts_path(&db_path)).unwrap();
    fts.execute_batch("DROP TABLE history_cjk; PRAGMA user_version = 0;").unwrap();
    drop(fts);

    let db = HistoryDb::open(&db_path).unwrap();
    assert_eq!(sessions_found(&db, "数据库连接"), BTreeSet::from([session.to_owned()]));
    assert_index_matches_rows(&db);
    let version: i64 = db.fts().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, super::index::LAYOUT);
}

/// An archive of the first layout (its index inside `history.db`) upgrades: the old index goes,
/// the index file is built from the rows, and search finds them.
#[test]
fn an_archive_of_the_first_layout_upgrades_and_stays_searchable() {
    let home = tempfile::tempdir().unwrap();
    let db_path = home.path().join("history.db");
    {
        let conn = Connection::open(&db_path).unwrap();
        conn.execute_batch(include_str!("../migrations/0001_init.sql")).unwrap();
        conn.execute_batch(
            "INSERT INTO history_sessions (id, host, created_at, updated_at)
                 VALUES ('ses_old', 'opencode', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO history_messages (session_id, id, role, seq, turn_number, created_at)
                 VALUES ('ses_old', 'm1', 'user', 1, 1, '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        for (i, body) in ["an ancient zeppelin", "another part"].iter().enumerate() {
            conn.execute(
                "INSERT INTO history_parts (session_id, message_id, id, idx, kind, text) VALUES ('ses_old', 'm1', ?1, ?2, 'text', ?3)",
                params![format!("p{i}"), i as i64, body],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO history_fts (rowid, body, kind, session) VALUES (?1, ?2, 'text', 'ses_old')",
                params![conn.last_insert_rowid(), body],
            )
            .unwrap();
        }
        conn.execute_batch("PRAGMA user_version = 1").unwrap();
    }
    let db = HistoryDb::open(&db_path).unwrap();
    let in_main: bool = db
        .conn()
        .query_row("SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'history_fts')", [], |r| r.get(0))
        .unwrap();
    assert!(!in_main, "the old index is dropped from history.db");
    assert_eq!(sessions_found(&db, "zeppelin"), BTreeSet::from(["ses_old".to_owned()]));
    assert_index_matches_rows(&db);
}

/// The state a kill between the rows' commit and the index's leaves (rows and queue stored, the
/// index behind): the next open indexes what is missing, once.
#[test]
fn rows_committed_before_a_kill_are_indexed_at_the_next_open() {
    let home = tempfile::tempdir().unwrap();
    write_corpus(home.path(), 3, 10);
    let db_path = home.path().join("history.db");
    let mut db = HistoryDb::open(&db_path).unwrap();
    ingest::scan(&mut db, &env_for(home.path()), &mut |_| {}).unwrap();
    drop(db);
    // Put the index back to an earlier state: its mark and its rows as before the last entries.
    {
        let main = Connection::open(&db_path).unwrap();
        main.execute(
            "INSERT INTO history_fts_queue (lo, hi, op) SELECT min(rowid), max(rowid), 'new' FROM history_parts",
            [],
        )
        .unwrap();
        let seq = main.last_insert_rowid();
        let fts = Connection::open(fts_path(&db_path)).unwrap();
        fts.execute_batch("INSERT INTO history_fts (history_fts) VALUES ('delete-all')").unwrap();
        fts.execute("UPDATE history_fts_state SET mark = ?1", [seq - 1]).unwrap();
    }
    let db = HistoryDb::open(&db_path).unwrap();
    assert_index_matches_rows(&db);
    assert_eq!(sessions_found(&db, "marker2").len(), 1);
}

/// Not a test on its own: the child process [`a_scan_killed_at_any_moment_loses_nothing_committed`]
/// starts and kills. It scans `CAIRN_TEST_SCAN_HOME` into its `history.db`.
#[test]
fn scan_child() {
    let Ok(home) = std::env::var("CAIRN_TEST_SCAN_HOME") else { return };
    let home = PathBuf::from(home);
    let mut db = HistoryDb::open(&home.join("history.db")).unwrap();
    ingest::scan(&mut db, &env_for(&home), &mut |_| {}).unwrap();
}

/// A scan (rows on one thread, the index on another, checkpoints on a third) SIGKILLed at
/// several moments: each time, the archive opens, every stored part is indexed exactly once,
/// and a scan run to its end then finds every session.
#[test]
fn a_scan_killed_at_any_moment_loses_nothing_committed() {
    let home = tempfile::tempdir().unwrap();
    let sessions = 12;
    write_corpus(home.path(), sessions, 400);
    let db_path = home.path().join("history.db");
    let exe = std::env::current_exe().unwrap();
    let mut kills = 0;
    for delay_ms in [30u64, 80, 150, 250, 400] {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "index_tests::scan_child", "--nocapture"])
            .env("CAIRN_TEST_SCAN_HOME", home.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(delay_ms) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();
        let db = HistoryDb::open(&db_path).unwrap();
        assert_index_matches_rows(&db);
        let ok: String = db.conn().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
    }
    let mut db = HistoryDb::open(&db_path).unwrap();
    ingest::scan(&mut db, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_index_matches_rows(&db);
    for s in 0..sessions {
        assert_eq!(sessions_found(&db, &format!("marker{s}")).len(), 1, "session {s}");
    }
    assert!(kills > 0, "no scan was killed: make the corpus bigger");
}

/// The same with transcripts of several chunks each, which the scan's reader thread reads
/// ahead of the writer: a kill loses at most what was not committed, and the scan after it
/// stores every message exactly once.
#[test]
fn a_scan_killed_while_reading_ahead_stores_every_message_once() {
    let home = tempfile::tempdir().unwrap();
    let (sessions, turns) = (3, 4_000);
    write_corpus(home.path(), sessions, turns);
    assert!(
        std::fs::metadata(home.path().join(".claude/projects/-p/00000000-0000-4000-8000-000000000000.jsonl"))
            .unwrap()
            .len()
            > ingest::CHUNK_BYTES as u64
    );
    let db_path = home.path().join("history.db");
    let exe = std::env::current_exe().unwrap();
    let mut kills = 0;
    for delay_ms in [150u64, 400, 900] {
        let mut child = std::process::Command::new(&exe)
            .args(["--exact", "index_tests::scan_child", "--nocapture"])
            .env("CAIRN_TEST_SCAN_HOME", home.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();
        let db = HistoryDb::open(&db_path).unwrap();
        assert_index_matches_rows(&db);
    }
    let mut db = HistoryDb::open(&db_path).unwrap();
    ingest::scan(&mut db, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_index_matches_rows(&db);
    let (messages, distinct): (i64, i64) = db
        .conn()
        .query_row("SELECT count(*), count(DISTINCT session_id || '/' || id) FROM history_messages", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((messages, distinct), ((2 * sessions * turns) as i64, (2 * sessions * turns) as i64));
    for s in 0..sessions {
        assert_eq!(sessions_found(&db, &format!("marker{s}")).len(), 1, "session {s}");
    }
    assert!(kills > 0, "no scan was killed: make the corpus bigger");
}

/// The writer of a scan waits for the indexer by the text it queued, not by entries: many
/// small transcripts never stall it, a long backlog of text or of entries does until the
/// indexer moves.
#[test]
fn a_scan_writer_waits_for_the_indexer_by_text_queued_not_by_entries() {
    use super::index::{MAX_LAG_BYTES, MAX_LAG_ENTRIES, Progress};
    let progress = std::sync::Arc::new(Progress::default());
    for seq in 1..=MAX_LAG_ENTRIES {
        progress.wait_within_lag(seq, 1_000); // returns: little text, not too many entries
    }
    let waits_until_published = |seq: i64, bytes: u64, mark: i64| {
        let shared = std::sync::Arc::clone(&progress);
        let writer = std::thread::spawn(move || shared.wait_within_lag(seq, bytes));
        std::thread::sleep(Duration::from_millis(150));
        assert!(!writer.is_finished(), "the writer went on {seq} entries / {bytes} bytes ahead");
        progress.publish_for_tests(mark);
        writer.join().unwrap();
    };
    // One entry too many: waits until the indexer applied the first.
    waits_until_published(MAX_LAG_ENTRIES + 1, 0, 1);
    // Too much text: waits until the indexer applied enough of it.
    progress.publish_for_tests(MAX_LAG_ENTRIES + 1);
    waits_until_published(MAX_LAG_ENTRIES + 2, MAX_LAG_BYTES + 1, MAX_LAG_ENTRIES + 2);
}
