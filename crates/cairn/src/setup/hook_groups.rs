//! cairn's matcher groups in a host's `hooks` object, the shape Claude Code made and Codex
//! (`~/.codex/hooks.json`) and Gemini CLI (`~/.gemini/settings.json`) copied:
//! `hooks.<Event>: [{matcher?, hooks: [{type: "command", command, timeout}]}]`. A group is
//! cairn's when every command in it is `<…/cairn> hook [--host=<name>] <Event>`; installing
//! replaces cairn's groups of each event and leaves every other group as it was.

use std::path::Path;

use anyhow::Result;
use jsonc_parser::cst::{CstArray, CstNode, CstObject};
use serde_json::{Value, json};

use super::Status;
use super::jsonc::{self, drop_if_empty};

/// The key order of a group (and of the hosts' documentation).
pub const HOOK_KEYS: &[&str] = &["matcher", "hooks", "type", "command", "timeout", "async"];

/// One hook setup writes: the host's event, its matcher, the event `cairn hook` is given, and
/// the time limit in the host's unit (seconds for Codex, milliseconds for Gemini CLI).
pub struct HookSpec {
    pub event: &'static str,
    pub matcher: Option<&'static str>,
    pub timeout: u64,
}

/// The groups of `specs`, each running `<bin> hook --host=<host> <Event>`.
pub fn groups(bin: &str, host: &str, specs: &[HookSpec]) -> Vec<(String, Vec<Value>)> {
    let program = shell_quote(bin);
    specs
        .iter()
        .map(|spec| {
            let command = format!("{program} hook --host={host} {}", spec.event);
            let hook = json!({"type": "command", "command": command, "timeout": spec.timeout});
            let group = match spec.matcher {
                Some(m) => json!({"matcher": m, "hooks": [hook]}),
                None => json!({"hooks": [hook]}),
            };
            (spec.event.to_owned(), vec![group])
        })
        .collect()
}

/// `path` as one shell word (the hosts run hook commands through a shell).
pub fn shell_quote(path: &str) -> String {
    if !path.is_empty() && path.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@%,=".contains(c)) {
        path.to_string()
    } else {
        format!("'{}'", path.replace('\'', r"'\''"))
    }
}

/// The program of a `<program> hook [--host=<name>] <Event>` command, unquoted, when it is one.
pub fn hook_program(command: &str) -> Option<String> {
    let (program, event) = command.trim().rsplit_once(" hook ")?;
    let event = match event.split_once(' ') {
        Some((flag, rest)) if flag.starts_with("--host=") => rest,
        _ => event,
    };
    if event.is_empty() || !event.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    let program = program.trim();
    let program = if let Some(inner) = program.strip_prefix('\'').and_then(|p| p.strip_suffix('\'')) {
        inner.replace(r"'\''", "'")
    } else if let Some(inner) = program.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
        inner.to_string()
    } else {
        program.to_string()
    };
    Some(program)
}

/// Whether every hook of a matcher group is `<…/cairn> hook <Event>` (cairn's, from setup or
/// written by hand after the README).
pub fn is_cairn_group(group: &Value) -> bool {
    let Some(hooks) = group.get("hooks").and_then(Value::as_array) else { return false };
    !hooks.is_empty()
        && hooks.iter().all(|h| {
            h.get("command")
                .and_then(Value::as_str)
                .and_then(hook_program)
                .is_some_and(|p| Path::new(&p).file_stem().is_some_and(|s| s == "cairn") && !p.contains("engram"))
        })
}

/// Whether a matcher group runs engram (its plugin's hooks copied into settings).
pub fn is_engram_group(group: &Value) -> bool {
    group.get("hooks").and_then(Value::as_array).is_some_and(|hooks| {
        hooks.iter().any(|h| h.get("command").and_then(Value::as_str).is_some_and(|c| c.contains("engram")))
    })
}

/// The cairn binary the first of cairn's groups in a `hooks` object runs, for `cairn doctor`.
pub fn program_in(hooks: Option<&Value>) -> Option<String> {
    hooks?.as_object()?.values().flat_map(|g| g.as_array().cloned().unwrap_or_default()).find_map(|g| {
        if !is_cairn_group(&g) {
            return None;
        }
        hook_program(g["hooks"][0]["command"].as_str()?)
    })
}

/// The hooks piece of a host's `hooks` object (in `path`) for `cairn doctor`: how many of
/// `events` hold a group of cairn's, and the binary the first of them runs.
pub fn piece(path: &Path, hooks: Option<&Value>, events: &[&str], running: &Path) -> super::wiring::Piece {
    let found = events
        .iter()
        .filter(|event| {
            hooks
                .and_then(|h| h.get(**event))
                .and_then(Value::as_array)
                .is_some_and(|groups| groups.iter().any(is_cairn_group))
        })
        .count();
    super::wiring::Piece::hooks(path, program_in(hooks), found, events.len(), running)
}

