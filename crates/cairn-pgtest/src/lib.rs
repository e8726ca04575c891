//! A throwaway PostgreSQL cluster for tests: `initdb` and `pg_ctl` in a temp dir, on a free
//! port of 127.0.0.1, its unix socket in the same dir; stopped and deleted on drop.
//!
//! A dev-dependency only (cairn-hub's tests and benchmark, the `cairn` binary's hub tests):
//! never part of a product build. Run as root, the server runs as the `postgres` user
//! (`runuser`), since PostgreSQL refuses root.
//! Without PostgreSQL's binaries [`PgCluster::start`] returns `None` (the test skips with a
//! note), unless `CAIRN_REQUIRE_PG` is set (CI), where that is a failure.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// A running cluster. Every database in it is reachable at [`PgCluster::url`].
#[derive(Debug)]
pub struct PgCluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// Where PostgreSQL's server binaries are: `CAIRN_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian), else the directory of `initdb` on PATH.
pub fn find_bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CAIRN_PG_BIN").map(PathBuf::from).filter(|d| d.join("initdb").exists()) {
        return Some(dir);
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    debian.sort();
    if let Some((_, bin)) = debian.pop() {
        return Some(bin);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).find(|dir| dir.join("initdb").exists() && dir.join("pg_ctl").exists())
}

impl PgCluster {
    /// A fresh cluster, or `None` with a note on stderr when PostgreSQL is not installed.
    /// Panics when it is installed but will not start, or when `CAIRN_REQUIRE_PG` is set and
    /// it is missing.
    pub fn start() -> Option<PgCluster> {
        Self::start_with(&["-c", "fsync=off"])
    }

    /// A cluster that syncs its commits to disk, as a production one does (for benchmarks).
    pub fn start_durable() -> Option<PgCluster> {
        Self::start_with(&[])
    }

    fn start_with(server_options: &[&str]) -> Option<PgCluster> {
        let Some(bin) = find_bin_dir() else {
            assert!(
                std::env::var_os("CAIRN_REQUIRE_PG").is_none(),
                "CAIRN_REQUIRE_PG is set but PostgreSQL's initdb was not found (run scripts/install-test-deps.sh postgresql)"
            );
            #[allow(clippy::print_stderr)] // a skipped test says why
            {
                eprintln!("note: skipped: PostgreSQL is not installed (scripts/install-test-deps.sh postgresql)");
            }
            return None;
        };
        let as_postgres = running_as_root();
        let dir = unique_temp_dir();
        std::fs::create_dir_all(&dir).expect("create the cluster's temp dir");
        if as_postgres {
            let status = Command::new("chown").arg("postgres:postgres").arg(&dir).status().expect("run chown");
            assert!(status.success(), "chown postgres {}", dir.display());
        }
        let cluster = PgCluster { bin, dir, port: 0, as_postgres };
        let data = cluster.data_dir();
        cluster.run_checked(
            "initdb",
            &["-D", path_str(&data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"],
        );
        let options = server_options.join(" ");
        std::fs::write(cluster.dir.join("options"), options).expect("write the server options");
        let mut cluster = cluster;
        cluster.port = free_port();
        cluster.pg_ctl_start();
        Some(cluster)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The TCP port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `postgres://` URL of database `db` (superuser, trust auth: test only).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Make a new empty database and return its URL.
    pub fn create_database(&self, name: &str) -> String {
        let port = self.port.to_string();
        let out = Command::new(self.bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &port, "-U", "postgres", name])
            .output()
            .expect("run createdb");
        assert!(out.status.success(), "createdb {name}: {}", String::from_utf8_lossy(&out.stderr));
        self.url(name)
    }

    /// Stop (fast: open connections are closed) and start again on the same port.
    pub fn restart(&self) {
        self.stop();
        self.pg_ctl_start();
    }

    /// Stop the server; [`PgCluster::start_again`] brings it back.
    pub fn stop(&self) {
        let data = self.data_dir();
        self.run_checked("pg_ctl", &["-D", path_str(&data), "-m", "fast", "-w", "stop"]);
    }

    pub fn start_again(&self) {
        self.pg_ctl_start();
    }

    fn pg_ctl_start(&self) {
        let data = self.data_dir();
        let log = self.dir.join("server.log");
        let options = std::fs::read_to_string(self.dir.join("options")).unwrap_or_default();
        let server = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200 {options}",
            self.port,
            path_str(&self.dir)
        );
        let out = self
            .run("pg_ctl", &["-D", path_str(&data), "-l", path_str(&log), "-w", "-t", "60", "-o", &server, "start"]);
        if !out.status.success() {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("pg_ctl start failed: {}\n{log}", String::from_utf8_lossy(&out.stderr));
        }
    }

    fn run_checked(&self, tool: &str, args: &[&str]) {
        let out = self.run(tool, args);
        assert!(
            out.status.success(),
            "{tool} {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn run(&self, tool: &str, args: &[&str]) -> Output {
        let program = self.bin.join(tool);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        // The server's working directory must be one the postgres user can enter.
        command.args(args).current_dir(&self.dir).output().unwrap_or_else(|e| panic!("run {}: {e}", program.display()))
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data_dir();
        let _ = self.run("pg_ctl", &["-D", path_str(&data), "-m", "immediate", "-w", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn unique_temp_dir() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!(
        "cairn-pg-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A port that was free a moment ago (the kernel's pick for port 0).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port on 127.0.0.1")
}
