//! Processes the bench starts (servers, `cairn mcp` children) and the temp dirs they use.
//! Every child is registered here so that it is killed and its directory removed on every way
//! out: normal end, error, panic (guards drop while unwinding) and Ctrl-C / SIGTERM
//! ([`kill_all`] from the signal thread).

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::http::{BaseUrl, Client};

struct Entry {
    key: u64,
    child: Child,
    cleanup: Vec<PathBuf>,
}

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

fn registry() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    REGISTRY.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Owns a registered child: kills it (and removes its dirs) when dropped.
#[derive(Debug)]
pub struct ChildGuard {
    key: u64,
    pub pid: u32,
}

impl ChildGuard {
    pub fn register(child: Child, cleanup: Vec<PathBuf>) -> Self {
        let key = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = child.id();
        registry().push(Entry { key, child, cleanup });
        Self { key, pid }
    }

    /// `Some(status)` once the child has exited.
    pub fn try_wait(&self) -> Option<ExitStatus> {
        let mut reg = registry();
        let entry = reg.iter_mut().find(|e| e.key == self.key)?;
        entry.child.try_wait().ok().flatten()
    }

    /// Wait up to `grace` for the child to exit on its own, then kill it.
    pub fn finish(self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.try_wait().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(self);
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let entry = {
            let mut reg = registry();
            reg.iter().position(|e| e.key == self.key).map(|i| reg.swap_remove(i))
        };
        if let Some(e) = entry {
            stop(e);
        }
    }
}

fn stop(mut e: Entry) {
    if e.child.try_wait().ok().flatten().is_none() {
        let _ = e.child.kill();
    }
    let _ = e.child.wait();
    for dir in e.cleanup {
        let _ = fs::remove_dir_all(dir);
    }
}

/// Kill every child the bench started and remove their dirs (signal handler, last resort).
pub fn kill_all() {
    let entries: Vec<Entry> = registry().drain(..).collect();
    for e in entries {
        stop(e);
    }
}

/// On Ctrl-C or SIGTERM: kill what we spawned, then exit 130.
pub fn install_signal_handler() {
    let spawned = std::thread::Builder::new().name("signals".into()).spawn(|| {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let term = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = term => {}
            }
        });
        crate::note("interrupted: stopping the processes the bench started");
        kill_all();
        std::process::exit(130);
    });
    if spawned.is_err() {
        crate::note("warning: no signal handler; Ctrl-C may leave spawned servers running");
    }
}

/// A fresh, empty directory under the system temp dir.
pub fn fresh_dir(label: &str) -> Result<PathBuf> {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("cairn-bench-{}-{label}-{n}", std::process::id()));
    if dir.exists() {
        fs::remove_dir_all(&dir).ok();
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(l.local_addr()?.port())
}

