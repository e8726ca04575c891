//! `cairn setup opencode`: cairn's OpenCode plugin with this binary's
//! path baked in, in OpenCode's global plugin directory, and `mcp.cairn` in the global config.
//!
//! Host facts (checked against OpenCode 1.18.33): the global config dir is
//! `$XDG_CONFIG_HOME/opencode` (`~/.config/opencode`); every `{plugin,plugins}/*.{ts,js}` in it
//! is loaded as a plugin (so `engram.ts.disabled` and our backups are not); `opencode.json`
//! and `opencode.jsonc` there are both read.

use std::path::{Path, PathBuf};

use anyhow::Result;
use jsonc_parser::cst::{CstInputValue, CstObject};
use serde_json::Value;

use super::jsonc::{self, Doc};
use super::{Answers, FileOp, Plan, Status, Step, path_str};
use crate::cli::SetupArgs;

/// The plugin's source (`plugins/opencode/cairn.ts`), embedded at build time.
const TEMPLATE: &str = include_str!("../../../../plugins/opencode/cairn.ts");

/// The folder of the plugin's modules, beside it in the plugin directory (OpenCode loads
/// `plugins/*.{ts,js}` only, so nothing in it is taken for a plugin).
const MODULE_DIR: &str = "cairn";

/// The plugin's modules (`plugins/opencode/cairn/*.ts`), installed as they are.
const MODULES: &[(&str, &str)] = &[
    ("chat.ts", include_str!("../../../../plugins/opencode/cairn/chat.ts")),
    ("compaction.ts", include_str!("../../../../plugins/opencode/cairn/compaction.ts")),
    ("daemon.ts", include_str!("../../../../plugins/opencode/cairn/daemon.ts")),
    ("events.ts", include_str!("../../../../plugins/opencode/cairn/events.ts")),
    ("facts.ts", include_str!("../../../../plugins/opencode/cairn/facts.ts")),
    ("link.ts", include_str!("../../../../plugins/opencode/cairn/link.ts")),
    ("memory.ts", include_str!("../../../../plugins/opencode/cairn/memory.ts")),
    ("meter.ts", include_str!("../../../../plugins/opencode/cairn/meter.ts")),
    ("parts.ts", include_str!("../../../../plugins/opencode/cairn/parts.ts")),
    ("private.ts", include_str!("../../../../plugins/opencode/cairn/private.ts")),
    ("rules.ts", include_str!("../../../../plugins/opencode/cairn/rules.ts")),
    ("sessions.ts", include_str!("../../../../plugins/opencode/cairn/sessions.ts")),
    ("spool.ts", include_str!("../../../../plugins/opencode/cairn/spool.ts")),
    ("tools.ts", include_str!("../../../../plugins/opencode/cairn/tools.ts")),
    ("util.ts", include_str!("../../../../plugins/opencode/cairn/util.ts")),
];

/// The one line of the plugin that setup rewrites (the contract with the plugin's source).
pub const BAKED_LINE: &str =
    "const BAKED_CAIRN_BIN: string | null = null; // cairn setup writes the binary's path here";

// The build fails, rather than installing a plugin that cannot find cairn, when the plugin's
// source lost the line setup rewrites (or has it twice).
const _: () = assert!(
    occurrences(TEMPLATE.as_bytes(), BAKED_LINE.as_bytes()) == 1,
    "plugins/opencode/cairn.ts must contain exactly once the line `const BAKED_CAIRN_BIN: string | null = null; // cairn setup writes the binary's path here`"
);

const fn occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i + needle.len() <= haystack.len() {
        let mut j = 0;
        while j < needle.len() && haystack[i + j] == needle[j] {
            j += 1;
        }
        if j == needle.len() {
            count += 1;
        }
        i += 1;
    }
    count
}

/// The file name of cairn's plugin in the plugin directory.
const PLUGIN_FILE: &str = "cairn.ts";
/// What the MCP entry runs after the binary.
/// `--host=opencode`: the plugin gives the agent the Memory Protocol, so the MCP server's
/// instructions are one line instead of a second copy (OpenCode shows both).
const MCP_ARGS: [&str; 3] = ["mcp", "--tools=agent", HOST_ARG];
const HOST_ARG: &str = "--host=opencode";

