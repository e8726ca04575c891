//! Crash proof (never lose): a write storm against a real `cairn serve` — HTTP saves, the
//! operation RPC the CLI and `cairn mcp` use, the CLI itself, imports and updates — killed with
//! SIGKILL at a random moment, round after round. After every kill:
//!
//! - every acknowledged write (a 2xx, or the CLI's exit 0) is stored with its exact content,
//!   once (no lost write, no write applied twice);
//! - an update is either its last acknowledged version or one in flight at the kill;
//! - an import in flight at the kill is all there or not there at all;
//! - `PRAGMA integrity_check` is `ok`, both FTS5 indexes match their tables, and
//!   `cairn doctor --json` says `ok`;
//! - the daemon comes back (its stale `daemon.json` names a dead process) and is healthy, and
//!   a search finds every memory acknowledged in the round before.
//!
//! CAIRN_CRASH_ROUNDS (default 20) sets the number of kills; CAIRN_CRASH_SEED replays a run
//! (the seed is printed). The storm of each round lasts 150–1200 ms.
//!
//! A second, shorter storm (CAIRN_CRASH_MODEL_ROUNDS, default 2) runs the daemon with the test
//! model, so it embeds in the background while it is killed, and adds deletes to the storm.
//! Before each storm and at the end, once the restarted daemon reports no embedding pending,
//! every live memory has exactly one whole vector of the current model, of its current text.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{Value, json};

use crate::support::{Daemon, Rng, cairn, http, model_dir, recorded};

const PROJECT: &str = "crash";

/// One write a client attempted, and whether it was acknowledged.
#[derive(Debug, Clone)]
struct Attempt {
    /// (title, content) of every memory the write carries (an import carries several).
    memories: Vec<(String, String)>,
    acked: bool,
    /// What an unacknowledged write got instead: a status and body, or a connection error.
    failure: Option<String>,
}

/// What every writer thread reports at the end of a round.
#[derive(Default)]
struct RoundLog {
    saves: Vec<Attempt>,
    imports: Vec<Attempt>,
    /// Update attempts on the round's one updated memory, in order.
    updates: Vec<Attempt>,
    /// Delete attempts (model storm only): the memory's title, and whether acknowledged.
    deletes: Vec<(String, bool)>,
}

/// The storm's settings.
struct Storm<'a> {
    rounds: usize,
    /// The model directory: the daemon embeds in the background, and vectors are checked.
    model: Option<&'a Path>,
    /// Pause of each writer between writes (a storm the embedder can keep up with).
    pace: Duration,
    /// Writes per writer and round, at most (a storm the embedder can finish in seconds).
    max_writes: usize,
}

