//! No two source files of one crate reach each other, at any depth of the module tree, in any
//! crate of the workspace. [`super::module_graph_tests`] watches cairn-core's top-level modules;
//! circles also grow one level down (two files of `agent/` taking each other's types, a command
//! file and the dispatcher sharing `Env`), and in the other crates. Each file's `crate::`,
//! `super::` and `self::` paths (tests left out) are resolved to the file that defines the
//! module they name, through one level of `pub use` re-exports, and a file may name its own
//! ancestors (a child uses its parent's items) but a parent's naming of its children is how
//! Rust declares them, not a dependency, so it is not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside one crate: `["agent", "activity"]`; the root is `[]`.
type ModPath = Vec<String>;
/// Module → the modules its code names (ancestors included, descendants left out).
type FileGraph = BTreeMap<ModPath, BTreeSet<ModPath>>;

/// Files that still reach each other, one list per circle, as `crate:module::path`. The test
/// fails when this differs from what the code has, both ways: shorten it when a circle opens.
/// - The engine and the workers it owns: each worker keeps its state in a field of `Engine` and
///   its loop is handed the `Engine` (extension `impl Engine` blocks). Opening it takes a
///   narrower handle than `Engine` for the workers.
const KNOWN_CIRCLES: &[&[&str]] = &[&[
    "cairn-engine:autosync",
    "cairn-engine:deep",
    "cairn-engine:engine",
    "cairn-engine:extraction",
    "cairn-engine:judging",
]];

#[test]
fn no_two_files_of_a_crate_reach_each_other() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for dir in crate_dirs(&crates) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let graph = file_graph(&dir.join("src"));
        for circle in circles(&graph) {
            found.push(circle.iter().map(|m| format!("{name}:{}", display(m))).collect::<Vec<_>>());
        }
    }
    found.sort();
    let known: Vec<Vec<String>> = KNOWN_CIRCLES.iter().map(|c| c.iter().map(|m| (*m).to_owned()).collect()).collect();
    assert_eq!(found, known, "files that reach each other");
}

fn crate_dirs(crates: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(crates).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("src").is_dir()).collect();
    dirs.sort();
    dirs
}

fn display(module: &ModPath) -> String {
    if module.is_empty() { "(root)".to_owned() } else { module.join("::") }
}

/// The module graph of one crate's `src`.
fn file_graph(src: &Path) -> FileGraph {
    let files: BTreeMap<ModPath, String> = source_files(src, src)
        .into_iter()
        .filter_map(|(module, path)| {
            Some((module?, super::module_graph_tests::code_of(&std::fs::read_to_string(path).ok()?)))
        })
        .collect();
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    let reexports: BTreeMap<(ModPath, String), ModPath> =
        files.iter().flat_map(|(module, code)| reexports_of(module, code, &modules)).collect();
    let mut graph = FileGraph::new();
    for (module, code) in &files {
        let targets = graph.entry(module.clone()).or_default();
        for path in referenced_paths(code) {
            let Some(absolute) = absolute(module, &path) else { continue };
            let target = resolve(&absolute, &modules, &reexports);
            if &target != module && !target.starts_with(module) {
                targets.insert(target);
            }
        }
    }
    graph
}

/// Every non-test `.rs` file under `dir` with its module path (`None` for test-only files).
fn source_files(src: &Path, dir: &Path) -> Vec<(Option<ModPath>, PathBuf)> {
    let mut files = Vec::new();
    for path in std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()) {
        if path.is_dir() {
            files.extend(source_files(src, &path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push((module_of(path.strip_prefix(src).unwrap()), path));
        }
    }
    files
}

fn module_of(relative: &Path) -> Option<ModPath> {
    let stem = relative.file_stem()?.to_str()?;
    if stem == "tests" || stem == "testutil" || stem == "test_sink" || stem.ends_with("_tests") {
        return None;
    }
    let mut module: ModPath =
        relative.parent()?.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if !matches!(stem, "lib" | "main" | "mod") {
        module.push(stem.to_owned());
    }
    Some(module)
}

/// `pub use child::{A, b::C}` in `module`: each name, to the module it is taken from.
fn reexports_of(module: &ModPath, code: &str, modules: &BTreeSet<ModPath>) -> Vec<((ModPath, String), ModPath)> {
    let mut found = Vec::new();
    for line in code.lines().map(str::trim) {
        let Some(rest) = ["pub use ", "pub(crate) use ", "pub(super) use "].iter().find_map(|p| line.strip_prefix(p))
        else {
            continue;
        };
        let rest = rest.trim_end_matches(';');
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let prefixed = if rest.starts_with("crate::") || rest.starts_with("super::") {
            rest.to_owned()
        } else {
            format!("self::{rest}")
        };
        for path in expand(&prefixed) {
            let Some(absolute) = absolute(module, &path) else { continue };
            let Some(name) = absolute.last().cloned() else { continue };
            let from = longest_module(&absolute, modules);
            if &from != module {
                found.push(((module.clone(), name), from));
            }
        }
    }
    found
}

/// Every path the code names through `crate::`, `super::` or `self::`, groups expanded.
fn referenced_paths(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for head in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(at) = rest.find(head) {
            let preceded = rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            let start = &rest[at..];
            rest = &rest[at + head.len()..];
            if !preceded {
                paths.extend(expand(path_text(start)));
            }
        }
    }
    paths
}