/// The plugin source with `binary` baked in (as a JSON string, which is a TS string literal).
pub fn plugin_source(template: &str, binary: &str) -> Option<String> {
    if !template.contains(BAKED_LINE) {
        return None;
    }
    let quoted = serde_json::to_string(binary).ok()?;
    let line = format!("const BAKED_CAIRN_BIN: string | null = {quoted}; // written by `cairn setup opencode`");
    Some(template.replacen(BAKED_LINE, &line, 1))
}

/// Inputs of one run.
pub struct Options {
    pub binary: PathBuf,
    /// `$XDG_CONFIG_HOME/opencode`.
    pub config_dir: PathBuf,
    /// `~/.engram/engram.db` (as `cairn import-engram`).
    pub engram_db: PathBuf,
    pub uninstall: bool,
    pub disable_engram: bool,
    pub import_engram: bool,
    /// cairn's own config.toml (in the data dir), where opencode-engram's settings go.
    pub cairn_config: PathBuf,
}

impl Options {
    pub fn from_env(args: &SetupArgs, binary: &Path, data_dir: &Path) -> Result<Options> {
        Ok(Options {
            cairn_config: data_dir.join(cairn_core::settings::CONFIG_FILE),
            binary: binary.to_path_buf(),
            config_dir: super::config_home()?.join("opencode"),
            engram_db: super::home_dir()?.join(".engram").join("engram.db"),
            uninstall: args.uninstall,
            disable_engram: args.disable_engram,
            import_engram: args.import_engram,
        })
    }
}

/// The config file setup edits: `opencode.jsonc` if it exists, else `opencode.json`.
fn config_path(dir: &Path) -> PathBuf {
    let jsonc = dir.join("opencode.jsonc");
    if jsonc.exists() { jsonc } else { dir.join("opencode.json") }
}