fn env_rounds(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

#[test]
fn sigkill_during_a_write_storm_loses_nothing() {
    storm(&Storm {
        rounds: env_rounds("CAIRN_CRASH_ROUNDS", 20),
        model: None,
        pace: Duration::ZERO,
        max_writes: usize::MAX,
    });
}

/// Kills land while the daemon embeds: each kill waits until the daemon has stored a vector
/// of the storm's memories, while the writers (paused between writes, so the indexer, which
/// only gets idle CPU, has some) leave more to embed.
#[test]
fn sigkill_while_embedding_keeps_vectors_exact() {
    let Some(model) = model_dir() else { return };
    storm(&Storm {
        rounds: env_rounds("CAIRN_CRASH_MODEL_ROUNDS", 2),
        model: Some(&model),
        pace: Duration::from_millis(60),
        max_writes: 10,
    });
}

fn storm(storm: &Storm<'_>) {
    let seed = Rng::seed_from_env("CAIRN_CRASH_SEED");
    eprintln!(
        "crash proof: CAIRN_CRASH_SEED={seed} rounds {} model {:?}",
        storm.rounds,
        storm.model.map(Path::display).map(|d| d.to_string())
    );
    let rounds = storm.rounds;
    let model = storm.model.map(Model::load);
    let model_env = storm.model.map(|m| m.to_str().expect("a UTF-8 model path").to_owned());
    let mut daemon_env: Vec<(&str, &str)> = vec![("CAIRN_LOG", "info")];
    if let Some(dir) = &model_env {
        daemon_env.push(("CAIRN_MODEL_DIR", dir));
    }
    let mut rng = Rng::new(seed);
    let tmp = tempfile::tempdir().unwrap();
    // cairn creates the data dir itself (0700), as for a user.
    let data = tmp.path().join("data");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let logs = tmp.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();

    // Every acknowledged memory so far: title → content.
    let mut acked: HashMap<String, String> = HashMap::new();
    // Titles acknowledged in the previous round: searched for after the restart.
    let mut to_search: Vec<String> = Vec::new();
    // The memory the updater revises, and the versions it may hold.
    let mut updated: Option<(i64, HashSet<String>)> = None;
    let started = Instant::now();
    let (mut kills, mut total_acked, mut in_flight_landed) = (0, 0, 0);
    // Model storm: vectors the killed daemon had stored for its round's memories.
    let mut embedded_in_storms = 0;

    for round in 0..rounds {
        let log = File::create(logs.join(format!("serve-{round}.log"))).unwrap();
        let mut daemon = Daemon::start_with(&data, &daemon_env, Stdio::from(log));
        let addr = daemon.addr;
        assert_healthy(addr, round);
        check_searchable(addr, &to_search, &acked, round);
        let (memory_id, allowed) = updated.get_or_insert_with(|| {
            let (status, body) = http(
                addr,
                "POST",
                "/observations",
                Some(&json!({"title": "crash updated memory", "content": "version zero", "project": PROJECT})),
            );
            assert_eq!(status, 201, "{body}");
            (body["id"].as_i64().unwrap(), HashSet::from(["version zero".to_owned()]))
        });
        let memory_id = *memory_id;
        // After the updated memory exists, so that it is always among the vectors checked.
        let mut to_delete = Vec::new();
        if let Some(model) = &model {
            model.check_all_embedded(addr, &data, &mut rng, round);
            to_delete = pick_to_delete(&data, &acked, &mut rng);
        }

        let stop = Arc::new(AtomicBool::new(false));
        let round_seed = rng.next_u64();
        let writers = spawn_writers(
            round,
            round_seed,
            addr,
            (&data, &work),
            memory_id,
            (storm.pace, storm.max_writes, to_delete),
            &stop,
        );
        std::thread::sleep(Duration::from_millis(rng.range(150, 1200)));
        if model.is_some() {
            wait_for_a_vector(&data, &round_titles(round), round);
            std::thread::sleep(Duration::from_millis(rng.range(0, 300)));
        }
        daemon.kill_hard();
        kills += 1;
        stop.store(true, Ordering::Relaxed);
        let mut log = RoundLog::default();
        for writer in writers {
            let part = writer.join().expect("writer thread");
            log.saves.extend(part.saves);
            log.imports.extend(part.imports);
            log.updates.extend(part.updates);
            log.deletes.extend(part.deletes);
        }
        assert!(recorded(&data).is_some(), "a killed daemon leaves its daemon.json behind (the restart must cope)");

        // What is on disk, with no daemon running.
        let conn = Connection::open(data.join("cairn.db")).unwrap();
        check_integrity(&conn, round);
        let stored = stored_memories(&conn);
        // A deleted memory is gone if the delete was acknowledged; one in flight may be either.
        for (title, delete_acked) in &log.deletes {
            assert!(!(*delete_acked && stored.contains_key(title)), "round {round}: deleted {title:?} is still there");
            if !stored.contains_key(title) {
                acked.remove(title);
            }
        }
        let mut round_acked = Vec::new();
        for attempt in log.saves.iter().chain(&log.imports) {
            for (title, content) in &attempt.memories {
                let found = stored.get(title);
                if attempt.acked {
                    let (content_stored, dups) = found
                        .unwrap_or_else(|| panic!("round {round} (seed {seed}): acknowledged {title:?} is not stored"));
                    assert_eq!(content_stored, content, "round {round}: {title:?} stored with other content");
                    assert_eq!(*dups, 1, "round {round}: {title:?} was applied {dups} times");
                    acked.insert(title.clone(), content.clone());
                    round_acked.push(title.clone());
                } else if let Some((content_stored, _)) = found {
                    // Committed, then killed before the answer: allowed, but exactly as sent.
                    assert_eq!(content_stored, content, "round {round}: {title:?} stored with other content");
                    acked.insert(title.clone(), content.clone());
                    in_flight_landed += 1;
                }
            }
        }
        for attempt in log.imports.iter().filter(|a| !a.acked) {
            let present = attempt.memories.iter().filter(|(t, _)| stored.contains_key(t)).count();
            assert!(
                present == 0 || present == attempt.memories.len(),
                "round {round}: an interrupted import is half applied ({present} of {})",
                attempt.memories.len()
            );
        }
        // Updates: the last acknowledged version, or one sent after it (in flight at the kill).
        if let Some(last_ack) = log.updates.iter().rposition(|a| a.acked) {
            allowed.clear();
            allowed.insert(log.updates[last_ack].memories[0].1.clone());
        }
        let first_unacked = log.updates.iter().rposition(|a| a.acked).map_or(0, |i| i + 1);
        allowed.extend(log.updates[first_unacked..].iter().map(|a| a.memories[0].1.clone()));
        let current: String =
            conn.query_row("SELECT content FROM observations WHERE id = ?1", [memory_id], |r| r.get(0)).unwrap();
        assert!(allowed.contains(&current), "round {round}: the updated memory holds {current:?}, never acknowledged");
        allowed.clear();
        allowed.insert(current);
        for (title, content) in &acked {
            let (content_stored, _) = stored
                .get(title)
                .unwrap_or_else(|| panic!("round {round} (seed {seed}): {title:?}, acknowledged earlier, is gone"));
            assert_eq!(content_stored, content);
        }
        check_vectors(&conn, round);
        if model.is_some() {
            embedded_in_storms += vectors_of(&conn, &round_acked);
        }
        drop(conn);
        doctor_says_ok(&data, round);

        let failures: Vec<&String> = log
            .saves
            .iter()
            .chain(&log.imports)
            .chain(&log.updates)
            .filter_map(|a| a.failure.as_ref())
            .filter(|f| !is_connection_failure(f))
            .collect();
        assert!(failures.is_empty(), "round {round}: writes refused while the daemon was up: {failures:?}");
        total_acked += round_acked.len();
        to_search = round_acked;
    }

    // One last restart: healthy, and everything of the last round is found.
    let log = File::create(logs.join("serve-final.log")).unwrap();
    let daemon = Daemon::start_with(&data, &daemon_env, Stdio::from(log));
    assert_healthy(daemon.addr, rounds);
    check_searchable(daemon.addr, &to_search, &acked, rounds);
    if let Some(model) = &model {
        model.check_all_embedded(daemon.addr, &data, &mut rng, rounds);
    }
    drop(daemon);
    eprintln!(
        "crash proof: {kills} SIGKILLs in {:.1?}, {total_acked} acknowledged writes kept, \
         {in_flight_landed} in-flight writes landed whole, {} memories in the store",
        started.elapsed(),
        acked.len()
    );
    assert!(total_acked > rounds, "the storm wrote too little to prove anything: {total_acked}");
    if model.is_some() {
        eprintln!("crash proof: {embedded_in_storms} vectors stored by daemons that were then killed");
        // Otherwise no kill could have interrupted the indexer: the proof would be vacuous.
        assert!(embedded_in_storms > 0, "the daemon never embedded during a storm");
    }
}

/// Start the round's writers: three HTTP savers, one `POST /v1/op` saver (what the CLI and
/// `cairn mcp` send), one CLI, one importer and updater, and a deleter when `to_delete` names
/// memories (id, title).
fn spawn_writers(
    round: usize,
    seed: u64,
    addr: std::net::SocketAddr,
    (data, work): (&Path, &Path),
    memory_id: i64,
    (pace, max_writes, to_delete): (Duration, usize, Vec<(i64, String)>),
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<RoundLog>> {
    let mut writers = Vec::new();
    if !to_delete.is_empty() {
        let stop = Arc::clone(stop);
        writers.push(std::thread::spawn(move || {
            let mut log = RoundLog::default();
            for (i, (id, title)) in to_delete.into_iter().enumerate() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // Soft and hard deletes: each must take the memory's vector with it.
                let path = format!("/observations/{id}?hard={}", i % 2 == 0);
                let (status, value) = http(addr, "DELETE", &path, None);
                assert!(status == 200 || status == 0, "round {round}: delete {id}: {status} {value}");
                log.deletes.push((title, status == 200));
                std::thread::sleep(pace * 4);
            }
            log
        }));
    }
    for w in 0..6 {
        let stop = Arc::clone(stop);
        let (data, work) = (data.to_owned(), work.to_owned());
        let mut rng = Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9E37_79B9));
        writers.push(std::thread::spawn(move || {
            let mut log = RoundLog::default();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) && i < max_writes {
                if !pace.is_zero() {
                    std::thread::sleep(pace);
                }
                let title = format!("crash r{round} w{w} n{i} {}", rng.word(12));
                // Longer than CONTEXT_MAX_CHARS: a short memory in a session is embedded with the
                // one before it, and a deletion in the storm would change that neighbour, so
                // its vector could not be checked against its own text alone (contextual
                // vectors are checked in the core's semantic tests).
                let content = format!(
                    "{} {} written by writer {w} in round {round}. {}",
                    rng.word(20),
                    rng.word(8),
                    "padding ".repeat(cairn_core::search::semantic::CONTEXT_MAX_CHARS as usize / 8 + 1)
                );
                match w {
                    0..=2 => {
                        let body = json!({"title": title, "content": content, "type": "bugfix", "project": PROJECT,
                            "session_id": format!("crash-http-{w}")});
                        let (status, value) = http(addr, "POST", "/observations", Some(&body));
                        log.saves.push(attempt(vec![(title, content)], status == 201, status, &value));
                    }
                    3 => {
                        let op = json!({"op": "save", "args": {"title": title, "content": content, "project": PROJECT}});
                        let (status, value) = http(addr, "POST", "/v1/op", Some(&op));
                        log.saves.push(attempt(vec![(title, content)], status == 200, status, &value));
                    }
                    4 => {
                        let out = cairn()
                            .args(["save", &title, &content, "--project", PROJECT])
                            .current_dir(&work)
                            .env("CAIRN_DATA_DIR", &data)
                            .output()
                            .unwrap();
                        let failure = (!out.status.success()).then(|| {
                            format!("cli {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim())
                        });
                        log.saves.push(Attempt { memories: vec![(title, content)], acked: failure.is_none(), failure });
                    }
                    _ => {
                        // Alternate: an import of three memories, an update of the shared one.
                        if i % 2 == 0 {
                            let memories: Vec<(String, String)> =
                                (0..3).map(|k| (format!("{title} import{k}"), format!("{content} part {k}"))).collect();
                            let observations: Vec<Value> = memories
                                .iter()
                                .map(|(t, c)| json!({"session_id": "crash-import", "title": t, "content": c, "project": PROJECT}))
                                .collect();
                            let file = json!({"sessions": [], "observations": observations});
                            let (status, value) = http(addr, "POST", "/import", Some(&file));
                            log.imports.push(attempt(memories, status == 200, status, &value));
                        } else {
                            let content = format!("version {round}.{i} {}", rng.word(10));
                            let path = format!("/observations/{memory_id}");
                            let (status, value) = http(addr, "PATCH", &path, Some(&json!({"content": content})));
                            log.updates.push(attempt(vec![(String::new(), content)], status == 200, status, &value));
                        }
                    }
                }
                i += 1;
            }
            log
        }));
    }
    writers
}

