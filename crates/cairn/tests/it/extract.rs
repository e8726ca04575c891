//! `cairn extract` and the daemon's model as a user meets them: the binary against a scripted
//! OpenAI-compatible server on loopback. A running daemon takes up `cairn llm use` and `cairn
//! llm off` without a restart; the output of `extract` (snapshots); the provenance of what a
//! model wrote (`cairn get`, `GET /observations/{id}`, search hits); a model that is down, slow,
//! malformed or refusing, retried later with nothing half saved and the failure in `llm
//! status`; a huge conversation sent in windows; the local models in `cairn model list`.

use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_core::history::model::*;
use cairn_core::history::{HistoryDb, SourceRef};
use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http};

/// How the fake model answers its next chats.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Facts (one per request, from the first message it was shown), a summary, a brief.
    Facts,
    /// Facts for this many more chats, then 503 (the server went down mid-conversation).
    FactsThenDown(usize),
    /// 503: the server is down.
    Down,
    /// Prose where JSON was asked.
    Malformed,
    /// The model declines (OpenAI's `refusal`).
    Refuses,
    /// Facts, after this long (longer than the `timeout_secs` the test sets).
    Slow(Duration),
}

/// The chats a window of a conversation costs: its facts, then the follow-up questions (the
/// bug, the settings), which this fake answers with the same fact (a duplicate, not saved).
const CHATS_PER_WINDOW: usize = 3;

/// An OpenAI-compatible server whose answers follow a [`Mode`]; records every chat's body.
struct FakeLlm {
    addr: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    chats: Arc<Mutex<Vec<Value>>>,
}

impl FakeLlm {
    fn start() -> FakeLlm {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, chats) = (Arc::new(Mutex::new(Mode::Facts)), Arc::new(Mutex::new(Vec::new())));
        let (mode_seen, recorded) = (mode.clone(), chats.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (mode, recorded) = (mode_seen.clone(), recorded.clone());
                // One thread per connection: a slow answer must not hold the next request.
                std::thread::spawn(move || answer(stream, &mode, &recorded));
            }
        });
        FakeLlm { addr, mode, chats }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn chats(&self) -> Vec<Value> {
        self.chats.lock().unwrap().clone()
    }
}

fn answer(mut stream: std::net::TcpStream, mode: &Mutex<Mode>, recorded: &Mutex<Vec<Value>>) {
    let (first, body) = crate::support::read_request(&stream);
    let (status, answer) = if first.starts_with("GET /v1/models") {
        (200, json!({"data": [{"id": "fake-model"}]}))
    } else {
        let request: Value = serde_json::from_slice(&body).unwrap_or_default();
        recorded.lock().unwrap().push(request.clone());
        let now = {
            let mut mode = mode.lock().unwrap();
            let now = *mode;
            if let Mode::FactsThenDown(n) = now {
                *mode = if n == 0 { Mode::Down } else { Mode::FactsThenDown(n - 1) };
            }
            now
        };
        match now {
            Mode::Facts | Mode::FactsThenDown(1..) => (200, completion(&facts_of(&request))),
            Mode::Slow(wait) => {
                std::thread::sleep(wait);
                (200, completion(&facts_of(&request)))
            }
            Mode::Down | Mode::FactsThenDown(0) => (503, json!({"error": {"message": "overloaded"}})),
            Mode::Malformed => (200, completion("Sorry, I can't help with that.")),
            Mode::Refuses => (200, refusal("I can't help with that request.")),
        }
    };
    let answer = answer.to_string();
    let reason = if status == 200 { "OK" } else { "Error" };
    let reply = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
    let _ = stream.write_all(reply.as_bytes());
}

fn completion(content: &str) -> Value {
    json!({
        "model": "fake-model",
        "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 40},
    })
}

