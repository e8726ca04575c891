//! `mcp-roundtrip`: spawn `cairn mcp` (JSON-RPC over stdio, newline-delimited), time spawn →
//! `initialize` answered, then `tools/call mem_search` round trips.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::procs::{ChildGuard, data_env};

#[derive(Debug, Default)]
pub struct McpRun {
    /// Spawn → initialize response, per spawn (ms).
    pub init_ms: Vec<f64>,
    /// tools/call mem_search round trips (ms).
    pub call_ms: Vec<f64>,
    /// Failed mem_search calls.
    pub errors: usize,
    /// Spawns that never answered initialize.
    pub init_errors: usize,
    pub error_samples: Vec<String>,
}

impl McpRun {
    fn error(&mut self, msg: String) {
        self.errors += 1;
        if self.error_samples.len() < 3 && !self.error_samples.contains(&msg) {
            self.error_samples.push(msg);
        }
    }
}

/// `queries`: (query text, project) pairs, used round-robin.
pub fn run(
    bin: &Path,
    data_dir: &Path,
    queries: &[(String, String)],
    spawns: usize,
    calls: usize,
    timeout: Duration,
    deadline: Instant,
) -> McpRun {
    let mut out = McpRun::default();
    // The child runs in the data dir, so a relative binary path must be resolved here.
    let bin = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    let mut q = 0;
    for _ in 0..spawns {
        if Instant::now() > deadline {
            break;
        }
        let initialized = out.init_ms.len();
        if let Err(e) = one_spawn(&bin, data_dir, queries, &mut q, calls, timeout, deadline, &mut out) {
            if out.init_ms.len() == initialized {
                out.init_errors += 1;
                if out.error_samples.len() < 3 && !out.error_samples.contains(&e) {
                    out.error_samples.push(e);
                }
            } else {
                out.error(e);
            }
        }
    }
    out
}

struct Session {
    stdin: ChildStdin,
    lines: Receiver<String>,
    timeout: Duration,
}

impl Session {
    fn send(&mut self, msg: &Value) -> Result<(), String> {
        let mut line = msg.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("writing to cairn mcp: {e}"))
    }

    /// Wait for the response with `id`, skipping notifications and other traffic.
    fn response(&mut self, id: u64) -> Result<Value, String> {
        let until = Instant::now() + self.timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!("no answer to request {id} within {:?}", self.timeout));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(format!("cairn mcp closed stdout before answering {id}"));
                }
            };
            let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
            if v.get("id").and_then(Value::as_u64) == Some(id) && v.get("method").is_none() {
                return Ok(v);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn one_spawn(
    bin: &Path,
    data_dir: &Path,
    queries: &[(String, String)],
    q: &mut usize,
    calls: usize,
    timeout: Duration,
    deadline: Instant,
    out: &mut McpRun,
) -> Result<(), String> {
    let started = Instant::now();
    let mut cmd = Command::new(bin);
    cmd.arg("mcp").current_dir(data_dir).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    data_env(&mut cmd, data_dir);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {} mcp: {e}", bin.display()))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let guard = ChildGuard::register(child, Vec::new());
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut s = Session { stdin, lines: rx, timeout };
    s.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "cairn-bench", "version": env!("CARGO_PKG_VERSION")}
    }}))?;
    let init = s.response(1)?;
    out.init_ms.push(started.elapsed().as_secs_f64() * 1000.0);
    if let Some(e) = init.get("error") {
        return Err(format!("initialize failed: {e}"));
    }
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    for i in 0..calls {
        if Instant::now() > deadline || queries.is_empty() {
            break;
        }
        let (query, project) = &queries[*q % queries.len()];
        *q += 1;
        let id = 2 + i as u64;
        let t = Instant::now();
        s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "mem_search",
            "arguments": {"query": query, "project": project, "limit": 10}
        }}))?;
        let r = s.response(id)?;
        out.call_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if let Some(e) = r.get("error") {
            out.error(format!("tools/call error: {e}"));
        } else if r.pointer("/result/isError").and_then(Value::as_bool) == Some(true) {
            let text = r.pointer("/result/content/0/text").and_then(Value::as_str).unwrap_or_default();
            out.error(format!("mem_search isError: {}", text.chars().take(200).collect::<String>()));
        }
    }
    drop(s); // closes stdin: the server should leave on EOF
    guard.finish(Duration::from_secs(2));
    Ok(())
}
