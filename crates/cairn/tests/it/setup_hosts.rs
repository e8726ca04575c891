//! What every host's setup shares: `cairn doctor` reporting each host's wiring piece by piece
//! (a golden file of `doctor --json`'s `hosts`), and a host config that is malformed,
//! read-only or a symbolic link refused with the reason and nothing changed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value;

use crate::support::{TempHome, home_snapshot as snapshot};

/// Codex's config pointing at a model, as a user has it before setup.
const CODEX_CONFIG: &str = "model = \"gpt-5.5\"\n";

#[test]
fn doctor_reports_each_hosts_mcp_entry_hooks_and_instructions() {
    let home = TempHome::new(&[".codex", ".gemini", ".qwen", ".cursor", ".claude"]);
    std::fs::write(home.root.join(".codex/config.toml"), CODEX_CONFIG).unwrap();
    home.ok("codex", &[]);
    home.ok("gemini", &[]);
    home.ok("qwen", &[]);
    // Gemini CLI: one of cairn's hooks taken out by hand, GEMINI.md holding an older text
    let settings = home.root.join(".gemini/settings.json");
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    value["hooks"].as_object_mut().unwrap().remove("PreCompress");
    std::fs::write(&settings, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let md = home.root.join(".gemini/GEMINI.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replacen("<!-- cairn:end -->", "A line of an older text.\n<!-- cairn:end -->", 1))
        .unwrap();
    // Claude Code: a hook of a cairn that was moved away since
    std::fs::write(
        home.root.join(".claude/settings.json"),
        r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/gone/bin/cairn hook Stop"}]}]}}"#,
    )
    .unwrap();
    let before = home.tree();

    let out = home.command(&["doctor", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(home.tree(), before, "doctor only reads the hosts' files");
    let checks: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"].as_str().unwrap().starts_with("setup."))
        .collect();
    let status = |id: &str| checks.iter().find(|c| c["id"] == id).map(|c| c["status"].as_str().unwrap().to_owned());
    assert_eq!(status("setup.codex").as_deref(), Some("ok"), "{checks:?}");
    assert_eq!(status("setup.qwen").as_deref(), Some("ok"), "{checks:?}");
    assert_eq!(status("setup.cursor").as_deref(), Some("ok"), "installed, not connected: {checks:?}");
    assert_eq!(status("setup.gemini").as_deref(), Some("warning"), "a hook missing, an old text: {checks:?}");
    assert_eq!(status("setup.claude-code").as_deref(), Some("warning"), "a stale binary: {checks:?}");
    let golden = serde_json::json!({"checks": checks, "hosts": report["hosts"]});
    snapshot!(home, "doctor_hosts_json", serde_json::to_string_pretty(&golden).unwrap());

    let out = home.command(&["doctor"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("setup.") || l.contains("hint: cairn setup")).collect();
    snapshot!(home, "doctor_hosts_text", lines.join("\n"));
}

/// One config file setup edits: the host, the directory it runs in, the file, a malformed
/// text of it (`None`: any text goes, a Markdown file).
struct Case {
    host: &'static str,
    dir: &'static str,
    file: &'static str,
    malformed: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case { host: "codex", dir: ".codex", file: ".codex/config.toml", malformed: Some("model = \n") },
    Case { host: "codex", dir: ".codex", file: ".codex/hooks.json", malformed: Some("{ \"hooks\": [ }") },
    Case { host: "gemini", dir: ".gemini", file: ".gemini/settings.json", malformed: Some("{\"mcpServers\": [}") },
    Case { host: "gemini", dir: ".gemini", file: ".gemini/GEMINI.md", malformed: None },
    Case {
        host: "qwen",
        dir: ".qwen",
        file: ".qwen/settings.json",
        malformed: Some("{\"mcpServers\": {\"cairn\": }}"),
    },
    Case { host: "kiro", dir: ".kiro", file: ".kiro/settings/mcp.json", malformed: Some("{") },
];

/// `cairn setup <host>` must fail, say `why`, and leave HOME byte for byte and mode for mode.
fn refused(home: &TempHome, case: &Case, why: &str) {
    let path = home.root.join(case.file);
    let mode = std::fs::symlink_metadata(&path).unwrap().permissions().mode();
    let before = home.tree();
    let out = home.setup(case.host, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}: {why}: setup succeeded", case.file);
    assert!(stderr.contains(why) && stderr.contains(case.file), "{}: wanted {why:?}: {stderr}", case.file);
    assert!(stderr.contains("hint:"), "{}: a refusal says what to do: {stderr}", case.file);
    assert_eq!(home.tree(), before, "{}: {why}: nothing may change", case.file);
    assert_eq!(std::fs::symlink_metadata(&path).unwrap().permissions().mode(), mode, "{}", case.file);
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_malformed_read_only_or_linked_host_config_is_refused_with_nothing_changed() {
    for case in CASES {
        let valid = if case.file.ends_with(".toml") {
            CODEX_CONFIG
        } else if case.file.ends_with(".md") {
            "# my rules\n"
        } else {
            "{}\n"
        };
        if let Some(malformed) = case.malformed {
            let home = TempHome::new(&[case.dir]);
            write(&home.root.join(case.file), malformed);
            refused(&home, case, "is not valid");
        }

        let home = TempHome::new(&[case.dir]);
        let path = home.root.join(case.file);
        write(&path, valid);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        refused(&home, case, "is read-only");

        let home = TempHome::new(&[case.dir]);
        let real = home.root.join("dotfiles/the-real-file");
        write(&real, valid);
        let path = home.root.join(case.file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&real, &path).unwrap();
        refused(&home, case, "is a symbolic link");
    }
}