fn refusal(said: &str) -> Value {
    json!({
        "model": "fake-model",
        "choices": [{"message": {"role": "assistant", "content": null, "refusal": said}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 10},
    })
}

/// One fact per request, in the words of the first message it was shown (so every window of a
/// conversation gives a fact of its own), and the keys a summary and a brief are read from.
fn facts_of(request: &Value) -> String {
    let shown = request["messages"][1]["content"].as_str().unwrap_or_default();
    let first = shown.lines().find_map(|l| l.split_once("] user: ").map(|(_, said)| said)).unwrap_or("nothing");
    json!({
        "facts": [{"type": "decision", "title": "A decision", "content": format!("We decided: {first}"),
                   "message_ids": ["m1"]}],
        "title": "Deciding things",
        "summary": format!("The team decided: {first}"),
        "content": "A project.",
    })
    .to_string()
}

/// A data dir, and `cairn` run against it without any LLM setting of the user's.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        Env { dir }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = cairn();
        cmd.args(args).env("CAIRN_DATA_DIR", self.data()).current_dir(self.dir.path()).stdin(Stdio::null());
        for var in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"] {
            cmd.env_remove(var);
        }
        for (var, _) in cairn_core::settings::LLM_ENV_VARS {
            cmd.env_remove(var);
        }
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", self.transcript(&out));
        out
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.ok(&[args, &["--json"]].concat());
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// stdout, stderr and the exit code, for a snapshot.
    fn transcript(&self, out: &Output) -> String {
        let text = format!(
            "{}--- stderr\n{}--- exit {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            out.status.code().unwrap_or(-1)
        );
        text.replace(&self.data().display().to_string(), "[DATA]")
    }

    fn use_fake(&self, fake: &FakeLlm) {
        self.ok(&["llm", "use", "openai", "--base-url", &fake.base_url(), "--model", "fake-model"]);
    }

    /// Archive a conversation of `turns` turns, as the history indexer would have.
    fn archive(&self, session: &str, turns: usize) {
        archive(&self.data(), session, turns);
    }
}

/// A conversation in the data dir's history archive: `turns` turns of a user's decision (in
/// words of that turn only, so no two facts read alike) and an answer, written an hour ago.
fn archive(data: &Path, session: &str, turns: usize) {
    let at = "2026-03-01T10:00:00.000Z";
    let mut batch = IngestBatch {
        sessions: vec![HistorySession {
            id: session.into(),
            host: HistoryHost::OpenCode,
            project: Some("shop".into()),
            directory: None,
            parent_id: None,
            title: Some("Decisions".into()),
            agent: None,
            model: None,
            created_at: at.into(),
            updated_at: at.into(),
        }],
        ..IngestBatch::default()
    };
    for turn in 0..turns {
        for (k, role) in [HistoryRole::User, HistoryRole::Assistant].into_iter().enumerate() {
            let seq = (turn * 2 + k) as i64;
            let message = HistoryMessage::new(session, &format!("msg_{seq:04}"), role, seq, at);
            let said = if role == HistoryRole::User {
                // Words of this turn of this conversation only (`cache0sesone`): no two facts alike.
                let tag = session.replace('_', "");
                let words: Vec<String> = ["cache", "queue", "schema", "port", "retry", "index"]
                    .iter()
                    .map(|w| format!("{w}{turn}{tag}"))
                    .collect();
                format!("{session} turn {turn}: use {} {}", words.join(" "), "x".repeat(200))
            } else {
                format!("Done for turn {turn}.")
            };
            batch.parts.push(HistoryPart {
                text: Some(said),
                ..HistoryPart::new(session, &message.id, &format!("prt_{seq:04}"), 0, PartKind::Text)
            });
            batch.messages.push(message);
        }
    }
    let mut db = HistoryDb::open(&data.join("history.db")).unwrap();
    let source = SourceRef { key: format!("opencode.db#{session}"), host: HistoryHost::OpenCode };
    db.apply(&source, None, &batch, &Cursor { offset: 0, size: 0, mtime_ms: 1, watermark: None }).unwrap();
}

