//! `cairn hook <event>`: Claude Code's payloads on stdin, its answer format on stdout, exit 0
//! whatever happens, within the deadline; state kept in the store across hook processes.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use cairn_core::spool::Spool;
use serde_json::{Value, json};

use crate::support::{Daemon, cairn};

/// A data dir, a project dir and a transcript, all temporary.
struct Sandbox {
    _tmp: tempfile::TempDir,
    data: PathBuf,
    project: PathBuf,
    transcript: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let project = tmp.path().join("shop-api");
        std::fs::create_dir_all(&project).unwrap();
        let transcript = tmp.path().join("transcript.jsonl");
        std::fs::write(&transcript, "").unwrap();
        Sandbox { data, project, transcript, _tmp: tmp }
    }

    /// A payload of `event` for session `sid`, with `extra` fields.
    fn payload(&self, sid: &str, event: &str, extra: Value) -> String {
        let mut p = json!({
            "session_id": sid,
            "transcript_path": self.transcript,
            "cwd": self.project,
            "hook_event_name": event,
        });
        p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        p.to_string()
    }

    fn hook(&self, event: &str, stdin: &str) -> Output {
        let mut child = cairn()
            .args(["hook", event])
            .env("CAIRN_DATA_DIR", &self.data)
            .current_dir(&self.project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A hook that refuses its event answers without reading stdin: the pipe may be closed.
        match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            written => written.unwrap(),
        }
        child.wait_with_output().unwrap()
    }

    /// Run a hook that must succeed quietly; its answer.
    fn ok(&self, event: &str, sid: &str, extra: Value) -> Value {
        let out = self.hook(event, &self.payload(sid, event, extra));
        assert_eq!(out.status.code(), Some(0));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.is_empty(), "{event}: {stderr}");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{event}: not JSON ({e}): {out:?}"))
    }

    fn cli(&self, args: &[&str]) -> Value {
        let out = cairn().args(args).arg("--json").env("CAIRN_DATA_DIR", &self.data).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn context_of(answer: &Value) -> &str {
    answer.pointer("/hookSpecificOutput/additionalContext").and_then(Value::as_str).unwrap_or("")
}

const LEARNINGS: &str = "Done.\n\n## Key Learnings:\n1. The checkout service retries payments three times\n";

#[test]
fn every_event_answers_in_claude_codes_shape() {
    let s = Sandbox::new();
    std::fs::write(
        &s.transcript,
        r#"{"type":"assistant","message":{"role":"assistant","model":"claude-test","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":150000,"cache_read_input_tokens":10000,"output_tokens":5}}}"#,
    )
    .unwrap();
    let sid = "5d1c6a2e-0000-4000-8000-000000000001";
    let steps: Vec<(&str, Value)> = vec![
        ("SessionStart", json!({"source": "startup", "model": "claude-test"})),
        ("UserPromptSubmit", json!({"prompt": "remember that payments go through the checkout service"})),
        (
            "PreToolUse",
            json!({"tool_name": "mcp__plugin_cairn_cairn__mem_save", "tool_input": {"title": "t", "content": "c"}, "tool_use_id": "toolu_1"}),
        ),
        ("PreToolUse", json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_2"})),
        ("PostToolUse", json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": ""}})),
        ("SubagentStart", json!({"agent_id": "a1", "agent_type": "Explore"})),
        (
            "SubagentStop",
            json!({"agent_id": "a1", "agent_type": "Explore", "last_assistant_message": LEARNINGS, "stop_hook_active": false}),
        ),
        ("Stop", json!({"last_assistant_message": "All done, nothing learned.", "stop_hook_active": false})),
        ("PreCompact", json!({"trigger": "manual", "custom_instructions": "keep it short"})),
        ("PostCompact", json!({"trigger": "manual", "compact_summary": "We wired payments through checkout."})),
        ("SessionStart", json!({"source": "compact", "model": "claude-test"})),
        ("SessionEnd", json!({"reason": "other"})),
    ];
    let mut log = String::new();
    for (event, extra) in steps {
        let answer = s.ok(event, sid, extra);
        log.push_str(&format!("## {event}\n{}\n\n", serde_json::to_string_pretty(&answer).unwrap()));
    }
    insta::with_settings!({filters => vec![
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}\.\d{3}Z)?", "[TIME]"),
        // the Last Session record's span
        (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "[TIME]"),
    ]}, {
        insta::assert_snapshot!("hook_every_event", log);
    });
    let sessions = s.cli(&["sessions", "--all-projects"]);
    assert_eq!(sessions[0]["id"], sid);
    assert_eq!(sessions[0]["project"], "shop-api");
    assert!(sessions[0]["ended_at"].is_string(), "{sessions}");
}

#[test]
fn state_lives_in_the_store_across_hook_processes() {
    let s = Sandbox::new();
    let _daemon = Daemon::start(&s.data);
    s.cli(&[
        "save",
        "Payments retry policy",
        "Checkout retries card payments three times with backoff",
        "--project",
        "shop-api",
    ]);
    let sid = "5d1c6a2e-0000-4000-8000-000000000002";
    let start = s.ok("SessionStart", sid, json!({"source": "startup"}));
    let text = context_of(&start);
    assert!(text.starts_with("cairn is your persistent memory") && text.contains("Payments retry policy"), "{start}");
    // A resume with nothing new: the transcript already replays the first injection.
    assert_eq!(s.ok("SessionStart", sid, json!({"source": "resume"})), json!({}));
    // After a compaction the context comes back, with the note that the summary is stored.
    let compact = s.ok("SessionStart", sid, json!({"source": "compact"}));
    assert!(context_of(&compact).contains("summary of this compaction is stored"), "{compact}");

    let first = s.ok("UserPromptSubmit", sid, json!({"prompt": "how do card payments retry in checkout?"}));
    assert!(context_of(&first).contains("[MEMORY]") && context_of(&first).contains("Payments retry policy"), "{first}");
    let second = s.ok("UserPromptSubmit", sid, json!({"prompt": "and how do card payments retry again?"}));
    assert_eq!(second, json!({}), "the block comes with the first prompt only");

    s.ok("PostToolUse", sid, json!({"tool_name": "Bash"}));
    s.ok("PostToolUse", sid, json!({"tool_name": "mcp__cairn__mem_search"}));
    let activity = s.cli(&["sessions", "--all-projects"]);
    assert_eq!(activity[0]["id"], sid);
    s.ok("Stop", sid, json!({"last_assistant_message": LEARNINGS}));
    let found = s.cli(&["search", "checkout service retries", "--project", "shop-api"]);
    assert!(found.to_string().contains("The checkout service retries payments three times"), "{found}");
    s.ok("SessionEnd", sid, json!({"reason": "prompt_input_exit"}));
    let sessions = s.cli(&["sessions", "--all-projects"]);
    assert!(sessions[0]["ended_at"].is_string(), "{sessions}");
    // `claude --resume` after the end: the replayed injection is not sent again.
    let last = s.ok("SessionStart", sid, json!({"source": "compact"}));
    s.ok("SessionEnd", sid, json!({"reason": "other"}));
    assert_eq!(s.ok("SessionStart", sid, json!({"source": "resume"})), json!({}), "after {last}");
    // ... nor is the first prompt's [MEMORY] block: the resumed session's prompt is not a first.
    let again = s.ok("UserPromptSubmit", sid, json!({"prompt": "how do payments retry in the checkout service?"}));
    assert!(!again.to_string().contains("[MEMORY]"), "{again}");
    // A resume after new memories: only the context, the protocol is in the replayed transcript.
    s.cli(&["save", "Refund window", "Refunds are accepted for 30 days", "--project", "shop-api"]);
    let resumed = s.ok("SessionStart", sid, json!({"source": "resume"}));
    let text = context_of(&resumed);
    assert!(text.contains("Refund window") && !text.contains("persistent memory"), "{resumed}");
}

/// A session that stops and ends leaves its Last Session record; the next session's first
/// prompt gets it in the `[MEMORY]` block. A first prompt with nothing stored gets the one line.
#[test]
fn the_next_session_gets_the_last_session() {
    let s = Sandbox::new();
    let (a, b) = ("5d1c6a2e-0000-4000-8000-00000000000a", "5d1c6a2e-0000-4000-8000-00000000000b");
    s.ok("SessionStart", a, json!({"source": "startup"}));
    let empty = s.ok("UserPromptSubmit", a, json!({"prompt": "fix the refund rounding in the ledger"}));
    assert!(context_of(&empty).starts_with("[MEMORY] Nothing is stored for project \"shop-api\""), "{empty}");
    s.ok("Stop", a, json!({"last_assistant_message": LEARNINGS, "stop_hook_active": false}));
    s.ok("SessionEnd", a, json!({"reason": "other"}));
    s.ok("SessionStart", b, json!({"source": "startup"}));
    let first = s.ok("UserPromptSubmit", b, json!({"prompt": "what did we do last time?"}));
    let text = context_of(&first);
    assert!(text.contains("## Last Session") && text.contains(&format!("Session {a} (claude-code)")), "{first}");
    assert!(text.contains("fix the refund rounding in the ledger"), "{first}");
    assert!(text.contains("The checkout service retries payments three times"), "{first}");
}

#[test]
fn bad_input_answers_fail_open_with_one_log_line() {
    let s = Sandbox::new();
    let cases: Vec<(&str, &str, &str)> = vec![
        ("empty stdin", "Stop", ""),
        ("not JSON", "UserPromptSubmit", "hello"),
        ("truncated", "SessionStart", r#"{"session_id":"s","cwd":"#),
        ("an array", "SessionStart", "[1,2]"),
        ("no session id", "SessionStart", r#"{"cwd":"/"}"#),
        ("unknown event", "Notification", r#"{"session_id":"s"}"#),
        ("no event", "", r#"{"session_id":"s"}"#),
        ("no prompt", "UserPromptSubmit", r#"{"session_id":"s"}"#),
    ];
    for (what, event, stdin) in cases {
        let out = s.hook(event, stdin);
        assert_eq!(out.status.code(), Some(0), "{what}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "{}\n", "{what}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{what}: {stderr}");
        assert!(stderr.starts_with("cairn hook"), "{what}: {stderr}");
    }
    // Unknown fields are ignored; a transcript that does not exist costs one line, not the answer.
    s.ok("SessionStart", "s2", json!({"source": "startup", "brand_new_field": {"x": 1}}));
    std::fs::remove_file(&s.transcript).unwrap();
    let out = s.hook(
        "UserPromptSubmit",
        &s.payload("s2", "UserPromptSubmit", json!({"prompt": "remember we ship on Fridays"})),
    );
    assert_eq!(out.status.code(), Some(0));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(context_of(&answer).contains("[MEMORY TRIGGER DETECTED]"), "{answer}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.lines().count() == 1 && stderr.contains("cannot read the transcript"), "{stderr}");
}

/// A daemon that answers its health check and then never answers an operation.
fn hanging_daemon(data_dir: &Path) -> std::thread::JoinHandle<()> {
    std::fs::create_dir_all(data_dir).unwrap();
    let canonical = data_dir.canonicalize().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let info =
        json!({"pid": std::process::id(), "addr": addr, "data_dir": canonical, "version": "0", "started_at": "x"});
    std::fs::write(data_dir.join("daemon.json"), info.to_string()).unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let n = stream.read(&mut buf).unwrap_or(0);
            if buf[..n].starts_with(b"GET /health") {
                let body = json!({"status": "ok", "data_dir": canonical}).to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            } else {
                held.push(stream); // never answered
            }
        }
    })
}

/// The hook's write gets no answer in its budget: it is kept in the spool under its event id
/// (the daemon may have it: applied once either way), and the hook answers in time.
#[test]
fn a_hanging_daemon_cannot_hold_a_hook_past_its_deadline() {
    let s = Sandbox::new();
    let _server = hanging_daemon(&s.data);
    let events = [("SessionStart", json!({"source": "startup"})), ("SessionEnd", json!({"reason": "other"}))];
    for (kept, (event, extra)) in events.into_iter().enumerate() {
        let started = Instant::now();
        let out = s.hook(event, &s.payload("s-slow", event, extra));
        let took = started.elapsed();
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "{}\n");
        assert_eq!(Spool::in_data_dir(&s.data).pending().len(), kept + 1, "{event}'s write waits in the spool");
        assert!(took < Duration::from_millis(2_500), "{event} took {took:?}");
    }
}

#[test]
fn private_text_never_leaves_the_hook() {
    let s = Sandbox::new();
    let sid = "s-private";
    s.ok("UserPromptSubmit", sid, json!({"prompt": "deploy with <private>hunter2-token</private> please"}));
    let stop = format!("{LEARNINGS}2. The staging key is <private>hunter2-key</private> for now\n");
    s.ok("Stop", sid, json!({"last_assistant_message": stop}));
    s.ok("PostCompact", sid, json!({"trigger": "auto", "compact_summary": "Used <private>hunter2-sum</private>."}));
    let mut files = vec![s.data.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else {
            let bytes = std::fs::read(&path).unwrap();
            assert!(!bytes.windows(7).any(|w| w == b"hunter2"), "{} holds private text", path.display());
        }
    }
}

#[test]
fn the_plugin_runs_cairn_hook_and_its_skill_is_the_protocol() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/claude-code");
    let skill = std::fs::read_to_string(root.join("skills/memory/SKILL.md")).unwrap();
    let body = skill.splitn(3, "---\n").nth(2).expect("frontmatter").trim();
    let out = cairn().args(["protocol", "--host", "claude-code"]).output().unwrap();
    let protocol = String::from_utf8(out.stdout).unwrap();
    assert_eq!(body, protocol.trim(), "regenerate SKILL.md from `cairn protocol --host claude-code`");
    assert!(skill.starts_with("---\nname: cairn-memory\n"), "{skill}");

    let hooks: Value = serde_json::from_str(&std::fs::read_to_string(root.join("hooks/hooks.json")).unwrap()).unwrap();
    let events = hooks["hooks"].as_object().unwrap();
    assert_eq!(events.len(), 10);
    for (event, groups) in events {
        for group in groups.as_array().unwrap() {
            for hook in group["hooks"].as_array().unwrap() {
                assert_eq!(hook["command"], format!("cairn hook {event}"));
            }
        }
    }
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["cairn"]["args"], json!(["mcp", "--tools=agent", "--host=claude-code"]));
}
