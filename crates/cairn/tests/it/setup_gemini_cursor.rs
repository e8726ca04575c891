//! `cairn setup gemini` and `cairn setup cursor` against a temp HOME: `mcpServers.cairn` in
//! their JSON(C) config, the protocol block in Gemini's GEMINI.md, uninstall restoring both.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{TempHome, home_snapshot as snapshot, setup_bin as bin};

fn parse_jsonc(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    jsonc_parser::cst::CstRootNode::parse(&text, &jsonc_parser::ParseOptions::default())
        .unwrap()
        .to_serde_value()
        .unwrap()
}

const SETTINGS: &str = "{\n  // my Gemini settings\n  \"theme\": \"Dracula\",\n  \"mcpServers\": {\n    \"github\": { \"httpUrl\": \"https://x/mcp\" } // remote\n  }\n}\n";
const GEMINI_MD: &str = "# My rules\n\nBe brief.\n";

#[test]
fn gemini_install_keeps_the_users_text_is_idempotent_and_uninstall_restores_it() {
    let home = TempHome::new(&[".gemini"]);
    let settings = home.root.join(".gemini/settings.json");
    let md = home.root.join(".gemini/GEMINI.md");
    std::fs::write(&settings, SETTINGS).unwrap();
    std::fs::write(&md, GEMINI_MD).unwrap();
    let before = home.tree();
    let (stdout, _) = home.ok("gemini", &["--dry-run"]);
    assert!(stdout.contains("+    \"cairn\": {"), "{stdout}");
    assert_eq!(home.tree(), before);

    let (stdout, _) = home.ok("gemini", &[]);
    snapshot!(home, "setup_gemini_install", stdout);
    let after = std::fs::read_to_string(&settings).unwrap();
    assert!(after.starts_with("{\n  // my Gemini settings\n  \"theme\": \"Dracula\","), "{after}");
    assert!(after.contains("// remote"), "{after}");
    assert_eq!(
        parse_jsonc(&settings)["mcpServers"]["cairn"],
        json!({"command": bin(), "args": ["mcp", "--tools=agent", "--host=gemini"]})
    );
    let text = std::fs::read_to_string(&md).unwrap();
    let protocol = home.command(&["protocol", "--host", "gemini"]).output().unwrap();
    assert!(text.starts_with(GEMINI_MD), "{text}");
    assert!(text.contains(String::from_utf8_lossy(&protocol.stdout).trim_end()), "{text}");

    let before = home.tree();
    assert!(home.ok("gemini", &[]).0.contains("Nothing to change"));
    assert_eq!(home.tree(), before);

    home.ok("gemini", &["--uninstall"]);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), SETTINGS);
    assert_eq!(std::fs::read_to_string(&md).unwrap(), GEMINI_MD);
}

#[test]
fn cursor_fresh_install_and_uninstall_leave_the_home_as_it_was() {
    let home = TempHome::new(&[".cursor"]);
    let empty = home.tree();
    let (stdout, _) = home.ok("cursor", &[]);
    snapshot!(home, "setup_cursor_install", stdout);
    assert_eq!(
        parse_jsonc(&home.root.join(".cursor/mcp.json")),
        json!({"mcpServers": {"cairn": {"command": bin(), "args": ["mcp", "--tools=agent", "--host=mcp"]}}})
    );
    assert!(home.ok("cursor", &[]).0.contains("Nothing to change"));
    home.ok("cursor", &["--uninstall"]);
    assert_eq!(home.tree_without_backups(), empty);
}

