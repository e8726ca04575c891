//! `cairn setup claude-code` against a temp HOME: hooks in `~/.claude/settings.json`, the MCP
//! server in `~/.claude.json`, what it leaves alone, and that uninstall restores the files.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{TempHome, home_snapshot as snapshot, read_json, setup_bin as bin};

/// Claude Code's files in a HOME.
trait ClaudeHome {
    fn settings(&self) -> PathBuf;
    fn state(&self) -> PathBuf;
}

impl ClaudeHome for TempHome {
    fn settings(&self) -> PathBuf {
        self.root.join(".claude/settings.json")
    }

    fn state(&self) -> PathBuf {
        self.root.join(".claude.json")
    }
}

/// What `cairn setup claude-code` writes: the plugin's hooks with the absolute binary.
fn expected_hooks() -> Value {
    let plugin: Value = serde_json::from_str(include_str!("../../../../plugins/claude-code/hooks/hooks.json")).unwrap();
    let text = serde_json::to_string(&plugin["hooks"]).unwrap();
    serde_json::from_str(&text.replace("\"cairn hook ", &format!("\"{} hook ", bin().display()))).unwrap()
}

#[test]
fn fresh_install_writes_hooks_and_user_mcp_then_changes_nothing_and_uninstall_removes_it_all() {
    let home = TempHome::new(&[".claude"]);
    let empty = home.tree();
    let (stdout, _) = home.ok("claude-code", &[]);
    snapshot!(home, "setup_claude_fresh", stdout);

    let settings = read_json(&home.settings());
    assert_eq!(settings, json!({"hooks": expected_hooks()}));
    assert_eq!(
        read_json(&home.state()),
        json!({"mcpServers": {"cairn": {"type": "stdio", "command": bin(), "args": ["mcp", "--tools=agent", "--host=claude-code"]}}})
    );
    snapshot!(home, "setup_claude_fresh_settings", std::fs::read_to_string(home.settings()).unwrap());

    // Idempotent: the same files, no backup, and it says so.
    let before = home.tree();
    let (stdout, _) = home.ok("claude-code", &["--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["changed"], false, "{report}");
    assert_eq!(home.tree(), before);
    assert!(home.backups().is_empty());

    // Files setup created are gone again after uninstall (their backups stay).
    let (stdout, _) = home.ok("claude-code", &["--uninstall"]);
    snapshot!(home, "setup_claude_uninstall_fresh", stdout);
    assert_eq!(home.tree_without_backups(), empty);
    assert_eq!(home.backups().len(), 2);
}

const SETTINGS: &str = r#"{
  // my Claude Code settings
  "model": "opus",
  "permissions": {
    "allow": [
      "Bash(npm run test:*)" // tests are fine
    ]
  },
  "hooks": {
    "Stop": [
      { "hooks": [ { "type": "command", "command": "notify-send done" } ] }
    ]
  },
  "enabledPlugins": { "other@market": true }
}
"#;

const STATE: &str = r#"{
  "numStartups": 12,
  "projects": {
    "/src/app": { "allowedTools": [], "mcpServers": {} }
  },
  "mcpServers": {
    "github": { "type": "http", "url": "https://api.example/mcp" }
  },
  "userID": "abc"
}"#;

