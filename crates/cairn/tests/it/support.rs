//! Helpers shared by the binary's integration tests.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub fn cairn() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    for var in [
        "CAIRN_PROJECT",
        "CAIRN_PORT",
        "ENGRAM_PORT",
        "CAIRN_LOG",
        "CAIRN_HTTP_TOKEN",
        "CAIRN_DIRECT",
        "CAIRN_BIND",
        "CAIRN_MODEL",
        "CAIRN_MODEL_INSTALL",
        "CAIRN_MODEL_URL",
    ] {
        cmd.env_remove(var);
    }
    // Tests never leave a daemon behind: each starts its own when it needs one.
    cmd.env("CAIRN_AUTOSTART", "never").env("NO_COLOR", "1");
    // A daemon backfills the hosts' conversation history: never the real user's. A test that
    // wants a host's storage sets these (or a temp HOME and removes them).
    let nowhere = std::env::temp_dir().join("cairn-tests-no-host-storage");
    cmd.env("CLAUDE_CONFIG_DIR", &nowhere).env("OPENCODE_DB", nowhere.join("opencode.db"));
    cmd.env("OPENCODE_DISABLE_CHANNEL_DB", "1");
    cmd
}

/// A `cairn serve` on a free port for `data_dir`, stopped on drop.
pub struct Daemon {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Daemon {
    pub fn start(data_dir: &Path) -> Daemon {
        Daemon::start_with(data_dir, &[], Stdio::null())
    }

    /// Start with extra environment and stderr going to `stderr` (a log file, say). Waits
    /// until `daemon.json` names *this* process and it answers `/health`: a record left by a
    /// killed daemon must not be mistaken for it.
    pub fn start_with(data_dir: &Path, env: &[(&str, &str)], stderr: Stdio) -> Daemon {
        let mut cmd = cairn();
        cmd.args(["serve", "--port", "0"])
            .env("CAIRN_DATA_DIR", data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn cairn serve");
        // From here the child is owned by `Daemon`, whose drop stops and reaps it.
        let mut daemon = Daemon { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
        let pid = daemon.child.id();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some((recorded_pid, addr)) = recorded(data_dir)
                && recorded_pid == pid
                && http(addr, "GET", "/health", None).0 == 200
            {
                daemon.addr = addr;
                return daemon;
            }
            if let Ok(Some(status)) = daemon.child.try_wait() {
                panic!("cairn serve exited before it answered: {status}");
            }
            assert!(Instant::now() < deadline, "daemon did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no shutdown code runs, as in a crash or an OOM kill.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The pid and address `daemon.json` records, if any.
pub fn recorded(data_dir: &Path) -> Option<(u32, SocketAddr)> {
    let text = std::fs::read_to_string(data_dir.join("daemon.json")).ok()?;
    let info: Value = serde_json::from_str(&text).ok()?;
    let pid = u32::try_from(info["pid"].as_u64()?).ok()?;
    Some((pid, info["addr"].as_str()?.parse().ok()?))
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return; // already reaped: its pid may belong to another process by now
        }
        #[cfg(unix)]
        {
            let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A small deterministic generator (splitmix64): tests print their seed so a failure replays.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The seed from `var` if set, else one from the clock (printed by the caller).
    pub fn seed_from_env(var: &str) -> u64 {
        std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            u64::try_from(now.as_nanos() % u128::from(u64::MAX)).unwrap_or(1)
        })
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }

    /// A lowercase alphanumeric word (unique enough to find by search).
    pub fn word(&mut self, len: usize) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..len).map(|_| CHARS[(self.next_u64() % CHARS.len() as u64) as usize] as char).collect()
    }
}

/// One HTTP/1.1 request with `Connection: close`; status and JSON body (`(0, null)` when the
/// daemon did not answer).
pub fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    http_with(addr, method, path, body, &[])
}

/// [`http`] with extra request headers.
pub fn http_with(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let body = body.map(Value::to_string);
    let mut client = cairn_http::Client::new(cairn_http::BaseUrl::from_addr(addr), Duration::from_secs(30)).one_shot();
    match client.send(method, path, body.as_deref().map(str::as_bytes), headers) {
        Ok(answer) => (answer.status, answer.json().unwrap_or(Value::Null)),
        Err(_) => (0, Value::Null),
    }
}

/// A `cairn mcp` child driven over stdio with newline-delimited JSON-RPC.
pub struct McpChild {
    child: Child,
    /// `None` once closed ([`McpChild::finish`]).
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl McpChild {
    pub fn spawn(data_dir: &Path, cwd: &Path, extra_env: &[(&str, &str)]) -> McpChild {
        McpChild::spawn_with(data_dir, cwd, extra_env, Stdio::null())
    }

    /// [`McpChild::spawn`] with stderr (its log) going to `stderr`.
    pub fn spawn_with(data_dir: &Path, cwd: &Path, extra_env: &[(&str, &str)], stderr: Stdio) -> McpChild {
        let mut cmd = cairn();
        cmd.args(["mcp", "--tools", "all"])
            .current_dir(cwd)
            .env("CAIRN_DATA_DIR", data_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn cairn mcp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut mcp = McpChild { child, stdin: Some(stdin), stdout, next_id: 1 };
        let init = mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "cairn-tests", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        mcp.notify("notifications/initialized");
        mcp
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Write raw bytes to its stdin (fuzzing the JSON-RPC framing).
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?;
        stdin.write_all(bytes)?;
        stdin.flush()
    }

    /// Close stdin and wait for the process to leave (the end of an agent session).
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return self.child.wait().expect("reap cairn mcp");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn notify(&mut self, method: &str) {
        let line = format!("{}\n", json!({"jsonrpc": "2.0", "method": method}));
        self.send_raw(line.as_bytes()).unwrap();
    }

    /// Send a request and wait for its response (skipping notifications).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = format!("{}\n", json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        if self.send_raw(line.as_bytes()).is_err() {
            return json!({"error": "cairn mcp closed its stdin"});
        }
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line).unwrap_or(0) == 0 {
                return json!({"error": "cairn mcp closed its stdout"});
            }
            let Ok(msg) = serde_json::from_str::<Value>(&line) else { continue };
            if msg["id"] == id {
                return msg;
            }
        }
    }

    /// Call a tool; `Ok(result)` unless the result or the call is an error.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, String> {
        let msg = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        match msg.get("result") {
            Some(result) if result["isError"] != true => Ok(result.clone()),
            Some(result) => Err(result.to_string()),
            None => Err(msg.to_string()),
        }
    }
}