fn attempt(memories: Vec<(String, String)>, acked: bool, status: u16, body: &Value) -> Attempt {
    let failure =
        (!acked).then(|| if status == 0 { "connection failed".to_owned() } else { format!("{status}: {body}") });
    Attempt { memories, acked, failure }
}

/// A write that never got an answer because the daemon died (the only failures allowed):
/// no HTTP status at all, or the CLI saying the daemon went away mid-operation.
fn is_connection_failure(failure: &str) -> bool {
    failure == "connection failed" || failure.contains("operation_interrupted")
}

/// Every memory in the file: title → (content, duplicate_count).
fn stored_memories(conn: &Connection) -> HashMap<String, (String, i64)> {
    let mut stmt = conn
        .prepare("SELECT title, content, duplicate_count FROM observations WHERE deleted_at IS NULL AND project = ?1")
        .unwrap();
    let rows = stmt.query_map([PROJECT], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?)))).unwrap();
    let mut out = HashMap::new();
    for row in rows {
        let (title, value): (String, (String, i64)) = row.unwrap();
        assert!(out.insert(title.clone(), value).is_none(), "{title:?} is stored twice");
    }
    out
}

fn check_integrity(conn: &Connection, round: usize) {
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(integrity, "ok", "round {round}: integrity_check");
    for table in ["observations_fts", "prompts_fts"] {
        conn.execute(&format!("INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)"), [])
            .unwrap_or_else(|e| panic!("round {round}: {table} does not match its table: {e}"));
    }
}