#[test]
fn comments_and_other_settings_are_kept_and_uninstall_restores_both_files_byte_for_byte() {
    let home = TempHome::new(&[".claude"]);
    std::fs::write(home.settings(), SETTINGS).unwrap();
    std::fs::write(home.state(), STATE).unwrap();
    home.ok("claude-code", &["--permissions"]);

    let after = std::fs::read_to_string(home.settings()).unwrap();
    assert!(after.starts_with("{\n  // my Claude Code settings\n  \"model\": \"opus\","), "{after}");
    assert!(after.contains("\"Bash(npm run test:*)\", // tests are fine\n      \"mcp__cairn__*\"\n"), "{after}");
    assert!(
        after.contains("{ \"hooks\": [ { \"type\": \"command\", \"command\": \"notify-send done\" } ] },"),
        "{after}"
    );
    let settings: Value = jsonc_parser::cst::CstRootNode::parse(&after, &jsonc_parser::ParseOptions::default())
        .unwrap()
        .to_serde_value()
        .unwrap();
    assert_eq!(settings["permissions"]["allow"], json!(["Bash(npm run test:*)", "mcp__cairn__*"]));
    assert_eq!(settings["hooks"]["Stop"][0]["hooks"][0]["command"], "notify-send done");
    assert_eq!(settings["hooks"]["Stop"][1], expected_hooks()["Stop"][0]);
    assert_eq!(settings["enabledPlugins"], json!({"other@market": true}));
    let state = read_json(&home.state());
    assert_eq!(state["numStartups"], 12);
    assert_eq!(state["mcpServers"]["github"]["url"], "https://api.example/mcp");
    assert_eq!(state["mcpServers"]["cairn"]["command"], bin().to_str().unwrap());
    assert!(state["projects"]["/src/app"]["mcpServers"].as_object().unwrap().is_empty(), "user scope only");

    // One backup per edited file, holding the original.
    let backups = home.backups();
    assert_eq!(backups.len(), 2, "{backups:?}");
    for b in &backups {
        let original = if b.starts_with(".claude/") { SETTINGS } else { STATE };
        assert_eq!(std::fs::read_to_string(home.root.join(b)).unwrap(), original, "{b:?}");
    }

    let (stdout, _) = home.ok("claude-code", &["--uninstall"]);
    snapshot!(home, "setup_claude_uninstall", stdout);
    assert_eq!(std::fs::read_to_string(home.settings()).unwrap(), SETTINGS);
    assert_eq!(std::fs::read_to_string(home.state()).unwrap(), STATE);
    let (stdout, _) = home.ok("claude-code", &["--uninstall"]);
    assert!(stdout.contains("Nothing to change"), "{stdout}");
}