/// A snapshot with ports, times and the fake's base URL named.
macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (r"127\.0\.0\.1:[0-9]+", "127.0.0.1:[PORT]"),
            (r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z", "[TIME]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

fn error_code(out: &Output) -> String {
    let value: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    value["error"]["code"].as_str().unwrap_or_default().to_owned()
}

/// `POST /extract` on the daemon for one conversation, until it answers otherwise than `while_`
/// (the daemon takes up a new `[llm]` within a few seconds).
fn extract_until(daemon: &Daemon, session: &str, while_status: u16) -> (u16, Value) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http(daemon.addr, "POST", "/extract", Some(&json!({"session_id": session})));
        if status != while_status {
            return (status, body);
        }
        assert!(Instant::now() < deadline, "the daemon kept answering {status}: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A daemon started with the LLM off takes up `cairn llm use openai` and `cairn llm off` while
/// it runs: the extraction it is asked for goes through the new model, and stops with `off`.
#[test]
fn a_running_daemon_takes_up_llm_use_and_off_without_a_restart() {
    let env = Env::new();
    let fake = FakeLlm::start();
    env.archive("ses_live", 2);
    let daemon = Daemon::start(&env.data());
    let pid = daemon.pid();
    let (status, body) = http(daemon.addr, "POST", "/extract", Some(&json!({"session_id": "ses_live"})));
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("llm_not_configured")), "{body}");

    env.use_fake(&fake);
    let (status, report) = extract_until(&daemon, "ses_live", 503);
    assert_eq!(status, 200, "{report}");
    assert_eq!((report["sessions"].as_u64(), report["facts_saved"].as_u64()), (Some(1), Some(1)), "{report}");
    assert!(!fake.chats().is_empty(), "the daemon called the model `llm use` named");
    let (_, found) = http(daemon.addr, "GET", "/search?q=cache0seslive", None);
    assert!(found.to_string().contains("ses_live"), "saved, with its session: {found}");

    env.ok(&["llm", "off"]);
    let (status, body) = extract_until(&daemon, "ses_live", 200);
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("llm_not_configured")), "{body}");
    let calls = fake.chats().len();
    env.archive("ses_after", 1);
    let (status, _) = http(daemon.addr, "POST", "/extract", Some(&json!({"session_id": "ses_after"})));
    assert_eq!((status, fake.chats().len()), (503, calls), "off: nothing more is sent");
    assert_eq!(daemon.pid(), pid, "the same daemon all along");
    let (_, health) = http(daemon.addr, "GET", "/health", None);
    assert!(health["workers"].as_array().unwrap().iter().any(|w| w["name"] == "cairn-llm-watch"), "{health}");
}