/// Everything `cairn setup opencode` would do.
pub fn plan(o: &Options, answers: &Answers) -> Result<Plan> {
    let mut plan = Plan::default();
    let bin = path_str(&o.binary)?;

    // Read and edit the config first: a config that cannot be parsed stops the run before
    // anything is planned for the other files.
    let config = config_path(&o.config_dir);
    let before = super::read_config(&config)?;
    let doc = match &before {
        Some(text) => Doc::parse(&config, text)?,
        None => Doc::parse(&config, "{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n")?,
    };
    let root = doc.root_object(&config)?;
    let mcp = jsonc::object_prop(&config, &root, "mcp", "mcp")?;

    // 1. the plugin: its file and its modules
    let plugin = o.config_dir.join("plugins").join(PLUGIN_FILE);
    let modules = o.config_dir.join("plugins").join(MODULE_DIR);
    let current = std::fs::read_to_string(&plugin).ok();
    if o.uninstall {
        match current {
            Some(text) if text.contains("BAKED_CAIRN_BIN") => {
                plan.steps.push(Step::new("plugin", Status::Removed, Some(&plugin)));
                plan.ops.push(FileOp::Remove { path: plugin });
                for (name, _) in MODULES {
                    let path = modules.join(name);
                    if path.is_file() {
                        plan.ops.push(FileOp::Remove { path });
                    }
                }
            }
            Some(_) => {
                plan.steps
                    .push(Step::new("plugin", Status::Skipped, Some(&plugin)).detail("not cairn's plugin: left alone"));
            }
            None => plan.steps.push(Step::new("plugin", Status::Absent, Some(&plugin))),
        }
    } else {
        let wanted = plugin_source(TEMPLATE, bin).expect("the build checks the template");
        let mut writes: Vec<FileOp> = Vec::new();
        if current.as_deref() != Some(wanted.as_str()) {
            writes.push(FileOp::Write { path: plugin.clone(), contents: wanted.into_bytes() });
        }
        for (name, source) in MODULES {
            let path = modules.join(name);
            if std::fs::read_to_string(&path).ok().as_deref() != Some(*source) {
                writes.push(FileOp::Write { path, contents: source.as_bytes().to_vec() });
            }
        }
        let status = match &current {
            None => Status::Created,
            Some(_) if writes.is_empty() => Status::Unchanged,
            Some(_) => Status::Updated,
        };
        plan.steps.push(Step::new("plugin", status, Some(&plugin)));
        plan.ops.extend(writes);
    }

    // 2. mcp.cairn
    let cairn_status = if o.uninstall {
        match mcp.as_ref().and_then(|m| m.get("cairn")) {
            Some(prop) => {
                prop.remove();
                Status::Removed
            }
            None => Status::Absent,
        }
    } else {
        let mcp = mcp.clone().unwrap_or_else(|| root.object_value_or_set("mcp"));
        register_cairn(&config, &mcp, bin)?
    };
    let mut cairn_step = Step::new("mcp.cairn", cairn_status, Some(&config));
    if let Some(m) = &mcp
        && let Some(entry) = m.object_value("cairn")
        && jsonc::value(&entry, "type").as_ref().and_then(Value::as_str) == Some("remote")
        && !o.uninstall
    {
        cairn_step = cairn_step.detail("a remote entry (cairn's HTTP /mcp): left as it is");
    }
    plan.steps.push(cairn_step);
    if !o.uninstall
        && let Some(entry) = mcp.as_ref().and_then(|m| m.object_value("cairn"))
        && jsonc::value(&entry, "enabled") == Some(Value::Bool(false))
    {
        // the user switched it off: respected, but said
        plan.warnings.push(format!(
            "mcp.cairn is switched off (\"enabled\": false) in {}: OpenCode will not start it",
            config.display()
        ));
    }

    // 3. engram's OpenCode pieces: both would capture every session a second time and offer
    // a second set of memory tools.
    if !o.uninstall {
        engram(o, &config, mcp.as_ref(), answers, &mut plan);
    }

    let after = doc.text();
    // (uninstall never creates a config that is not there)
    if before.as_deref() != Some(after.as_str()) && (before.is_some() || !o.uninstall) {
        plan.ops.push(FileOp::Write { path: config.clone(), contents: after.into_bytes() });
    }

    // 4. opencode-engram's history settings
    if !o.uninstall {
        opencode_engram_settings(o, &mut plan)?;
    }

    // 5. engram's memories
    if !o.uninstall && o.engram_db.is_file() {
        if answers.ask(o.import_engram, &format!("Import engram's memories from {}?", o.engram_db.display())) {
            plan.steps.push(Step::new("engram import", Status::Imported, Some(&o.engram_db)));
            plan.import_engram = Some(o.engram_db.clone());
        } else {
            plan.steps.push(Step::new("engram import", Status::Skipped, Some(&o.engram_db)));
            plan.warnings.push(format!(
                "engram has memories in {}: bring them in with `cairn import-engram` (or `cairn setup opencode --import-engram`)",
                o.engram_db.display()
            ));
        }
    }
    Ok(plan)
}

/// `opencode-engram.json[c]` into cairn's `[history]` (keys cairn already sets are kept).
fn opencode_engram_settings(o: &Options, plan: &mut Plan) -> Result<()> {
    let Some(source) = super::engram_history::find(&o.config_dir) else { return Ok(()) };
    let before = super::read_config(&o.cairn_config)?.unwrap_or_default();
    let import = super::engram_history::import(&source, &before, &o.cairn_config)?;
    if !import.ignored.is_empty() {
        plan.warnings.push(format!(
            "{}: cairn has no setting for {}; left out",
            source.display(),
            import.ignored.join(", ")
        ));
    }
    let step = Step::new("opencode-engram settings", Status::Imported, Some(&source));
    if import.imported.is_empty() {
        let detail = if import.kept.is_empty() { "nothing to import" } else { "already in cairn's config.toml" };
        plan.steps.push(Step { status: Status::Unchanged, ..step }.detail(detail));
        return Ok(());
    }
    let mut detail = format!("{} into [history] of {}", import.imported.join(", "), o.cairn_config.display());
    if !import.kept.is_empty() {
        detail.push_str(&format!("; kept cairn's own {}", import.kept.join(", ")));
    }
    plan.steps.push(step.detail(detail));
    plan.ops.push(FileOp::Write { path: o.cairn_config.clone(), contents: import.config.into_bytes() });
    Ok(())
}

