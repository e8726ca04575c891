//! `cairn setup codex` against a temp HOME: `[mcp_servers.cairn]` and the compaction prompt in
//! `~/.codex/config.toml`, comments kept, engram's pieces, and uninstall restoring the file.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{TempHome, home_snapshot as snapshot, setup_bin as bin};

/// Codex's config in a HOME.
trait CodexHome {
    fn config(&self) -> PathBuf;
}

impl CodexHome for TempHome {
    fn config(&self) -> PathBuf {
        self.root.join(".codex/config.toml")
    }
}

const CONFIG: &str = r#"# my Codex config
model = "gpt-5.5" # the best

[mcp_servers.github]
command = "gh-mcp"   # keep this spacing
args = ["serve"]

[profiles.fast]
model = "gpt-5-mini"
"#;

#[test]
fn install_keeps_comments_is_idempotent_and_uninstall_restores_the_file() {
    let home = TempHome::new(&[".codex"]);
    std::fs::write(home.config(), CONFIG).unwrap();
    let (stdout, _) = home.ok("codex", &["--dry-run"]);
    snapshot!(home, "setup_codex_dry_run", stdout);
    assert_eq!(home.tree_without_backups().len(), 1, "dry run wrote nothing");

    let (stdout, _) = home.ok("codex", &[]);
    snapshot!(home, "setup_codex_install", stdout);
    let after = std::fs::read_to_string(home.config()).unwrap();
    snapshot!(home, "setup_codex_config", after);
    assert!(after.contains("command = \"gh-mcp\"   # keep this spacing"), "{after}");
    let prompt = std::fs::read_to_string(home.root.join(".codex/cairn-compact-prompt.md")).unwrap();
    let continuity = home.command(&["protocol", "--host", "codex", "--part", "continuity"]).output().unwrap();
    assert_eq!(prompt.trim_end(), String::from_utf8_lossy(&continuity.stdout).trim_end());

    let before = home.tree();
    let (stdout, _) = home.ok("codex", &["--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["changed"], false, "{report}");
    assert_eq!(home.tree(), before);

    home.ok("codex", &["--uninstall"]);
    assert_eq!(std::fs::read_to_string(home.config()).unwrap(), CONFIG);
    assert!(!home.root.join(".codex/cairn-compact-prompt.md").exists());
    let (stdout, _) = home.ok("codex", &["--uninstall"]);
    assert!(stdout.contains("Nothing to change"), "{stdout}");
}

#[test]
fn a_fresh_codex_home_gets_a_config_that_uninstall_removes_again() {
    let home = TempHome::new(&[".codex"]);
    let empty = home.tree();
    home.ok("codex", &[]);
    let config: toml_edit::DocumentMut = std::fs::read_to_string(home.config()).unwrap().parse().unwrap();
    assert_eq!(config["mcp_servers"]["cairn"]["command"].as_str(), bin().to_str());
    let args: Vec<&str> =
        config["mcp_servers"]["cairn"]["args"].as_array().unwrap().iter().filter_map(|v| v.as_str()).collect();
    assert_eq!(args, ["mcp", "--tools=agent", "--host=codex"]);
    home.ok("codex", &["--uninstall"]);
    assert_eq!(home.tree_without_backups(), empty);
}

#[test]
fn a_stale_entry_is_repointed_and_a_foreign_compact_prompt_is_left_alone() {
    let home = TempHome::new(&[".codex"]);
    let text = "experimental_compact_prompt_file = \"/mine/compact.md\"\n\n[mcp_servers.cairn]\ncommand = \"/old/cairn\"\nargs = [\"mcp\", \"--tools=all\"]\nenv = { CAIRN_PROJECT = \"x\" }\n";
    std::fs::write(home.config(), text).unwrap();
    let (stdout, _) = home.ok("codex", &["--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let statuses: Vec<_> =
        report["steps"].as_array().unwrap().iter().map(|s| (s["item"].clone(), s["status"].clone())).collect();
    assert_eq!(
        statuses,
        [
            ("mcp.cairn".into(), "updated".into()),
            ("hooks".into(), "created".into()),
            ("compact prompt".into(), "skipped".into())
        ]
    );
    let after = std::fs::read_to_string(home.config()).unwrap();
    assert_eq!(
        after,
        format!(
            "experimental_compact_prompt_file = \"/mine/compact.md\"\n\n[mcp_servers.cairn]\ncommand = \"{}\"\nargs = [\"mcp\", \"--tools=all\", \"--host=codex\"]\nenv = {{ CAIRN_PROJECT = \"x\", CAIRN_DATA_DIR = \"{}\" }}\n",
            bin().display(),
            // Codex clears an MCP server's environment: the store setup ran with is passed on
            home.root.join("cairn-data").display()
        )
    );
}

#[test]
fn engram_is_reported_and_disabled_only_when_asked() {
    let home = TempHome::new(&[".codex"]);
    let text = "model_instructions_file = \"/h/.codex/engram-instructions.md\"\n\n[mcp_servers.engram]\ncommand = \"engram\"\nargs = [\"mcp\", \"--tools=agent\"]\n";
    std::fs::write(home.config(), text).unwrap();
    let (_, stderr) = home.ok("codex", &[]);
    assert!(stderr.contains("cairn setup codex --disable-engram"), "{stderr}");
    assert!(std::fs::read_to_string(home.config()).unwrap().contains("model_instructions_file"));

    let (stdout, _) = home.ok("codex", &["--disable-engram"]);
    snapshot!(home, "setup_codex_disable_engram", stdout);
    let after = std::fs::read_to_string(home.config()).unwrap();
    assert!(!after.contains("model_instructions_file"), "{after}");
    assert!(
        after.contains(
            "[mcp_servers.engram]\ncommand = \"engram\"\nargs = [\"mcp\", \"--tools=agent\"]\nenabled = false\n"
        ),
        "{after}"
    );
    let (_, stderr) = home.ok("codex", &[]);
    assert!(!stderr.contains("disable-engram"), "{stderr}");
}

#[test]
fn bad_configs_are_refused_with_a_code_and_left_untouched() {
    for text in
        ["model = \n", "mcp_servers = 3\n", "[mcp_servers]\ncairn = \"x\"\n", "experimental_compact_prompt_file = 1\n"]
    {
        let home = TempHome::new(&[".codex"]);
        std::fs::write(home.config(), text).unwrap();
        let before = home.tree();
        let out = home.setup("codex", &["--json"]);
        assert_eq!(out.status.code(), Some(3), "{text}: {out:?}");
        let err: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(err["error"]["code"], "invalid_config", "{text}: {err}");
        assert_eq!(home.tree(), before, "{text}: nothing may change");
    }
    // no Codex here
    let home = TempHome::new(&[".codex"]);
    std::fs::remove_dir(home.root.join(".codex")).unwrap();
    let out = home.setup("codex", &[]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Codex is not set up here"), "{out:?}");
    assert!(home.tree().is_empty());
}

#[test]
fn codex_home_is_honoured_and_doctor_reports_the_wiring() {
    let home = TempHome::new(&[".codex"]);
    let dir = home.root.join("codex-home");
    std::fs::create_dir_all(&dir).unwrap();
    let out = home.command(&["setup", "codex"]).env("CODEX_HOME", &dir).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(dir.join("config.toml").is_file() && !home.config().exists());
    let doctor = home.command(&["doctor", "--json"]).env("CODEX_HOME", &dir).output().unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = report["checks"].as_array().unwrap().iter().find(|c| c["id"] == "setup.codex").unwrap().clone();
    assert_eq!(check["status"], "ok", "{check}");
}

#[test]
fn codex_gets_cairns_hooks_beside_the_users_and_uninstall_takes_only_cairns() {
    let home = TempHome::new(&[".codex"]);
    let hooks = home.root.join(".codex/hooks.json");
    let mine = "{\n  // my hooks\n  \"hooks\": {\n    \"Stop\": [\n      { \"hooks\": [{ \"type\": \"command\", \"command\": \"notify-send done\" }] }\n    ]\n  }\n}\n";
    std::fs::write(&hooks, mine).unwrap();
    let (stdout, stderr) = home.ok("codex", &["--permissions"]);
    assert!(stdout.contains("hooks"), "{stdout}");
    assert!(stderr.contains("trust cairn's in /hooks"), "setup says Codex asks the user to trust them: {stderr}");
    let written = std::fs::read_to_string(&hooks).unwrap();
    let program = bin().display().to_string();
    snapshot!(home, "setup_codex_hooks", written.replace(&program, "<cairn>"));
    assert!(written.contains("notify-send done") && written.contains("// my hooks"), "{written}");
    let config = std::fs::read_to_string(home.config()).unwrap();
    assert!(config.contains("default_tools_approval_mode = \"approve\""), "{config}");
    let before = home.tree();
    let (stdout, _) = home.ok("codex", &["--permissions"]);
    assert!(stdout.contains("Nothing to change"), "{stdout}");
    assert_eq!(home.tree(), before);
    home.ok("codex", &["--uninstall"]);
    assert_eq!(std::fs::read_to_string(&hooks).unwrap(), mine, "the user's own hooks stay, cairn's go");
}

#[test]
fn a_malformed_read_only_or_linked_hooks_file_is_refused_with_nothing_changed() {
    let home = TempHome::new(&[".codex"]);
    std::fs::write(home.config(), CONFIG).unwrap();
    let hooks = home.root.join(".codex/hooks.json");
    std::fs::write(&hooks, "{ \"hooks\": [ }").unwrap();
    let before = home.tree();
    let out = home.setup("codex", &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("hooks.json is not valid JSON"), "{out:?}");
    assert_eq!(home.tree(), before, "nothing changed");

    std::fs::write(&hooks, "{\"hooks\": {\"Stop\": {}}}").unwrap();
    let out = home.setup("codex", &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("has `hooks.Stop` but it is not an array"), "{out:?}");

    let real = home.root.join("elsewhere.json");
    std::fs::write(&real, "{}").unwrap();
    std::fs::remove_file(&hooks).unwrap();
    std::os::unix::fs::symlink(&real, &hooks).unwrap();
    let before = home.tree();
    let out = home.setup("codex", &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a symbolic link"), "{out:?}");
    assert_eq!(home.tree(), before);

    std::fs::remove_file(&hooks).unwrap();
    std::fs::write(&hooks, "{}").unwrap();
    let mut perms = std::fs::metadata(&hooks).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&hooks, perms).unwrap();
    let before = home.tree();
    let out = home.setup("codex", &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("is read-only"), "{out:?}");
    assert_eq!(home.tree(), before);
}
