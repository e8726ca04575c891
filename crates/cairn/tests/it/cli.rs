//! The real `cairn` binary, run in temp dirs, its output snapshotted with insta.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use std::io::Write;

struct Cairn {
    dir: tempfile::TempDir,
}

impl Cairn {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("workspace")).unwrap();
        Cairn { dir }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = crate::support::cairn();
        cmd.args(args).current_dir(self.workspace()).env("CAIRN_DATA_DIR", self.data_dir()).stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn run_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child =
            self.cmd(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Run, expect success, return stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&self.ok(&all)).unwrap()
    }

    fn db(&self) -> PathBuf {
        self.data_dir().join("cairn.db")
    }
}

/// Render a run for a snapshot: exit code, stdout, stderr, with volatile parts filtered.
fn transcript(out: &Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}\.\d{3}Z)?", "[TIME]"),
            (r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", "[UUID]"),
            (r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]"),
            (r"\(\d+ bytes\)", "([N] bytes)"),
            (r#""db_bytes": \d+"#, r#""db_bytes": [N]"#),
            (r"\d+\.\d (kB|MB)", "[SIZE]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

#[test]
fn save_search_get_roundtrip() {
    let c = Cairn::new();
    let saved = c.run(&[
        "save",
        "Flaky login test on CI",
        "The login e2e test failed randomly: the session cookie expired mid-run. Fixed by freezing time.",
        "--type",
        "bugfix",
    ]);
    snap!("save_created", transcript(&saved));
    c.ok(&["save", "Redis pool", "Raised the redis pool size to 50 after ECONNRESET storms", "--type", "config"]);
    let found = c.run(&["search", "how", "did", "we", "fix", "the", "flaky", "login", "test?"]);
    snap!("search_natural_question", transcript(&found));
    snap!("get_human", transcript(&c.run(&["get", "#1"])));
    let v = c.json(&["get", "1"]);
    assert_eq!(v["project"], "workspace", "project detected from the directory");
}

#[test]
fn topic_revision_and_history() {
    let c = Cairn::new();
    c.ok(&["save", "Postgres version", "We pin Postgres 15", "--topic", "decision/postgres", "--type", "decision"]);
    let revised = c.run(&[
        "save",
        "Postgres version",
        "We moved to Postgres 16 for MERGE",
        "--topic",
        "decision/postgres",
        "--type",
        "decision",
    ]);
    snap!("save_revised", transcript(&revised));
    let hits = c.json(&["search", "which postgres version do we run"]);
    assert_eq!(hits["hits"].as_array().unwrap().len(), 1);
    assert!(hits["hits"][0]["content"].as_str().unwrap().contains("16"));
    let full = c.json(&["get", "1", "--revisions"]);
    assert_eq!(full["revisions"][0]["content"], "We pin Postgres 15");
}

#[test]
fn json_outputs_are_stable() {
    let c = Cairn::new();
    let save = c.json(&["save", "Use tabs", "Indent with tabs in Go files", "--type", "pattern", "--pin"]);
    insta::with_settings!({filters => vec![(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", "[UUID]")]}, {
        insta::assert_json_snapshot!("save_json", save);
    });
    let stats = c.json(&["stats"]);
    assert_eq!(stats["schema_version"], cairn_core::store::SCHEMA_VERSION);
    insta::assert_json_snapshot!("stats_json", stats, {
        ".schema_version" => "[SCHEMA_VERSION]",
        ".by_project[].last_activity_at" => "[TIME]",
        ".db_path" => "[PATH]",
        ".db_bytes" => "[N]",
        // Sizes move with SQLite's page layout; the parts are what is checked.
        ".disk.total_bytes" => "[N]",
        ".disk.memories_bytes" => "[N]",
        ".disk.vectors_bytes" => "[N]",
        ".disk.search_index_bytes" => "[N]",
        ".disk.sync_bytes" => "[N]",
        ".disk.free_bytes" => "[N]",
        ".disk.wal_bytes" => "[N]",
    });
    let ctx = c.run(&["context"]);
    snap!("context_human", transcript(&ctx));
}

#[test]
fn errors_have_codes_and_exit_codes() {
    let c = Cairn::new();
    c.ok(&["save", "keep", "me"]);
    let cases: &[(&str, &[&str])] = &[
        ("err_empty_title", &["save", "", "content"]),
        ("err_unknown_id", &["get", "42"]),
        ("err_bad_id", &["delete", "../etc"]),
        ("err_update_nothing", &["update", "1"]),
        ("err_empty_query", &["search", "  "]),
        ("err_import_missing", &["import", "/nonexistent/file.json"]),
        ("err_usage", &["frobnicate"]),
    ];
    for (name, args) in cases {
        snap!(*name, transcript(&c.run(args)));
    }
    // A scope filter is read by core's rule, the same as over HTTP and MCP.
    let bad_scope = c.run(&["search", "keep", "--scope", "team"]);
    assert_eq!(bad_scope.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&bad_scope.stderr).contains("invalid_argument"));
    let json_err = c.run(&["get", "42", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&json_err.stdout).unwrap();
    assert_eq!(v["error"]["code"], "observation_not_found");
    assert_eq!(json_err.status.code(), Some(4));
    assert_eq!(c.json(&["stats"])["total_observations"], 1, "nothing changed");
}

#[cfg(unix)]
#[test]
fn invalid_utf8_arguments_and_stdin() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let c = Cairn::new();
    let out = c.cmd(&["save"]).arg(OsStr::from_bytes(b"bad \xff title")).arg("content").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_utf8"));
    let out = c.run_stdin(&["save", "title", "-"], b"bytes \xfe\xff here");
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_utf8"));
    assert_eq!(c.json(&["stats"])["total_observations"], 0);
}

#[test]
fn oversized_content_truncated_or_refused() {
    let c = Cairn::new();
    let big = "a".repeat(60_000);
    let out = c.run_stdin(&["save", "big", "-"], big.as_bytes());
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cut from 60000 bytes"));
    let absurd = "b".repeat(5 * 1024 * 1024);
    let out = c.run_stdin(&["save", "absurd", "-"], absurd.as_bytes());
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("content_too_large"));
}

/// A NUL character on stdin or in an import file: exit 3 with `nul_character` naming the
/// field, nothing stored.
#[test]
fn a_nul_character_is_refused_naming_the_field() {
    let c = Cairn::new();
    c.ok(&["save", "kept", "stays"]);
    let out = c.run_stdin(&["save", "title", "-"], b"a\0b");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("error[nul_character]") && stderr.contains("content"), "{stderr}");
    let file = c.dir.path().join("export.json");
    c.ok(&["export", file.to_str().unwrap()]);
    let text = std::fs::read_to_string(&file).unwrap().replace("\"stays\"", "\"sta\\u0000ys\"");
    std::fs::write(&file, text).unwrap();
    let other = Cairn::new();
    let out = other.run(&["import", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("error[nul_character]") && stderr.contains("observations[0].content"), "{stderr}");
    assert_eq!(c.json(&["stats"])["total_observations"], 1);
    assert_eq!(other.json(&["stats"])["total_observations"], 0);
}

#[test]
fn export_import_idempotent_and_malformed_rejected() {
    let a = Cairn::new();
    a.ok(&["save", "one", "first", "--type", "decision"]);
    a.ok(&["save", "two", "second <private>hidden</private>"]);
    let file = a.dir.path().join("export.json");
    a.ok(&["export", file.to_str().unwrap()]);
    let b = Cairn::new();
    let first = b.json(&["import", file.to_str().unwrap()]);
    assert_eq!(first["observations_imported"], 2);
    let second = b.json(&["import", file.to_str().unwrap()]);
    assert_eq!(second["observations_imported"], 0);
    assert_eq!(b.json(&["stats"])["total_observations"], 2);
    // A truncated file: clear error, nothing imported.
    let text = std::fs::read_to_string(&file).unwrap();
    let broken = a.dir.path().join("broken.json");
    std::fs::write(&broken, &text[..text.len() / 3]).unwrap();
    let c = Cairn::new();
    let out = c.run(&["import", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid_import"));
    assert_eq!(c.json(&["stats"])["total_observations"], 0);
    // Export to stdout works in a pipe.
    let piped = a.ok(&["export", "-"]);
    assert!(!piped.contains("hidden"));
}

#[test]
fn import_engram_database() {
    let c = Cairn::new();
    let path = c.dir.path().join("engram.db");
    make_engram_db(&path);
    let report = c.json(&["import-engram", path.to_str().unwrap()]);
    assert_eq!(report["observations_imported"], 2);
    assert_eq!(report["prompts_imported"], 1);
    assert_eq!(report["relations_imported"], 1);
    let again = c.json(&["import-engram", path.to_str().unwrap()]);
    assert_eq!(again["observations_imported"], 0);
    let hit = c.json(&["search", "websocket reconnect", "--all-projects"]);
    assert_eq!(hit["hits"][0]["sync_id"], "obs-aaaaaaaaaaaaaaaa");
    assert_eq!(hit["hits"][0]["created_at"], "2026-04-01T09:30:00.000Z");
    // Unknown shape and missing file.
    let bogus = c.dir.path().join("bogus.db");
    rusqlite::Connection::open(&bogus).unwrap().execute_batch("CREATE TABLE t(x);").unwrap();
    let out = c.run(&["import-engram", bogus.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("engram_db_unrecognized"));
    let text_file = c.dir.path().join("notes.txt");
    std::fs::write(&text_file, "this is not sqlite at all, just words ".repeat(200)).unwrap();
    let out = c.run(&["import-engram", text_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let out = c.run(&["import-engram", "/nonexistent/engram.db"]);
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(c.json(&["stats"])["total_observations"], 2);
}

pub(crate) fn make_engram_db(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, project TEXT NOT NULL, directory TEXT NOT NULL,
            started_at TEXT NOT NULL DEFAULT (datetime('now')), ended_at TEXT, summary TEXT);
         CREATE TABLE observations (id INTEGER PRIMARY KEY AUTOINCREMENT, sync_id TEXT, session_id TEXT NOT NULL,
            type TEXT NOT NULL, title TEXT NOT NULL, content TEXT NOT NULL, tool_name TEXT, project TEXT,
            scope TEXT NOT NULL DEFAULT 'project', topic_key TEXT, normalized_hash TEXT,
            revision_count INTEGER NOT NULL DEFAULT 1, duplicate_count INTEGER NOT NULL DEFAULT 1,
            last_seen_at TEXT, created_at TEXT NOT NULL DEFAULT (datetime('now')),
            updated_at TEXT NOT NULL DEFAULT (datetime('now')), deleted_at TEXT);
         CREATE TABLE user_prompts (id INTEGER PRIMARY KEY AUTOINCREMENT, sync_id TEXT, session_id TEXT NOT NULL,
            content TEXT NOT NULL, project TEXT, created_at TEXT NOT NULL DEFAULT (datetime('now')));
         CREATE TABLE memory_relations (id INTEGER PRIMARY KEY AUTOINCREMENT, sync_id TEXT NOT NULL UNIQUE,
            source_id TEXT, target_id TEXT, relation TEXT NOT NULL DEFAULT 'pending', reason TEXT, evidence TEXT,
            confidence REAL, judgment_status TEXT NOT NULL DEFAULT 'pending', marked_by_actor TEXT,
            marked_by_kind TEXT, marked_by_model TEXT, session_id TEXT, superseded_at TEXT,
            superseded_by_relation_id INTEGER, created_at TEXT NOT NULL DEFAULT (datetime('now')),
            updated_at TEXT NOT NULL DEFAULT (datetime('now')));
         INSERT INTO sessions VALUES ('s1', 'chatapp', '/home/u/chatapp', '2026-04-01 09:00:00', NULL, 'did things');
         INSERT INTO observations (sync_id, session_id, type, title, content, project, created_at, updated_at)
            VALUES ('obs-aaaaaaaaaaaaaaaa', 's1', 'bugfix', 'Websocket reconnect loop',
                    'Backoff was reset on every error; now exponential with jitter', 'chatapp',
                    '2026-04-01 09:30:00', '2026-04-01 09:30:00');
         INSERT INTO observations (sync_id, session_id, type, title, content, project, created_at, updated_at)
            VALUES (NULL, 's1', 'decision', 'Use SSE for notifications', 'Simpler than websockets for one-way',
                    'chatapp', '2026-04-01 09:40:00', '2026-04-01 09:40:00');
         INSERT INTO user_prompts (sync_id, session_id, content, project) VALUES ('prompt-1', 's1', 'fix reconnect', 'chatapp');
         INSERT INTO memory_relations (sync_id, source_id, target_id, relation, judgment_status)
            VALUES ('rel-1', 'obs-aaaaaaaaaaaaaaaa', 'engram-obs-2', 'related', 'judged');",
    )
    .unwrap();
}

#[test]
fn project_detection_config_and_git() {
    let c = Cairn::new();
    let ws = c.workspace();
    let out = c.json(&["project"]);
    assert_eq!((out["project"].as_str(), out["project_source"].as_str()), (Some("workspace"), Some("dir_basename")));
    let git = |args: &[&str]| {
        let ok = Command::new("git").args(args).current_dir(&ws).output().unwrap().status.success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    assert_eq!(c.json(&["project"])["project_source"], "git_root");
    git(&["remote", "add", "origin", "git@example.com:acme/Widget-App.git"]);
    let out = c.json(&["project"]);
    assert_eq!((out["project"].as_str(), out["project_source"].as_str()), (Some("widget-app"), Some("git_remote")));
    std::fs::create_dir_all(ws.join("pkg/sub/.cairn")).unwrap();
    std::fs::write(ws.join("pkg/sub/.cairn/config.json"), r#"{"project_name":"Sub-Pkg"}"#).unwrap();
    let nested = crate::support::cairn()
        .args(["project", "--json"])
        .current_dir(ws.join("pkg/sub"))
        .env("CAIRN_DATA_DIR", c.data_dir())
        .env_remove("CAIRN_PROJECT")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&nested.stdout).unwrap();
    assert_eq!((v["project"].as_str(), v["project_source"].as_str()), (Some("sub-pkg"), Some("config")));
    let flag = c.json(&["project", "--project", "Explicit--Name"]);
    assert_eq!(flag["project"], "explicit-name");
}

#[test]
fn data_dir_private_and_read_only_dir_is_clear() {
    let c = Cairn::new();
    c.ok(&["save", "a", "b"]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&c.data_dir()), 0o700);
        assert_eq!(mode(&c.db()), 0o600);
        // A file where the data dir should be: nothing can be created there, whoever runs it.
        let blocked = c.dir.path().join("not-a-dir");
        std::fs::write(&blocked, "x").unwrap();
        let out = c.cmd(&["save", "t", "c"]).env("CAIRN_DATA_DIR", &blocked).output().unwrap();
        assert_eq!(out.status.code(), Some(6));
        assert!(String::from_utf8_lossy(&out.stderr).contains("data_dir_not_writable"));
    }
}

#[test]
fn corrupted_database_is_reported_not_overwritten() {
    let c = Cairn::new();
    std::fs::create_dir_all(c.data_dir()).unwrap();
    let garbage = b"definitely not a database file ".repeat(300);
    std::fs::write(c.db(), &garbage).unwrap();
    let out = c.run(&["save", "t", "c"]);
    assert_eq!(out.status.code(), Some(6));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("database_corrupt"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(c.db()).unwrap(), garbage, "file untouched");
    let doctor = c.run(&["doctor"]);
    assert_ne!(doctor.status.code(), Some(0));
}

#[test]
fn broken_pipe_exits_zero() {
    let c = Cairn::new();
    for i in 0..200 {
        c.ok(&["save", &format!("memory {i}"), &"lots of shared words here ".repeat(40)]);
    }
    let mut child = c.cmd(&["search", "shared", "words", "--limit", "100"]).stdout(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn doctor_config_and_suggest_topic() {
    let c = Cairn::new();
    c.ok(&["save", "x", "y"]);
    // (HOME without agent configs: doctor also reports how each installed agent is wired)
    let doctor = c
        .cmd(&["doctor", "--json"])
        .env("HOME", c.workspace())
        .env("XDG_CONFIG_HOME", c.workspace())
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .unwrap();
    let doctor: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(doctor["status"], "ok", "{doctor}");
    let cfg = c.json(&["config"]);
    assert_eq!(cfg["port"]["value"], 7437);
    assert_eq!(cfg["data_dir"]["source"]["kind"], "env");
    assert_eq!(c.ok(&["suggest-topic", "--type", "bugfix", "--title", "N+1 in orders"]).trim(), "bug/n-1-in-orders");
}

#[test]
fn sessions_pin_delete_timeline() {
    let c = Cairn::new();
    for i in 1..=4 {
        c.ok(&["save", &format!("step {i}"), &format!("did step {i}"), "--session", "s-1"]);
    }
    let t = c.json(&["timeline", "2", "--before", "1", "--after", "1"]);
    assert_eq!(t["before"][0]["id"], 1);
    assert_eq!(t["after"][0]["id"], 3);
    assert_eq!(t["total_in_range"], 4);
    assert_eq!(c.json(&["pin", "3"])["pinned"], true);
    let ctx = c.ok(&["context"]);
    assert!(ctx.find("step 3").unwrap() < ctx.find("step 4").unwrap(), "pinned first");
    c.ok(&["delete", "2"]);
    assert_eq!(c.run(&["get", "2"]).status.code(), Some(4));
    snap!("trash_one", transcript(&c.run(&["trash"])));
    snap!("restore_a_live_memory", transcript(&c.run(&["restore", "1"])));
    c.ok(&["restore", "#2"]);
    assert_eq!(c.json(&["get", "2"])["title"], "step 2");
    assert_eq!(c.ok(&["trash"]), "The trash is empty.\n");
    c.ok(&["delete", "2"]);
    c.ok(&["delete", "2", "--hard"]);
    assert_eq!(c.run(&["restore", "2"]).status.code(), Some(4), "a hard delete is final");
    let sessions = c.json(&["sessions"]);
    assert_eq!(sessions[0]["id"], "s-1");
    assert_eq!(sessions[0]["observation_count"], 3);
}

/// `log` in config.toml is the log filter (under `CAIRN_LOG`), as `cairn config` shows it.
#[test]
fn config_file_log_setting_is_applied() {
    let c = Cairn::new();
    let search = |env: &[(&str, &str)]| {
        // Without a daemon or a model, a search says at debug level that semantic search is off.
        let mut cmd = c.cmd(&["search", "anything"]);
        cmd.env("HOME", c.dir.path()).env_remove("CAIRN_EMBEDDER").env_remove("CAIRN_MODEL_DIR");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stderr).unwrap()
    };
    c.ok(&["save", "x", "y"]);
    assert!(!search(&[]).contains("DEBUG"), "the default is warn");
    std::fs::write(c.data_dir().join("config.toml"), "log = \"debug\"\n").unwrap();
    let logged = search(&[]);
    assert!(logged.contains("DEBUG") && logged.contains("semantic search is off"), "{logged}");
    assert!(!search(&[("CAIRN_LOG", "warn")]).contains("DEBUG"), "CAIRN_LOG wins over the file");
    let cfg = c.json(&["config"]);
    assert_eq!(
        (cfg["log"]["value"].as_str(), cfg["log"]["source"]["kind"].as_str()),
        (Some("debug"), Some("config_file"))
    );
}

/// engram's OpenCode plugin starts `serve` with no port and calls `ENGRAM_PORT`.
#[test]
fn serve_listens_on_engram_port_when_cairn_port_is_unset() {
    let c = Cairn::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = |cmd: &mut Command| {
        cmd.env("HOME", c.dir.path()).env("ENGRAM_PORT", port.to_string());
    };
    let mut config = c.cmd(&["config", "--json"]);
    env(&mut config);
    let cfg: serde_json::Value = serde_json::from_slice(&config.output().unwrap().stdout).unwrap();
    assert_eq!(cfg["port"]["value"], port);
    assert_eq!(cfg["port"]["source"], serde_json::json!({"kind": "env", "name": "ENGRAM_PORT"}));
    let mut serve = c.cmd(&["serve"]);
    env(&mut serve);
    let child = serve.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    // Stopped (SIGTERM, then reaped) when dropped, even if an assertion fails.
    let mut daemon = crate::support::Daemon { child, addr };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while crate::support::http(addr, "GET", "/health", None).0 != 200 {
        assert!(daemon.child.try_wait().unwrap().is_none(), "cairn serve exited");
        assert!(std::time::Instant::now() < deadline, "nothing answered on ENGRAM_PORT {port}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(crate::support::recorded(&c.data_dir()).map(|(_, a)| a.port()), Some(port));
    drop(daemon);
}

/// `context_budget` in config.toml sizes the daemon's context blocks too, not only `cairn context`.
#[test]
fn context_budget_setting_reaches_the_daemon() {
    let c = Cairn::new();
    std::fs::create_dir_all(c.data_dir()).unwrap();
    std::fs::write(c.data_dir().join("config.toml"), "context_budget = 300\n").unwrap();
    for i in 0..5 {
        c.ok(&["save", &format!("note {i}"), &"a fairly long memory body ".repeat(10), "--project", "demo"]);
    }
    assert_eq!(c.json(&["context", "--project", "demo"])["budget_bytes"], 300);
    let daemon = crate::support::Daemon::start(&c.data_dir());
    let (status, body) = crate::support::http(daemon.addr, "GET", "/context?project=demo", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["budget_bytes"].as_u64(), body["truncated"].as_bool()), (Some(300), Some(true)), "{body}");
}

/// A daemon started while another process holds the store locked for longer than the store's
/// busy timeout (10 s) keeps trying and comes up once the lock is released; it used to exit
/// with `database_busy`, leaving a host's writes in the spool until its next session.
#[test]
fn a_daemon_started_on_a_locked_store_comes_up_when_the_lock_is_released() {
    let c = Cairn::new();
    std::fs::create_dir_all(c.data_dir()).unwrap();
    let db = c.data_dir().join("cairn.db");
    let held = std::time::Duration::from_secs(12);
    let (locked, lock_taken) = std::sync::mpsc::channel();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch("BEGIN EXCLUSIVE; CREATE TABLE held_by_the_test (x);").unwrap();
        locked.send(()).unwrap();
        std::thread::sleep(held);
        conn.execute_batch("ROLLBACK").unwrap();
    });
    lock_taken.recv().unwrap();
    let started = std::time::Instant::now();
    let daemon = crate::support::Daemon::start_with(&c.data_dir(), &[("CAIRN_EMBEDDER", "none")], Stdio::null());
    assert!(started.elapsed() + std::time::Duration::from_secs(1) >= held, "it came up while the store was locked");
    holder.join().unwrap();
    let (status, body) = crate::support::http(daemon.addr, "GET", "/health", None);
    assert_eq!(status, 200, "{body}");
}

/// `cairn config` shows the plugin tables with where each value came from (a file, a variable).
#[test]
fn config_shows_the_plugin_settings() {
    let c = Cairn::new();
    std::fs::create_dir_all(c.data_dir()).unwrap();
    std::fs::write(c.data_dir().join("config.toml"), "[inject]\nmode = \"system\"\n[compaction]\nauto_at = 0.8\n")
        .unwrap();
    let out = c.cmd(&["config"]).env("CAIRN_SIMILARITY_THRESHOLD", "0.4").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let plugin = &text[text.find("Plugin settings").unwrap()..text.find("Environment variables").unwrap()];
    snap!("config_plugin_settings", plugin);
    let cfg = c.json(&["config"]);
    assert_eq!(cfg["plugin"]["config"]["inject"]["mode"], "system");
    assert_eq!(cfg["plugin"]["sources"]["compaction.auto_at"]["kind"], "config_file");
    std::fs::write(c.data_dir().join("config.toml"), "[inject]\nsimilarity_threshold = 3\n").unwrap();
    let bad = c.run(&["config"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid_config"), "a bad value is a config error");
}

/// `cairn protocol` prints the same text as op `protocol` (and the MCP instructions for mcp).
#[test]
fn protocol_prints_the_text_of_each_host_and_part() {
    let c = Cairn::new();
    let opencode = c.ok(&["protocol", "--host", "opencode"]);
    assert!(opencode.contains("cairn_mem_save") && opencode.contains("AFTER COMPACTION"), "{opencode}");
    let request =
        cairn_core::agent::ProtocolRequest { host: cairn_core::agent::protocol::Host::Opencode, ..Default::default() };
    assert_eq!(opencode.trim_end(), cairn_core::agent::protocol(request).text);
    let json = c.json(&["protocol", "--part", "continuity", "--tools", "router"]);
    assert!(json["text"].as_str().unwrap().ends_with("not another agent."));
    snap!("protocol_bad_host", transcript(&c.run(&["protocol", "--host", "vim"])));
}

/// `cairn context --memory-block` prints the plugin's `[MEMORY]` block.
#[test]
fn context_memory_block() {
    let c = Cairn::new();
    c.ok(&["save", "Hexagonal core", "ports and adapters", "--type", "architecture"]);
    c.ok(&["save", "Stripe webhooks", "retried twice, handler made idempotent", "--type", "bugfix"]);
    let block = c.ok(&["context", "--memory-block", "--query", "stripe webhook", "--similarity-threshold", "0.5"]);
    assert!(block.starts_with("[MEMORY]\n"), "{block}");
    assert!(block.contains("## Architecture\n- Hexagonal core: ports and adapters"), "{block}");
    assert!(block.contains("## Relevant to Current Task\n- [100%, "), "{block}");
    assert_eq!(c.run(&["context", "--query", "x"]).status.code(), Some(2), "--query needs --memory-block");
}

#[test]
fn search_min_score_keeps_the_best() {
    let c = Cairn::new();
    c.ok(&["save", "auth tokens", "auth tokens rotate hourly"]);
    c.ok(&["save", "billing", "auth mentioned once"]);
    let hits = |args: &[&str]| c.json(args)["hits"].as_array().map(Vec::len);
    assert_eq!(hits(&["search", "auth", "tokens"]), Some(2));
    assert_eq!(hits(&["search", "auth", "tokens", "--min-score", "1"]), Some(1));
    assert_eq!(c.run(&["search", "auth", "--min-score", "2"]).status.code(), Some(3));
}

/// A Claude-Code-shaped session (a tool call and its result, a compaction, a turn after it)
/// and a sub-agent child, written straight into the data dir's history.db.
fn seed_history(data_dir: &Path) {
    use cairn_core::history::model::*;
    use cairn_core::history::{HistoryDb, SourceRef};
    const S: &str = "0b7e5c1d-1111-4222-8333-444455556666";
    let message = |session: &str, id: &str, role: HistoryRole, seq: i64| {
        HistoryMessage::new(session, id, role, seq, &format!("2026-03-01T10:00:{seq:02}.000Z"))
    };
    let part = |m: &HistoryMessage, idx: i64, kind: PartKind| {
        HistoryPart::new(&m.session_id, &m.id, &format!("{}:{idx}", m.id), idx, kind)
    };
    let text = |m: &HistoryMessage, idx: i64, body: &str| HistoryPart {
        text: Some(body.into()),
        ..part(m, idx, PartKind::Text)
    };
    let session = |id: &str, parent: Option<&str>, title: &str| HistorySession {
        id: id.into(),
        host: HistoryHost::ClaudeCode,
        project: Some("shop".into()),
        directory: Some("/nonexistent/shop".into()),
        parent_id: parent.map(Into::into),
        title: Some(title.into()),
        agent: None,
        model: None,
        created_at: "2026-03-01T10:00:00.000Z".into(),
        updated_at: "2026-03-01T10:00:09.000Z".into(),
    };
    let u1 = message(S, "u1", HistoryRole::User, 1);
    let a1 = message(S, "a1", HistoryRole::Assistant, 2);
    let boundary = HistoryMessage { compaction: true, ..message(S, "b1", HistoryRole::User, 3) };
    let summary = HistoryMessage { summary: true, ..message(S, "s1", HistoryRole::User, 4) };
    let u2 = message(S, "u2", HistoryRole::User, 5);
    let k1 = message("agent-a1b2", "k1", HistoryRole::User, 6);
    let parts = vec![
        text(&u1, 0, "Why does checkout fail with a 502?"),
        text(&a1, 0, &format!("The payment proxy times out. {}", "Details follow. ".repeat(40))),
        HistoryPart {
            tool: Some("Bash".into()),
            call_id: Some("toolu_1".into()),
            status: Some(ToolStatus::Running),
            input: Some(r#"{"command":"curl -s localhost:8080/health"}"#.into()),
            ..part(&a1, 1, PartKind::Tool)
        },
        text(&summary, 0, "Summary: the payment proxy timeout causes the 502"),
        text(&u2, 0, "Raise the proxy timeout"),
        text(&k1, 0, "Find the proxy config"),
    ];
    let batch = IngestBatch {
        sessions: vec![session(S, None, "Checkout 502"), session("agent-a1b2", Some(S), "Find config")],
        messages: vec![u1, a1, boundary, summary, u2, k1],
        parts,
        results: vec![ToolResult {
            session_id: S.into(),
            call_id: "toolu_1".into(),
            output: "upstream timeout".into(),
            is_error: false,
        }],
        skipped: vec![("bad_json_line".into(), 1)],
    };
    std::fs::create_dir_all(data_dir).unwrap();
    let mut db = HistoryDb::open(&data_dir.join("history.db")).unwrap();
    let source = SourceRef { key: "projects/shop/s.jsonl".into(), host: HistoryHost::ClaudeCode };
    db.apply(&source, None, &batch, &Cursor::default()).unwrap();
}

/// `cairn history …`: every command's text, `--json` where a script reads it, and bad input.
#[test]
fn history_commands() {
    const S: &str = "0b7e5c1d-1111-4222-8333-444455556666";
    let c = Cairn::new();
    seed_history(&c.data_dir());
    snap!("history_sessions", transcript(&c.run(&["history", "sessions", "--include-children"])));
    snap!("history_turns", transcript(&c.run(&["history", "turns", S, "--before", "5"])));
    snap!("history_turns_own", transcript(&c.run(&["history", "turns", S, "--before", "5", "--own"])));
    snap!(
        "history_messages",
        transcript(&c.run(&["history", "messages", S, "--message", "a1", "--before", "1", "--after", "1"]))
    );
    snap!("history_message", transcript(&c.run(&["history", "message", S, "a1"])));
    snap!("history_part_page", transcript(&c.run(&["history", "part", S, "a1", "a1:0", "--max-chars", "60"])));
    snap!("history_search", transcript(&c.run(&["history", "search", "proxy", "timeout", "--session", S])));
    snap!("history_chart", transcript(&c.run(&["history", "chart", S])));
    snap!("history_compactions", transcript(&c.run(&["history", "compactions", S])));
    snap!("history_children", transcript(&c.run(&["history", "children", S])));
    snap!("history_stats", transcript(&c.run(&["history", "stats"])));
    let json = c.json(&["history", "message", S, "a1"]);
    assert_eq!(json["sections"][1]["status"], "completed");
    assert_eq!(json["sections"][1]["content"], "upstream timeout");
    snap!("history_unknown_session", transcript(&c.run(&["history", "turns", "ses_nope"])));
    snap!("history_path_id", transcript(&c.run(&["history", "message", S, "../etc/passwd"])));
    snap!("history_offset_past_end", transcript(&c.run(&["history", "part", S, "a1", "a1:0", "--offset", "99999"])));
    snap!("history_forget", transcript(&c.run(&["history", "forget", S])));
    assert_eq!(c.run(&["history", "forget", S]).status.code(), Some(4));
}

/// `cairn history stats` after `cairn history ingest` of a Claude Code project (a transcript
/// and two sub-agents'): the host's files are counted at their real sizes, the archive at its
/// own, and the ratio is the one over the other, in JSON and in the text.
#[test]
fn history_stats_weigh_the_archive_against_the_transcripts() {
    let c = Cairn::new();
    let claude = c.dir.path().join("claude");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-history/tests/fixtures/history/claude");
    let transcript_bytes = copy_tree(&fixture, &claude.join("projects"));
    let ingest = c.cmd(&["history", "ingest"]).env("CLAUDE_CONFIG_DIR", &claude).output().unwrap();
    assert!(ingest.status.success(), "{}", String::from_utf8_lossy(&ingest.stderr));

    let stats = c.json(&["history", "stats"]);
    let claude_code = stats["hosts"].as_array().unwrap().iter().find(|h| h["host"] == "claude-code").unwrap();
    assert_eq!(claude_code["source_files"], 3, "{stats}");
    assert_eq!(claude_code["source_bytes"], transcript_bytes, "{stats}");
    let disk = &stats["disk"];
    let figure = |name: &str| disk[name].as_u64().unwrap();
    let history_db = std::fs::metadata(c.data_dir().join("history.db")).unwrap().len();
    assert_eq!(figure("db_bytes"), history_db, "{stats}");
    let index = std::fs::metadata(c.data_dir().join("history-fts.db")).unwrap().len();
    assert!(figure("index_bytes") >= index && index > 0, "the index file, with its WAL while open: {stats}");
    assert_eq!(figure("archive_bytes"), figure("db_bytes") + figure("wal_bytes") + figure("index_bytes"));
    assert_eq!(figure("source_bytes"), transcript_bytes);
    let ratio = disk["ratio"].as_f64().unwrap();
    assert!((ratio - figure("archive_bytes") as f64 / transcript_bytes as f64).abs() < 1e-9, "{stats}");

    let text = c.ok(&["history", "stats"]);
    assert!(text.contains("claude-code: 3 sessions") && text.contains("read from 3 files"), "{text}");
    assert!(text.contains(&format!("{ratio:.2} times the")), "{text}");
}

/// `cairn history plans` (the project's and OpenCode's global plans, read, a path refused) and
/// `cairn history context-usage` (numbers and trend, a session without usage, the latest).
#[test]
fn history_plans_and_context_usage() {
    use cairn_core::history::model::*;
    use cairn_core::history::{HistoryDb, SourceRef};
    let c = Cairn::new();
    seed_history(&c.data_dir());
    let answer = |id: &str, seq: i64, tokens: serde_json::Value| HistoryMessage {
        tokens: Some(tokens.to_string()),
        model: Some("claude-sonnet-4".into()),
        ..HistoryMessage::new("ses_usage", id, HistoryRole::Assistant, seq, &format!("2026-03-02T10:00:{seq:02}.000Z"))
    };
    let batch = IngestBatch {
        sessions: vec![HistorySession {
            id: "ses_usage".into(),
            host: HistoryHost::OpenCode,
            project: Some("shop".into()),
            directory: None,
            parent_id: None,
            title: Some("Usage".into()),
            agent: None,
            model: None,
            created_at: "2026-03-02T10:00:00.000Z".into(),
            updated_at: "2026-03-02T10:00:09.000Z".into(),
        }],
        messages: vec![
            answer(
                "a1",
                1,
                serde_json::json!({"input": 120_000, "output": 3000, "cache": {"read": 20000, "write": 0}}),
            ),
            answer("a2", 2, serde_json::json!({"total": 176_400, "input": 1, "output": 1})),
        ],
        ..Default::default()
    };
    let mut db = HistoryDb::open(&c.data_dir().join("history.db")).unwrap();
    let source = SourceRef { key: "opencode.db#ses_usage".into(), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor::default()).unwrap();
    drop(db);
    snap!("history_context_usage", transcript(&c.run(&["history", "context-usage", "ses_usage"])));
    const S: &str = "0b7e5c1d-1111-4222-8333-444455556666";
    snap!("history_context_usage_none", transcript(&c.run(&["history", "context-usage", S])));
    let latest = c.json(&["history", "context-usage"]);
    assert_eq!((latest["session_id"].as_str(), latest["source"].as_str()), (Some("ses_usage"), Some("latest")));
    assert_eq!((latest["percent"].as_u64(), latest["status"].as_str()), (Some(88), Some("red")));
    let known = c.json(&["history", "context-usage", "ses_usage", "--limit", "400000"]);
    assert_eq!(
        (known["percent"].as_u64(), known["limit"].as_u64(), known["status"].as_str()),
        (Some(44), Some(400_000), Some("green"))
    );

    // A session the archive has not read yet is read from its host first: an agent asking
    // mid-session gets its last answer counted (here Claude Code's transcript, from the real CLI).
    let claude = c.dir.path().join("claude");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-history/tests/fixtures/history/claude");
    copy_tree(&fixture, &claude.join("projects"));
    const FRESH: &str = "3f0c2a4e-9b1d-4c55-8a77-0d2e6f1b9c01";
    let out = c.cmd(&["history", "context-usage", FRESH, "--json"]).env("CLAUDE_CONFIG_DIR", &claude).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fresh: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((fresh["session_id"].as_str(), fresh["host"].as_str()), (Some(FRESH), Some("claude-code")), "{fresh}");
    assert!(fresh["used"].as_u64().is_some_and(|used| used > 0), "{fresh}");

    let write = |dir: &Path, name: &str, body: &str, age: u64| {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), body).unwrap();
        let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
        std::fs::File::options().write(true).open(dir.join(name)).unwrap().set_modified(when).unwrap();
    };
    std::fs::create_dir_all(c.workspace().join(".git")).unwrap();
    write(&c.workspace().join(".opencode/plans"), "1767000200000-brave-fox.md", "# Ship the router\n\n1. plans\n", 5);
    let xdg = c.dir.path().join("xdg");
    write(&xdg.join("opencode/plans"), "1767000000000-old-river.md", "# Old plan\nsteps\n", 300);
    let plans = |args: &[&str]| {
        let mut all = vec!["history", "plans"];
        all.extend_from_slice(args);
        c.cmd(&all).env("XDG_DATA_HOME", &xdg).output().unwrap()
    };
    snap!("history_plans", transcript(&plans(&[])));
    snap!("history_plans_read", transcript(&plans(&["--read", "1767000000000-old-river.md"])));
    snap!(
        "history_plans_traversal",
        transcript(&plans(&["--read", "../../xdg/opencode/plans/1767000000000-old-river.md"]))
    );
    assert_eq!(plans(&["--read", "1767000000001-none.md"]).status.code(), Some(4));
    let blank = plans(&["--read", " "]);
    assert_eq!(blank.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&blank.stderr).contains("error[invalid_argument]: read: a plan's file name, not blank")
    );
}

/// Copy a directory tree (fixtures into a temp host config dir); the bytes copied.
fn copy_tree(from: &Path, to: &Path) -> u64 {
    std::fs::create_dir_all(to).unwrap();
    let mut bytes = 0;
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        bytes += if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target)
        } else {
            std::fs::copy(entry.path(), target).unwrap()
        };
    }
    bytes
}

/// `cairn --help` gives each command its own line: `history` says what history is and
/// `conflicts` what conflicts are (a doc comment once landed on the wrong one).
#[test]
fn top_level_help_describes_each_command_once() {
    let cairn = Cairn::new();
    let help = cairn.ok(&["--help"]);
    let line_of = |command: &str| {
        help.lines().find(|line| line.trim_start().starts_with(&format!("{command} "))).unwrap_or("").to_owned()
    };
    assert!(line_of("history").contains("Conversation history"), "{help}");
    assert!(!line_of("history").contains("duplicates"), "{help}");
    assert!(line_of("conflicts").contains("duplicates and contradictions"), "{help}");
    // One snapshot for both builds: the `hub` feature adds its command (two lines) and nothing else.
    let help = if cfg!(feature = "hub") {
        assert!(line_of("hub").contains("team hub"), "{help}");
        without_command(&help, "hub")
    } else {
        assert!(line_of("hub").is_empty(), "the default build has no hub: {help}");
        help
    };
    snap!("top_level_help", help);
}

/// `help` without `command`'s entry: its line and the wrapped lines under it.
fn without_command(help: &str, command: &str) -> String {
    let mut skipping = false;
    let mut kept = Vec::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        if line.trim_start().starts_with(&format!("{command} ")) {
            skipping = true;
            continue;
        }
        // A wrapped description is indented deeper than the command names.
        if skipping && indent > 4 && !line.trim().is_empty() {
            continue;
        }
        skipping = false;
        kept.push(line);
    }
    let mut out = kept.join("\n");
    if help.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Git sync through the binary: export in one data dir, the folder carried to another (as git
/// would), import there, again (a no-op), the status, and a corrupt chunk refused with its code.
#[test]
fn git_sync_export_import_status_and_a_refused_chunk() {
    let a = Cairn::new();
    a.ok(&["save", "Invoices are CSV", "finance imports CSV, not XLSX", "--project", "billing"]);
    let exported = a.run(&["sync", "--project", "billing"]);
    let b = Cairn::new();
    copy_tree(&a.workspace().join(".cairn"), &b.workspace().join(".cairn"));
    let imported = b.run(&["sync", "--import"]);
    let again = b.run(&["sync", "--import"]);
    let status = b.run(&["sync", "--status", "--json"]);
    let hit = b.json(&["search", "finance CSV", "--all-projects"]);
    assert_eq!(hit["hits"][0]["title"], "Invoices are CSV");
    // A chunk that is not gzip: refused with its code (exit 3), the store untouched.
    let folder = b.workspace().join(".cairn");
    std::fs::write(folder.join("chunks/0badf00d.jsonl.gz"), b"not gzip").unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(folder.join("manifest.json")).unwrap()).unwrap();
    manifest["chunks"].as_array_mut().unwrap().push(serde_json::json!({"id": "0badf00d", "created_by": "t",
        "created_at": "2026-03-01T10:00:00Z", "sessions": 0, "memories": 1, "prompts": 0}));
    std::fs::write(folder.join("manifest.json"), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let refused = b.run(&["sync", "--import"]);
    assert_eq!(refused.status.code(), Some(3));
    assert_eq!(b.json(&["stats"])["total_observations"], 1);
    let cloud = a.run(&["sync", "--cloud"]);
    insta::with_settings!({filters => vec![
        (r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", "[UUID]"),
        (r"/tmp/\.tmp[A-Za-z0-9]+", "[TMP]"),
        (r#""node_id": "[0-9a-f]{16}""#, r#""node_id": "[NODE]""#),
        (r"\b[0-9a-f]{8}\b", "[CHUNK]"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}\.\d{3}Z)?", "[TIME]"),
    ]}, {
        insta::assert_snapshot!("git_sync_cli", [
            ("sync --project billing", &exported),
            ("sync --import", &imported),
            ("sync --import (again)", &again),
            ("sync --status --json", &status),
            ("sync --import (a corrupt chunk)", &refused),
            ("sync --cloud", &cloud),
        ]
        .iter()
        .map(|(what, out)| format!("$ cairn {what}\n{}", transcript(out)))
        .collect::<Vec<_>>()
        .join("\n"));
    });
}