impl Drop for McpChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real embedding model's files for tests: `CAIRN_TEST_MODEL_DIR`, else
/// `target/test-deps/all-MiniLM-L6-v2` (scripts/install-test-deps.sh). `None` (the test then
/// checks only what needs no model) unless `CAIRN_REQUIRE_MODEL` is set, where it fails.
pub fn model_dir() -> Option<std::path::PathBuf> {
    let dir = cairn_embed::install::test_model_dir();
    if cairn_embed::missing_file(&dir).is_none() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CAIRN_REQUIRE_MODEL").is_none(),
        "CAIRN_REQUIRE_MODEL is set but there is no model in {} (run scripts/install-test-deps.sh)",
        dir.display()
    );
    eprintln!("note: no model in {}; skipping the parts that need it", dir.display());
    None
}

/// A static file server on loopback (`GET /<name>` → the file), for download tests.
/// `corrupt` names a file served with one byte changed.
pub fn serve_files(dir: std::path::PathBuf, corrupt: Option<&'static str>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let dir = dir.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                if reader.read_line(&mut request_line).is_err() {
                    return;
                }
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                }
                let name = request_line.split_whitespace().nth(1).unwrap_or("/").trim_start_matches('/').to_owned();
                let Ok(mut body) = std::fs::read(dir.join(&name)) else {
                    let _ =
                        stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                    return;
                };
                if corrupt == Some(name.as_str()) && !body.is_empty() {
                    body[0] ^= 0x20;
                }
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(&body));
            });
        }
    });
    addr
}

