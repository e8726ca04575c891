//! `cairn setup opencode` against temp HOME/XDG dirs: what it writes, what it leaves alone,
//! and that it can be undone.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::support::{TempHome, home_snapshot as snapshot, read_json, setup_bin as bin};

/// OpenCode's config dir in a HOME.
trait OpenCodeHome {
    fn oc(&self) -> PathBuf;
    /// Every file under OpenCode's config dir.
    fn oc_tree(&self) -> BTreeMap<PathBuf, Vec<u8>>;
}

impl OpenCodeHome for TempHome {
    fn oc(&self) -> PathBuf {
        self.root.join(".config/opencode")
    }

    fn oc_tree(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        self.tree_under(&self.oc())
    }
}

#[test]
fn fresh_install_writes_plugin_and_mcp_entry_then_changes_nothing() {
    let home = TempHome::new(&[".config/opencode"]);
    let (stdout, _) = home.ok("opencode", &[]);
    snapshot!(home, "setup_opencode_fresh", stdout);

    let plugin = std::fs::read_to_string(home.oc().join("plugins/cairn.ts")).unwrap();
    let quoted = serde_json::to_string(bin().to_str().unwrap()).unwrap();
    assert!(plugin.contains(&format!("const BAKED_CAIRN_BIN: string | null = {quoted};")), "{plugin}");
    let config = read_json(&home.oc().join("opencode.json"));
    assert_eq!(
        config["mcp"]["cairn"],
        serde_json::json!({"type": "local", "command": [bin(), "mcp", "--tools=agent", "--host=opencode"], "enabled": true})
    );

    // Idempotent: the same files, no backup, and it says so.
    let before = home.oc_tree();
    let (stdout, _) = home.ok("opencode", &["--json"]);
    snapshot!(home, "setup_opencode_again_json", stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["changed"], false);
    assert_eq!(home.oc_tree(), before);
    assert!(home.backups().is_empty());
}

const JSONC: &str = "\u{feff}// my OpenCode config\n{\n\t\"$schema\": \"https://opencode.ai/config.json\",\n\t/* servers */\n\t\"mcp\": {\n\t\t\"other\": { \"type\": \"remote\", \"url\": \"http://x\" }, // trailing\n\t},\n\t\"theme\": \"dark\",\n}\n";

#[test]
fn jsonc_keeps_bom_comments_and_layout_and_uninstall_restores_it() {
    let home = TempHome::new(&[".config/opencode"]);
    let path = home.oc().join("opencode.jsonc");
    std::fs::write(&path, JSONC).unwrap();
    home.ok("opencode", &[]);
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(!home.oc().join("opencode.json").exists(), "the .jsonc is the file to edit");
    // Everything before the new entry and after it is the user's text, byte for byte.
    let head = "\u{feff}// my OpenCode config\n{\n\t\"$schema\": \"https://opencode.ai/config.json\",\n\t/* servers */\n\t\"mcp\": {\n\t\t\"other\": { \"type\": \"remote\", \"url\": \"http://x\" }, // trailing\n";
    assert!(after.starts_with(head), "{after:?}");
    assert!(after.ends_with("\t},\n\t\"theme\": \"dark\",\n}\n"), "{after:?}");
    assert!(after.contains("\t\t\"cairn\": {\n\t\t\t\"type\": \"local\","), "{after:?}");
    // The backup is the original.
    let backups = home.backups();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(std::fs::read_to_string(home.root.join(&backups[0])).unwrap(), JSONC);

    let (stdout, _) = home.ok("opencode", &["--uninstall"]);
    snapshot!(home, "setup_opencode_uninstall", stdout);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), JSONC, "uninstall restores the file");
    assert!(!home.oc().join("plugins/cairn.ts").exists());
    let (stdout, _) = home.ok("opencode", &["--uninstall"]);
    assert!(stdout.contains("Nothing to change"), "{stdout}");
}