/// Add `mcp.cairn`, or point an existing local entry at this binary (keeping its other
/// arguments and fields).
fn register_cairn(config: &Path, mcp: &CstObject, bin: &str) -> Result<Status> {
    let Some(prop) = mcp.get("cairn") else {
        let command: Vec<CstInputValue> =
            std::iter::once(bin).chain(MCP_ARGS).map(|s| CstInputValue::String(s.into())).collect();
        mcp.append(
            "cairn",
            CstInputValue::Object(vec![
                ("type".into(), "local".into()),
                ("command".into(), CstInputValue::Array(command)),
                ("enabled".into(), true.into()),
            ]),
        );
        return Ok(Status::Created);
    };
    let Some(entry) = prop.object_value() else {
        return Err(jsonc::invalid(
            config,
            "has `mcp.cairn` but it is not an object".into(),
            "fix it by hand (or delete it) and run again; the file was not changed",
        ));
    };
    if jsonc::value(&entry, "type").as_ref().and_then(Value::as_str) == Some("remote") {
        return Ok(Status::Unchanged);
    }
    let command = jsonc::value(&entry, "command");
    let mut args: Vec<Value> = match command {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => std::iter::once(bin).chain(MCP_ARGS).map(Value::from).collect(),
    };
    // An entry from an older setup runs `cairn mcp` without `--host`: add it (only to our own
    // `cairn mcp` command line).
    let switched_off = jsonc::value(&entry, "enabled").and_then(|v| v.as_bool()) == Some(false);
    let needs_host = !switched_off
        && args.get(1).and_then(Value::as_str) == Some("mcp")
        && !args.iter().filter_map(Value::as_str).any(|a| a == "--host" || a.starts_with("--host="));
    if args[0].as_str() == Some(bin) && entry.get("command").is_some() && !needs_host {
        return Ok(Status::Unchanged);
    }
    args[0] = Value::from(bin);
    if needs_host {
        args.push(Value::from(HOST_ARG));
    }
    let input = CstInputValue::Array(args.iter().map(jsonc::to_input).collect());
    match entry.get("command") {
        Some(c) => c.set_value(input),
        None => {
            entry.append("command", input);
        }
    }
    Ok(Status::Updated)
}

/// engram's plugin files and `mcp.engram`: disabled when asked, else a warning that says how.
fn engram(o: &Options, config: &Path, mcp: Option<&CstObject>, answers: &Answers, plan: &mut Plan) {
    let files: Vec<PathBuf> = ["plugins", "plugin"]
        .iter()
        .flat_map(|d| ["engram.ts", "engram.js"].map(|f| o.config_dir.join(d).join(f)))
        .filter(|p| p.is_file())
        .collect();
    let entry = mcp.and_then(|m| m.object_value("engram"));
    let enabled = entry.as_ref().map(|e| jsonc::value(e, "enabled").as_ref().and_then(Value::as_bool).unwrap_or(true));
    if files.is_empty() && enabled != Some(true) {
        if enabled == Some(false) {
            plan.steps.push(Step::new("mcp.engram", Status::AlreadyDisabled, Some(config)));
        }
        return;
    }
    let disable = answers.ask(
        o.disable_engram,
        "engram is set up in OpenCode too: disable its plugin and MCP server so sessions are not captured twice?",
    );
    for file in files {
        if disable {
            let mut to = PathBuf::from(format!("{}.disabled", file.display()));
            let mut n = 1;
            while to.exists() {
                n += 1;
                to = PathBuf::from(format!("{}.disabled-{n}", file.display()));
            }
            plan.steps.push(
                Step::new("engram plugin", Status::Disabled, Some(&file))
                    .detail(format!("renamed to {}", to.file_name().unwrap_or_default().to_string_lossy())),
            );
            plan.ops.push(FileOp::Rename { from: file, to });
        } else {
            plan.steps.push(Step::new("engram plugin", Status::Found, Some(&file)));
        }
    }
    match (entry, enabled) {
        (Some(e), Some(true)) if disable => {
            match e.get("enabled") {
                Some(p) => p.set_value(false.into()),
                None => {
                    e.append("enabled", false.into());
                }
            }
            plan.steps.push(Step::new("mcp.engram", Status::Disabled, Some(config)).detail("\"enabled\": false"));
        }
        (Some(_), Some(true)) => plan.steps.push(Step::new("mcp.engram", Status::Found, Some(config))),
        (Some(_), _) => plan.steps.push(Step::new("mcp.engram", Status::AlreadyDisabled, Some(config))),
        _ => {}
    }
    if !disable {
        plan.warnings.push(
            "engram is still active in OpenCode: every session would be captured twice and the agent offered two sets of memory tools; \
             run `cairn setup opencode --disable-engram`"
                .into(),
        );
    }
}

