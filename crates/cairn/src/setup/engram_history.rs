//! `cairn setup opencode` brings an existing opencode-engram configuration along
//! (the `[history]` table): `opencode-engram.json[c]` in OpenCode's config dir (JSONC, UTF-8 or
//! UTF-16 with a byte-order mark) becomes the `[history]` table of cairn's config.toml. Keys
//! cairn's file already sets are kept (the user chose them for cairn); keys opencode-engram has
//! and cairn has not are named in a warning, never guessed.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{Map, Value};
use toml_edit::{DocumentMut, Item, Table};

use super::jsonc::{self, Doc};

/// opencode-engram's file in `dir`: the `.jsonc` first, as it reads them.
pub fn find(dir: &Path) -> Option<PathBuf> {
    ["opencode-engram.jsonc", "opencode-engram.json"].iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// What importing one file into config.toml would do.
#[derive(Debug, Default, PartialEq)]
pub struct Import {
    /// config.toml afterwards (unchanged text when nothing is imported).
    pub config: String,
    /// Dotted `[history]` keys written.
    pub imported: Vec<String>,
    /// Keys config.toml already had, left as they are.
    pub kept: Vec<String>,
    /// opencode-engram keys cairn has no place for.
    pub ignored: Vec<String>,
}

/// Read `source` and merge it into the text of config.toml (`config`, empty when absent).
pub fn import(source: &Path, config: &str, config_path: &Path) -> Result<Import> {
    let settings = read_source(source)?;
    let (history, ignored) = history_table(&settings);
    let mut doc: DocumentMut = config.parse().map_err(|e| {
        jsonc::invalid(config_path, format!("is not valid TOML: {e}"), "fix it and run `cairn setup opencode` again")
    })?;
    let table = doc.entry("history").or_insert_with(|| Item::Table(Table::new()));
    let Some(table) = table.as_table_like_mut() else {
        return Err(jsonc::invalid(config_path, "has a `history` key that is not a table".into(), "fix it by hand"));
    };
    let mut out = Import { ignored, ..Import::default() };
    merge(table, &history, "", &mut out);
    out.config = if out.imported.is_empty() { config.to_owned() } else { doc.to_string() };
    Ok(out)
}

/// The file as JSON: a BOM (UTF-8 or UTF-16) and comments allowed.
fn read_source(path: &Path) -> Result<Value> {
    let bytes = std::fs::read(path)
        .map_err(|e| jsonc::invalid(path, format!("cannot be read: {e}"), "check its permissions"))?;
    let text = decode(&bytes)
        .ok_or_else(|| jsonc::invalid(path, "is not UTF-8 or UTF-16 text".into(), "save it as UTF-8 and run again"))?;
    let doc = Doc::parse(path, &text)?;
    match doc.root.value().and_then(|v| v.to_serde_value()) {
        Some(v @ Value::Object(_)) => Ok(v),
        None => Ok(Value::Object(Map::new())),
        Some(_) => Err(jsonc::invalid(path, "is not a JSON object at the top level".into(), "fix it by hand")),
    }
}

/// Text of a config file: UTF-16 when its byte-order mark says so, else UTF-8 (its mark is
/// handled by the JSONC reader).
fn decode(bytes: &[u8]) -> Option<String> {
    let utf16 = |rest: &[u8], unit: fn([u8; 2]) -> u16| {
        let units: Vec<u16> = rest.chunks_exact(2).map(|c| unit([c[0], c[1]])).collect();
        String::from_utf16(&units).ok()
    };
    match bytes {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        _ => String::from_utf8(bytes.to_vec()).ok(),
    }
}

/// opencode-engram's keys as cairn's `[history]` keys, and the names of the ones without one.
fn history_table(settings: &Value) -> (Map<String, Value>, Vec<String>) {
    let defaults = serde_json::to_value(cairn_core::settings::HistorySettings::default()).expect("plain data");
    let mut table = Map::new();
    let mut ignored = Vec::new();
    for (key, value) in settings.as_object().into_iter().flatten() {
        match key.as_str() {
            "$schema" => {}
            // opencode-engram writes one file per call under the project; cairn one line per
            // call in its data dir.
            "debug_mode" => {
                let on = |k: &str, default: bool| value.get(k).and_then(Value::as_bool).unwrap_or(default);
                table.insert(
                    "debug_log_tool_calls".into(),
                    Value::Bool(on("enable", false) && on("log_tool_calls", true)),
                );
            }
            _ => match known(&defaults[key.as_str()], value, key, &mut ignored) {
                Some(v) => {
                    table.insert(key.clone(), v);
                }
                None => ignored.push(key.clone()),
            },
        }
    }
    (table, ignored)
}

/// `value` limited to the keys cairn knows (those of `default`), with the others named.
fn known(default: &Value, value: &Value, key: &str, ignored: &mut Vec<String>) -> Option<Value> {
    match (default, value) {
        (Value::Null, _) => None,
        (Value::Object(d), Value::Object(v)) => {
            let mut kept = Map::new();
            for (k, inner) in v {
                match known(&d.get(k).cloned().unwrap_or(Value::Null), inner, &format!("{key}.{k}"), ignored) {
                    Some(x) => {
                        kept.insert(k.clone(), x);
                    }
                    None => ignored.push(format!("{key}.{k}")),
                }
            }
            Some(Value::Object(kept))
        }
        (Value::Object(_), _) => None,
        (_, v) => Some(v.clone()),
    }
}

/// Write each leaf of `from` into `table` unless it is there already.
fn merge(table: &mut dyn toml_edit::TableLike, from: &Map<String, Value>, prefix: &str, out: &mut Import) {
    for (key, value) in from {
        let dotted = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        if let Value::Object(inner) = value {
            let sub = table.entry(key).or_insert_with(|| {
                let mut t = Table::new();
                t.set_implicit(true);
                Item::Table(t)
            });
            match sub.as_table_like_mut() {
                Some(sub) => merge(sub, inner, &dotted, out),
                None => out.kept.push(dotted),
            }
            continue;
        }
        if table.contains_key(key) {
            out.kept.push(dotted);
            continue;
        }
        if let Some(item) = toml_value(value) {
            table.insert(key, Item::Value(item));
            out.imported.push(dotted);
        }
    }
}

fn toml_value(value: &Value) -> Option<toml_edit::Value> {
    Some(match value {
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => n.as_i64().map(toml_edit::Value::from).or_else(|| n.as_f64().map(Into::into))?,
        Value::String(s) => s.as_str().into(),
        Value::Array(items) => {
            let mut array = toml_edit::Array::new();
            for item in items {
                array.push(toml_value(item)?);
            }
            array.into()
        }
        Value::Null | Value::Object(_) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENGRAM: &str = "\u{feff}{
  // mine
  \"$schema\": \"https://example.invalid/schema.json\",
  \"debug_mode\": { \"enable\": true },
  \"context_charting\": { \"recent_turns\": 4, },
  \"browse_messages\": { \"message_limit\": 100, \"user_preview_length\": 500 },
  \"show_tool_output\": [\"bash\", \"mcp__*\"],
  \"telemetry\": false,
}";

    fn run(source: &[u8], config: &str) -> Import {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opencode-engram.jsonc");
        std::fs::write(&path, source).unwrap();
        import(&path, config, &dir.path().join("config.toml")).unwrap()
    }

    #[test]
    fn keys_become_the_history_table_and_unknown_ones_are_named() {
        let out = run(ENGRAM.as_bytes(), "port = 7000\n");
        assert_eq!(
            out.config,
            "port = 7000\n\n[history]\ndebug_log_tool_calls = true\nshow_tool_output = [\"bash\", \"mcp__*\"]\n\n\
             [history.browse_messages]\nuser_preview_length = 500\n\n[history.context_charting]\nrecent_turns = 4\n"
        );
        assert_eq!(out.ignored, ["browse_messages.message_limit", "telemetry"]);
        // cairn reads what was written.
        let data = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join("config.toml"), &out.config).unwrap();
        let flags = cairn_core::settings::Overrides { data_dir: Some(data.path().into()), ..Default::default() };
        let history = cairn_core::settings::Settings::load_with(&flags, &|_| None).unwrap().history.config;
        assert_eq!((history.context_charting.recent_turns, history.browse_messages.user_preview_length), (4, 500));
        assert!(history.debug_log_tool_calls);
    }

    #[test]
    fn keys_cairn_already_sets_are_kept_and_a_second_run_changes_nothing() {
        let first = run(ENGRAM.as_bytes(), "[history]\nshow_tool_output = [\"read\"]\n");
        assert!(first.kept.contains(&"show_tool_output".to_owned()), "{first:?}");
        assert!(first.config.contains("show_tool_output = [\"read\"]"), "{}", first.config);
        let again = run(ENGRAM.as_bytes(), &first.config);
        assert!(again.imported.is_empty(), "{again:?}");
        assert_eq!(again.config, first.config);
    }

    #[test]
    fn utf16_files_are_read() {
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend("{\"search\": {\"snippet_length\": 90}}".encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(run(&bytes, "").imported, ["search.snippet_length"]);
    }

    #[test]
    fn broken_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opencode-engram.json");
        std::fs::write(&path, "{ \"search\": ").unwrap();
        let err = import(&path, "", &dir.path().join("config.toml")).unwrap_err();
        assert!(err.to_string().contains("opencode-engram.json"), "{err}");
        std::fs::write(&path, "{}").unwrap();
        let err = import(&path, "history = 3\n", &dir.path().join("config.toml")).unwrap_err();
        assert!(err.to_string().contains("not a table"), "{err}");
    }
}
