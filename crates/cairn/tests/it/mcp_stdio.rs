//! `cairn mcp` over piped stdio at the edges of JSON-RPC: a line that is no JSON, not UTF-8 or
//! over 16 MiB gets a `-32700` answer and the next line is served; `tools/call` with array
//! `arguments` gets `-32602`; and every request written before stdin ends is answered before
//! the process exits.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::cairn;

/// Generous: a wait that ends early is a pass, only a hang runs into it.
const WAIT: Duration = Duration::from_secs(30);

struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Mcp {
    /// A `cairn mcp` on a fresh data dir, initialized.
    fn start() -> Mcp {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let mut child = cairn()
            .args(["mcp", "--tools", "all"])
            .current_dir(&work)
            .env("CAIRN_DATA_DIR", dir.path().join("data"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn cairn mcp");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut mcp = Mcp { child, stdin, lines, _dir: dir };
        mcp.send(&json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}}));
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(mcp.next()["id"], "init");
        mcp
    }

    fn send(&mut self, msg: &Value) {
        self.send_bytes(format!("{msg}\n").as_bytes());
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).and_then(|()| stdin.flush()).expect("write to cairn mcp");
    }

    /// The next message on stdout.
    fn next(&self) -> Value {
        let line = self.lines.recv_timeout(WAIT).expect("cairn mcp answered");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("stdout carried non-JSON ({e}): {line:?}"))
    }

    fn ping(&mut self, id: &str) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "ping"}));
        let answer = self.next();
        assert_eq!((answer["id"].as_str(), answer.get("result").is_some()), (Some(id), true), "{answer}");
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn unreadable_lines_get_a_parse_error_and_the_next_request_is_served() {
    let mut mcp = Mcp::start();
    let mut huge = br#"{"jsonrpc":"2.0","id":"huge","method":"ping","params":{"pad":""#.to_vec();
    huge.resize(17 * 1024 * 1024, b'a');
    huge.extend_from_slice(b"\"}}\n");
    let unreadable: [(&str, &[u8]); 4] = [
        ("not JSON", b"this is not json\n"),
        ("cut short", b"{\"jsonrpc\":\"2.0\",\"id\":5,\n"),
        ("not UTF-8", b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\xfe\",\"method\":\"ping\"}\n"),
        ("over 16 MiB", &huge),
    ];
    for (what, line) in unreadable {
        mcp.send_bytes(line);
        let answer = mcp.next();
        assert_eq!(
            (answer["jsonrpc"].as_str(), answer["id"].clone(), answer["error"]["code"].as_i64()),
            (Some("2.0"), Value::Null, Some(-32700)),
            "{what}: {answer}"
        );
        mcp.ping(&format!("after {what}"));
    }
}

#[test]
fn array_arguments_are_invalid_params() {
    let mut mcp = Mcp::start();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "mem_stats", "arguments": [1, 2]}}));
    let answer = mcp.next();
    assert_eq!((answer["id"].clone(), answer["error"]["code"].as_i64()), (json!(7), Some(-32602)), "{answer}");
    mcp.ping("after");
}

/// The requests already written when stdin ends are all answered, then the process exits.
#[test]
fn every_request_read_before_stdin_ends_is_answered() {
    for round in 0..4 {
        let mut mcp = Mcp::start();
        let ids: Vec<String> = (0..8).map(|k| format!("r{round}-{k}")).collect();
        for (k, id) in ids.iter().enumerate() {
            let msg = if k % 2 == 0 {
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "mem_stats", "arguments": {}}})
            };
            mcp.send(&msg);
        }
        drop(mcp.stdin.take());
        let mut answered = Vec::new();
        while let Ok(line) = mcp.lines.recv_timeout(WAIT) {
            let answer: Value = serde_json::from_str(&line).unwrap();
            assert!(answer.get("result").is_some(), "round {round}: {answer}");
            answered.push(answer["id"].as_str().unwrap().to_owned());
        }
        assert_eq!(answered.len(), ids.len(), "round {round}: answered {answered:?}");
        let status = mcp.child.wait().unwrap();
        assert!(status.success(), "round {round}: {status}");
    }
}
