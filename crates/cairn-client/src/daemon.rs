//! How `cairn mcp` and the CLI reach the daemon of their data dir: `serve` records its address
//! in `<data dir>/daemon.json`; a client reads it, checks `/health` names the same data dir
//! (a daemon of another store is never used), and sends operations to `POST /v1/op`.
//!
//! A hook has no time for the health round trip: it trusts the record when its process is
//! alive ([`DaemonClient::from_record`]), and every request names the data dir it is meant for
//! ([`DATA_DIR_HEADER`]), which the daemon checks, so a stale record whose port another
//! store's daemon now holds still never reaches the wrong store.
//!
//! Requests go through cairn's one blocking HTTP/1.1 client (`cairn-http`), one request per
//! connection and no async runtime, so a CLI call or a hook costs a connect and a write.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_core::ops::{EventOutcome, Op, OpOutput};
use cairn_core::spool::EventId;
use cairn_core::{CairnError, ErrorCode, Result};
use cairn_http as http;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// File in the data dir that names the running daemon.
pub const DAEMON_FILE: &str = "daemon.json";
/// How long a health check may take before the daemon counts as absent.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a second health check waits when the first got no answer in time but the daemon's
/// process is alive: a daemon slowed by a busy machine is still the one to write through (its
/// index and its queue), not a reason to open the file beside it.
const BUSY_PROBE_TIMEOUT: Duration = Duration::from_secs(5);
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

    /// Record the daemon (atomically: a reader never sees half a file). The temporary file is
    /// this process's own: two daemons starting at once must not rename each other's.
    pub fn write(&self) -> std::io::Result<()> {
        let path = Self::path(&self.data_dir);
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let written = std::fs::write(&tmp, serde_json::to_vec_pretty(self).unwrap_or_default())
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
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

/// File in the data dir that the serving daemon holds locked for as long as it runs.
pub const DAEMON_LOCK_FILE: &str = "daemon.lock";

/// The data dir's daemon lock, held by the one daemon that serves it. Two daemons started at
/// once (a host's plugin and its hooks, both finding none) would otherwise both open the store
/// and both record themselves; the one the record does not name would take writes no client
/// sends it. The operating system releases the lock when the process ends, however it ends.
#[derive(Debug)]
pub struct DaemonLock {
    _file: std::fs::File,
}

impl DaemonLock {
    /// Take the lock, or `None` when another process holds it. A file system without locks
    /// gives the lock anyway (as before locks existed): serving beats refusing to start.
    pub fn try_take(data_dir: &Path) -> std::io::Result<Option<DaemonLock>> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(data_dir.join(DAEMON_LOCK_FILE))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
            Err(std::fs::TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Unsupported => {
                tracing::warn!(error = %e, "this file system has no file locks: two daemons could start at once");
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
        // The holder's pid, for the message of a daemon that finds the lock taken.
        file.set_len(0)?;
        write!(file, "{}", std::process::id())?;
        Ok(Some(DaemonLock { _file: file }))
    }

    /// The pid the lock's holder wrote, if any.
    pub fn holder(data_dir: &Path) -> Option<u32> {
        std::fs::read_to_string(data_dir.join(DAEMON_LOCK_FILE)).ok()?.trim().parse().ok()
    }
}

/// The request header naming the data dir a client means (percent-encoded bytes of the path):
/// a daemon serving another one refuses the request with `daemon_mismatch`.
pub const DATA_DIR_HEADER: &str = "cairn-data-dir";

/// The [`DATA_DIR_HEADER`] value for `dir`.
pub fn data_dir_header_value(dir: &Path) -> String {
    percent_encoding::percent_encode(&path_bytes(dir), percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The data dir a [`DATA_DIR_HEADER`] value names.
pub fn data_dir_from_header(value: &str) -> PathBuf {
    let bytes: Vec<u8> = percent_encoding::percent_decode_str(value).collect();
    path_from_bytes(bytes)
}

#[cfg(unix)]
fn path_bytes(dir: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    dir.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn path_bytes(dir: &Path) -> Vec<u8> {
    dir.to_string_lossy().into_owned().into_bytes()
}

#[cfg(unix)]
fn path_from_bytes(bytes: Vec<u8>) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(bytes))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(&bytes).into_owned())
}

/// Whether the two paths name the same directory (either may be a symlink or relative).
pub fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    canon(a) == canon(b)
}

/// A connection to a running daemon.
#[derive(Debug, Clone)]
pub struct DaemonClient {
    pub addr: SocketAddr,
    token: Option<String>,
    /// The data dir this client means, sent with every request ([`DATA_DIR_HEADER`]).
    data_dir: Option<String>,
}

impl DaemonClient {
    pub fn new(addr: SocketAddr, token: Option<String>) -> Self {
        Self { addr, token, data_dir: None }
    }

    fn of_data_dir(addr: SocketAddr, token: Option<String>, data_dir: &Path) -> Self {
        Self { addr, token, data_dir: Some(data_dir_header_value(data_dir)) }
    }

    /// The daemon serving `data_dir`, if one is running and answers.
    pub fn discover(data_dir: &Path, token: Option<String>) -> Option<DaemonClient> {
        let info = DaemonInfo::read(data_dir)?;
        let client = DaemonClient::of_data_dir(info.addr, token, data_dir);
        let health = client
            .health_within(PROBE_TIMEOUT)
            .or_else(|e| if process_alive(info.pid) { client.health_within(BUSY_PROBE_TIMEOUT) } else { Err(e) })
            .ok()?;
        let served = health.get("data_dir").and_then(Value::as_str).map(PathBuf::from)?;
        same_dir(&served, data_dir).then_some(client)
    }

    /// The daemon `data_dir`'s record names, when its process is alive, without asking it
    /// anything (a hook's budget has no room for a health round trip). Its requests name the
    /// data dir, so a daemon of another store refuses them (`daemon_mismatch`).
    pub fn from_record(data_dir: &Path, token: Option<String>) -> Option<DaemonClient> {
        let info = DaemonInfo::read(data_dir)?;
        process_alive(info.pid).then(|| DaemonClient::of_data_dir(info.addr, token, data_dir))
    }

    pub fn health(&self) -> Result<Value> {
        self.health_within(PROBE_TIMEOUT)
    }

    fn health_within(&self, timeout: Duration) -> Result<Value> {
        let (status, body) = self.request("GET", "/health", None, timeout).map_err(RequestError::into_inner)?;
        if status != 200 {
            return Err(unavailable(format!("health check answered {status}")));
        }
        serde_json::from_slice(&body).map_err(|e| unavailable(format!("health check: {e}")))
    }

    /// Run an operation in the daemon. Errors keep their code.
    ///
    /// `daemon_unavailable` means the operation surely did not run (no connection, or the
    /// request was not fully sent): the caller may run it elsewhere. An operation that is not
    /// safe to replay (a write to the memory store) sent whole that gets no answer (the
    /// daemon died, or timed out) fails with `operation_interrupted` instead: it may have
    /// been committed, and running it again could apply it twice.
    pub fn execute(&self, op: &Op) -> Result<OpOutput> {
        match self.execute_with(op, None, OP_TIMEOUT)? {
            EventOutcome::Applied(output) => Ok(output),
            EventOutcome::Duplicate(id) => {
                Err(CairnError::internal(format!("a write without an event id was a duplicate of {}", id.as_str())))
            }
        }
    }

    /// [`DaemonClient::execute`] naming the write with an event id (`Idempotency-Key`: sent
    /// again, it is applied once) and waiting at most `timeout` for the answer.
    pub fn execute_with(&self, op: &Op, event: Option<&EventId>, timeout: Duration) -> Result<EventOutcome> {
        let body = serde_json::to_vec(op)?;
        let interrupted = |e: CairnError| {
            if op.is_replay_safe() {
                return e;
            }
            CairnError::new(
                ErrorCode::OperationInterrupted,
                format!("the daemon stopped answering while running `{}`: {}", op.name(), e.message),
            )
            .with_hint("it may or may not have been applied: check (cairn search, cairn get) before running it again")
        };
        let key = event.map(|id| ("Idempotency-Key", id.as_str()));
        let (status, bytes) = self.request_with("POST", "/v1/op", Some(&body), timeout, key).map_err(|e| match e {
            RequestError::NotSent(e) => e,
            RequestError::NoAnswer(e) => interrupted(e),
        })?;
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            interrupted(unavailable(format!("the daemon answered {status} with something that is not JSON: {e}")))
        })?;
        if status == 200 {
            // The HTTP body is this client's JSON edge: typed from here on.
            return EventOutcome::from_value(op.kind(), value);
        }
        Err(error_from_body(&value, status))
    }

    /// Have the daemon apply what waits in the spool now (it answers when done): a host's write
    /// then does not overtake the events kept before it. The events still waiting.
    pub fn drain_spool(&self, timeout: Duration) -> Result<u64> {
        let (status, body) = self.request("POST", "/spool/drain", None, timeout).map_err(RequestError::into_inner)?;
        let value: Value = serde_json::from_slice(&body).map_err(|e| unavailable(format!("spool drain: {e}")))?;
        if status != 200 {
            return Err(error_from_body(&value, status));
        }
        Ok(value["pending"].as_u64().unwrap_or(0))
    }

    /// Ask the daemon to import the git sync chunks of `directory` in the background: it
    /// answers at once (202), imports for at most its time cap, and never twice at a time.
    pub fn start_sync_import(&self, directory: &Path, timeout: Duration) -> Result<()> {
        let body = serde_json::json!({ "directory": directory }).to_string();
        let (status, body) =
            self.request("POST", "/sync/import", Some(body.as_bytes()), timeout).map_err(RequestError::into_inner)?;
        if status == 202 || status == 200 {
            return Ok(());
        }
        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Err(error_from_body(&value, status))
    }

    /// Have the daemon run a sync round with its hub now, and wait for its report.
    pub fn remote_sync(&self, timeout: Duration) -> Result<cairn_core::sync::remote::RoundReport> {
        let (status, body) =
            self.request("POST", "/sync/remote", Some(b"{}"), timeout).map_err(RequestError::into_inner)?;
        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if status != 200 {
            return Err(error_from_body(&value, status));
        }
        serde_json::from_value(value).map_err(|e| unavailable(format!("sync round report: {e}")))
    }

    /// Have the daemon extract memories from archived conversations (one, or every one with
    /// something new): its report when `wait`, else `None` once it started.
    pub fn extract(
        &self,
        session_id: Option<&str>,
        wait: bool,
        timeout: Duration,
    ) -> Result<Option<cairn_core::extract::ExtractionReport>> {
        let body = serde_json::json!({"session_id": session_id, "wait": wait}).to_string();
        let (status, body) =
            self.request("POST", "/extract", Some(body.as_bytes()), timeout).map_err(RequestError::into_inner)?;
        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        match status {
            200 => serde_json::from_value(value).map(Some).map_err(|e| unavailable(format!("extraction report: {e}"))),
            202 => Ok(None),
            _ => Err(error_from_body(&value, status)),
        }
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
    ) -> std::result::Result<(u16, Vec<u8>), RequestError> {
        self.request_with(method, path, body, timeout, None)
    }

    fn request_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        timeout: Duration,
        header: Option<(&str, &str)>,
    ) -> std::result::Result<(u16, Vec<u8>), RequestError> {
        let mut client =
            http::Client::new(http::BaseUrl::from_addr(self.addr), timeout).one_shot().connect_timeout(PROBE_TIMEOUT);
        if let Some(token) = &self.token {
            client = client.header("Authorization", &format!("Bearer {token}"));
        }
        if let Some(dir) = &self.data_dir {
            client = client.header(DATA_DIR_HEADER, dir);
        }
        let headers: Vec<(&str, &str)> = header.into_iter().collect();
        let answer = client.send(method, path, Some(body.unwrap_or_default()), &headers).map_err(|e| match e {
            http::Error::NotSent(e) => RequestError::NotSent(unavailable(format!("{}: {e}", self.addr))),
            http::Error::NoAnswer(e) => RequestError::NoAnswer(unavailable(format!("{}: {e}", self.addr))),
        })?;
        Ok((answer.status, answer.body))
    }
}

