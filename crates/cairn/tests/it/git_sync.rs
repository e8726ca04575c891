//! Git sync against what a repository can carry: a manifest linked to `/dev/zero`, a FIFO as a
//! chunk, a `.cairn` linked out of the repository. The command ends with its error code, reads
//! and writes nothing outside, and keeps what was stored; the daemon's writes go on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Daemon, cairn, http};

/// Longest a test waits on a command that should end at once: only a guard against a hang (a
/// FIFO opened for reading waits for a writer forever), never a measure of speed.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// The address space (bytes: prlimit takes no suffix) the CLI is run with where `/dev/zero`
/// must not be read whole: far above what an import needs, far below what reading until an
/// allocation fails takes.
const ADDRESS_SPACE_LIMIT: u64 = 2 << 30;

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("workspace")).unwrap();
        Repo { dir }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = cairn();
        cmd.args(args).current_dir(self.workspace()).env("CAIRN_DATA_DIR", self.data_dir()).stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Run, failing the test if the command has not ended within [`HANG_GUARD`].
    fn run_unless_it_hangs(&self, mut cmd: Command) -> Output {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > HANG_GUARD {
                child.kill().unwrap();
                panic!("the command did not end: {cmd:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    fn save(&self, title: &str) {
        let out = self.run(&["save", title, "stored before the sync", "--project", "billing"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    fn titles(&self) -> Vec<String> {
        let out = self.run(&["search", "stored", "--all-projects", "--json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let hits: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut titles: Vec<String> =
            hits["hits"].as_array().unwrap().iter().map(|h| h["title"].as_str().unwrap().to_owned()).collect();
        titles.sort();
        titles
    }

    fn folder(&self) -> PathBuf {
        self.workspace().join(".cairn")
    }
}

/// The stderr of a command, for assertions and failure messages.
fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every file under `dir` with its bytes (links as their target's path).
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            files.extend(tree(&path));
        } else if meta.is_symlink() {
            files.insert(path.clone(), std::fs::read_link(&path).unwrap().into_os_string().into_encoded_bytes());
        } else {
            files.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    files
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A manifest listing one chunk, `id`, whose file the test puts in place.
fn manifest_listing(folder: &Path, id: &str) {
    std::fs::create_dir_all(folder.join("chunks")).unwrap();
    let manifest = json!({"version": 1, "chunks": [{"id": id, "created_by": "t", "created_at": "2026-03-01T10:00:00Z",
        "sessions": 0, "memories": 1, "prompts": 0}]});
    std::fs::write(folder.join("manifest.json"), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
}

#[test]
fn a_manifest_linked_to_dev_zero_is_refused_within_a_memory_limit() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: prlimit (util-linux) is not installed");
        return;
    }
    let repo = Repo::new();
    repo.save("Kept");
    std::fs::create_dir(repo.folder()).unwrap();
    std::os::unix::fs::symlink("/dev/zero", repo.folder().join("manifest.json")).unwrap();
    // The CLI under a limit, with the same environment as every test's.
    let base = repo.cmd(&["sync", "--import"]);
    let mut limited = Command::new("prlimit");
    limited.arg(format!("--as={ADDRESS_SPACE_LIMIT}")).arg("--").arg(base.get_program()).args(base.get_args());
    limited.current_dir(repo.workspace()).stdin(Stdio::null());
    for (key, value) in base.get_envs() {
        match value {
            Some(value) => limited.env(key, value),
            None => limited.env_remove(key),
        };
    }
    let out = repo.run_unless_it_hangs(limited);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("sync_symlink_refused"), "{}", stderr(&out));
    // The refusal names the file.
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains(".cairn/manifest.json is a symbolic link"), "{listed}");
    assert_eq!(repo.titles(), ["Kept"]);
}

#[test]
fn a_fifo_chunk_is_refused_and_the_command_ends() {
    let repo = Repo::new();
    repo.save("Kept");
    manifest_listing(&repo.folder(), "0badf00d");
    mkfifo(&repo.folder().join("chunks/0badf00d.jsonl.gz"));
    let out = repo.run_unless_it_hangs(repo.cmd(&["sync", "--import"]));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0badf00d") && text.contains("a FIFO") && text.contains("sync_file_not_regular"), "{text}");
    assert_eq!(repo.titles(), ["Kept"]);
}

#[test]
fn a_cairn_folder_linked_out_of_the_repository_is_neither_read_nor_written() {
    // A foreign folder holding a real chunk (exported by another data dir).
    let other = Repo::new();
    other.save("Foreign");
    let out = other.run(&["sync", "--project", "billing"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let foreign = other.folder();
    let before = tree(&foreign);

    let repo = Repo::new();
    repo.save("Kept");
    std::os::unix::fs::symlink(&foreign, repo.folder()).unwrap();
    let export = repo.run(&["sync", "--project", "billing"]);
    assert_eq!(export.status.code(), Some(3), "{}", stderr(&export));
    assert!(stderr(&export).contains("sync_symlink_refused"), "{}", stderr(&export));
    let import = repo.run(&["sync", "--import"]);
    assert_eq!(import.status.code(), Some(3), "{}", stderr(&import));
    assert!(String::from_utf8_lossy(&import.stdout).contains("sync_symlink_refused"));
    assert_eq!(tree(&foreign), before, "nothing outside the repository changed");
    assert_eq!(repo.titles(), ["Kept"], "nothing outside the repository was applied");
}

#[test]
fn a_background_import_meeting_a_fifo_never_holds_the_daemons_writes() {
    let repo = Repo::new();
    let daemon = Daemon::start(&repo.data_dir());
    manifest_listing(&repo.folder(), "0badf00d");
    mkfifo(&repo.folder().join("chunks/0badf00d.jsonl.gz"));
    let workspace = repo.workspace().display().to_string();
    let (status, body) = http(daemon.addr, "POST", "/sync/import", Some(&json!({"directory": workspace})));
    assert_eq!(status, 202, "{body}");
    // The import ends with the chunk refused (recorded as the folder's last error).
    let started = Instant::now();
    loop {
        let (_, status) = http(daemon.addr, "GET", &format!("/sync/status?directory={workspace}"), None);
        if let Some(error) = status["folders"][0]["error"].as_str() {
            assert!(error.contains("a FIFO"), "{error}");
            break;
        }
        assert!(started.elapsed() < HANG_GUARD, "the import did not end: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = http(
        daemon.addr,
        "POST",
        "/observations",
        Some(&json!({"title": "After", "content": "written after the import", "project": "billing"})),
    );
    assert_eq!(status, 201, "{body}");
}