/// `obj[name]` as an array: `None` when absent, an error when it is something else.
pub fn array_prop(path: &Path, obj: &CstObject, name: &str, what: &str) -> Result<Option<CstArray>> {
    let Some(prop) = obj.get(name) else { return Ok(None) };
    match prop.value().and_then(|v| v.as_array()) {
        Some(a) => Ok(Some(a)),
        None => Err(jsonc::invalid(
            path,
            format!("has `{what}` but it is not an array"),
            "fix the file by hand (or move it away) and run again; it was not changed",
        )),
    }
}

pub fn prop_names(obj: &CstObject) -> Vec<String> {
    obj.properties().iter().filter_map(|p| p.name()?.decoded_value().ok()).collect()
}

/// Make each event's cairn groups the `wanted` ones, leaving every other group.
pub fn install(path: &Path, hooks: &CstObject, wanted: Vec<(String, Vec<Value>)>) -> Result<Status> {
    let mut created = 0;
    let mut updated = 0;
    for (event, wanted) in wanted {
        let array = match array_prop(path, hooks, &event, &format!("hooks.{event}"))? {
            Some(a) => a,
            None => hooks.array_value_or_set(&event),
        };
        let ours: Vec<CstNode> =
            array.elements().into_iter().filter(|e| e.to_serde_value().is_some_and(|v| is_cairn_group(&v))).collect();
        let current: Vec<Value> = ours.iter().filter_map(CstNode::to_serde_value).collect();
        if current == wanted {
            continue;
        }
        if ours.is_empty() {
            created += 1;
        } else {
            updated += 1;
        }
        for node in ours {
            node.remove();
        }
        for group in &wanted {
            array.append(jsonc::to_input_ordered(group, HOOK_KEYS));
        }
    }
    Ok(match (created, updated) {
        (0, 0) => Status::Unchanged,
        (_, 0) => Status::Created,
        _ => Status::Updated,
    })
}

/// Remove cairn's groups from every event (and the events they leave empty).
pub fn remove(path: &Path, hooks: Option<&CstObject>) -> Result<Status> {
    let Some(hooks) = hooks else { return Ok(Status::Absent) };
    let mut removed = false;
    for event in prop_names(hooks) {
        let Some(array) = array_prop(path, hooks, &event, &format!("hooks.{event}"))? else { continue };
        let ours: Vec<CstNode> =
            array.elements().into_iter().filter(|e| e.to_serde_value().is_some_and(|v| is_cairn_group(&v))).collect();
        if ours.is_empty() {
            continue;
        }
        for node in ours {
            node.remove();
        }
        removed = true;
        // (an event the user left empty themselves stays)
        drop_if_empty(hooks, &event);
    }
    Ok(if removed { Status::Removed } else { Status::Absent })
}

/// Plan cairn's hooks in the `hooks` object of `root` (in `path`): installed, or with
/// `uninstall` removed together with a `hooks` they leave empty.
pub fn plan(path: &Path, root: &CstObject, wanted: Vec<(String, Vec<Value>)>, uninstall: bool) -> Result<Status> {
    let hooks = jsonc::object_prop(path, root, "hooks", "hooks")?;
    if uninstall {
        let status = remove(path, hooks.as_ref())?;
        if status == Status::Removed {
            drop_if_empty(root, "hooks");
        }
        return Ok(status);
    }
    let hooks = hooks.unwrap_or_else(|| root.object_value_or_set("hooks"));
    install(path, &hooks, wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_command_names_its_program_with_or_without_a_host() {
        assert_eq!(hook_program("'/a b/it'\\''s/cairn' hook Stop").as_deref(), Some("/a b/it's/cairn"));
        assert_eq!(hook_program("/usr/bin/cairn hook SessionStart").as_deref(), Some("/usr/bin/cairn"));
        assert_eq!(hook_program("/usr/bin/cairn hook --host=gemini BeforeAgent").as_deref(), Some("/usr/bin/cairn"));
        assert_eq!(hook_program("/usr/bin/cairn hook --host=gemini"), None);
        assert_eq!(hook_program("/usr/bin/cairn hook rm -rf"), None);
        let ours = groups("/opt/my cairn/cairn", "codex", &[HookSpec { event: "Stop", matcher: None, timeout: 5 }]);
        assert_eq!(ours[0].1[0]["hooks"][0]["command"], "'/opt/my cairn/cairn' hook --host=codex Stop");
        assert!(is_cairn_group(&ours[0].1[0]));
        assert!(!is_cairn_group(&json!({"hooks": [{"command": "engram hook x"}]})));
        assert!(is_engram_group(&json!({"hooks": [{"command": "bash ~/.engram/session-start.sh"}]})));
    }
}
