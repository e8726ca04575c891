//! `cairn remote` and the daemon's autosync against a real hub (`cairn hub serve`) on a
//! throwaway PostgreSQL cluster: two data dirs converge through it with edits and deletes,
//! nothing is lost while the hub is killed and restarted, a second hub process on the same
//! database serves the same mutations, and tokens for another project or read-only are refused.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use cairn_pgtest::PgCluster;
use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http, http_with};

/// A `cairn hub serve` process on a loopback port, killed on drop.
struct Hub {
    child: Child,
    addr: SocketAddr,
    database_url: String,
}

impl Hub {
    fn start(database_url: &str) -> Hub {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Hub::start_on(database_url, port)
    }

    fn start_on(database_url: &str, port: u16) -> Hub {
        let child = cairn()
            .args(["hub", "serve", "--listen", &format!("127.0.0.1:{port}")])
            .env("CAIRN_HUB_DATABASE_URL", database_url)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start cairn hub serve");
        let hub = Hub { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), database_url: database_url.to_owned() };
        wait_for("the hub to answer", Duration::from_secs(60), || http(hub.addr, "GET", "/health", None).0 == 200);
        hub
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL, then a new process on the same port and database.
    fn restart_after(&mut self, while_down: impl FnOnce()) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while_down();
        *self = Hub::start_on(&self.database_url.clone(), self.addr.port());
    }

    fn token(&self, projects: &str, extra: &[&str]) -> String {
        let out = cairn()
            .args(["hub", "token", "create", "--project", projects])
            .args(extra)
            .env("CAIRN_HUB_DATABASE_URL", &self.database_url)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().last().unwrap().to_owned()
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run(dir: &Path, args: &[&str]) -> Output {
    cairn().arg("--data-dir").arg(dir).args(args).output().expect("run cairn")
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = run(dir, args);
    assert!(out.status.success(), "cairn {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn refused(out: &Output, exit: i32, code: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(exit), "{stderr}");
    assert!(stderr.contains(&format!("error[{code}]")), "{stderr}");
}

/// A project's memories as every store must end up with them: sync id, title, content,
/// deleted or not.
fn memories(dir: &Path, project: &str) -> Vec<(String, String, String, bool)> {
    let export: Value = serde_json::from_str(&ok(dir, &["export", "-", "--project", project])).unwrap();
    let mut rows: Vec<_> = export["observations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["sync_id"].as_str().unwrap().to_owned(),
                o["title"].as_str().unwrap().to_owned(),
                o["content"].as_str().unwrap().to_owned(),
                !o["deleted_at"].is_null(),
            )
        })
        .collect();
    rows.sort();
    rows
}

/// One row of `cairn doctor --json` (the report comes first; an error line may follow it).
fn doctor_row(dir: &Path, id: &str) -> Value {
    let out = run(dir, &["--json", "doctor"]);
    let report: Value = serde_json::Deserializer::from_slice(&out.stdout).into_iter().next().unwrap().unwrap();
    report["checks"].as_array().unwrap().iter().find(|c| c["id"] == id).cloned().unwrap_or(Value::Null)
}

fn save(dir: &Path, title: &str, content: &str) -> i64 {
    let out = ok(dir, &["--json", "save", title, content, "--project", "alpha"]);
    serde_json::from_str::<Value>(&out).unwrap()["id"].as_i64().unwrap()
}