/// Why a request got no answer.
enum RequestError {
    /// It never reached the daemon whole.
    NotSent(CairnError),
    /// It was sent; the answer did not come.
    NoAnswer(CairnError),
}

impl RequestError {
    fn into_inner(self) -> CairnError {
        match self {
            RequestError::NotSent(e) | RequestError::NoAnswer(e) => e,
        }
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

/// Whether the process `pid` runs (Linux: its `/proc` entry; elsewhere assumed, and a dead
/// daemon's port then refuses the connection).
fn process_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        return Path::new("/proc").join(pid.to_string()).exists();
    }
    true
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
    if !spawn_detached(exe, data_dir, port) {
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

/// File whose age says a daemon was started moments ago (by any process).
const STARTING_FILE: &str = "daemon.starting";
/// A daemon started this recently may still be coming up: do not start another.
const STARTING_GRACE: Duration = Duration::from_secs(15);

/// Start `cairn serve` for `data_dir` without waiting for it (a hook that keeps its events in
/// the spool meanwhile), unless some process started one in the last few seconds: on a loaded
/// machine a daemon can take seconds to come up, and every hook of that time would start one.
pub fn start_in_background(exe: &Path, data_dir: &Path, port: u16) {
    let marker = data_dir.join(STARTING_FILE);
    let recent = std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.elapsed().unwrap_or(Duration::MAX) < STARTING_GRACE);
    if recent {
        return;
    }
    let _ = std::fs::write(&marker, std::process::id().to_string());
    spawn_detached(exe, data_dir, port);
}

/// Run the `cairn serve --detach` hop (it returns at once, leaving the daemon behind).
fn spawn_detached(exe: &Path, data_dir: &Path, port: u16) -> bool {
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
        // through a short-lived intermediate process (`cairn serve --detach`), so the daemon is
        // not a child of this process: a host that stops its MCP server's whole process tree
        // (OpenCode does) must not stop the daemon other sessions share
        .arg("--detach")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.map_or_else(Stdio::null, Stdio::from));
    own_process_group(&mut cmd);
    match cmd.spawn().and_then(|mut hop| hop.wait()) {
        Ok(status) if status.success() => true,
        Ok(status) => {
            tracing::warn!(%status, "could not start the cairn daemon");
            false
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not start the cairn daemon");
            false
        }
    }
}

