//! `cairn setup` for engram's other hosts (`setup/more_hosts.rs`): every engram host name has a
//! dry run that changes nothing; each host of the table gets its MCP entry and instructions
//! (golden files), a second run changes nothing, uninstall leaves the home as it was; `cairn
//! doctor` reports the wiring.

use serde_json::Value;

use crate::support::{TempHome, home_snapshot as snapshot};

/// engram's setup names with the directory each host creates when it runs.
const ENGRAM_HOSTS: &[(&str, &str)] = &[
    ("opencode", ".config/opencode"),
    ("pi", ".pi/agent"),
    ("claude-code", ".claude"),
    ("gemini-cli", ".gemini"),
    ("codex", ".codex"),
    ("antigravity-cli", ".gemini"),
    ("windsurf", ".codeium/windsurf"),
    ("qwen", ".qwen"),
    ("kiro", ".kiro"),
    ("cursor", ".cursor"),
    ("vscode-copilot", ".config/Code/User"),
    ("kilocode", ".config/kilo"),
    ("commandcode", ".commandcode"),
    ("cline", ".cline"),
    ("kimi", ".kimi-code"),
];

#[test]
fn every_engram_host_name_has_a_dry_run_that_changes_nothing() {
    for (name, dir) in ENGRAM_HOSTS {
        let home = TempHome::new(&[dir]);
        let before = home.tree();
        let (stdout, _) = home.ok(name, &["--dry-run", "--json"]);
        let report: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(report["dry_run"], true, "{name}: {report}");
        assert!(report["steps"].as_array().is_some_and(|s| !s.is_empty()), "{name}: {report}");
        assert_eq!(home.tree(), before, "{name}: the dry run wrote something");
    }
}

/// The files setup wrote under HOME, as one text for a golden file.
fn written(home: &TempHome) -> String {
    home.tree_without_backups()
        .into_iter()
        .map(|(path, bytes)| format!("=== {}\n{}", path.display(), String::from_utf8_lossy(&bytes)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn each_host_gets_its_mcp_entry_and_instructions_and_uninstall_leaves_the_home_as_it_was() {
    for (name, dir) in ENGRAM_HOSTS
        .iter()
        .filter(|(n, _)| !["opencode", "claude-code", "gemini-cli", "codex", "cursor", "pi"].contains(n))
    {
        let home = TempHome::new(&[dir]);
        let empty = home.tree();
        home.ok(name, &[]);
        let snapshot_name = format!("setup_{}_files", name.replace('-', "_"));
        snapshot!(home, snapshot_name.as_str(), written(&home));
        let before = home.tree();
        let (stdout, _) = home.ok(name, &[]);
        assert!(stdout.contains("Nothing to change"), "{name}: {stdout}");
        assert_eq!(home.tree(), before, "{name}: the second run changed something");
        home.ok(name, &["--uninstall"]);
        assert_eq!(home.tree_without_backups(), empty, "{name}: uninstall left something");
    }
}

#[test]
fn pi_is_told_it_has_no_mcp_client_and_nothing_is_written() {
    let home = TempHome::new(&[".pi/agent"]);
    let before = home.tree();
    let (stdout, stderr) = home.ok("pi", &[]);
    assert!(stderr.contains("Pi has no MCP client"), "{stderr}");
    assert!(stdout.contains("skipped"), "{stdout}");
    assert_eq!(home.tree(), before);
}

#[test]
fn a_malformed_host_config_is_refused_and_doctor_reports_the_wiring() {
    let home = TempHome::new(&[".qwen"]);
    let settings = home.root.join(".qwen/settings.json");
    std::fs::write(&settings, "{\"mcpServers\": [}").unwrap();
    let before = home.tree();
    let out = home.setup("qwen", &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not valid JSON"), "{out:?}");
    assert_eq!(home.tree(), before, "nothing changed");

    std::fs::write(&settings, "{}").unwrap();
    home.ok("qwen", &[]);
    let out = home.command(&["doctor", "--json"]).output().unwrap();
    let doctor: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = doctor["checks"].as_array().unwrap().iter().find(|c| c["id"] == "setup.qwen").cloned();
    let check = check.unwrap_or_else(|| panic!("no setup.qwen in {doctor}"));
    assert!(check["message"].as_str().unwrap().starts_with("connected (this binary"), "{check}");
}