/// Split a command line into words (whitespace, with '…' and "…" quoting; no shell).
pub fn split_command(cmd: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in cmd.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// A server the bench started, on its own data dir and port.
#[derive(Debug)]
pub struct Server {
    pub guard: ChildGuard,
    pub base: BaseUrl,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    /// Spawn → first 200 from /health.
    pub ready_after: Duration,
}

/// Environment for a spawned server or `cairn mcp` on `data_dir`.
pub fn data_env(cmd: &mut Command, data_dir: &Path) {
    cmd.env("CAIRN_DATA_DIR", data_dir).env("ENGRAM_DATA_DIR", data_dir).env("CAIRN_AUTOSTART", "never");
}

/// Start `template` (`{port}` replaced) on a fresh data dir and wait for `GET /health` → 200.
pub fn spawn_server(template: &str, label: &str, ready_timeout: Duration) -> Result<Server> {
    let data_dir = fresh_dir(label)?;
    spawn_server_in(template, label, data_dir, true, ready_timeout)
}

/// Start `template` on an existing data dir (a restart), which is left in place afterwards.
pub fn spawn_server_on(template: &str, label: &str, data_dir: &Path, ready_timeout: Duration) -> Result<Server> {
    spawn_server_in(template, label, data_dir.to_owned(), false, ready_timeout)
}

fn spawn_server_in(
    template: &str,
    label: &str,
    data_dir: PathBuf,
    remove_data_dir: bool,
    ready_timeout: Duration,
) -> Result<Server> {
    let words = split_command(template);
    if words.is_empty() {
        bail!("--spawn needs a command, e.g. \"target/release/cairn serve --port {{port}}\"");
    }
    let port = free_port()?;
    let words: Vec<String> = words.iter().map(|w| w.replace("{port}", &port.to_string())).collect();
    let log_dir = fresh_dir(&format!("{label}-log"))?;
    let log = log_dir.join("server.log");
    let log_file = fs::File::create(&log)?;
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..])
        .stdin(Stdio::null())
        .stdout(log_file.try_clone()?)
        .stderr(log_file)
        .env("CAIRN_PORT", port.to_string())
        .env("ENGRAM_PORT", port.to_string());
    data_env(&mut cmd, &data_dir);
    let started = Instant::now();
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            if remove_data_dir {
                let _ = fs::remove_dir_all(&data_dir);
            }
            let _ = fs::remove_dir_all(&log_dir);
            bail!("cannot start {:?}: {e}", words[0]);
        }
    };
    let cleanup = if remove_data_dir { vec![data_dir.clone(), log_dir] } else { vec![log_dir] };
    let guard = ChildGuard::register(child, cleanup);
    let base = BaseUrl::loopback(port);
    loop {
        if let Some(status) = guard.try_wait() {
            bail!("{} exited ({status}) before answering /health; its output:\n{}", words[0], tail(&log, 20));
        }
        let mut client = Client::new(base.clone(), Duration::from_secs(2));
        if client.get("/health").is_ok_and(|r| r.status == 200) {
            break;
        }
        if started.elapsed() > ready_timeout {
            bail!("{} did not answer /health within {ready_timeout:?}; its output:\n{}", words[0], tail(&log, 20));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(Server { guard, base, data_dir, log, ready_after: started.elapsed() })
}

impl Server {
    /// SIGTERM, then wait for a clean exit (a restart then finds a checkpointed store).
    pub fn stop_gracefully(self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.guard.pid.to_string()).status();
        self.guard.finish(Duration::from_secs(10));
    }
}

/// Last `n` lines of a file (for error messages).
pub fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Peak resident set size (VmHWM) of a live process, in bytes.
pub fn peak_rss(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Total size of the regular files under `dir`.
pub fn disk_usage(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_commands() {
        assert_eq!(
            split_command("target/release/cairn serve --port {port}"),
            ["target/release/cairn", "serve", "--port", "{port}"]
        );
        assert_eq!(split_command(r#"a "b c" 'd e'f  "#), ["a", "b c", "d ef"]);
        assert_eq!(split_command(r#"x """#), ["x", ""]);
        assert!(split_command("   ").is_empty());
    }

    #[test]
    fn measures_dirs_and_self() {
        let dir = fresh_dir("t").unwrap();
        fs::create_dir_all(dir.join("sub")).unwrap();
        fs::write(dir.join("a"), [0u8; 100]).unwrap();
        fs::write(dir.join("sub/b"), [0u8; 23]).unwrap();
        assert_eq!(disk_usage(&dir), 123);
        fs::remove_dir_all(&dir).unwrap();
        assert!(peak_rss(std::process::id()).unwrap() > 0);
    }

    #[test]
    fn guard_kills_and_cleans_up() {
        let dir = fresh_dir("guard").unwrap();
        let child = Command::new("sleep").arg("30").spawn().unwrap();
        let guard = ChildGuard::register(child, vec![dir.clone()]);
        assert!(guard.try_wait().is_none());
        drop(guard);
        assert!(!dir.exists());
    }
}