#[test]
fn dry_run_shows_the_diff_and_touches_nothing() {
    let home = TempHome::new(&[".claude"]);
    std::fs::write(home.settings(), SETTINGS).unwrap();
    std::fs::write(home.state(), STATE).unwrap();
    let before = home.tree();
    let (stdout, _) = home.ok("claude-code", &["--dry-run", "--permissions"]);
    snapshot!(home, "setup_claude_dry_run", stdout);
    assert_eq!(home.tree(), before);
    let (stdout, _) = home.ok("claude-code", &["--dry-run", "--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((report["dry_run"].clone(), report["changed"].clone()), (Value::Bool(true), Value::Bool(true)));
    let diffs = report["diffs"].as_array().unwrap();
    assert_eq!(diffs.len(), 2, "{report}");
    assert!(diffs[1]["diff"].as_str().unwrap().contains("+    \"cairn\": {"), "{report}");
    assert_eq!(home.tree(), before);
    assert!(!home.root.join("cairn-data").exists());
}

#[test]
fn a_stale_binary_is_repointed_without_duplicating_hooks_and_doctor_sees_it() {
    let home = TempHome::new(&[".claude"]);
    let stale_group = json!({"hooks": [{"type": "command", "command": "/old/bin/cairn hook Stop", "timeout": 5}]});
    std::fs::write(home.settings(), serde_json::to_string_pretty(&json!({"hooks": {"Stop": [stale_group]}})).unwrap())
        .unwrap();
    std::fs::write(
        home.state(),
        serde_json::to_string_pretty(&json!({"mcpServers": {"cairn": {"type": "stdio", "command": "/old/bin/cairn", "args": ["mcp", "--tools=all"], "env": {"CAIRN_PROJECT": "x"}}}}))
            .unwrap(),
    )
    .unwrap();

    let doctor = home.command(&["doctor", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = report["checks"].as_array().unwrap().iter().find(|c| c["id"] == "setup.claude-code").unwrap().clone();
    assert_eq!(check["status"], "warning", "{check}");
    assert!(check["message"].as_str().unwrap().contains("/old/bin/cairn"), "{check}");

    let (stdout, _) = home.ok("claude-code", &["--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let statuses: Vec<_> =
        report["steps"].as_array().unwrap().iter().map(|s| (s["item"].clone(), s["status"].clone())).collect();
    assert_eq!(statuses, [("hooks".into(), "updated".into()), ("mcp.cairn".into(), "updated".into())]);
    assert_eq!(read_json(&home.settings())["hooks"], expected_hooks(), "the stale group replaced, not doubled");
    let entry = &read_json(&home.state())["mcpServers"]["cairn"];
    assert_eq!(entry["command"], bin().to_str().unwrap());
    assert_eq!(entry["args"], json!(["mcp", "--tools=all", "--host=claude-code"]), "the user's arguments stay");
    assert_eq!(entry["env"], json!({"CAIRN_PROJECT": "x"}));

    let doctor = home.command(&["doctor", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = report["checks"].as_array().unwrap().iter().find(|c| c["id"] == "setup.claude-code").unwrap().clone();
    assert_eq!(check["status"], "ok", "{check}");
    assert!(check["message"].as_str().unwrap().starts_with("connected (this binary"), "{check}");
}

#[test]
fn engram_is_reported_and_disabled_only_when_asked() {
    let home = TempHome::new(&[".claude"]);
    let settings = json!({
        "enabledPlugins": {"engram@engram": true},
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "bash ~/.engram/hooks/session-start.sh"}]}]}
    });
    std::fs::write(home.settings(), serde_json::to_string_pretty(&settings).unwrap()).unwrap();
    std::fs::write(
        home.state(),
        serde_json::to_string_pretty(
            &json!({"mcpServers": {"engram": {"type": "stdio", "command": "engram", "args": ["mcp"]}}}),
        )
        .unwrap(),
    )
    .unwrap();

    let (_, stderr) = home.ok("claude-code", &[]);
    assert!(stderr.contains("cairn setup claude-code --disable-engram"), "{stderr}");
    assert_eq!(read_json(&home.state())["mcpServers"]["engram"]["command"], "engram");
    assert_eq!(read_json(&home.settings())["enabledPlugins"]["engram@engram"], true);

    let (stdout, _) = home.ok("claude-code", &["--disable-engram"]);
    snapshot!(home, "setup_claude_disable_engram", stdout);
    let settings = read_json(&home.settings());
    assert_eq!(settings["enabledPlugins"]["engram@engram"], false);
    assert_eq!(settings["hooks"], expected_hooks(), "engram's hook gone, cairn's in place");
    let state = read_json(&home.state());
    assert_eq!(state["mcpServers"].as_object().unwrap().keys().collect::<Vec<_>>(), ["cairn"]);
    let (_, stderr) = home.ok("claude-code", &[]);
    assert!(!stderr.contains("disable-engram"), "{stderr}");
}

#[test]
fn bad_configs_are_refused_with_a_code_and_left_untouched() {
    for (file, text, code) in [
        ("settings", "{\n  // oops\n  \"hooks\": { \"Stop\": [\n", "invalid_config"),
        ("settings", "{\"hooks\": []}", "invalid_config"),
        ("settings", "{\"hooks\": {\"Stop\": {}}}", "invalid_config"),
        ("settings", "{\"permissions\": {\"allow\": \"all\"}}", "invalid_config"),
        ("state", "[]", "invalid_config"),
        ("state", "{\"mcpServers\": [1]}", "invalid_config"),
        ("state", "{\"mcpServers\": {\"cairn\": \"cairn mcp\"}}", "invalid_config"),
    ] {
        let home = TempHome::new(&[".claude"]);
        let path = if file == "settings" { home.settings() } else { home.state() };
        std::fs::write(&path, text).unwrap();
        let before = home.tree();
        let out = home.setup("claude-code", &["--json", "--permissions"]);
        assert_eq!(out.status.code(), Some(3), "{text}: {out:?}");
        let err: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(err["error"]["code"], code, "{text}: {err}");
        assert!(err["error"]["message"].as_str().unwrap().contains(&*path.to_string_lossy()), "{err}");
        assert_eq!(home.tree(), before, "{text}: nothing may change");
    }
}

#[test]
fn symlinked_and_read_only_configs_are_refused_and_left_untouched() {
    let home = TempHome::new(&[".claude"]);
    let real = home.root.join("dotfiles/settings.json");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(&real, SETTINGS).unwrap();
    std::os::unix::fs::symlink(&real, home.settings()).unwrap();
    let before = home.tree();
    let out = home.setup("claude-code", &["--json"]);
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "invalid_config", "{err}");
    assert!(err["error"]["message"].as_str().unwrap().contains("symbolic link"), "{err}");
    assert_eq!(home.tree(), before);

    let home = TempHome::new(&[".claude"]);
    std::fs::write(home.state(), STATE).unwrap();
    let mut perms = std::fs::metadata(home.state()).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(home.state(), perms).unwrap();
    let before = home.tree();
    let out = home.setup("claude-code", &["--json"]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    let err: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(err["error"]["code"], "data_dir_not_writable", "{err}");
    assert_eq!(home.tree(), before);
}

#[test]
fn a_home_without_claude_code_gets_a_clear_error_and_nothing_is_created() {
    let home = TempHome::new(&[]);
    let out = home.setup("claude-code", &[]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error[file_not_found]: Claude Code is not set up here"), "{stderr}");
    assert!(home.tree().is_empty());
    // nothing to undo is not an error
    let (stdout, _) = home.ok("claude-code", &["--uninstall"]);
    assert!(stdout.contains("Nothing to change"), "{stdout}");
    assert!(home.tree().is_empty());
}

#[test]
fn uninstall_leaves_the_users_own_empty_events() {
    let home = TempHome::new(&[".claude"]);
    let text = "{\"hooks\":{\"Notification\":[],\"Stop\":[]},\"model\":\"opus\"}";
    std::fs::write(home.settings(), text).unwrap();
    home.ok("claude-code", &[]);
    assert_eq!(read_json(&home.settings())["hooks"]["Notification"], json!([]));
    home.ok("claude-code", &["--uninstall"]);
    // An empty event of the user's stays; one that cairn's group went into goes with it (setup
    // keeps no record of what was there, and an empty event means nothing to Claude Code).
    assert_eq!(read_json(&home.settings()), json!({"hooks": {"Notification": []}, "model": "opus"}));
}

#[test]
fn the_cairn_plugin_enabled_too_is_warned_about() {
    let home = TempHome::new(&[".claude"]);
    std::fs::write(home.settings(), r#"{"enabledPlugins": {"cairn@cairn": true}}"#).unwrap();
    let (_, stderr) = home.ok("claude-code", &[]);
    assert!(stderr.contains("cairn's Claude Code plugin (cairn@cairn) is enabled too"), "{stderr}");
    assert!(stderr.contains("claude plugin disable cairn@cairn"), "{stderr}");
    assert_eq!(read_json(&home.settings())["enabledPlugins"], json!({"cairn@cairn": true}), "left to the user");
}

#[test]
fn plugin_mode_prints_the_commands_and_changes_nothing() {
    let home = TempHome::new(&[".claude"]);
    home.ok("claude-code", &[]);
    let before = home.tree();
    let (stdout, stderr) = home.ok("claude-code", &["--plugin"]);
    snapshot!(home, "setup_claude_plugin", stdout);
    assert!(stderr.contains("with the plugin too every hook would run twice"), "{stderr}");
    assert_eq!(home.tree(), before);
    let out = home.command(&["setup", "codex", "--plugin"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn claude_config_dir_holds_both_files_when_set() {
    let home = TempHome::new(&[]);
    let dir = home.root.join("claude-cfg");
    std::fs::create_dir_all(&dir).unwrap();
    let out = home.command(&["setup", "claude-code"]).env("CLAUDE_CONFIG_DIR", &dir).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(read_json(&dir.join("settings.json"))["hooks"], expected_hooks());
    assert_eq!(read_json(&dir.join(".claude.json"))["mcpServers"]["cairn"]["command"], bin().to_str().unwrap());
    assert!(!home.state().exists() && !home.root.join(".claude").exists());
}
