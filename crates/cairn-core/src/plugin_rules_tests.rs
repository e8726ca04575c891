//! The OpenCode plugin runs in OpenCode's process and needs a few of cairn's rules before it
//! can ask the daemon (which ops are writes to spool, the spool's bounds, cairn's own tool
//! names, what redaction writes). It does not copy them: `plugins/opencode/cairn/rules.ts` is
//! generated here from the Rust values, and this test fails when the committed file differs.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::agent::activity::MAX_PROMPT_CHARS;
use crate::agent::intent::{OPENCODE_TOOL_NAMES, OPENCODE_TOOL_PREFIXES};
use serde_json::{Value, json};

use crate::ops::{CATALOGUE, Writes};
use crate::settings::PluginConfig;
use crate::spool;
use crate::text::{PRIVATE_TAG, REDACTED};

/// Set to write the file instead of checking it.
const WRITE_VAR: &str = "CAIRN_WRITE_PLUGIN_RULES";
const REGENERATE: &str = "CAIRN_WRITE_PLUGIN_RULES=1 cargo nextest run -p cairn-core plugin_rules";

fn rules_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../plugins/opencode/cairn/rules.ts")
}

/// A JS string literal (a JSON string is one).
fn js(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

fn js_strings<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = items.into_iter().map(js).collect();
    format!("[{}]", quoted.join(", "))
}

/// The settings the plugin works with until the daemon's `plugin_config` answers (or from a
/// daemon without that op): Rust's defaults, only the keys the plugin reads before it asks
/// (a threshold or a limit sent before the user's own config arrived could override it).
fn plugin_defaults() -> Value {
    let all = serde_json::to_value(PluginConfig::default()).expect("the defaults serialise");
    let inject: serde_json::Map<String, Value> = ["protocol", "mode", "budget_bytes", "profile"]
        .iter()
        .map(|key| ((*key).to_owned(), all["inject"][*key].clone()))
        .collect();
    json!({
        "inject": inject,
        "triggers": all["triggers"],
        "compaction": all["compaction"],
        "context_meter": all["context_meter"],
        "history": all["history"],
    })
}

/// The file's text, from the Rust source.
fn rules_ts() -> String {
    let writes = CATALOGUE.iter().filter(|spec| spec.writes == Writes::MemoryStore).map(|spec| spec.name);
    let mut ts = String::new();
    let mut line = |text: String| writeln!(ts, "{text}").expect("a String takes every write");
    line("// GENERATED from cairn's Rust source by cairn-core's `plugin_rules_tests.rs`: do not edit.".into());
    line(format!("// Regenerate: {REGENERATE}"));
    line(String::new());
    line("/** The spool (cairn-core `spool.rs`): the record version, where records go, and the bounds. */".into());
    line(format!("export const SPOOL_RECORD_VERSION = {};", spool::RECORD_VERSION));
    line(format!("export const SPOOL_DIR = {};", js(spool::SPOOL_DIR)));
    line(format!("export const SPOOL_DROPPED_FILE = {};", js(spool::DROPPED_FILE)));
    line(format!("export const SPOOL_MAX_EVENTS = {};", spool::MAX_EVENTS));
    line(format!("export const SPOOL_MAX_BYTES = {};", spool::MAX_BYTES));
    line(format!("export const SPOOL_MAX_RECORD_BYTES = {};", spool::MAX_RECORD_BYTES));
    line(String::new());
    line("/** The catalogue's operations that write the memory store (`ops/catalogue.rs`): delivered through the spool when no daemon answers. */".into());
    line(format!("export const WRITE_OPS: ReadonlySet<string> = new Set({});", js_strings(writes)));
    line(String::new());
    line("/** cairn's own tools as OpenCode names them, in any case (`agent/intent.rs`, `is_cairn_tool`). */".into());
    line(format!("export const CAIRN_TOOL_PREFIXES: readonly string[] = {};", js_strings(OPENCODE_TOOL_PREFIXES)));
    line(format!("export const CAIRN_TOOL_NAMES: readonly string[] = {};", js_strings(OPENCODE_TOOL_NAMES)));
    line(String::new());
    line("/** The longest prompt kept (`agent/activity.rs`): the plugin cuts before it redacts and sends. */".into());
    line(format!("export const MAX_PROMPT_CHARS = {MAX_PROMPT_CHARS};"));
    line(String::new());
    line("/** `<private>` redaction (cairn-base `text`): the tag's name and what a block becomes. */".into());
    line(format!("export const PRIVATE_TAG = {};", js(PRIVATE_TAG)));
    line(format!("export const REDACTED = {};", js(REDACTED)));
    line(String::new());
    line("/** The plugin's settings until the daemon's `plugin_config` answers (cairn-base `settings/plugin.rs` defaults). */".into());
    let defaults = serde_json::to_string_pretty(&plugin_defaults()).expect("JSON serialises");
    line(format!("export const PLUGIN_DEFAULTS: Record<string, Record<string, any>> = {defaults};"));
    ts
}

#[test]
fn plugin_rules_are_generated_from_the_rust_source() {
    let path = rules_path();
    let wanted = rules_ts();
    if std::env::var_os(WRITE_VAR).is_some() {
        std::fs::write(&path, &wanted).expect("write the plugin's rules");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == wanted,
        "{} is not what cairn's Rust source generates (a rule changed, or the file was edited); regenerate it:\n  {REGENERATE}",
        path.display()
    );
}

/// The plugin's write ops are the ones it sends that write: every one of them is in the file.
#[test]
fn the_plugins_writes_are_catalogue_writes() {
    let rules = rules_ts();
    let ts = rules.lines().find(|l| l.starts_with("export const WRITE_OPS")).expect("the write ops line");
    for op in ["start_session", "user_prompt", "record_activity", "capture_passive", "save_compaction", "end_session"] {
        assert!(ts.contains(&format!("\"{op}\"")), "{op} is not a write of the catalogue");
    }
    for read in ["context", "context_meter", "protocol", "plugin_config", "history_ingest"] {
        assert!(!ts.contains(&format!("\"{read}\"")), "{read} would be spooled");
    }
}
