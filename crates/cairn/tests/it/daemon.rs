//! Finding the daemon: every cairn process uses the one its data dir records, wherever it
//! listens, and follows it when it comes back elsewhere.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{Daemon, McpChild, cairn, http, recorded};

/// Stops the daemon a test had started for it by `cairn mcp` (not a child of the test).
struct Autostarted<'a>(&'a Path);

impl Drop for Autostarted<'_> {
    fn drop(&mut self) {
        if let Some((pid, _)) = recorded(self.0) {
            let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while recorded(self.0).is_some_and(|(p, _)| p == pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

fn wait_for_record(data: &Path) -> (u32, std::net::SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(found) = recorded(data)
            && http(found.1, "GET", "/health", None).0 == 200
        {
            return found;
        }
        assert!(Instant::now() < deadline, "no daemon recorded in {}", data.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where a CLI call went, from the client's own debug line.
fn cli_search(data: &Path, work: &Path, query: &str) -> (String, String) {
    let out = cairn()
        .args(["search", query])
        .current_dir(work)
        .env("CAIRN_DATA_DIR", data)
        .env("CAIRN_LOG", "warn,cairn_client=debug")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_daemon_that_had_to_take_another_port_is_found_and_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, work) = (tmp.path().join("data"), tmp.path().join("repo"));
    std::fs::create_dir_all(&work).unwrap();
    // Someone else (engram, say) holds the configured port.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let log = tmp.path().join("mcp.log");
    let stderr = Stdio::from(std::fs::File::create(&log).unwrap());
    let env = [("CAIRN_AUTOSTART", "mcp"), ("CAIRN_PORT", port.as_str()), ("CAIRN_LOG", "warn,cairn_client=debug")];
    let mut mcp = McpChild::spawn_with(&data, &work, &env, stderr);
    let cleanup = Autostarted(&data);
    mcp.call("mem_save", json!({"title": "Ports", "content": "the daemon moved to a free port"})).unwrap();
    let (first_pid, addr) = wait_for_record(&data);
    assert_ne!(addr.port().to_string(), port, "it cannot have the taken port");

    // A CLI process (which may not start one) uses it, and sees the memory.
    let (stdout, stderr) = cli_search(&data, &work, "ports");
    assert!(stderr.contains("using the running daemon"), "{stderr}");
    assert!(stdout.contains("Ports"), "{stdout}");
    // So does a second agent session.
    let mut other = McpChild::spawn(&data, &work, &[("CAIRN_AUTOSTART", "never")]);
    let found = other.call("mem_search", json!({"query": "free port"})).unwrap();
    assert!(found.to_string().contains("Ports"), "{found}");

    // The daemon goes; another comes back on yet another port: the first session follows it
    // instead of opening the file itself.
    drop(cleanup);
    let restarted = Daemon::start(&data);
    assert_ne!(restarted.addr, addr);
    mcp.call("mem_save", json!({"title": "Moved", "content": "saved through the new daemon"})).unwrap();
    let (pid, _) = recorded(&data).unwrap();
    assert_eq!(pid, restarted.child.id());
    assert_ne!(pid, first_pid);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("the daemon moved; following it"), "{log}");
    assert!(!log.contains("opened the database file in this process"), "{log}");
    drop(taken);
}

/// What OpenCode does to stop an MCP server (strace of OpenCode 1.18.33): find every
/// descendant with `pgrep -P`, SIGTERM them, then the server. The daemon `cairn mcp` started
/// must survive it, since other sessions share it.
#[cfg(target_os = "linux")]
#[test]
fn the_daemon_outlives_the_mcp_process_tree_that_started_it() {
    fn descendants(pid: u32) -> Vec<u32> {
        let out = Command::new("pgrep").args(["-P", &pid.to_string()]).output().expect("pgrep");
        let children: Vec<u32> =
            String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect();
        children.iter().flat_map(|&c| std::iter::once(c).chain(descendants(c))).collect()
    }
    fn alive(pid: u32) -> bool {
        Command::new("kill").args(["-0", &pid.to_string()]).status().is_ok_and(|s| s.success())
    }

    let tmp = tempfile::tempdir().unwrap();
    let (data, work) = (tmp.path().join("data"), tmp.path().join("repo"));
    std::fs::create_dir_all(&work).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let mut mcp = McpChild::spawn(&data, &work, &[("CAIRN_AUTOSTART", "mcp"), ("CAIRN_PORT", port.as_str())]);
    let _cleanup = Autostarted(&data);
    mcp.call("mem_save", json!({"title": "Survivor", "content": "the daemon outlives its agent"})).unwrap();
    let (daemon_pid, addr) = wait_for_record(&data);

    let tree = descendants(mcp.pid());
    assert!(!tree.contains(&daemon_pid), "the daemon (pid {daemon_pid}) is in the MCP server's process tree {tree:?}");
    for pid in tree.iter().chain([&mcp.pid()]) {
        let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    }
    drop(mcp);
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(daemon_pid), "the daemon died with the MCP server");
    assert_eq!(http(addr, "GET", "/health", None).0, 200);
    assert_eq!(recorded(&data).map(|(p, _)| p), Some(daemon_pid));
}

/// `cairn serve` backfills the conversation history by itself: a Claude Code transcript in the
/// (temp) config dir is searchable without any hook or `history ingest`, and `/health` lists
/// the worker.
#[test]
fn the_daemon_backfills_claude_code_transcripts_without_a_poke() {
    const SESSION: &str = "3f0c2a4e-9b1d-4c55-8a77-0d2e6f1b9c01";
    let tmp = tempfile::tempdir().unwrap();
    let (data, claude) = (tmp.path().join("data"), tmp.path().join("claude"));
    let project = claude.join("projects").join("-nonexistent-sandbox-cc-history-project");
    std::fs::create_dir_all(&project).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cairn-history/tests/fixtures/history/claude/-nonexistent-sandbox-cc-history-project")
        .join(format!("{SESSION}.jsonl"));
    std::fs::copy(fixture, project.join(format!("{SESSION}.jsonl"))).unwrap();
    let claude_dir = claude.display().to_string();
    let daemon = Daemon::start_with(&data, &[("CLAUDE_CONFIG_DIR", &claude_dir)], Stdio::null());

    let (status, health) = http(daemon.addr, "GET", "/health", None);
    assert_eq!(status, 200);
    let workers = health["workers"].as_array().unwrap();
    assert!(workers.iter().any(|w| w["name"] == "cairn-history"), "{health}");

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body = json!({"op": "history_sessions", "args": {}});
        let (status, sessions) = http(daemon.addr, "POST", "/v1/op", Some(&body));
        assert_eq!(status, 200, "{sessions}");
        if sessions.to_string().contains(SESSION) {
            break;
        }
        assert!(Instant::now() < deadline, "the transcript was never ingested: {sessions}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn daemons_started_at_once_leave_one_serving_and_the_record_names_it() {
    // A host's plugin and its hooks can each find no daemon and start one in the same instant.
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let logs: Vec<_> = (0..4).map(|i| tmp.path().join(format!("serve-{i}.log"))).collect();
    let mut daemons: Vec<Daemon> = logs
        .iter()
        .map(|log| {
            let child = cairn()
                .args(["serve", "--port", "0"])
                .env("CAIRN_DATA_DIR", &data)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(log).unwrap())
                .spawn()
                .unwrap();
            Daemon { child, addr: std::net::SocketAddr::from(([127, 0, 0, 1], 0)) }
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let exited = loop {
        let exited: Vec<usize> =
            (0..daemons.len()).filter(|&i| matches!(daemons[i].child.try_wait(), Ok(Some(_)))).collect();
        if exited.len() == daemons.len() - 1 {
            break exited;
        }
        assert!(Instant::now() < deadline, "{} of 4 daemons still running", daemons.len() - exited.len());
        std::thread::sleep(Duration::from_millis(50));
    };
    for &i in &exited {
        let status = daemons[i].child.wait().unwrap();
        let said = std::fs::read_to_string(&logs[i]).unwrap();
        assert!(status.success(), "a second daemon is not an error: {said}");
        assert!(said.contains("already serving"), "{said}");
    }
    let serving = (0..daemons.len()).find(|i| !exited.contains(i)).unwrap();
    let (pid, addr) = wait_for_record(&data);
    assert_eq!(pid, daemons[serving].pid(), "the record names the daemon that serves");
    let (status, health) = http(addr, "GET", "/health", None);
    assert_eq!(status, 200, "{health}");
    // No temporary record is left behind by any of them.
    let leftovers: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    daemons.clear();
}