/// Read one HTTP/1.1 request from `stream`: its request line (`"POST /v1/chat/completions
/// HTTP/1.1\r\n"`) and its body (by `content-length`), for the loopback fakes of providers.
pub fn read_request(stream: &std::net::TcpStream) -> (String, Vec<u8>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = std::io::Read::read_exact(&mut reader, &mut body);
    (first, body)
}

/// An OpenAI-compatible server on loopback: `GET /v1/models` lists `model`, and every other
/// request (a chat completion) is answered 200 with `reply(its JSON body)` as the assistant's
/// content and the given token counts. Also gives the log of what it was asked (`"POST
/// /v1/chat/completions"`, one entry a request). The provider fakes of the binary's tests.
pub fn openai_server(
    model: &'static str,
    usage: (u64, u64),
    reply: impl Fn(&Value) -> String + Send + 'static,
) -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&asked);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let (first, body) = read_request(&stream);
            log.lock().unwrap().push(first.split_whitespace().take(2).collect::<Vec<_>>().join(" "));
            let answer = if first.starts_with("GET /v1/models") {
                json!({"data": [{"id": model}]})
            } else {
                let request: Value = serde_json::from_slice(&body).unwrap_or_default();
                json!({
                    "model": model,
                    "choices": [{"message": {"role": "assistant", "content": reply(&request)}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1},
                })
            }
            .to_string();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (addr, asked)
}

/// A server on loopback that answers every request with `status` and an empty body (a gated
/// hub's 401, a rate limit's 429).
pub fn serve_status(status: u16) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
            }
            let head = format!("HTTP/1.1 {status} Refused\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = stream.write_all(head.as_bytes());
        }
    });
    addr
}

/// A temp HOME for `cairn setup <agent>` (canonical path, so it matches what setup writes),
/// with cairn's data dir inside it and no agent config dir of the developer's shell.
pub struct TempHome {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
}