/// Vectors after a crash, as the killed daemon left them: none may outlive its memory, and
/// each is whole (`dims` floats). Without a model no vector is computed and only this holds;
/// [`Model::check_all_embedded`] checks the rest once a restarted daemon has caught up.
fn check_vectors(conn: &Connection, round: usize) {
    let orphans: i64 = conn
        .query_row(
            "SELECT count(*) FROM embeddings e WHERE NOT EXISTS
                (SELECT 1 FROM observations o WHERE o.id = e.observation_id AND o.deleted_at IS NULL)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0, "round {round}: vectors of memories that are gone");
    let torn: i64 =
        conn.query_row("SELECT count(*) FROM embeddings WHERE length(vector) != dims * 4", [], |r| r.get(0)).unwrap();
    assert_eq!(torn, 0, "round {round}: vectors cut short");
}

/// Titles of a round's memories start with this.
fn round_titles(round: usize) -> String {
    format!("crash r{round} ")
}

/// Wait until the daemon has stored a vector of one of this round's memories: it is then
/// embedding, and a kill interrupts it (read from the file: the daemon is a WAL writer).
fn wait_for_a_vector(data: &Path, title_prefix: &str, round: usize) {
    let conn = Connection::open(data.join("cairn.db")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let pattern = format!("{title_prefix}%");
    loop {
        let embedded: bool = conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM embeddings e JOIN observations o ON o.id = e.observation_id
                 WHERE o.title LIKE ?1)",
                [&pattern],
                |r| r.get(0),
            )
            .unwrap();
        if embedded {
            return;
        }
        assert!(Instant::now() < deadline, "round {round}: the daemon embedded none of the storm's memories");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many of these memories have a vector.
fn vectors_of(conn: &Connection, titles: &[String]) -> usize {
    let mut stmt = conn
        .prepare(
            "SELECT count(*) FROM observations o JOIN embeddings e ON e.observation_id = o.id
             WHERE o.title = ?1 AND o.deleted_at IS NULL",
        )
        .unwrap();
    titles.iter().map(|t| stmt.query_row([t], |r| r.get::<_, i64>(0)).unwrap() as usize).sum()
}

/// Up to 12 memories of earlier rounds for the storm to delete: (id, title).
fn pick_to_delete(data: &Path, acked: &HashMap<String, String>, rng: &mut Rng) -> Vec<(i64, String)> {
    let conn = Connection::open(data.join("cairn.db")).unwrap();
    let mut titles: Vec<&String> = acked.keys().collect();
    titles.sort();
    let mut picked = Vec::new();
    for _ in 0..12.min(titles.len()) {
        let title = titles.swap_remove(rng.range(0, titles.len() as u64) as usize);
        let id: i64 = conn
            .query_row("SELECT id FROM observations WHERE title = ?1 AND deleted_at IS NULL", [title], |r| r.get(0))
            .unwrap();
        picked.push((id, title.clone()));
    }
    picked
}

/// The test model, loaded in this process to recompute vectors.
struct Model {
    id: String,
    embedder: cairn_embed::LocalModel,
}

impl Model {
    fn load(dir: &Path) -> Model {
        let embedder = cairn_embed::LocalModel::load(dir).expect("load the test model");
        Model { id: cairn_embed::local_model_id(dir), embedder }
    }

    /// Once the daemon reports nothing pending: every live memory has exactly one vector
    /// (`observation_id` is the table's key), of the current model, whole; none outlives its
    /// memory; and the vectors of the updated memory and of a sample of others are those of
    /// their current text (recomputed here: a vector left from an earlier text differs).
    fn check_all_embedded(&self, addr: std::net::SocketAddr, data: &Path, rng: &mut Rng, round: usize) {
        // The embedder runs at idle priority: on a machine busy with other work it advances
        // slowly but must keep advancing. Fail only when it stalls.
        let mut last_progress = (Instant::now(), None);
        loop {
            let (status, stats) = http(addr, "GET", "/stats", None);
            assert_eq!(status, 200, "round {round}: {stats}");
            if stats["embeddings_pending"] == 0 && stats["semantic_search"] == "ready" {
                assert_eq!(stats["embedding_model"].as_str(), Some(self.id.as_str()), "round {round}: {stats}");
                break;
            }
            let pending = stats["embeddings_pending"].as_i64();
            if pending != last_progress.1 {
                last_progress = (Instant::now(), pending);
            }
            assert!(
                last_progress.0.elapsed() < Duration::from_secs(120),
                "round {round}: no embedding progress for 120 s: {stats}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let conn = Connection::open(data.join("cairn.db")).unwrap();
        check_vectors(&conn, round);
        let mut stmt = conn
            .prepare(
                "SELECT o.id, o.title, o.content, e.model, e.dims, e.vector FROM observations o
                 LEFT JOIN embeddings e ON e.observation_id = o.id WHERE o.deleted_at IS NULL ORDER BY o.id",
            )
            .unwrap();
        type Row = (i64, String, String, Option<String>, Option<i64>, Option<Vec<u8>>);
        let rows: Vec<Row> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let dims = 384;
        for (id, title, _, model, row_dims, vector) in &rows {
            assert_eq!(
                model.as_deref(),
                Some(self.id.as_str()),
                "round {round}: {title:?} ({id}) has no current vector"
            );
            assert_eq!(*row_dims, Some(dims), "round {round}: {title:?}");
            assert_eq!(vector.as_ref().map(Vec::len), Some(dims as usize * 4), "round {round}: {title:?}");
        }
        // The updated memory (the one whose text changes under the indexer) and a sample.
        let mut sample: Vec<&Row> = rows.iter().filter(|r| r.1 == "crash updated memory").collect();
        assert_eq!(sample.len(), 1, "round {round}: the updated memory");
        for _ in 0..8.min(rows.len()) {
            sample.push(&rows[rng.range(0, rows.len() as u64) as usize]);
        }
        for (id, title, content, _, _, vector) in sample {
            let text = cairn_core::search::semantic::embed_text(title, content);
            let fresh = cairn_embed::Embedder::embed(&self.embedder, &[text.as_str()]).unwrap().remove(0);
            let stored: Vec<f32> =
                vector.as_deref().unwrap().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
            let cosine = cairn_embed::dot(&fresh, &stored);
            assert!(
                cosine > 0.999,
                "round {round}: the vector of {title:?} ({id}) is not of its text {content:?}: cosine {cosine}"
            );
        }
    }
}

fn doctor_says_ok(data: &Path, round: usize) {
    // HOME without agent configs: `setup.<agent>` checks are about the machine, not the store
    let out = cairn()
        .args(["doctor", "--json"])
        .env("CAIRN_DATA_DIR", data)
        .env("HOME", data)
        .env("XDG_CONFIG_HOME", data)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("round {round}: doctor --json is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
    });
    let checks = report["checks"].as_array().cloned().unwrap_or_default();
    for id in ["integrity", "fts_observations", "fts_prompts", "schema"] {
        assert!(checks.iter().any(|c| c["id"] == id), "round {round}: doctor has no {id} check: {report}");
    }
    assert_eq!(report["status"], "ok", "round {round}: doctor: {report}");
    assert!(out.status.success(), "round {round}: doctor exited {}", out.status);
}

fn assert_healthy(addr: std::net::SocketAddr, round: usize) {
    let (status, health) = http(addr, "GET", "/health", None);
    assert_eq!(status, 200, "round {round}: {health}");
    assert_eq!(
        (health["status"].as_str(), health["store"].as_str()),
        (Some("ok"), Some("ok")),
        "round {round}: {health}"
    );
}

/// Each title's unique word finds its memory (FTS5 while the index builds, then the index).
fn check_searchable(addr: std::net::SocketAddr, titles: &[String], acked: &HashMap<String, String>, round: usize) {
    for title in titles {
        let word = title.rsplit(' ').find(|w| w.len() == 12).expect("titles end with a unique word");
        let (status, hits) = http(addr, "GET", &format!("/search?q={word}&limit=5"), None);
        assert_eq!(status, 200, "round {round}: search {word}: {hits}");
        let found = hits.as_array().into_iter().flatten().any(|h| h["title"] == title.as_str());
        assert!(found, "round {round}: {title:?} ({}) not found by search: {hits}", acked[title]);
    }
}
