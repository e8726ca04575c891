//! JSON-RPC fuzzing of `cairn mcp` over stdio: arbitrary bytes, arbitrary JSON, and
//! JSON-RPC messages with random methods, ids, params and tool arguments. After every case the
//! process is still there; every well-formed request got an answer (a result or an error);
//! stdout carried nothing but JSON-RPC; and a plain request still works.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use crate::support::cairn;

const TOOLS: &[&str] = &[
    "mem_save",
    "mem_search",
    "mem_context",
    "mem_session_summary",
    "mem_session_start",
    "mem_session_end",
    "mem_get_observation",
    "mem_suggest_topic_key",
    "mem_capture_passive",
    "mem_save_prompt",
    "mem_update",
    "mem_current_project",
    "mem_judge",
    "mem_compare",
    "mem_doctor",
    "mem_delete",
    "mem_stats",
    "mem_timeline",
    "mem_merge_projects",
    "memory",
    "no_such_tool",
];
const FIELDS: &[&str] = &[
    "title",
    "content",
    "query",
    "id",
    "type",
    "scope",
    "project",
    "session_id",
    "topic_key",
    "limit",
    "summary",
    "directory",
    "observation_id",
    "before",
    "after",
    "judgment_id",
    "relation",
    "confidence",
    "memory_id_a",
    "memory_id_b",
    "reasoning",
    "from",
    "to",
    "op",
    "args",
    "hard_delete",
    "all_projects",
    "source",
];

/// One line sent, and the id of the answer it must get (for a well-formed request).
#[derive(Debug, Clone)]
struct Line {
    bytes: Vec<u8>,
    expects: Option<String>,
}

