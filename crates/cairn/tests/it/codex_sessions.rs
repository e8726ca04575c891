//! `cairn mcp --host=codex` before the user trusts cairn's hooks: the Codex sessions it archives
//! are recorded in the memory store with their prompts (as the hooks would), redacted, once.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http};

/// The rollout recorded from Codex 0.171 (cairn-history's fixture): one prompt, `SAVEIT please`,
/// in `/nonexistent/sandbox/proj`.
const SESSION: &str = "01a233b2-e74b-76c3-a14c-67c65c24cda6";
const FIXTURE: &str = "../cairn-history/tests/fixtures/history/codex/2026/12/01";

/// A temp HOME holding Codex's home with the fixture rollout, a data dir and a daemon that
/// sees that HOME.
struct Sandbox {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    data: PathBuf,
    rollout: PathBuf,
    daemon: Daemon,
}

impl Sandbox {
    fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let day = home.join(".codex/sessions/2026/12/01");
        std::fs::create_dir_all(&day).unwrap();
        let mut rollout = None;
        for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE)).unwrap() {
            let entry = entry.unwrap();
            let copy = day.join(entry.file_name());
            std::fs::copy(entry.path(), &copy).unwrap();
            rollout = Some(copy);
        }
        let data = tmp.path().join("data");
        let codex = home.join(".codex");
        let env = [("HOME", home.to_str().unwrap()), ("CODEX_HOME", codex.to_str().unwrap())];
        let daemon = Daemon::start_with(&data, &env, Stdio::null());
        Sandbox { home, data, rollout: rollout.expect("the fixture holds a rollout"), daemon, _tmp: tmp }
    }

    /// A second prompt in the rollout, as Codex appends it.
    fn append_prompt(&self, at: &str, text: &str) {
        let line = json!({"timestamp": at, "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}});
        let mut file = std::fs::OpenOptions::new().append(true).open(&self.rollout).unwrap();
        writeln!(file, "{line}").unwrap();
    }

    /// One Codex session's `cairn mcp --host=codex`: started, initialized, closed by Codex.
    fn mcp_session(&self) {
        let mut child = cairn()
            .args(["mcp", "--tools=agent", "--host=codex"])
            .current_dir(&self.home)
            .env("CAIRN_DATA_DIR", &self.data)
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "codex-test", "version": "0"}}});
        writeln!(stdin, "{init}").unwrap();
        let mut answer = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut answer).unwrap();
        assert!(answer.contains("\"result\""), "initialize failed: {answer}");
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        drop(stdin);
        assert!(wait(&mut child).success(), "cairn mcp failed");
    }

    /// `cairn hook --host=codex UserPromptSubmit`, as a trusted hook runs it.
    fn prompt_hook(&self, prompt: &str) {
        let mut child = cairn()
            .args(["hook", "--host=codex", "UserPromptSubmit"])
            .env("CAIRN_DATA_DIR", &self.data)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let payload = json!({"session_id": SESSION, "cwd": "/nonexistent/sandbox/proj",
            "hook_event_name": "UserPromptSubmit", "prompt": prompt});
        child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
        assert!(wait(&mut child).success());
    }

    /// Trust cairn's SessionStart hook as Codex records it after `/hooks`.
    fn trust_hooks(&self) {
        let codex = self.home.join(".codex");
        let hooks = codex.join("hooks.json");
        let group = json!({"hooks": [{"type": "command", "command": "/usr/bin/cairn hook --host=codex SessionStart"}]});
        std::fs::write(&hooks, json!({"hooks": {"SessionStart": [group]}}).to_string()).unwrap();
        let state = format!("[hooks.state.\"{}:session_start:0:0\"]\ntrusted_hash = \"sha256:ab\"\n", hooks.display());
        std::fs::write(codex.join("config.toml"), state).unwrap();
    }

    fn session(&self) -> Option<Value> {
        let (status, body) = http(self.daemon.addr, "GET", &format!("/sessions/{SESSION}"), None);
        (status == 200).then_some(body)
    }

    fn prompts(&self) -> Vec<String> {
        let (status, body) = http(self.daemon.addr, "GET", "/prompts/recent?limit=100", None);
        assert_eq!(status, 200, "{body}");
        let mut prompts: Vec<String> = body
            .as_array()
            .unwrap()
            .iter()
            .inspect(|p| assert_eq!(p["session_id"], SESSION, "{p}"))
            .map(|p| p["content"].as_str().unwrap().to_owned())
            .collect();
        prompts.sort();
        prompts
    }
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the process did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn untrusted_codex_sessions_and_their_prompts_are_recorded_redacted_and_once() {
    let sandbox = Sandbox::new();
    sandbox.append_prompt("2026-12-01T22:30:00.000Z", "deploy with <private>hunter2</private> to fly.io");
    sandbox.mcp_session();

    let session = sandbox.session().expect("the session is recorded");
    assert_eq!(session["agent"], "codex", "{session}");
    assert_eq!(session["directory"], "/nonexistent/sandbox/proj", "{session}");
    assert_eq!(session["project"], "proj", "{session}");
    // the rollout's times: its first prompt, its last message
    assert!(session["started_at"].as_str().unwrap().starts_with("2026-12-01T22:2"), "{session}");
    assert_eq!(session["ended_at"], "2026-12-01T22:30:00.000Z", "{session}");
    let prompts = sandbox.prompts();
    assert_eq!(prompts, ["SAVEIT please", "deploy with [REDACTED] to fly.io"], "each once, redacted");

    // the next session's server: nothing new
    sandbox.mcp_session();
    assert_eq!(sandbox.prompts(), prompts, "running again adds nothing");
    assert_eq!(sandbox.session().unwrap(), session);

    // `codex resume`: the session goes on in the same rollout, and ends again
    sandbox.append_prompt("2026-12-02T09:00:00.000Z", "and now the staging deploy");
    sandbox.mcp_session();
    assert_eq!(sandbox.prompts().len(), 3, "{:?}", sandbox.prompts());
    let resumed = sandbox.session().unwrap();
    assert_eq!(resumed["started_at"], session["started_at"]);
    assert!(resumed["ended_at"].as_str() > session["ended_at"].as_str(), "{resumed}");
}

#[test]
fn a_prompt_a_trusted_hook_stored_is_not_stored_again() {
    let sandbox = Sandbox::new();
    // the user trusted the hooks for a while, then Codex asked again (the hook changed)
    sandbox.prompt_hook("SAVEIT please");
    let hooks_session = sandbox.session().expect("the hook started the session");
    sandbox.mcp_session();
    assert_eq!(sandbox.prompts(), ["SAVEIT please"]);
    let session = sandbox.session().unwrap();
    assert_eq!(session["started_at"], hooks_session["started_at"], "what the hook recorded stays");
    assert!(session["ended_at"].is_string(), "{session}");
}

#[test]
fn with_trusted_hooks_the_hooks_record_the_sessions() {
    let sandbox = Sandbox::new();
    sandbox.trust_hooks();
    sandbox.mcp_session();
    assert_eq!(sandbox.session(), None, "recorded by the server although the hooks run");
    assert!(sandbox.prompts().is_empty());
}
