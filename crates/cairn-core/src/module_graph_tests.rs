//! The core's top-level modules form no cycle: each module's `crate::…` references (its `use`
//! statements and paths, tests left out) make a graph, and no two modules may reach each other.
//! A cycle is where a module grows into its neighbour's rules; this test names the modules that
//! close one, so it is opened where it forms instead of found in a later review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → the top-level modules its code names.
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

/// Modules that still reach each other, one list per strongly connected component. The test
/// fails when this differs from what the code has, both ways: a new cycle, or a module that left
/// one (then shorten the list, so it cannot come back unnoticed). None is left: keep it so.
const KNOWN_CYCLES: &[&[&str]] = &[];

#[test]
fn the_top_level_modules_form_no_cycle() {
    let graph = module_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    let cycles = cycles(&graph);
    let known: Vec<Vec<String>> = KNOWN_CYCLES.iter().map(|c| c.iter().map(|m| (*m).to_owned()).collect()).collect();
    assert_eq!(cycles, known, "modules that reach each other (graph: {})", describe(&graph, &cycles));
}

/// The graph of every non-test source file under `src`.
fn module_graph(src: &Path) -> Graph {
    let reexports = root_reexports(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut graph = Graph::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap();
        let Some(module) = top_level_module(relative) else { continue };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        let targets = graph.entry(module.clone()).or_default();
        for name in crate_references(&code) {
            let target = reexports.get(&name).cloned().unwrap_or(name);
            if target != module && !target.chars().next().is_some_and(char::is_uppercase) {
                targets.insert(target);
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for targets in graph.values_mut() {
        // `crate::VERSION` and the like live in the root, which is no module.
        targets.retain(|t| modules.contains(t));
    }
    graph
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The top-level module a file belongs to; `None` for the crate root and for test-only files.
fn top_level_module(relative: &Path) -> Option<String> {
    let stem = relative.file_stem()?.to_str()?;
    if stem == "tests" || stem == "testutil" || stem == "test_sink" || stem.ends_with("_tests") {
        return None;
    }
    let first = relative.components().next()?.as_os_str().to_str()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    (module != "lib").then(|| module.to_owned())
}

/// `pub use module::{A, B}` in the crate root: `crate::A` is module's.
fn root_reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for line in lib.lines().filter_map(|l| l.trim().strip_prefix("pub use ")) {
        let line = line.trim_end_matches(';');
        let Some((module, rest)) = line.split_once("::") else { continue };
        let rest = rest.trim_start_matches('{').trim_end_matches('}');
        for name in rest.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let name = name.rsplit("::").next().unwrap_or(name);
            names.insert(name.to_owned(), module.to_owned());
        }
    }
    names
}

/// The file without comments and without its inline `#[cfg(test)]` modules.
pub(crate) fn code_of(source: &str) -> String {
    let mut code = String::new();
    let mut lines = source.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod ") && next.trim_end().ends_with('{'))
        {
            skip_block(&mut lines);
            continue;
        }
        let without_comment = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(without_comment);
        code.push('\n');
    }
    code
}

/// Skip the lines of the block opened on the next line, up to its closing brace.
fn skip_block<'a>(lines: &mut impl Iterator<Item = &'a str>) {
    let mut depth = 0i64;
    for line in lines {
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        if depth <= 0 {
            return;
        }
    }
}

/// The first segment after every `crate::`, including each item of `crate::{a, b::c}`.
fn crate_references(code: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let preceded_by_ident = rest[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
        rest = &rest[at + "crate::".len()..];
        if preceded_by_ident {
            continue; // `cairn_crate::`, not ours
        }
        if let Some(group) = rest.strip_prefix('{') {
            names.extend(group_heads(group));
        } else {
            names.insert(identifier(rest).to_owned());
        }
    }
    names.retain(|n| !n.is_empty());
    names
}

/// The first identifier of each item of a `{…}` group, up to its closing brace.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut expecting = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => expecting = true,
            c if expecting && depth == 0 && (c.is_alphabetic() || c == '_') => {
                heads.push(identifier(&group[i..]).to_owned());
                expecting = false;
            }
            _ => {}
        }
    }
    heads
}

fn identifier(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// Strongly connected components of more than one module, each sorted, in name order (Tarjan).
pub(crate) fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in &self.graph[node] {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.components.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        components: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.components.sort();
    walk.components
}

/// Each module of a cycle with the modules of the same cycle it names.
fn describe(graph: &Graph, cycles: &[Vec<String>]) -> String {
    let mut out = String::new();
    for cycle in cycles {
        for module in cycle {
            let inside: Vec<&str> = graph[module].iter().filter(|t| cycle.contains(t)).map(String::as_str).collect();
            out.push_str(&format!("\n  {module} → {}", inside.join(", ")));
        }
        out.push('\n');
    }
    out
}

#[test]
fn references_are_read_from_paths_groups_and_reexports() {
    let code = code_of(
        "use crate::{agent::Host, error::{CairnError, Result}, Store};\n\
         // crate::obsidian in a comment\n\
         fn f() { crate::search::run(); other_crate::x(); }\n\
         #[cfg(test)]\nmod tests {\n    use crate::spool;\n}\n",
    );
    let names = crate_references(&code);
    assert_eq!(names, ["Store", "agent", "error", "search"].map(String::from).into_iter().collect());
    let reexports = root_reexports("pub use error::{CairnError, Result};\npub use store::Store;\n");
    assert_eq!(reexports["Store"], "store");
    assert_eq!(reexports["Result"], "error");
}

#[test]
fn a_cycle_is_found_and_a_chain_is_not() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (from, to) in edges {
            g.entry((*from).to_owned()).or_default().insert((*to).to_owned());
            g.entry((*to).to_owned()).or_default();
        }
        g
    };
    assert!(cycles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
    let found = cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
    assert_eq!(found, [["a", "b", "c"].map(String::from).to_vec()]);
}