#[test]
fn engram_stale_paths_bad_configs_and_missing_hosts() {
    // engram's entry: reported, removed only when asked; a stale cairn entry is repointed.
    let home = TempHome::new(&[".cursor"]);
    let path = home.root.join(".cursor/mcp.json");
    let config = json!({"mcpServers": {"engram": {"command": "engram", "args": ["mcp"]}, "cairn": {"command": "/old/cairn", "args": ["mcp"]}}});
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    let out = home.setup("cursor", &[]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cairn setup cursor --disable-engram"), "{out:?}");
    let value = parse_jsonc(&path);
    assert_eq!(value["mcpServers"]["engram"]["command"], "engram");
    assert_eq!(value["mcpServers"]["cairn"], json!({"command": bin(), "args": ["mcp", "--host=mcp"]}));
    home.ok("cursor", &["--disable-engram"]);
    assert_eq!(parse_jsonc(&path)["mcpServers"].as_object().unwrap().keys().collect::<Vec<_>>(), ["cairn"]);

    for text in ["{ \"mcpServers\": ", "{\"mcpServers\": []}", "{\"mcpServers\": {\"cairn\": 1}}"] {
        let home = TempHome::new(&[".gemini"]);
        std::fs::write(home.root.join(".gemini/settings.json"), text).unwrap();
        let before = home.tree();
        let out = home.setup("gemini", &["--json"]);
        assert_eq!(out.status.code(), Some(3), "{text}: {out:?}");
        let err: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(err["error"]["code"], "invalid_config", "{err}");
        assert_eq!(home.tree(), before);
    }

    let home = TempHome::new(&[]);
    for agent in ["gemini", "cursor"] {
        let out = home.setup(agent, &[]);
        assert_eq!(out.status.code(), Some(4), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("is not set up here"), "{out:?}");
    }
    assert!(home.tree().is_empty());
}

/// engram calls the host `gemini-cli` (`engram setup gemini-cli`): cairn takes that name too,
/// and does exactly what `cairn setup gemini` does.
#[test]
fn engrams_name_gemini_cli_sets_up_gemini() {
    let by_engram_name = TempHome::new(&[".gemini"]);
    let by_cairn_name = TempHome::new(&[".gemini"]);
    let (stdout, _) = by_engram_name.ok("gemini-cli", &[]);
    assert_eq!(stdout.replace(&*by_engram_name.root.to_string_lossy(), "[HOME]"), {
        let (stdout, _) = by_cairn_name.ok("gemini", &[]);
        stdout.replace(&*by_cairn_name.root.to_string_lossy(), "[HOME]")
    });
    assert_eq!(
        parse_jsonc(&by_engram_name.root.join(".gemini/settings.json")),
        parse_jsonc(&by_cairn_name.root.join(".gemini/settings.json"))
    );
    assert!(by_engram_name.ok("gemini-cli", &["--uninstall"]).0.contains("Gemini CLI"));
    assert_eq!(by_engram_name.tree_without_backups(), TempHome::new(&[".gemini"]).tree_without_backups());
}

/// `cairn setup --help` names every host and says which of engram's names it also takes.
#[test]
fn setup_help_lists_the_hosts_with_engrams_names() {
    let home = TempHome::new(&[]);
    let out = home.command(&["setup", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("gemini-cli"), "{help}");
    snapshot!(home, "setup_help", help);
}

#[test]
fn gemini_gets_its_lifecycle_hooks_and_trust_and_uninstall_takes_them_out() {
    let home = TempHome::new(&[".gemini"]);
    let settings = home.root.join(".gemini/settings.json");
    std::fs::write(&settings, SETTINGS).unwrap();
    home.ok("gemini", &["--permissions"]);
    let value = parse_jsonc(&settings);
    assert_eq!(value["mcpServers"]["cairn"]["trust"], true);
    let program = bin().display().to_string();
    let hooks = serde_json::to_string_pretty(&value["hooks"]).unwrap().replace(&program, "<cairn>");
    snapshot!(home, "setup_gemini_hooks", hooks);
    home.ok("gemini", &["--uninstall"]);
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), SETTINGS);
}

#[test]
fn a_malformed_gemini_settings_file_is_refused_with_nothing_changed() {
    let home = TempHome::new(&[".gemini"]);
    let settings = home.root.join(".gemini/settings.json");
    std::fs::write(&settings, "{\"hooks\": {\"BeforeAgent\": 3}}").unwrap();
    let before = home.tree();
    let out = home.setup("gemini", &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has `hooks.BeforeAgent` but it is not an array"), "{out:?}");
    assert_eq!(home.tree(), before);
}
