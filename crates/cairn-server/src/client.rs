//! How `cairn mcp` and the CLI reach the daemon of their data dir: `serve` records its address
//! in `<data dir>/daemon.json`; a client reads it, checks `/health` names the same data dir
//! (a daemon of another store is never used), and sends operations to `POST /v1/op`.
//!
//! A deliberately small blocking HTTP/1.1 client over loopback: one request per connection,
//! no async runtime, so a CLI call costs a connect and a write.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_core::ops::Op;
use cairn_core::{CairnError, ErrorCode, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// File in the data dir that names the running daemon.
pub const DAEMON_FILE: &str = "daemon.json";
/// How long a health check may take before the daemon counts as absent.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long an operation may take (an import of a large file).
const OP_TIMEOUT: Duration = Duration::from_secs(120);

/// What `serve` writes about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonInfo {
    pub pid: u32,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    pub version: String,
    pub started_at: String,
}

impl DaemonInfo {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(DAEMON_FILE)
    }

    /// Record the daemon (atomically: a reader never sees half a file).
    pub fn write(&self) -> std::io::Result<()> {
        let path = Self::path(&self.data_dir);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).unwrap_or_default())?;
        std::fs::rename(tmp, path)
    }

    pub fn read(data_dir: &Path) -> Option<DaemonInfo> {
        serde_json::from_slice(&std::fs::read(Self::path(data_dir)).ok()?).ok()
    }

    /// Remove the record if it still names this process.
    pub fn remove_if_mine(data_dir: &Path) {
        if DaemonInfo::read(data_dir).is_some_and(|d| d.pid == std::process::id()) {
            let _ = std::fs::remove_file(Self::path(data_dir));
        }
    }
}

/// A connection to a running daemon.
#[derive(Debug, Clone)]
pub struct DaemonClient {
    pub addr: SocketAddr,
    token: Option<String>,
}

impl DaemonClient {
    pub fn new(addr: SocketAddr, token: Option<String>) -> Self {
        Self { addr, token }
    }

    /// The daemon serving `data_dir`, if one is running and answers.
    pub fn discover(data_dir: &Path, token: Option<String>) -> Option<DaemonClient> {
        let info = DaemonInfo::read(data_dir)?;
        let client = DaemonClient::new(info.addr, token);
        let health = client.health().ok()?;
        let served = health.get("data_dir").and_then(Value::as_str).map(PathBuf::from)?;
        same_dir(&served, data_dir).then_some(client)
    }

    pub fn health(&self) -> Result<Value> {
        let (status, body) = self.request("GET", "/health", None, PROBE_TIMEOUT)?;
        if status != 200 {
            return Err(unavailable(format!("health check answered {status}")));
        }
        serde_json::from_slice(&body).map_err(|e| unavailable(format!("health check: {e}")))
    }

    /// Run an operation in the daemon. Errors keep their code.
    pub fn execute(&self, op: &Op) -> Result<Value> {
        let body = serde_json::to_vec(op)?;
        let (status, bytes) = self.request("POST", "/v1/op", Some(&body), OP_TIMEOUT)?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| unavailable(format!("the daemon answered {status} with something that is not JSON: {e}")))?;
        if status == 200 {
            return Ok(value);
        }
        Err(error_from_body(&value, status))
    }

    fn request(&self, method: &str, path: &str, body: Option<&[u8]>, timeout: Duration) -> Result<(u16, Vec<u8>)> {
        let io = |e: std::io::Error| unavailable(format!("{}: {e}", self.addr));
        let mut stream = TcpStream::connect_timeout(&self.addr, PROBE_TIMEOUT).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        let body = body.unwrap_or_default();
        head.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body)).map_err(io)?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).map_err(io)?;
        parse_response(&response).ok_or_else(|| unavailable("malformed HTTP response".into()))
    }
}

fn unavailable(message: String) -> CairnError {
    CairnError::new(ErrorCode::DaemonUnavailable, format!("cairn daemon: {message}"))
}

fn error_from_body(value: &Value, status: u16) -> CairnError {
    let error = &value["error"];
    let code = error["code"].as_str().and_then(ErrorCode::from_name).unwrap_or(ErrorCode::Internal);
    let message = error["message"].as_str().map_or_else(|| format!("the daemon answered {status}"), str::to_owned);
    let mut err = CairnError::new(code, message);
    err.hint = error["hint"].as_str().map(str::to_owned);
    err
}

/// Status and body of an HTTP/1.1 response read to EOF (`Connection: close`).
fn parse_response(raw: &[u8]) -> Option<(u16, Vec<u8>)> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = &raw[split + 4..];
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    Some((status, if chunked { dechunk(body)? } else { body.to_vec() }))
}

fn dechunk(mut body: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&body[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(body.get(..size)?);
        body = body.get(size + 2..)?;
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    canon(a) == canon(b)
}

/// Start `cairn serve` for `data_dir` in the background and wait until it answers. The daemon
/// outlives the caller (that is the point) and leaves by itself after an idle period.
pub fn autostart(
    exe: &Path,
    data_dir: &Path,
    port: u16,
    token: Option<String>,
    wait: Duration,
) -> Option<DaemonClient> {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(data_dir.join("daemon.log")).ok();
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--port")
        .arg(port.to_string())
        .arg("--idle-exit")
        .arg("1800")
        .arg("--or-any-port")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, Stdio::from));
    detach(&mut cmd);
    if let Err(e) = cmd.spawn() {
        tracing::warn!(error = %e, "could not start the cairn daemon");
        return None;
    }
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Some(client) = DaemonClient::discover(data_dir, token.clone()) {
            return Some(client);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[cfg(unix)]
fn detach(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // Its own process group: a Ctrl-C aimed at the agent does not take the daemon down mid-write.
    cmd.process_group(0);
}

#[cfg(not(unix))]
fn detach(_cmd: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked_responses() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain), Some((200, b"{}".to_vec())));
        let chunked = b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked), Some((404, b"abcde".to_vec())));
        assert_eq!(parse_response(b"garbage"), None);
    }

    #[test]
    fn error_bodies_keep_their_code() {
        let body = serde_json::json!({"error": {"code": "observation_not_found", "message": "nope", "hint": "h"}});
        let err = error_from_body(&body, 404);
        assert_eq!((err.code, err.hint.as_deref()), (ErrorCode::ObservationNotFound, Some("h")));
    }

    #[test]
    fn no_daemon_file_means_no_daemon() {
        let dir = tempfile::tempdir().unwrap();
        assert!(DaemonClient::discover(dir.path(), None).is_none());
    }
}