fn odd_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(0)),
        Just(json!(1.5)),
        "\\PC{0,16}".prop_map(Value::String),
        Just(json!("1")),
        Just(json!("<private>s</private>")),
    ];
    leaf.prop_recursive(2, 10, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(FIELDS).prop_map(str::to_owned), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arguments() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(prop::sample::select(FIELDS).prop_map(str::to_owned), odd_json(), 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

fn line() -> impl Strategy<Value = (u8, Vec<u8>, Value, Value, bool)> {
    (
        0u8..5,
        prop::collection::vec(any::<u8>(), 0..64),
        odd_json(),
        (prop::sample::select(TOOLS), arguments()).prop_map(|(t, a)| json!({"name": t, "arguments": a})),
        any::<bool>(),
    )
}

fn lines() -> impl Strategy<Value = Vec<(u8, Vec<u8>, Value, Value, bool)>> {
    prop::collection::vec(line(), 1..8)
}

/// Turn generated parts into lines. Kinds: 0 raw bytes, 1 any JSON, 2 a tool call, 3 a request
/// with a random method, 4 a message with a broken envelope.
fn build(case: u32, parts: &[(u8, Vec<u8>, Value, Value, bool)]) -> Vec<Line> {
    const METHODS: &[&str] = &[
        "tools/list",
        "ping",
        "initialize",
        "resources/list",
        "prompts/list",
        "completion/complete",
        "logging/setLevel",
        "tools/call",
        "no/such/method",
        "",
    ];
    parts
        .iter()
        .enumerate()
        .map(|(k, (kind, raw, any, call, notify))| {
            let id = format!("fz-{case}-{k}");
            match kind {
                0 => {
                    let mut bytes: Vec<u8> = raw.iter().copied().filter(|b| *b != b'\n').collect();
                    bytes.push(b'\n');
                    Line { bytes, expects: None }
                }
                1 => Line { bytes: format!("{any}\n").into_bytes(), expects: None },
                2 => {
                    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": call});
                    Line { bytes: format!("{msg}\n").into_bytes(), expects: Some(id) }
                }
                3 => {
                    let method = METHODS[raw.first().copied().unwrap_or(0) as usize % METHODS.len()];
                    if *notify {
                        let msg = json!({"jsonrpc": "2.0", "method": format!("notifications/{method}"), "params": any});
                        Line { bytes: format!("{msg}\n").into_bytes(), expects: None }
                    } else {
                        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": any});
                        Line { bytes: format!("{msg}\n").into_bytes(), expects: Some(id) }
                    }
                }
                _ => {
                    // Wrong version, id of a wrong type, params not an object, an answer to nothing.
                    let msg = match raw.first().copied().unwrap_or(0) % 4 {
                        0 => json!({"jsonrpc": "1.0", "id": id, "method": "ping"}),
                        1 => json!({"jsonrpc": "2.0", "id": any, "method": "tools/list"}),
                        2 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": [1, 2]}),
                        _ => json!({"jsonrpc": "2.0", "id": id, "result": any}),
                    };
                    Line { bytes: format!("{msg}\n").into_bytes(), expects: None }
                }
            }
        })
        .collect()
}

/// `cairn mcp` with its stdout read on a thread, so a silent process is a timeout, not a hang.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Server {
    fn start(data: &std::path::Path, work: &std::path::Path) -> Server {
        let mut child = cairn()
            .args(["mcp", "--tools", "all,router"])
            .current_dir(work)
            .env("CAIRN_DATA_DIR", data)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cairn mcp");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut server = Server { child, stdin, lines: rx };
        server.send(&json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}}));
        server.wait_for(&HashSet::from(["init".to_owned()])).expect("initialize answered");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, msg: &Value) {
        self.send_bytes(format!("{msg}\n").as_bytes()).expect("write to cairn mcp");
    }

    fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let stdin = self.stdin.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?;
        stdin.write_all(bytes)?;
        stdin.flush()
    }

    /// Read until every id in `ids` was answered; every line must be a JSON-RPC message.
    fn wait_for(&mut self, ids: &HashSet<String>) -> Result<Vec<Value>, String> {
        let mut pending = ids.clone();
        let mut answers = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pending.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => return Err(format!("no answer to {pending:?}")),
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!(
                        "cairn mcp closed stdout ({:?}); unanswered {pending:?}",
                        self.child.try_wait()
                    ));
                }
            };
            let msg: Value =
                serde_json::from_str(&line).map_err(|e| format!("stdout carried non-JSON ({e}): {line:?}"))?;
            if msg["jsonrpc"] != "2.0" {
                return Err(format!("stdout carried something that is not JSON-RPC: {line}"));
            }
            if let Some(id) = msg["id"].as_str() {
                pending.remove(id);
            }
            answers.push(msg);
        }
        Ok(answers)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn arbitrary_stdin_never_takes_cairn_mcp_down() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, work) = (tmp.path().join("data"), tmp.path().join("fuzz"));
    std::fs::create_dir_all(&work).unwrap();
    let mut server = Server::start(&data, &work);
    // Few shrink steps: each failing step waits out a timeout.
    let config = Config { cases: 192, max_shrink_iters: 16, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let case = std::cell::Cell::new(0u32);
    let server_cell = std::cell::RefCell::new(&mut server);
    let result = runner.run(&lines(), |parts| {
        let case = {
            case.set(case.get() + 1);
            case.get()
        };
        let mut server = server_cell.borrow_mut();
        let sent = build(case, &parts);
        let mut expected: HashSet<String> = HashSet::new();
        for line in &sent {
            server.send_bytes(&line.bytes).map_err(|e| TestCaseError::fail(format!("stdin closed: {e}")))?;
            expected.extend(line.expects.clone());
        }
        // A plain request after the noise must still be answered.
        let probe = format!("probe-{case}");
        server.send(&json!({"jsonrpc": "2.0", "id": probe, "method": "ping"}));
        expected.insert(probe);
        let answers = server.wait_for(&expected).map_err(TestCaseError::fail)?;
        for answer in &answers {
            let ok = answer.get("result").is_some() || answer["error"]["code"].is_i64();
            prop_assert!(ok || answer.get("method").is_some(), "neither a result nor an error: {answer}");
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!("mcp fuzz: {} cases of arbitrary stdin survived", case.get());
    // Still a working memory server.
    server.send(&json!({"jsonrpc": "2.0", "id": "save", "method": "tools/call",
        "params": {"name": "mem_save", "arguments": {"title": "after the fuzz", "content": "the store still works"}}}));
    server.wait_for(&HashSet::from(["save".to_owned()])).unwrap();
    server.send(&json!({"jsonrpc": "2.0", "id": "search", "method": "tools/call",
        "params": {"name": "mem_search", "arguments": {"query": "fuzz store works"}}}));
    let answers = server.wait_for(&HashSet::from(["search".to_owned()])).unwrap();
    let search = answers.iter().find(|a| a["id"] == "search").unwrap();
    assert!(search.to_string().contains("after the fuzz"), "{search}");
    assert!(server.child.try_wait().unwrap().is_none(), "cairn mcp is still running");
}
