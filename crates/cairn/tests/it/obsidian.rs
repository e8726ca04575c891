//! `cairn export --obsidian DIR`: the real binary against a temp data dir and HOME, without a
//! daemon and through one, once and with `--watch`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Vault {
    tmp: tempfile::TempDir,
}

impl Vault {
    fn new() -> Vault {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("home")).unwrap();
        Vault { tmp }
    }

    fn data_dir(&self) -> PathBuf {
        self.tmp.path().join("data")
    }

    fn dir(&self) -> PathBuf {
        self.tmp.path().join("vault")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = crate::support::cairn();
        cmd.args(args)
            .current_dir(self.tmp.path())
            .env("HOME", self.tmp.path().join("home"))
            .env("CAIRN_DATA_DIR", self.data_dir())
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn save(&self, title: &str, content: &str, kind: &str) -> i64 {
        let out = self.ok(&["--project", "demo", "save", title, content, "--type", kind, "--json"]);
        serde_json::from_str::<Value>(&out).unwrap()["id"].as_i64().unwrap()
    }

    fn export(&self) -> Value {
        let dir = self.dir();
        serde_json::from_str(&self.ok(&["export", "--obsidian", dir.to_str().unwrap(), "--json"])).unwrap()
    }

    /// Every note's path (relative, sorted) and text.
    fn notes(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        collect(&self.dir(), &self.dir(), &mut out);
        out.sort();
        out
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            out.push((rel, std::fs::read_to_string(&path).unwrap()));
        }
    }
}

fn transcript(out: &Output) -> String {
    format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::with_settings!({filters => vec![
            (r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", "[TIME]"),
            (r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", "[UUID]"),
            (r"-[0-9a-f]{8}( \(cairn\))?\.md", "-[ID]$1.md"),
            (r"-[0-9a-f]{8}\|", "-[ID]|"),
            (r"/[^ \n]*/vault", "[VAULT]"),
            (r"local_id: \d+", "local_id: [N]"),
        ]}, {
            insta::assert_snapshot!($name, $value);
        })
    };
}

#[test]
fn export_obsidian_writes_notes_then_only_changes_and_keeps_edited_notes() {
    let v = Vault::new();
    let kept = v.save(
        "Use [[argon2]] <b>not</b> bcrypt",
        "Passwords: argon2id.\n\n<private>pepper=xyz</private> is secret",
        "decision",
    );
    let gone = v.save("Old build flag", "drop it later", "manual");
    let dir = v.dir();
    let first = v.run(&["export", "--obsidian", dir.to_str().unwrap()]);
    snap!("obsidian_first_export", transcript(&first));
    let notes = v.notes();
    let (decision_path, decision) = notes.iter().find(|(p, _)| p.starts_with("demo/decision/")).unwrap().clone();
    snap!("obsidian_decision_note", decision.clone());
    assert!(notes.iter().all(|(_, text)| !text.contains("pepper")), "private content in the vault");
    assert!(notes.iter().any(|(p, _)| p == "_hubs/project-demo.md"));

    // Nothing changed: nothing written.
    let again = v.export();
    assert_eq!(again["written"], serde_json::json!([]));

    // The user edits the note; the memory changes too: the edit is kept, cairn's version beside it.
    std::fs::write(dir.join(&decision_path), "my notes").unwrap();
    v.ok(&["update", &kept.to_string(), "--content", "Passwords: argon2id, m=64MiB"]);
    v.ok(&["delete", &gone.to_string()]);
    let out = v.run(&["export", "--obsidian", dir.to_str().unwrap()]);
    snap!("obsidian_edited_and_deleted", transcript(&out));
    assert_eq!(std::fs::read_to_string(dir.join(&decision_path)).unwrap(), "my notes");
    let report = v.export();
    assert_eq!(report["kept_edited"][0]["reason"], "edited_in_vault");
    assert_eq!(report["notes"], 1);
    assert!(v.notes().iter().all(|(p, _)| !p.contains("old-build-flag")));
}

#[test]
fn export_obsidian_refuses_a_file_as_folder_and_changes_nothing() {
    let v = Vault::new();
    v.save("One", "x", "manual");
    let file = v.tmp.path().join("not-a-folder");
    std::fs::write(&file, "mine").unwrap();
    let out = v.run(&["export", "--obsidian", file.to_str().unwrap()]);
    insta::with_settings!({filters => vec![(r"/[^ \n]*/not-a-folder", "[FILE]")]}, {
        insta::assert_snapshot!("obsidian_not_a_folder", transcript(&out));
    });
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    // --watch without --obsidian is a usage error.
    assert_eq!(v.run(&["export", "--watch"]).status.code(), Some(2));
}

#[cfg(unix)]
#[test]
fn export_obsidian_through_a_daemon_and_watch_follows_new_memories_until_ctrl_c() {
    let v = Vault::new();
    v.save("First", "before the daemon", "manual");
    let daemon = crate::support::Daemon::start(&v.data_dir());
    let report = v.export();
    assert_eq!(report["notes"], 1);

    let dir = v.dir();
    let mut watch = v
        .cmd(&["export", "--obsidian", dir.to_str().unwrap(), "--watch", "--interval", "1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its stderr says when the first pass is done: the next memory is then a change it follows.
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let stderr = BufReader::new(watch.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines_tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let started = lines.recv_timeout(Duration::from_secs(30)).expect("the watch said nothing");
    assert!(started.contains("watching the store"), "{started}");
    v.save("Second", "saved while watching", "manual");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !v.notes().iter().any(|(p, _)| p.contains("/second-")) {
        assert!(Instant::now() < deadline, "the watch never wrote the new memory's note");
        std::thread::sleep(Duration::from_millis(100));
    }
    let interrupted = Command::new("kill").args(["-INT", &watch.id().to_string()]).status().unwrap();
    assert!(interrupted.success());
    let out = watch.wait_with_output().unwrap();
    let stderr = reader.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("stopped watching"), "{stderr}");
    // One JSON object per pass that changed something: the first pass, then the new note.
    let passes: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(passes.len() >= 2, "{passes:?}");
    let last = passes.last().unwrap();
    assert!(last["written"].as_array().unwrap().iter().any(|p| p.as_str().unwrap().contains("/second-")), "{last}");
    assert_eq!(last["notes"], 2);
    drop(daemon);
}