/// The path starting `text`: identifiers, `::` and a balanced `{…}` group.
fn path_text(text: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return &text[..i],
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[..=i];
                }
            }
            c if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':') => return &text[..i],
            _ => {}
        }
    }
    text
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`, as segments.
fn expand(path: &str) -> Vec<Vec<String>> {
    // `A as B` names A: the alias is marked before the spaces go.
    let path: String = path.replace(" as ", "@").chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = path.find('{') else {
        let segments = path.split("::").filter(|s| !s.is_empty() && *s != "*");
        return vec![segments.map(|s| s.split('@').next().unwrap_or(s).to_owned()).collect()];
    };
    let prefix = &path[..open];
    let inner = path[open + 1..].strip_suffix('}').unwrap_or(&path[open + 1..]);
    let mut out = Vec::new();
    for item in split_top_level(inner) {
        out.extend(expand(&format!("{prefix}{item}")));
    }
    out
}

fn split_top_level(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items.into_iter().filter(|s| !s.is_empty()).collect()
}

/// `segments` (led by `crate`, `super` or `self`) as a path from the crate root.
fn absolute(module: &ModPath, segments: &[String]) -> Option<ModPath> {
    let mut at = module.clone();
    let mut rest = segments;
    match rest.first()?.as_str() {
        "crate" => {
            at.clear();
            rest = &rest[1..];
        }
        "self" => rest = &rest[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    at.extend(rest.iter().cloned());
    Some(at)
}

/// The longest prefix of `path` that is a module of the crate.
fn longest_module(path: &ModPath, modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p)).unwrap_or_default()
}

/// The module a path names: its longest module prefix, or the module an item it names was
/// re-exported from.
fn resolve(path: &ModPath, modules: &BTreeSet<ModPath>, reexports: &BTreeMap<(ModPath, String), ModPath>) -> ModPath {
    let module = longest_module(path, modules);
    match path.get(module.len()) {
        Some(item) => reexports.get(&(module.clone(), item.clone())).cloned().unwrap_or(module),
        None => module,
    }
}

/// Strongly connected components of more than one module (the top-level test's walk).
fn circles(graph: &FileGraph) -> Vec<Vec<ModPath>> {
    let names: BTreeMap<String, ModPath> = graph.keys().map(|m| (m.join("::"), m.clone())).collect();
    let flat: super::module_graph_tests::Graph = graph
        .iter()
        .map(|(m, targets)| {
            let targets = targets.iter().map(|t| t.join("::")).filter(|t| names.contains_key(t)).collect();
            (m.join("::"), targets)
        })
        .collect();
    super::module_graph_tests::cycles(&flat).into_iter().map(|c| c.iter().map(|n| names[n].clone()).collect()).collect()
}

#[test]
fn paths_resolve_through_super_groups_and_reexports() {
    let module: ModPath = vec!["agent".into(), "intent".into()];
    let code = "use super::{activity::{ActivityEvent, Record}, Host};\nfn f() { crate::store::Store::open(); }\n";
    let mut paths: Vec<ModPath> = referenced_paths(code).iter().filter_map(|p| absolute(&module, p)).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            ["agent", "Host"].as_slice(),
            &["agent", "activity", "ActivityEvent"],
            &["agent", "activity", "Record"],
            &["store", "Store", "open"]
        ]
        .map(|p| p.iter().map(|s| (*s).to_owned()).collect::<ModPath>())
    );
    let modules: BTreeSet<ModPath> =
        [vec![], vec!["agent".into()], vec!["agent".into(), "activity".into()], module.clone()].into_iter().collect();
    let reexports: BTreeMap<_, _> =
        reexports_of(&vec!["agent".into()], "pub use activity::{Host, other::X};\n", &modules).into_iter().collect();
    assert_eq!(reexports[&(vec!["agent".into()], "Host".to_owned())], vec!["agent".to_owned(), "activity".to_owned()]);
    assert_eq!(resolve(&vec!["agent".into(), "Host".into()], &modules, &reexports), vec!["agent", "activity"]);
}

#[test]
fn a_circle_between_sibling_files_is_found_and_a_parent_naming_its_child_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("agent")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod agent;\n").unwrap();
    std::fs::write(src.join("agent.rs"), "mod a;\nmod b;\npub use a::A;\nfn f() { self::b::g(); }\n").unwrap();
    std::fs::write(src.join("agent/a.rs"), "use super::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("agent/b.rs"), "use crate::agent::A;\npub struct B;\n").unwrap();
    let circles = circles(&file_graph(src));
    assert_eq!(circles, vec![vec![vec!["agent".to_owned(), "a".to_owned()], vec!["agent".to_owned(), "b".to_owned()]]]);
    std::fs::write(src.join("agent/b.rs"), "use crate::agent::Other;\npub struct B;\n").unwrap();
    assert!(super::file_graph_tests::circles(&file_graph(src)).is_empty(), "a names b, b names only their parent");
}
