//! What a user gets without a checkout: shell completions and the manual page generated from
//! the CLI definition, and the binary run from a fresh PATH and HOME (docs/INSTALL.md).

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn run(args: &[&str]) -> Output {
    let out = crate::support::cairn().args(args).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn stdout(args: &[&str]) -> String {
    String::from_utf8(run(args).stdout).unwrap()
}

#[test]
fn bash_completion_names_the_subcommands_and_their_flags() {
    let script = stdout(&["completions", "bash"]);
    assert!(script.contains("complete -F _cairn"), "not a bash completion script:\n{script:.400}");
    for word in ["save", "search", "history", "completions", "doctor", "--data-dir", "--json"] {
        assert!(script.contains(word), "bash completion lacks {word}");
    }
}

#[test]
fn every_shell_gets_a_script() {
    for (shell, marker) in [
        ("zsh", "#compdef cairn"),
        ("fish", "complete -c cairn"),
        ("elvish", "edit:completion"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let script = stdout(&["completions", shell]);
        assert!(script.contains(marker), "{shell}: no {marker:?}");
        assert!(script.contains("history"), "{shell}: no history subcommand");
    }
    let bad = crate::support::cairn().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "an unknown shell is a usage error");
}

/// The page from its name to its list of commands, without the synopsis (which lists every
/// command): what does not move with each new command or version.
fn stable_head(page: &str) -> String {
    let section = |name: &str| page.find(name).unwrap_or_else(|| panic!("no {name} section"));
    let (name, synopsis) = (section(".SH NAME"), section(".SH SYNOPSIS"));
    let (description, subcommands) = (section(".SH DESCRIPTION"), section(".SH SUBCOMMANDS"));
    format!("{}{}", &page[name..synopsis], &page[description..subcommands])
}

#[test]
fn the_manual_page_renders() {
    let page = stdout(&["man"]);
    assert!(page.starts_with(".ie") || page.contains(".TH cairn 1"), "not roff:\n{page:.200}");
    assert!(page.contains(".TH cairn 1"));
    for section in [".SH SYNOPSIS", ".SH OPTIONS", ".SH SUBCOMMANDS", ".SH VERSION"] {
        assert!(page.contains(section), "no {section}");
    }
    assert!(page.contains("cairn\\-history(1)"), "the subcommands section names cairn-history(1)");
    insta::assert_snapshot!("man_page_head", stable_head(&page));

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    run(&["man", "--out-dir", out.to_str().unwrap()]);
    for page in ["cairn.1", "cairn-save.1", "cairn-history.1", "cairn-history-search.1"] {
        assert!(out.join(page).is_file(), "no {page}");
    }
}

/// The binary alone in a bin dir on PATH, a HOME with nothing in it and no cairn variable: what
/// `cargo install --locked --path crates/cairn` leaves a new user with.
#[test]
fn an_installed_binary_runs_from_a_clean_home() {
    let tmp = tempfile::tempdir().unwrap();
    let (bin, home) = (tmp.path().join("bin"), tmp.path().join("home"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_cairn"), bin.join("cairn")).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin.display());

    let version = clean(&home, &path, &["--version"]);
    assert!(version.status.success());
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("cairn "));

    // Before the first save the data dir does not exist yet: a warning, never an error.
    let report = doctor(&home, &path);
    assert_eq!(report["status"], "warning", "{report}");
    assert!(report["checks"].as_array().unwrap().iter().all(|c| c["status"] != "error"), "{report}");

    let save = clean(&home, &path, &["save", "first memory", "installed from a clean HOME"]);
    assert!(save.status.success(), "{}", String::from_utf8_lossy(&save.stderr));
    assert!(home.join(".local/share/cairn/cairn.db").is_file(), "the default data dir is under HOME");
    let report = doctor(&home, &path);
    assert_eq!(report["status"], "ok", "{report}");
}

fn doctor(home: &Path, path: &str) -> serde_json::Value {
    let out = clean(home, path, &["doctor", "--json"]);
    assert!(out.status.success(), "doctor: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("doctor --json: {e}"))
}

fn clean(home: &Path, path: &str, args: &[&str]) -> Output {
    Command::new("cairn")
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        // Never leave a daemon behind (tests start their own when they need one).
        .env("CAIRN_AUTOSTART", "never")
        .current_dir(home)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}