#[test]
fn a_stale_binary_path_is_updated_keeping_the_rest_of_the_entry() {
    let home = TempHome::new(&[".config/opencode"]);
    let path = home.oc().join("opencode.json");
    let config = serde_json::json!({"mcp": {"cairn": {"type": "local", "command": ["/old/cairn", "mcp", "--tools=all"], "environment": {"CAIRN_PROJECT": "x"}}}});
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    std::fs::create_dir_all(home.oc().join("plugins")).unwrap();
    std::fs::write(home.oc().join("plugins/cairn.ts"), "// old\nconst BAKED_CAIRN_BIN = \"/old/cairn\";\n").unwrap();
    let (stdout, _) = home.ok("opencode", &["--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let statuses: Vec<_> =
        report["steps"].as_array().unwrap().iter().map(|s| (s["item"].clone(), s["status"].clone())).collect();
    assert_eq!(statuses, [("plugin".into(), "updated".into()), ("mcp.cairn".into(), "updated".into())]);
    let entry = &read_json(&path)["mcp"]["cairn"];
    // The user's arguments stay; `--host=opencode` joins them (one protocol copy, not two).
    assert_eq!(entry["command"], serde_json::json!([bin(), "mcp", "--tools=all", "--host=opencode"]));
    assert_eq!(entry["environment"], serde_json::json!({"CAIRN_PROJECT": "x"}));
    assert_eq!(home.backups().len(), 2, "both files were backed up");
}

#[test]
fn an_entry_from_an_older_setup_gains_the_host_flag_once() {
    let home = TempHome::new(&[".config/opencode"]);
    let path = home.oc().join("opencode.json");
    let config = serde_json::json!({"mcp": {"cairn": {"type": "local", "command": [bin(), "mcp", "--tools=agent"], "enabled": true}}});
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    home.ok("opencode", &[]);
    let entry = &read_json(&path)["mcp"]["cairn"];
    assert_eq!(entry["command"], serde_json::json!([bin(), "mcp", "--tools=agent", "--host=opencode"]));
    let (stdout, _) = home.ok("opencode", &[]);
    assert!(stdout.contains("Nothing to change"), "{stdout}");
    // A user's own `--host` choice is theirs.
    let config = serde_json::json!({"mcp": {"cairn": {"type": "local", "command": [bin(), "mcp", "--host", "mcp"]}}});
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    home.ok("opencode", &[]);
    assert_eq!(read_json(&path)["mcp"]["cairn"]["command"], serde_json::json!([bin(), "mcp", "--host", "mcp"]));
}

#[test]
fn engram_is_reported_and_disabled_only_when_asked() {
    let home = TempHome::new(&[".config/opencode"]);
    let path = home.oc().join("opencode.json");
    let config = serde_json::json!({"mcp": {"engram": {"type": "local", "command": ["engram", "mcp"]}}});
    std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
    std::fs::create_dir_all(home.oc().join("plugins")).unwrap();
    std::fs::write(home.oc().join("plugins/engram.ts"), "export const Engram = async () => ({});\n").unwrap();

    // Without the flag (and no terminal to ask): a warning with the command, engram untouched.
    let (_, stderr) = home.ok("opencode", &[]);
    assert!(stderr.contains("cairn setup opencode --disable-engram"), "{stderr}");
    assert!(home.oc().join("plugins/engram.ts").exists());
    assert_eq!(read_json(&path)["mcp"]["engram"].get("enabled"), None);

    let (stdout, _) = home.ok("opencode", &["--disable-engram"]);
    snapshot!(home, "setup_opencode_disable_engram", stdout);
    assert!(!home.oc().join("plugins/engram.ts").exists());
    assert!(home.oc().join("plugins/engram.ts.disabled").exists());
    let config = read_json(&path);
    assert_eq!(config["mcp"]["engram"]["enabled"], false);
    assert_eq!(config["mcp"]["cairn"]["enabled"], true);
    let (_, stderr) = home.ok("opencode", &[]);
    assert!(!stderr.contains("disable-engram"), "{stderr}");
}

#[test]
fn dry_run_touches_nothing() {
    let home = TempHome::new(&[".config/opencode"]);
    let fresh = home.oc_tree();
    let (stdout, _) = home.ok("opencode", &["--dry-run"]);
    snapshot!(home, "setup_opencode_dry_run", stdout);
    assert_eq!(home.oc_tree(), fresh);

    std::fs::write(home.oc().join("opencode.jsonc"), JSONC).unwrap();
    let before = home.oc_tree();
    let (stdout, _) = home.ok("opencode", &["--dry-run", "--json", "--disable-engram"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((report["dry_run"].clone(), report["changed"].clone()), (Value::Bool(true), Value::Bool(true)));
    assert_eq!(home.oc_tree(), before);
    assert!(!home.root.join("cairn-data").exists());
}

#[test]
fn bad_configs_are_refused_with_a_code_and_left_untouched() {
    for (name, text) in [
        ("opencode.jsonc", "{\n  // oops\n  \"mcp\": { \"a\": 1\n"),
        ("opencode.json", "{\"mcp\": [1, 2]}"),
        ("opencode.json", "[]"),
        ("opencode.json", "{\"mcp\": {\"cairn\": \"cairn mcp\"}}"),
    ] {
        let home = TempHome::new(&[".config/opencode"]);
        let path = home.oc().join(name);
        std::fs::write(&path, text).unwrap();
        let before = home.oc_tree();
        let out = home.setup("opencode", &["--json"]);
        assert_eq!(out.status.code(), Some(3), "{text}: {out:?}");
        let err: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(err["error"]["code"], "invalid_config", "{text}: {err}");
        assert!(err["error"]["message"].as_str().unwrap().contains(&*path.to_string_lossy()), "{err}");
        assert_eq!(home.oc_tree(), before, "{text}: nothing may change");
    }
}

#[test]
fn an_unwritable_plugin_dir_fails_before_anything_changes() {
    let home = TempHome::new(&[".config/opencode"]);
    // `plugins` is a file, so no directory can be made there (root ignores permission bits).
    std::fs::write(home.oc().join("plugins"), "").unwrap();
    std::fs::write(home.oc().join("opencode.jsonc"), JSONC).unwrap();
    let before = home.oc_tree();
    let out = home.setup("opencode", &[]);
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error[data_dir_not_writable]: cannot write"), "{stderr}");
    assert_eq!(home.oc_tree(), before);
}

#[test]
fn engram_memories_are_imported_only_when_asked() {
    let home = TempHome::new(&[".config/opencode"]);
    let db = home.root.join(".engram/engram.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    crate::cli::make_engram_db(&db);
    let (_, stderr) = home.ok("opencode", &[]);
    assert!(stderr.contains("cairn import-engram"), "{stderr}");
    assert!(!home.root.join("cairn-data/cairn.db").exists(), "nothing imported unasked");

    let (stdout, _) = home.ok("opencode", &["--import-engram", "--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["engram_import"]["observations_imported"], 2, "{report}");
    let step = report["steps"].as_array().unwrap().iter().find(|s| s["item"] == "engram import").unwrap();
    assert_eq!(step["status"], "imported");
    let found = home.command(&["search", "websocket reconnect", "--all-projects"]).output().unwrap();
    assert!(String::from_utf8_lossy(&found.stdout).contains("Websocket reconnect loop"));
}

#[test]
fn a_cairn_entry_switched_off_by_the_user_stays_off_with_a_warning() {
    let home = TempHome::new(&[".config/opencode"]);
    let path = home.oc().join("opencode.json");
    let config = serde_json::json!({"mcp": {"cairn": {"type": "local", "command": [bin(), "mcp"], "enabled": false}}});
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    let (_, stderr) = home.ok("opencode", &[]);
    assert!(stderr.contains("mcp.cairn is switched off"), "{stderr}");
    assert_eq!(read_json(&path), config);
}

#[test]
fn doctor_reports_opencode_wiring_and_a_stale_binary() {
    let home = TempHome::new(&[".config/opencode"]);
    let doctor = |home: &TempHome| -> Value {
        let out = home.command(&["doctor", "--json"]).output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        report["checks"].as_array().unwrap().iter().find(|c| c["id"] == "setup.opencode").unwrap().clone()
    };
    let check = doctor(&home);
    assert_eq!(
        (check["status"].as_str(), check["message"].as_str()),
        (Some("ok"), Some("installed, not connected to cairn"))
    );
    home.ok("opencode", &[]);
    let check = doctor(&home);
    assert_eq!(check["status"], "ok", "{check}");
    assert!(check["message"].as_str().unwrap().starts_with("connected (this binary"), "{check}");
    // the plugin still bakes in a binary that is gone
    let plugin = home.oc().join("plugins/cairn.ts");
    let text = std::fs::read_to_string(&plugin).unwrap();
    let quoted = serde_json::to_string(bin().to_str().unwrap()).unwrap();
    std::fs::write(&plugin, text.replace(&quoted, "\"/gone/cairn\"")).unwrap();
    let check = doctor(&home);
    assert_eq!(check["status"], "warning", "{check}");
    assert!(check["message"].as_str().unwrap().contains("/gone/cairn"), "{check}");
}

#[test]
fn opencode_engram_settings_become_cairns_history_table() {
    let home = TempHome::new(&[".config/opencode", "cairn-data"]);
    let engram = home.oc().join("opencode-engram.jsonc");
    let source = "// opencode-engram\n{ \"context_charting\": { \"recent_turns\": 3 }, \"show_tool_input\": [\"bash\"], \"debug_mode\": { \"enable\": false }, \"extra\": 1, }\n";
    std::fs::write(&engram, source).unwrap();
    let config = home.root.join("cairn-data/config.toml");
    std::fs::write(&config, "log = \"info\"\n\n[history]\nshow_tool_input = [\"read\"]\n").unwrap();

    let (stdout, stderr) = home.ok("opencode", &["--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let step = report["steps"].as_array().unwrap().iter().find(|s| s["item"] == "opencode-engram settings").unwrap();
    assert_eq!(step["status"], "imported", "{step}");
    let detail = step["detail"].as_str().unwrap();
    assert!(
        detail.contains("context_charting.recent_turns") && detail.contains("kept cairn's own show_tool_input"),
        "{detail}"
    );
    assert!(stderr.contains("cairn has no setting for extra"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "log = \"info\"\n\n[history]\nshow_tool_input = [\"read\"]\ndebug_log_tool_calls = false\n\n[history.context_charting]\nrecent_turns = 3\n"
    );
    // cairn now runs with them, and opencode-engram's file is untouched.
    let shown = home.command(&["config", "--json"]).output().unwrap();
    let settings: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(settings["history"]["config"]["context_charting"]["recent_turns"], 3, "{settings}");
    assert_eq!(std::fs::read_to_string(&engram).unwrap(), source);

    let (stdout, _) = home.ok("opencode", &["--json"]);
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let step = report["steps"].as_array().unwrap().iter().find(|s| s["item"] == "opencode-engram settings").unwrap();
    assert_eq!(step["status"], "unchanged", "a second run imports nothing: {step}");
}