#[test]
fn remote_sync_converges_edits_and_deletes_and_refuses_what_a_token_may_not_do() {
    let Some(pg) = PgCluster::start() else { return };
    let hub = Hub::start(&pg.create_database("hub"));
    let (alpha, beta, read_only) =
        (hub.token("alpha", &[]), hub.token("beta", &[]), hub.token("alpha", &["--read-only"]));
    let dirs = tempfile::tempdir().unwrap();
    let (a, b, c) = (dirs.path().join("a"), dirs.path().join("b"), dirs.path().join("c"));

    // Bad input: an address that is not a hub's, a token the hub refuses; nothing is written.
    refused(&run(&a, &["remote", "add", "hub.example.com", "--token", &alpha]), 3, "remote_url_invalid");
    refused(&run(&a, &["remote", "add", "http://10.1.2.3:80", "--token", &alpha]), 3, "remote_url_invalid");
    refused(&run(&a, &["remote", "add", &hub.url(), "--token", "chub_nope"]), 5, "remote_refused");
    refused(&run(&c, &["remote", "add", &hub.url(), "--token", &beta, "--project", "alpha"]), 5, "remote_refused");
    assert!(!a.join("config.toml").exists() && !c.join("config.toml").exists());
    refused(&run(&a, &["remote", "sync"]), 5, "remote_not_configured");

    for dir in [&a, &b] {
        ok(dir, &["remote", "add", &hub.url(), "--token", &alpha, "--project", "alpha"]);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(a.join("config.toml")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "config.toml holds the token");
    }
    save(&a, "redis timeout", "the redis timeout is 30 s");
    let dropped = save(&a, "old port", "the api listens on 8080");
    save(&a, "private", "the key is <private>hunter2</private> here");
    ok(&a, &["remote", "sync"]);
    ok(&b, &["remote", "sync"]);
    assert_eq!(memories(&a, "alpha"), memories(&b, "alpha"));
    assert_eq!(memories(&b, "alpha").len(), 3);
    assert!(!ok(&b, &["export", "-", "--project", "alpha"]).contains("hunter2"), "private text stays home");

    // An edit on B and a delete on A travel both ways.
    let on_b = memories(&b, "alpha");
    let export: Value = serde_json::from_str(&ok(&b, &["export", "-", "--project", "alpha"])).unwrap();
    let b_id = export["observations"].as_array().unwrap().iter().find(|o| o["title"] == "redis timeout").unwrap()["id"]
        .as_i64()
        .unwrap();
    ok(&b, &["update", &b_id.to_string(), "--content", "the redis timeout is 60 s"]);
    ok(&a, &["delete", &dropped.to_string()]);
    for dir in [&a, &b, &a] {
        ok(dir, &["remote", "sync"]);
    }
    let converged = memories(&a, "alpha");
    assert_eq!(converged, memories(&b, "alpha"));
    assert_ne!(converged, on_b);
    assert!(converged.iter().any(|m| m.2 == "the redis timeout is 60 s" && !m.3), "{converged:?}");
    assert!(converged.iter().any(|m| m.1 == "old port" && m.3), "{converged:?}");

    // What people read, kept as snapshots (the hub's port and the times vary).
    let transcript = [
        ("remote sync", run(&a, &["remote", "sync"])),
        ("remote status", run(&a, &["remote", "status"])),
        ("remote add (no scheme)", run(&c, &["remote", "add", "hub.example.com", "--token", "t"])),
        ("remote sync (no hub set)", run(&c, &["remote", "sync"])),
    ]
    .iter()
    .map(|(what, out)| {
        format!(
            "$ cairn {what}\nexit: {}\n{}{}",
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
    .collect::<Vec<_>>()
    .join("\n");
    insta::with_settings!({filters => vec![
        (r"http://127\.0\.0\.1:\d+", "[HUB]"),
        (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "[TIME]"),
    ]}, {
        insta::assert_snapshot!("remote_cli", transcript);
    });

    // Once in sync, a round changes nothing and says so.
    let again: Value = serde_json::from_str(&ok(&a, &["--json", "remote", "sync"])).unwrap();
    assert_eq!(
        (again["pushed"].as_u64(), again["pulled"].as_u64(), &again["in_sync"]),
        (Some(0), Some(0), &json!(true))
    );

    // A read-only token pulls, but its pushes are refused with a stable code, kept pending.
    ok(&c, &["remote", "add", &hub.url(), "--token", &read_only, "--project", "alpha"]);
    let pulled = run(&c, &["remote", "sync"]);
    assert!(pulled.status.success(), "{}", String::from_utf8_lossy(&pulled.stderr));
    assert_eq!(memories(&c, "alpha"), converged);
    save(&c, "from c", "c may not push");
    refused(&run(&c, &["remote", "sync"]), 5, "remote_refused");
    let status: Value = serde_json::from_str(&ok(&c, &["--json", "remote", "status"])).unwrap();
    assert_eq!(status["pending"], 1, "{status}");
    assert!(status["per_project"][0]["last_error"].as_str().unwrap().contains("read_only_grant"), "{status}");
    ok(&a, &["remote", "sync"]);
    assert!(!memories(&a, "alpha").iter().any(|m| m.1 == "from c"));
    let row = doctor_row(&c, "sync");
    assert_eq!(row["status"], "warning", "{row}");
    assert!(row["message"].as_str().unwrap().contains("read_only_grant"), "{row}");
    // A [sync] table the rules refuse is a doctor error, and `remote status` says why.
    let good = std::fs::read_to_string(c.join("config.toml")).unwrap();
    std::fs::write(c.join("config.toml"), "[sync]\nremote = \"ftp://hub\"\ntoken = \"t\"\n").unwrap();
    refused(&run(&c, &["remote", "status"]), 3, "invalid_config");
    let row = doctor_row(&c, "sync");
    assert_eq!(row["status"], "error", "{row}");
    // Only sync stops: the rest of cairn still works.
    ok(&c, &["search", "from c", "--project", "alpha"]);
    std::fs::write(c.join("config.toml"), good).unwrap();

    // Every project syncing (no --project) with a token for alpha only: alpha syncs, the
    // other project stays here without an error, and the round is in sync.
    let d = dirs.path().join("d");
    ok(&d, &["remote", "add", &hub.url(), "--token", &alpha]);
    ok(&d, &["save", "private notes", "only for this laptop", "--project", "gamma"]);
    let round: Value = serde_json::from_str(&ok(&d, &["--json", "remote", "sync"])).unwrap();
    assert_eq!((&round["not_granted"], &round["in_sync"]), (&json!(["gamma"]), &json!(true)), "{round}");
    assert_eq!(memories(&d, "alpha"), memories(&a, "alpha"));
    let status: Value = serde_json::from_str(&ok(&d, &["--json", "remote", "status"])).unwrap();
    let gamma = status["per_project"].as_array().unwrap().iter().find(|p| p["project"] == "gamma").cloned().unwrap();
    assert_eq!((&gamma["not_granted"], &status["pending"]), (&json!(true), &json!(0)), "{status}");
    // Asked again only after a while: the next round does not knock on the hub for it.
    let again: Value = serde_json::from_str(&ok(&d, &["--json", "remote", "sync"])).unwrap();
    assert_eq!(again["not_granted"], json!(["gamma"]));

    // `remote remove` stops syncing and keeps every memory.
    ok(&c, &["remote", "remove"]);
    refused(&run(&c, &["remote", "sync"]), 5, "remote_not_configured");
    assert_eq!(memories(&c, "alpha").len(), converged.len() + 1);
}

fn daemon_save(d: &Daemon, title: &str, content: &str) -> i64 {
    let body = json!({"title": title, "content": content, "project": "alpha", "session_id": "s"});
    let (status, saved) = http(d.addr, "POST", "/observations", Some(&body));
    assert_eq!(status, 201, "{saved}");
    saved["id"].as_i64().unwrap()
}

fn titles(dir: &Path) -> Vec<String> {
    memories(dir, "alpha").into_iter().filter(|m| !m.3).map(|m| m.1).collect()
}

#[test]
fn two_daemons_autosync_through_a_hub_killed_and_restarted() {
    let Some(pg) = PgCluster::start() else { return };
    let mut hub = Hub::start(&pg.create_database("hub"));
    let token = hub.token("alpha", &[]);
    let dirs = tempfile::tempdir().unwrap();
    let (a, b) = (dirs.path().join("a"), dirs.path().join("b"));
    for dir in [&a, &b] {
        ok(dir, &["remote", "add", &hub.url(), "--token", &token, "--project", "alpha"]);
        let config = dir.join("config.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        std::fs::write(&config, text.replace("[sync]\n", "[sync]\npull_interval_secs = 1\n")).unwrap();
    }
    let (da, db) = (Daemon::start(&a), Daemon::start(&b));

    // A write on A reaches B with nobody asking.
    daemon_save(&da, "from a", "autosync carries this");
    wait_for("B to receive A's memory", Duration::from_secs(30), || titles(&b).contains(&"from a".to_owned()));
    // An edit on B comes back to A.
    let export: Value = serde_json::from_str(&ok(&b, &["export", "-", "--project", "alpha"])).unwrap();
    assert_eq!(export["observations"].as_array().unwrap().len(), 1);
    let on_b = export["observations"][0]["id"].as_i64().unwrap();
    let (status, _) =
        http_with(db.addr, "PATCH", &format!("/observations/{on_b}"), Some(&json!({"content": "edited on b"})), &[]);
    assert_eq!(status, 200);
    wait_for("A to receive B's edit", Duration::from_secs(30), || {
        memories(&a, "alpha").iter().any(|m| m.2 == "edited on b")
    });

    // The hub dies; both sides keep writing; the status says it is backing off.
    hub.restart_after(|| {
        daemon_save(&da, "a while down", "written while the hub was down");
        daemon_save(&db, "b while down", "also written while the hub was down");
        wait_for("A to notice", Duration::from_secs(30), || {
            let status = http(da.addr, "GET", "/sync/status", None).1;
            status["remote"]["phase"] == "backoff" && status["remote"]["pending"].as_i64() > Some(0)
        });
        let refused = http(da.addr, "POST", "/sync/remote", Some(&json!({})));
        assert_eq!((refused.0, refused.1["code"].as_str()), (503, Some("remote_unreachable")), "{}", refused.1);
    });
    // Back up: everything written on either side arrives on both, each once.
    wait_for("both stores to converge", Duration::from_secs(90), || {
        let (ta, tb) = (titles(&a), titles(&b));
        ta.len() == 3 && ta == tb
    });
    assert_eq!(memories(&a, "alpha"), memories(&b, "alpha"));
    let (status, report) = http(db.addr, "POST", "/sync/remote", Some(&json!({})));
    assert_eq!((status, &report["in_sync"]), (200, &json!(true)), "{report}");
    // The CLI beside a running daemon asks the daemon (one syncing process per data dir).
    let round: Value = serde_json::from_str(&ok(&b, &["--json", "remote", "sync"])).unwrap();
    assert_eq!(round["in_sync"], json!(true), "{round}");
    let status: Value = serde_json::from_str(&ok(&b, &["--json", "remote", "status"])).unwrap();
    assert_eq!(status["lease_holder"], json!(format!("daemon:{}", db.pid())), "{status}");
    // A's judge reads each memory that arrives (supersession judged on arrival) and may record
    // a relation of its own, a local change its next round pushes: A settles with nothing left.
    wait_for("A to push what it judged and settle", Duration::from_secs(30), || {
        let status = http(da.addr, "GET", "/sync/status", None).1;
        status["remote"]["phase"] == "idle" && status["remote"]["pending"] == json!(0)
    });

    // PostgreSQL stops under the hub: the daemons back off (the hub answers 503) and resume
    // once it is back, losing nothing.
    pg.stop();
    daemon_save(&db, "b while pg down", "written while the database was down");
    wait_for("B to back off", Duration::from_secs(60), || {
        let status = http(db.addr, "GET", "/sync/status", None).1;
        status["remote"]["phase"] == "backoff"
            && status["remote"]["last_error"].as_str().is_some_and(|e| e.contains("remote_unreachable"))
    });
    pg.start_again();
    wait_for("A to receive what B wrote while the database was down", Duration::from_secs(90), || {
        titles(&a).contains(&"b while pg down".to_owned())
    });

    // A second hub process on the same database serves the same mutations.
    let second = Hub::start(&hub.database_url);
    let pull = |h: &Hub| {
        let auth = format!("Bearer {token}");
        http_with(
            h.addr,
            "GET",
            "/sync/mutations/pull?since_seq=0&limit=100",
            None,
            &[("Authorization", auth.as_str())],
        )
        .1
    };
    let (one, two) = (pull(&hub), pull(&second));
    assert_eq!(one["mutations"], two["mutations"]);
    assert!(one["mutations"].as_array().unwrap().len() >= 5, "{one}");
}

/// A memory whose text holds a NUL (stored by a cairn that did not refuse it yet; PostgreSQL
/// cannot store one) is parked with its reason instead of stalling the sync: every other change
/// before and after it reaches the second data dir, pulls go on, the status names the parked
/// entry, nothing stored is lost, and once the memory is edited it travels again.
#[test]
fn a_nul_in_a_stored_memory_is_parked_and_every_other_change_syncs() {
    let Some(pg) = PgCluster::start() else { return };
    let hub = Hub::start(&pg.create_database("hub"));
    let token = hub.token("alpha", &[]);
    let dirs = tempfile::tempdir().unwrap();
    let (a, b) = (dirs.path().join("a"), dirs.path().join("b"));
    for dir in [&a, &b] {
        ok(dir, &["remote", "add", &hub.url(), "--token", &token, "--project", "alpha"]);
    }
    save(&a, "before", "saved before the bad one");
    let bad = save(&a, "bad", "a clean first version");
    ok(&a, &["remote", "sync"]);
    let db = rusqlite::Connection::open(a.join("cairn.db")).unwrap();
    db.execute("UPDATE observations SET content = 'a' || char(0) || 'b' WHERE id = ?1", [bad]).unwrap();
    drop(db);
    save(&a, "after", "saved after the bad one");
    save(&b, "from b", "written on b");
    ok(&b, &["remote", "sync"]);

    let round: Value = serde_json::from_str(&ok(&a, &["--json", "remote", "sync"])).unwrap();
    assert_eq!((&round["in_sync"], round["parked"].as_array().map(Vec::len)), (&json!(true), Some(1)), "{round}");
    ok(&b, &["remote", "sync"]);
    let on_b: Vec<(String, String)> = memories(&b, "alpha").into_iter().map(|m| (m.1, m.2)).collect();
    for (title, content) in [
        ("before", "saved before the bad one"),
        ("bad", "a clean first version"),
        ("after", "saved after the bad one"),
        ("from b", "written on b"),
    ] {
        assert!(on_b.contains(&(title.to_owned(), content.to_owned())), "{title} missing on b: {on_b:?}");
    }
    assert!(titles(&a).contains(&"from b".to_owned()), "a pulled b's memory");
    let status: Value = serde_json::from_str(&ok(&a, &["--json", "remote", "status"])).unwrap();
    assert_eq!((&status["pending"], &status["parked"]), (&json!(0), &json!(1)), "{status}");
    let parked = &status["parked_entries"][0];
    assert_eq!((&parked["entity"], &parked["code"]), (&json!("observation"), &json!("nul_character")), "{status}");
    assert!(parked["reason"].as_str().unwrap().contains("payload.content"), "{status}");
    assert!(status["cursor"].as_i64() > Some(0), "{status}");
    let text = ok(&a, &["remote", "status"]);
    assert!(text.contains("parked: 1") && text.contains("nul_character"), "{text}");
    assert!(memories(&a, "alpha").iter().any(|m| m.1 == "bad" && m.2 == "a\0b"), "kept as stored on a");

    // Edited, the memory travels again and is no longer parked.
    ok(&a, &["update", &bad.to_string(), "--content", "fixed on a"]);
    ok(&a, &["remote", "sync"]);
    ok(&b, &["remote", "sync"]);
    assert!(memories(&b, "alpha").iter().any(|m| m.1 == "bad" && m.2 == "fixed on a"));
    let status: Value = serde_json::from_str(&ok(&a, &["--json", "remote", "status"])).unwrap();
    assert_eq!(status["parked"], json!(0), "{status}");
}