/// How OpenCode is wired to cairn, for `cairn doctor`: the binary in `mcp.cairn` and the one
/// baked into the plugin.
pub fn wiring(binary: &Path) -> Option<super::Wiring> {
    let dir = super::config_home().ok()?.join("opencode");
    if !dir.is_dir() {
        return None;
    }
    let path = config_path(&dir);
    let config =
        std::fs::read_to_string(&path).ok().and_then(|text| Doc::parse(&path, &text).ok()?.root.to_serde_value());
    let mcp = config
        .and_then(|c| {
            (c["mcp"]["cairn"]["type"] != "remote").then(|| c["mcp"]["cairn"]["command"][0].as_str().map(String::from))
        })
        .flatten();
    let plugin_path = dir.join("plugins").join(PLUGIN_FILE);
    let plugin = std::fs::read_to_string(&plugin_path).ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("const BAKED_CAIRN_BIN"))?;
        let quoted = line.split_once("= ")?.1.split_once(';')?.0;
        serde_json::from_str::<String>(quoted).ok()
    });
    Some(super::Wiring::new(
        "opencode",
        vec![
            super::wiring::Piece::running("mcp", &path, mcp, binary),
            super::wiring::Piece::running("plugin", &plugin_path, plugin, binary),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bakes_the_binary_as_a_quoted_string_into_any_template_with_the_line() {
        let template = format!("// any plugin\n{BAKED_LINE}\nexport default {{}};\n");
        let out = plugin_source(&template, "/opt/My \"cairn\"/cairn").unwrap();
        assert!(out.contains(r#"const BAKED_CAIRN_BIN: string | null = "/opt/My \"cairn\"/cairn";"#), "{out}");
        assert!(!out.contains(BAKED_LINE));
        assert!(out.starts_with("// any plugin\n") && out.ends_with("export default {};\n"));
        assert_eq!(plugin_source("no line here", "/x"), None);
        // the embedded plugin has the line (the build checks it too)
        assert!(plugin_source(TEMPLATE, "/x").is_some());
    }

    /// Every module of the plugin is installed: a new file in `plugins/opencode/cairn/` that is
    /// not in [`MODULES`] would be imported by the plugin and missing beside it.
    #[test]
    fn every_module_of_the_plugin_is_embedded() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/opencode").join(MODULE_DIR);
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".ts"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = MODULES.iter().map(|(name, _)| (*name).to_owned()).collect();
        assert_eq!(embedded, on_disk, "list the plugin's modules in MODULES (crates/cairn/src/setup/opencode.rs)");
        for (name, source) in MODULES {
            assert_eq!(*source, std::fs::read_to_string(dir.join(name)).unwrap(), "{name}");
        }
        // the plugin imports its modules from the folder they are installed in
        assert!(TEMPLATE.contains(&format!("from \"./{MODULE_DIR}/")));
    }
}