impl TempHome {
    /// A HOME holding the given directories (where the agent ran once).
    pub fn new(dirs: &[&str]) -> TempHome {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        for dir in dirs {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        TempHome { _tmp: tmp, root }
    }

    /// `cairn <args>` with this HOME, its XDG config dir and its data dir.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = cairn();
        cmd.args(args)
            .env("HOME", &self.root)
            .env_remove("CODEX_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("XDG_CONFIG_HOME", self.root.join(".config"))
            .env("CAIRN_DATA_DIR", self.root.join("cairn-data"))
            .stdin(Stdio::null());
        cmd
    }

    pub fn setup(&self, agent: &str, args: &[&str]) -> Output {
        self.command(&[&["setup", agent], args].concat()).output().unwrap()
    }

    /// `cairn setup <agent> <args>`, which must succeed: its stdout and stderr.
    pub fn ok(&self, agent: &str, args: &[&str]) -> (String, String) {
        let out = self.setup(agent, args);
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
        assert!(out.status.success(), "cairn setup {agent} {args:?} failed\n{stdout}\n{stderr}");
        (stdout, stderr)
    }

    /// Every file under HOME (but cairn's data dir) with its bytes; a symlink is `-> link`.
    pub fn tree(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.tree_under(&self.root)
    }

    /// Every file under `dir`, keyed by its path relative to HOME.
    pub fn tree_under(&self, dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.ends_with("cairn-data") {
                    continue;
                }
                if path.is_symlink() {
                    out.insert(path.strip_prefix(base).unwrap().to_path_buf(), b"-> link".to_vec());
                } else if path.is_dir() {
                    walk(&path, base, out);
                } else {
                    out.insert(path.strip_prefix(base).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(dir, &self.root, &mut out);
        out
    }

    /// The tree without setup's backups.
    pub fn tree_without_backups(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.tree().into_iter().filter(|(p, _)| !is_backup(p)).collect()
    }

    pub fn backups(&self) -> Vec<PathBuf> {
        self.tree().into_keys().filter(|p| is_backup(p)).collect()
    }

    /// Snapshot filters: the binary, HOME and the backups' timestamps.
    pub fn filters(&self) -> Vec<(String, String)> {
        vec![
            (regex_escape(&setup_bin().to_string_lossy()), "[CAIRN]".into()),
            (regex_escape(&self.root.to_string_lossy()), "[HOME]".into()),
            (r"cairn-backup-[0-9]{8}T[0-9]{6}Z(-[0-9]+)?".into(), "cairn-backup-[TIME]".into()),
        ]
    }
}

fn is_backup(path: &Path) -> bool {
    path.to_string_lossy().contains(".cairn-backup-")
}

fn regex_escape(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// The binary as setup writes it: absolute, symlinks resolved.
pub fn setup_bin() -> PathBuf {
    std::fs::canonicalize(env!("CARGO_BIN_EXE_cairn")).unwrap()
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// An insta snapshot with a [`TempHome`]'s filters.
macro_rules! home_snapshot {
    ($home:expr, $name:expr, $value:expr) => {
        let filters = $home.filters();
        let filters: Vec<(&str, &str)> = filters.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        insta::with_settings!({filters => filters}, {
            insta::assert_snapshot!($name, $value);
        });
    };
}
pub(crate) use home_snapshot;

/// The resident memory of process `pid`, in KiB (Linux).
pub fn vm_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A process's anonymous resident memory (`RssAnon`: its heap and stacks, not the files it
/// maps), in KiB: what a leak grows, where `VmRSS` also counts the archive's mapped pages.
pub fn rss_anon_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub fn median(values: &[u64]) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

/// A daemon's RSS sampled once a second (the load and soak proofs) did not climb: the last
/// third's median RSS may exceed the first third's by a quarter plus 16 MiB. Some
/// growth is by design and bounded: SQLite page caches fill to their limit as the file grows,
/// and the search index keeps up to 10,000 replaced or erased memories before it compacts
/// (about 6 MiB over the load proof's 60 s run, then flat). A leak of about 2 KiB per
/// request (some 25 MiB over the 20 s between the medians, at ~650 requests/s) fails it.
pub fn assert_rss_flat(label: &str, samples_kb: &[u64]) {
    if cfg!(not(target_os = "linux")) || samples_kb.len() < 6 {
        eprintln!("{label}: {} RSS samples, not enough to judge memory", samples_kb.len());
        return;
    }
    let third = samples_kb.len() / 3;
    let first = median(&samples_kb[..third]);
    let last = median(&samples_kb[samples_kb.len() - third..]);
    let peak = samples_kb.iter().max().copied().unwrap_or(0);
    let mib: Vec<String> = samples_kb.iter().map(|kb| format!("{:.0}", *kb as f64 / 1024.0)).collect();
    eprintln!("{label}: daemon RSS per sample (MiB): {}", mib.join(" "));
    eprintln!(
        "{label}: daemon RSS first third {:.1} MiB, last third {:.1} MiB, peak {:.1} MiB ({} samples)",
        first as f64 / 1024.0,
        last as f64 / 1024.0,
        peak as f64 / 1024.0,
        samples_kb.len()
    );
    let bound = first + first / 4 + 16 * 1024;
    assert!(last <= bound, "daemon memory grew: {first} KiB → {last} KiB (bound {bound} KiB): {samples_kb:?}");
}

/// Words of a coding agent's memories, for the load and soak proofs' generated text.
pub const WORDS: &[&str] = &[
    "auth",
    "login",
    "session",
    "cookie",
    "token",
    "redis",
    "postgres",
    "migration",
    "index",
    "query",
    "cache",
    "timeout",
    "retry",
    "queue",
    "worker",
    "deploy",
    "docker",
    "router",
    "handler",
    "middleware",
    "logging",
    "tracing",
    "flaky",
    "test",
    "fixture",
    "snapshot",
    "rust",
    "tokio",
    "axum",
    "serde",
    "python",
    "pytest",
    "deadlock",
    "latency",
    "memory",
    "leak",
    "config",
    "schema",
    "webhook",
    "backoff",
];

/// One of [`WORDS`] at random.
pub fn pick(rng: &mut Rng) -> &'static str {
    WORDS[rng.range(0, WORDS.len() as u64) as usize]
}