/// What `cairn extract` prints: no model (the error and its fix), one conversation, all of
/// them; what a model wrote shows where it came from in `cairn get`, and search finds it with
/// the conversation's session id.
#[test]
fn extract_output_and_the_provenance_of_what_it_saved() {
    let env = Env::new();
    let fake = FakeLlm::start();
    env.archive("ses_one", 1);
    env.archive("ses_two", 2);
    env.ok(&["save", "an agent's own note", "saved by hand, not by a model"]);

    let out = env.run(&["extract", "--session", "ses_one", "--wait"]);
    snap!("extract_no_llm", env.transcript(&out));
    let out = env.run(&["extract", "--all", "--wait", "--json"]);
    assert_eq!((out.status.code(), error_code(&out).as_str()), (Some(6), "llm_not_configured"));
    assert!(fake.chats().is_empty());

    env.use_fake(&fake);
    let out = env.ok(&["extract", "--session", "ses_one", "--wait"]);
    snap!("extract_session", env.transcript(&out));
    let out = env.ok(&["extract", "--all", "--wait"]);
    snap!("extract_all_wait", env.transcript(&out));
    let out = env.ok(&["extract", "--all", "--wait"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("0 conversation(s)"), "nothing new");

    let found = env.json(&["search", "cache0sesone", "--all-projects"]);
    let hits = found["hits"].as_array().cloned().unwrap_or_default();
    // The session's summary is found by the developer's words too (its `Asked:` line): the fact
    // is the hit whose provenance is checked here.
    let summary = hits.iter().find(|h| h["type"] == "session_summary").unwrap_or_else(|| panic!("{found}"));
    assert_eq!(summary["session_id"], "ses_one", "{summary}");
    let is_fact = |h: &&serde_json::Value| h.to_string().contains("ses_one") && h["type"] != "session_summary";
    let hit = hits.iter().find(is_fact).unwrap_or_else(|| panic!("{found}"));
    assert_eq!(hit["session_id"], "ses_one", "{hit}");
    let id = hit["id"].as_i64().unwrap().to_string();
    let got = env.json(&["get", &id]);
    assert_eq!(
        got["provenance"],
        json!({"origin": "fact", "session_id": "ses_one", "message_ids": ["msg_0000"], "provider": "openai",
               "model": "fake-model", "created_at": got["provenance"]["created_at"]}),
        "{got}"
    );
    let out = env.ok(&["get", &id]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().find(|l| l.starts_with("Extracted:")).unwrap_or_else(|| panic!("{text}"));
    snap!("extract_get_provenance", line);
    let own = env.json(&["get", "1"]);
    assert!(own.get("provenance").is_none(), "an agent's save has none: {own}");
    let status = env.json(&["llm", "status"]);
    assert_eq!(
        (status["extraction"]["sessions"].as_u64(), status["extraction"]["extracted_memories"].as_u64()),
        (Some(2), Some(4)),
        "a fact and a summary of each: {status}"
    );
}

/// A model that is down, slow, answers prose or refuses: the conversation is recorded as failing
/// (retried later, with backoff), nothing of it is saved, and `cairn llm status` says so; once
/// the model answers again the next attempt saves it and the failure is gone.
#[test]
fn a_failing_model_is_retried_later_and_shown_in_llm_status() {
    let env = Env::new();
    let fake = FakeLlm::start();
    env.archive("ses_fault", 1);
    env.use_fake(&fake);
    let config = env.data().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}timeout_secs = 1\n")).unwrap();

    let cases = [
        (Mode::Down, "llm_unavailable", "503", Some("unavailable")),
        (Mode::Slow(Duration::from_millis(2500)), "llm_unavailable", "longer than 1 s", Some("timeout")),
        (Mode::Malformed, "llm_unavailable", "cannot use", None),
        (Mode::Refuses, "llm_refused", "can't help with that request", Some("refused")),
    ];
    for (attempt, (mode, code, said, ledger_kind)) in cases.into_iter().enumerate() {
        fake.set(mode);
        let report = env.json(&["extract", "--session", "ses_fault", "--wait"]);
        assert_eq!((report["failures"].as_u64(), report["facts_saved"].as_u64()), (Some(1), Some(0)), "{report}");
        assert_eq!(report["failed"][0]["code"], code, "{mode:?}: {report}");
        assert!(report["failed"][0]["error"].as_str().unwrap().contains(said), "{mode:?}: {report}");
        let out = env.ok(&["extract", "--session", "ses_fault", "--wait"]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("retried later"), "{}", env.transcript(&out));

        let status = env.json(&["llm", "status"]);
        let failing = &status["extraction"]["failing"][0];
        assert_eq!(
            (failing["session_id"].as_str(), failing["last_error_code"].as_str()),
            (Some("ses_fault"), Some(code))
        );
        assert_eq!(failing["attempts"].as_u64(), Some(2 * attempt as u64 + 2), "{status}");
        assert!(failing["next_attempt_at"].is_string(), "a retry is planned: {status}");
        if let Some(kind) = ledger_kind {
            assert_eq!(status["last_failure"]["kind"], kind, "{status}");
        }
        let out = env.ok(&["llm", "status"]);
        assert!(String::from_utf8_lossy(&out.stdout).contains("failing       ses_fault"), "{}", env.transcript(&out));
        assert_eq!(
            env.json(&["search", "cache0sesfault", "--all-projects"]).to_string().matches("ses_fault").count(),
            0,
            "nothing saved"
        );
    }

    fake.set(Mode::Facts);
    let report = env.json(&["extract", "--session", "ses_fault", "--wait"]);
    assert_eq!((report["failures"].as_u64(), report["facts_saved"].as_u64()), (Some(0), Some(1)), "{report}");
    let status = env.json(&["llm", "status"]);
    assert_eq!(status["extraction"]["failing"], json!([]), "the failure is cleared: {status}");
}

/// A conversation far longer than a request goes in windows, each saved with the mark that
/// follows it; the model going down mid-conversation keeps what was saved, and the next attempt
/// starts at the window that failed.
#[test]
fn a_huge_conversation_goes_in_windows_and_resumes_where_it_failed() {
    let env = Env::new();
    let fake = FakeLlm::start();
    env.archive("ses_huge", 150);
    env.use_fake(&fake);
    fake.set(Mode::FactsThenDown(2 * CHATS_PER_WINDOW));
    let report = env.json(&["extract", "--session", "ses_huge", "--wait"]);
    assert_eq!((report["facts_saved"].as_u64(), report["failures"].as_u64()), (Some(2), Some(1)), "{report}");
    let first_pass = fake.chats();
    assert_eq!(first_pass.len(), 2 * CHATS_PER_WINDOW + 1, "two windows, then the one that failed");
    let window_text = |chat: &Value| chat["messages"][1]["content"].as_str().unwrap_or_default().to_owned();
    for chat in &first_pass {
        assert!(window_text(chat).len() < 16 * 1024, "each request is one window");
    }

    fake.set(Mode::Facts);
    let report = env.json(&["extract", "--session", "ses_huge", "--wait"]);
    let windows = report["facts_saved"].as_u64().unwrap();
    assert!(windows >= 3, "the rest of the conversation, in several windows: {report}");
    let chats = fake.chats();
    let (failed, resumed) = (first_pass.last().unwrap(), &chats[first_pass.len()]);
    assert_eq!(window_text(resumed), window_text(failed), "it resumes with the window that failed");
    let facts: Vec<String> = chats[first_pass.len()..].iter().map(window_text).collect();
    assert!(!facts.iter().any(|w| w.contains("ses_huge turn 0:")), "the saved windows are not sent again");
    assert!(facts.iter().any(|w| w.contains("ses_huge turn 149:")), "to the end of the conversation");
    let status = env.json(&["llm", "status"]);
    let summaries = report["summaries"].as_u64().unwrap();
    assert_eq!(status["extraction"]["extracted_memories"].as_u64(), Some(2 + windows + summaries), "{status}");
}

/// `cairn model list` shows the local LLMs of the catalogue with their measured figures, and
/// which one `[llm]` runs once installed from a file.
#[test]
fn model_list_shows_the_local_llms() {
    let env = Env::new();
    let listed = env.json(&["model", "list"]);
    let rows = listed["llm"].as_array().expect("llm rows");
    let names: Vec<&str> = rows.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct"]);
    assert!(rows.iter().all(|r| r["installed"] == false && r["in_use"] == false), "{listed}");
    assert_eq!(rows[0]["default"], true);
    assert!(rows[0]["measured"]["session_seconds"].as_f64().is_some(), "measured: {listed}");
    let out = env.ok(&["model", "list"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("Local LLMs (memories extracted from sessions; cairn llm use local --model NAME):"),
        "{text}"
    );
    assert!(text.contains("  qwen2.5-coder-0.5b-instruct   not installed"), "{text}");

    let Some(file) = test_model("SmolLM2-135M-Instruct.Q4_1.gguf") else { return };
    env.ok(&["llm", "use", "local", "--model", "smollm2-135m-instruct", "--from", file.to_str().unwrap()]);
    let listed = env.json(&["model", "list"]);
    let smol = listed["llm"].as_array().unwrap().iter().find(|r| r["name"] == "smollm2-135m-instruct").cloned();
    let smol = smol.unwrap();
    assert_eq!((smol["installed"].as_bool(), smol["in_use"].as_bool()), (Some(true), Some(true)), "{smol}");
    let out = env.ok(&["model", "list"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("* smollm2-135m-instruct         in use"));
}

/// The test copy of a local model (`scripts/install-test-deps.sh llm`); required where
/// `CAIRN_REQUIRE_LLM=1`, else skipped with a note.
pub fn test_model(file_name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CAIRN_TEST_LLM_DIR")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/llm"), PathBuf::from);
    let file = dir.join(file_name);
    if file.is_file() {
        return Some(file);
    }
    assert!(
        std::env::var_os("CAIRN_REQUIRE_LLM").is_none(),
        "CAIRN_REQUIRE_LLM is set but {} is missing (scripts/install-test-deps.sh llm)",
        file.display()
    );
    eprintln!("skipped: no {} (scripts/install-test-deps.sh llm)", file.display());
    None
}