/// Put the process `cmd` starts in a process group of its own.
#[cfg(unix)]
pub fn own_process_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // Its own process group: a Ctrl-C aimed at the agent does not take the daemon down mid-write.
    cmd.process_group(0);
}

#[cfg(not(unix))]
pub fn own_process_group(_cmd: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_process_at_a_time_holds_the_daemon_lock_and_it_frees_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DaemonLock::try_take(dir.path()).unwrap().expect("a free lock is taken");
        assert_eq!(DaemonLock::holder(dir.path()), Some(std::process::id()));
        // A lock is held per open file: a second daemon (here a second open) is refused.
        assert!(DaemonLock::try_take(dir.path()).unwrap().is_none());
        drop(first);
        assert!(DaemonLock::try_take(dir.path()).unwrap().is_some(), "free again once its holder is gone");
    }

    #[test]
    fn a_record_that_cannot_be_written_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let info = DaemonInfo {
            pid: std::process::id(),
            addr: "127.0.0.1:1".parse().unwrap(),
            data_dir: dir.path().to_owned(),
            version: "test".into(),
            started_at: "now".into(),
        };
        // A directory where the record goes: the rename fails.
        std::fs::create_dir(DaemonInfo::path(dir.path())).unwrap();
        assert!(info.write().is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from(DAEMON_FILE)]);
        std::fs::remove_dir(DaemonInfo::path(dir.path())).unwrap();
        info.write().unwrap();
        assert_eq!(DaemonInfo::read(dir.path()), Some(info));
    }

    #[test]
    fn error_bodies_keep_their_code() {
        let body = serde_json::json!({"error": {"code": "observation_not_found", "message": "nope", "hint": "h"}});
        let err = error_from_body(&body, 404);
        assert_eq!((err.code, err.hint.as_deref()), (ErrorCode::ObservationNotFound, Some("h")));
    }

    /// A daemon that reads each request whole, then dies without answering.
    fn vanishing_daemon() -> SocketAddr {
        use std::io::Read;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // Read the head and the Content-Length body, then drop the connection.
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if let Some(split) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&seen[..split]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if seen.len() >= split + 4 + len {
                            break;
                        }
                    }
                }
            }
        });
        addr
    }

    #[test]
    fn a_write_sent_without_an_answer_is_interrupted_not_unavailable() {
        let client = DaemonClient::new(vanishing_daemon(), None);
        let save = Op::from_value(serde_json::json!({"op": "save", "args": {"title": "t", "content": "c"}})).unwrap();
        // The caller must not run it again elsewhere: it may have been committed.
        assert_eq!(client.execute(&save).unwrap_err().code, ErrorCode::OperationInterrupted);
        // A read is safe to run elsewhere.
        assert_eq!(client.execute(&Op::Stats).unwrap_err().code, ErrorCode::DaemonUnavailable);
        // Nothing listening: nothing was sent, so a write may run elsewhere too.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        assert_eq!(DaemonClient::new(closed, None).execute(&save).unwrap_err().code, ErrorCode::DaemonUnavailable);
    }

    #[test]
    fn no_daemon_file_means_no_daemon() {
        let dir = tempfile::tempdir().unwrap();
        assert!(DaemonClient::discover(dir.path(), None).is_none());
        assert!(DaemonClient::from_record(dir.path(), None).is_none());
    }

    fn record(dir: &Path, pid: u32) {
        let info = DaemonInfo {
            pid,
            addr: "127.0.0.1:9".parse().unwrap(),
            data_dir: dir.to_owned(),
            version: "test".into(),
            started_at: "now".into(),
        };
        info.write().unwrap();
    }

    #[test]
    fn a_record_is_trusted_only_while_its_process_lives() {
        let dir = tempfile::tempdir().unwrap();
        record(dir.path(), std::process::id());
        let found = DaemonClient::from_record(dir.path(), None).expect("a live record");
        assert_eq!(found.data_dir.as_deref(), Some(data_dir_header_value(dir.path()).as_str()));
        if cfg!(target_os = "linux") {
            // pids are below 2^22 on Linux: this one cannot run
            record(dir.path(), u32::MAX - 1);
            assert!(DaemonClient::from_record(dir.path(), None).is_none());
        }
    }

    /// A daemon that answers `/health` for `data_dir` only after `delay`.
    fn slow_daemon(data_dir: &Path, delay: Duration) -> SocketAddr {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let body = serde_json::json!({"status": "ok", "data_dir": data_dir}).to_string();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                std::thread::sleep(delay);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        addr
    }

    /// A daemon slowed past the first probe by a busy machine is still found while its process
    /// lives (a CLI write then goes through it, not into the file beside it); a record whose
    /// process is gone is not waited for.
    #[test]
    fn a_slow_daemon_whose_process_lives_is_still_found() {
        let dir = tempfile::tempdir().unwrap();
        let addr = slow_daemon(dir.path(), PROBE_TIMEOUT + Duration::from_millis(700));
        let info = |pid| DaemonInfo {
            pid,
            addr,
            data_dir: dir.path().to_owned(),
            version: "test".into(),
            started_at: "now".into(),
        };
        info(std::process::id()).write().unwrap();
        assert!(DaemonClient::discover(dir.path(), None).is_some(), "the live daemon answered the second probe");
        if cfg!(target_os = "linux") {
            info(u32::MAX - 1).write().unwrap();
            assert!(DaemonClient::discover(dir.path(), None).is_none(), "a dead record is not waited for");
        }
    }
}
