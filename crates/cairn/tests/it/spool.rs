//! The spool with the real binary: a hook with no daemon keeps its writes on disk and starts
//! the daemon, which applies them; a daemon killed mid-drain and restarted applies each event
//! once (no duplicate, no gap); unreadable records are counted in `/health` and `cairn doctor`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cairn_core::ops::Op;
use cairn_core::spool::{EventId, Pushed, Spool};
use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http, http_with, recorded};

/// The daemon a hook started (not a child of the test): stopped on drop.
struct Started(PathBuf);

impl Drop for Started {
    fn drop(&mut self) {
        if let Some((pid, _)) = recorded(&self.0) {
            let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
        }
    }
}

fn op(name: &str, args: Value) -> Op {
    Op::from_value(json!({"op": name, "args": args})).unwrap()
}

fn pending(data: &Path) -> usize {
    Spool::in_data_dir(data).pending().len()
}

fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run_op(daemon: &Daemon, name: &str, args: Value) -> Value {
    let (status, body) = http(daemon.addr, "POST", "/v1/op", Some(&json!({"op": name, "args": args})));
    assert_eq!(status, 200, "{name}: {body}");
    body
}

/// A cold start: no daemon runs. The hooks answer in their budget, keep their writes in the
/// spool and start the daemon, which applies them: the session and its prompt are stored.
#[test]
fn hooks_without_a_daemon_spool_and_the_daemon_they_start_applies_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let project = tmp.path().join("shop-api");
    std::fs::create_dir_all(&project).unwrap();
    let _started = Started(data.clone());
    let hook = |event: &str, payload: Value| {
        let started = Instant::now();
        let mut child = cairn()
            .args(["hook", event])
            .env("CAIRN_DATA_DIR", &data)
            // hooks may start the daemon, as installed
            .env("CAIRN_AUTOSTART", "mcp")
            .current_dir(&project)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(payload.to_string().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        assert!(started.elapsed() < Duration::from_secs(5), "{event} took {:?}", started.elapsed());
        out
    };
    let base = json!({"session_id": "cold-1", "cwd": project, "transcript_path": tmp.path().join("none.jsonl")});
    let mut start = base.clone();
    start["hook_event_name"] = json!("SessionStart");
    start["source"] = json!("startup");
    hook("SessionStart", start);
    let mut prompt = base.clone();
    prompt["hook_event_name"] = json!("UserPromptSubmit");
    prompt["prompt"] = json!("why does the checkout retry payments three times?");
    hook("UserPromptSubmit", prompt.clone());
    // A rule stated in a prompt is a memory once the daemon applies it, with no model set up.
    prompt["prompt"] = json!("Good. From now on the checkout never retries a declined payment automatically.");
    hook("UserPromptSubmit", prompt);
    wait_until("the started daemon", 30, || recorded(&data).is_some());
    wait_until("the spool drained", 30, || pending(&data) == 0);
    let (_, addr) = recorded(&data).unwrap();
    let ask = |name: &str, args: Value| http(addr, "POST", "/v1/op", Some(&json!({"op": name, "args": args})));
    let (status, session) = ask("get_session", json!({"id": "cold-1"}));
    assert_eq!(status, 200, "{session}");
    let (_, prompts) = ask("recent_prompts", json!({"limit": 50}));
    let text = prompts.to_string();
    assert_eq!(text.matches("retry payments three times").count(), 1, "{text}");
    let (_, found) = http(addr, "GET", "/search?q=declined+payment+automatically", None);
    let rule = "From now on the checkout never retries a declined payment automatically.";
    assert_eq!(found.to_string().matches(rule).count(), 1, "saved once, as said: {found}");
}

/// Thousands of spooled events; the daemon is SIGKILLed while it drains them, then started
/// again: every event is applied exactly once (a counter of tool calls is exact).
#[test]
fn a_daemon_killed_mid_drain_applies_each_event_once() {
    const EVENTS: usize = 3000;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let spool = Spool::in_data_dir(&data);
    let call = op("record_activity", json!({"session_id": "busy", "project": "p", "event": "tool_call"}));
    for _ in 0..EVENTS {
        assert_eq!(spool.push(&EventId::new(), "test", call.name(), &call), Pushed::Kept);
    }
    let mut first = Daemon::start(&data);
    wait_until("the drain to begin", 60, || pending(&data) < EVENTS);
    first.kill_hard();
    let left = pending(&data);
    assert!(left > 0, "the drain ended before the kill: raise EVENTS");
    let second = Daemon::start(&data);
    wait_until("the spool drained", 120, || pending(&data) == 0);
    let activity = run_op(&second, "session_activity", json!({"session_id": "busy"}));
    assert_eq!(activity["tool_calls"], json!(EVENTS), "killed with {left} left");
}

/// Truncated and corrupt records are counted and skipped, the rest is applied; the counts
/// show in `/health` and `cairn doctor`, and survive a restart.
#[test]
fn unreadable_records_are_counted_in_health_and_doctor() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let spool = Spool::in_data_dir(&data);
    let save = |n: usize| op("save", json!({"title": format!("spooled {n}"), "content": "kept", "project": "p"}));
    spool.push(&EventId::new(), "test", "save", &save(1));
    std::fs::write(spool.dir().join(format!("{}.json", EventId::new())), b"{\"v\":1,\"id\":").unwrap();
    std::fs::write(spool.dir().join(format!("{}.json", EventId::new())), b"\x00\x01not json").unwrap();
    spool.push(&EventId::new(), "test", "save", &save(2));
    {
        let daemon = Daemon::start(&data);
        wait_until("the spool drained", 30, || pending(&data) == 0);
        let (_, stats) = http(daemon.addr, "GET", "/stats", None);
        assert_eq!(stats["total_observations"], 2);
    }
    let daemon = Daemon::start(&data);
    let (_, health) = http(daemon.addr, "GET", "/health", None);
    assert_eq!(
        health["spool"],
        json!({"pending": 0, "bytes": 0, "dropped": 0, "corrupt": 2, "rejected": 0, "failed": 0})
    );
    drop(daemon);
    let out = cairn().args(["doctor", "--json"]).env("CAIRN_DATA_DIR", &data).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check =
        report["checks"].as_array().unwrap().iter().find(|c| c["id"] == "spool").expect("a spool check").clone();
    assert_eq!(check["status"], "warning", "{check}");
    assert!(check["message"].as_str().unwrap().contains("2 unreadable"), "{check}");
}

/// A live write sent again with the same `Idempotency-Key` (a plugin's retry) is applied once;
/// a key that is not a UUID v7 is refused with `invalid_argument`, nothing applied.
#[test]
fn a_write_sent_twice_with_one_key_is_applied_once() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let daemon = Daemon::start(&data);
    let key = EventId::new();
    let body = json!({"op": "record_activity", "args": {"session_id": "r", "project": "p", "event": "tool_call"}});
    for _ in 0..2 {
        let (status, _) = post_with_key(daemon.addr, &body, key.as_str());
        assert_eq!(status, 200);
    }
    let (status, error) = post_with_key(daemon.addr, &body, "not-a-uuid");
    assert_eq!((status, error["error"]["code"].as_str()), (400, Some("invalid_argument")));
    assert_eq!(run_op(&daemon, "session_activity", json!({"session_id": "r"}))["tool_calls"], 1);
}

fn post_with_key(addr: std::net::SocketAddr, body: &Value, key: &str) -> (u16, Value) {
    http_with(addr, "POST", "/v1/op", Some(body), &[("Idempotency-Key", key)])
}
