//! SQL lives in the storage modules only. Every crate's production code (the module tree from
//! `src/lib.rs`, `src/main.rs` and `src/bin/*.rs`, `#[cfg(test)]` items and test files left
//! out) is read for string literals that start with an SQL statement; one outside
//! `store/`, a `store.rs`, a migration runner (`migrate.rs`) or [`ALLOWED`] fails the test. A
//! domain module that needs a row calls a typed function of its store module instead, so a
//! newcomer finds each table's SQL in one place (issue 40, item 1).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Files (or whole crates, as `crate/`) outside the storage modules that may hold SQL, each
/// with why. Shorten it when one moves; the test also fails on an entry that holds no SQL.
const ALLOWED: &[(&str, &str)] = &[
    (
        "cairn-history/",
        "the history archive crate is `history.db`'s storage: its connection is private and \
         every statement on it lives in this crate, a module per request family",
    ),
    ("cairn-llm/src/budget.rs", "the one module of `llm-usage.db`, the LLM budget's own database file"),
    (
        "cairn-base/src/settings.rs",
        "reads which model the store's vectors use before any store is open; cairn-base sits \
         below cairn-core's store, so it cannot call it",
    ),
    ("cairn-hub/src/db.rs", "the hub's pool and migrations: the advisory lock that runs them once"),
    (
        "cairn-base/src/vacuum.rs",
        "the one rebuild (`VACUUM` with its copy on disk) both stores run, `cairn.db` and the \
         archive; cairn-base sits below both",
    ),
];

/// Crates that never ship in a product binary: dev tools and test helpers.
const NOT_SHIPPED: &[&str] = &["cairn-bench", "cairn-eval", "cairn-pgtest"];

/// First words of a statement. A literal that is only the word (`"UPDATE"`, a label) is no
/// statement, except for the transaction words, which are whole statements alone.
const VERBS: &[&str] = &[
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "REPLACE",
    "CREATE",
    "DROP",
    "ALTER",
    "PRAGMA",
    "WITH",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "VACUUM",
    "ANALYZE",
    "ATTACH",
    "DETACH",
    "REINDEX",
    "EXPLAIN",
];
const WHOLE_STATEMENTS: &[&str] = &["BEGIN", "COMMIT", "ROLLBACK", "VACUUM", "ANALYZE", "REINDEX"];

#[test]
fn sql_appears_only_in_the_storage_modules() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut stray = Vec::new();
    let mut allowed_used = BTreeSet::new();
    for (name, file) in production_files(&crates) {
        let relative = format!("{name}/{}", file.strip_prefix(crates.join(&name)).unwrap().display());
        let statements = sql_literals(&std::fs::read_to_string(&file).unwrap());
        if statements.is_empty() || is_storage(&relative) {
            continue;
        }
        match ALLOWED.iter().find(|(entry, _)| relative == *entry || relative.starts_with(&format!("{entry}src/"))) {
            Some((entry, _)) => {
                allowed_used.insert(*entry);
            }
            None => stray.extend(statements.into_iter().map(|(line, sql)| format!("{relative}:{line}: {sql}"))),
        }
    }
    assert!(stray.is_empty(), "SQL outside the storage modules (move it under a store module):\n{}", stray.join("\n"));
    let unused: Vec<&str> = ALLOWED.iter().map(|(entry, _)| *entry).filter(|e| !allowed_used.contains(e)).collect();
    assert!(unused.is_empty(), "allowed files that hold no SQL any more (remove them from ALLOWED): {unused:?}");
}

/// `store/…`, `store.rs` and migration runners, in any crate.
fn is_storage(relative: &str) -> bool {
    let path = Path::new(relative);
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    stem == "store" || stem == "migrate" || path.components().any(|c| c.as_os_str() == "store")
}

/// `(crate name, file)` of every production source file of the workspace's shipped crates.
fn production_files(crates: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(crates).unwrap().flatten().map(|e| e.path()).filter(|p| p.join("src").is_dir()).collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if NOT_SHIPPED.contains(&name.as_str()) {
            continue;
        }
        let src = dir.join("src");
        let mut roots: Vec<PathBuf> =
            ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).filter(|p| p.is_file()).collect();
        if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
            roots.extend(bins.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "rs")));
        }
        let mut seen = BTreeSet::new();
        while let Some(file) = roots.pop() {
            if seen.insert(file.clone()) {
                let source = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                roots.extend(child_modules(&file, &source));
                files.push((name.clone(), file));
            }
        }
    }
    files
}

/// The files of the modules `file` declares with `mod name;`, test-only ones left out.
fn child_modules(file: &Path, source: &str) -> Vec<PathBuf> {
    let lexed = lex(source);
    let code = without_test_items(&lexed.code);
    let own_dir = match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => file.parent().unwrap().to_owned(),
        _ => file.with_extension(""),
    };
    let mut children = Vec::new();
    let mut rest = code.as_str();
    let mut offset = 0;
    while let Some(at) = find_word(rest, "mod") {
        let after = &rest[at + 3..];
        let name: String = after.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let declared = after.trim_start()[name.len()..].trim_start().starts_with(';');
        if declared && !name.is_empty() {
            let attributes = attributes_before(&code[..offset + at]);
            let path = if let Some(path) = path_attribute(source, &lexed, attributes) {
                file.parent().unwrap().join(path)
            } else {
                let flat = own_dir.join(format!("{name}.rs"));
                if flat.is_file() { flat } else { own_dir.join(&name).join("mod.rs") }
            };
            assert!(path.is_file(), "{}: module {name} has no file at {}", file.display(), path.display());
            children.push(path);
        }
        offset += at + 3;
        rest = &rest[at + 3..];
    }
    children
}

/// The byte range of the `#[…]` attributes right before an item that starts at the end of
/// `code`.
fn attributes_before(code: &str) -> std::ops::Range<usize> {
    let mut start = code.trim_end().len();
    let end = start;
    loop {
        let before = code[..start].trim_end();
        let visibility = ["pub(crate)", "pub(super)", "pub"].iter().find(|v| before.ends_with(*v));
        if let Some(v) = visibility {
            start = before.len() - v.len();
            continue;
        }
        if !before.ends_with(']') {
            return start.min(end)..end;
        }
        let Some(open) = before.rfind("#[") else { return start..end };
        start = open;
    }
}

/// `#[path = "…"]` among the attributes: the literal's text.
fn path_attribute(source: &str, lexed: &Lexed, attributes: std::ops::Range<usize>) -> Option<String> {
    if !lexed.code[attributes.clone()].contains("path") {
        return None;
    }
    lexed
        .literals
        .iter()
        .find(|l| attributes.contains(&l.start))
        .map(|l| source[l.start..l.end].trim_matches('"').to_owned())
}

/// `word` as a whole identifier in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = text[from..].find(word).map(|i| i + from) {
        let before = text[..at].chars().next_back().is_some_and(is_ident);
        let after = text[at + word.len()..].chars().next().is_some_and(is_ident);
        if !before && !after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `(line, first line of the statement)` of each literal of production code that starts
/// with an SQL statement.
fn sql_literals(source: &str) -> Vec<(usize, String)> {
    let lexed = lex(source);
    let code = without_test_items(&lexed.code);
    lexed
        .literals
        .iter()
        .filter(|l| code.as_bytes()[l.start] != b'\0')
        .filter(|l| starts_a_statement(&l.text))
        .map(|l| {
            (source[..l.start].lines().count().max(1), l.text.trim().lines().next().unwrap_or_default().to_owned())
        })
        .collect()
}

fn starts_a_statement(text: &str) -> bool {
    let text = text.trim_start();
    let word: String = text.chars().take_while(char::is_ascii_alphabetic).collect();
    if !VERBS.contains(&word.as_str()) {
        return false;
    }
    let rest = text[word.len()..].trim_end();
    let rest = rest.strip_suffix(';').unwrap_or(rest);
    if rest.is_empty() {
        return WHOLE_STATEMENTS.contains(&word.as_str());
    }
    rest.starts_with(|c: char| c.is_whitespace() || c == '(' || c == '*')
}

/// A source file split into code and string literals.
struct Lexed {
    /// The source with comments and literals blanked (same byte offsets, newlines kept).
    code: String,
    literals: Vec<Literal>,
}

struct Literal {
    /// Byte range in the source, quotes included.
    start: usize,
    end: usize,
    /// The text between the quotes, escapes left as written.
    text: String,
}

/// Comments, string literals (plain, raw, byte) and character literals, told apart from
/// lifetimes, so a `"` inside a comment or a `'"'` does not start a string.
fn lex(source: &str) -> Lexed {
    let bytes = source.as_bytes();
    let mut code = bytes.to_vec();
    let mut literals = Vec::new();
    let blank = |code: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut code[from..to] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let prev_ident = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                let end = source[i..].find('\n').map_or(bytes.len(), |n| i + n);
                blank(&mut code, i, end);
                i = end;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                let mut j = i;
                while j < bytes.len() {
                    if bytes[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if bytes[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut code, i, j);
                i = j;
            }
            b'r' | b'b' if !prev_ident && raw_string_at(bytes, i).is_some() => {
                let (text_start, hashes) = raw_string_at(bytes, i).unwrap();
                let closing = format!("\"{}", "#".repeat(hashes));
                let text_end = source[text_start..].find(&closing).map_or(bytes.len(), |n| text_start + n);
                let end = (text_end + closing.len()).min(bytes.len());
                literals.push(Literal { start: i, end, text: source[text_start..text_end].to_owned() });
                blank(&mut code, i, end);
                i = end;
            }
            b'"' => {
                let start = if i > 0 && bytes[i - 1] == b'b' && !(i > 1 && bytes[i - 2].is_ascii_alphanumeric()) {
                    i - 1
                } else {
                    i
                };
                let mut j = i + 1;
                while j < bytes.len() && bytes[j] != b'"' {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(bytes.len());
                literals.push(Literal { start, end, text: source[i + 1..j.min(bytes.len())].to_owned() });
                blank(&mut code, start, end);
                i = end;
            }
            b'\'' => {
                let end = char_literal_end(source, i);
                blank(&mut code, i, end);
                i = end.max(i + 1);
            }
            _ => i += 1,
        }
    }
    Lexed { code: String::from_utf8(code).expect("blanking keeps UTF-8 boundaries"), literals }
}

/// `r"`, `r#"`, `br"`…: where the text starts and how many `#` close it.
fn raw_string_at(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if bytes[j] == b'b' {
        j += 1;
    }
    if bytes.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = bytes[j..].iter().take_while(|b| **b == b'#').count();
    (bytes.get(j + hashes) == Some(&b'"')).then_some((j + hashes + 1, hashes))
}

/// The end of a character literal at `i`, or `i + 1` for a lifetime's quote.
fn char_literal_end(source: &str, i: usize) -> usize {
    let rest = &source[i + 1..];
    if let Some(escaped) = rest.strip_prefix('\\') {
        let close = escaped.find('\'').map_or(rest.len(), |n| n + 1);
        return i + 1 + close + 1;
    }
    let mut chars = rest.char_indices();
    match (chars.next(), chars.next()) {
        (Some(_), Some((at, '\''))) => i + 1 + at + 1,
        _ => i + 1,
    }
}

/// `code` with every item under a `#[cfg(…test…)]` attribute replaced by NUL bytes (an
/// inline test module, a test-only function, a `mod x_tests;` declaration).
fn without_test_items(code: &str) -> String {
    let mut bytes = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(").map(|n| n + from) {
        let attribute_end = code[at..].find(']').map_or(code.len(), |n| at + n + 1);
        let condition = &code[at..attribute_end];
        from = attribute_end;
        if find_word(condition, "test").is_none() || condition.contains("not(test") {
            continue;
        }
        let end = item_end(code, attribute_end);
        for b in &mut bytes[at..end] {
            if *b != b'\n' {
                *b = b'\0';
            }
        }
        from = end;
    }
    String::from_utf8(bytes).expect("NUL keeps UTF-8 boundaries")
}

/// Where the item starting at `start` ends: after its `;`, or after the brace closing its
/// first block (further attributes are part of the item).
fn item_end(code: &str, start: usize) -> usize {
    let mut depth = 0usize;
    let mut brackets = 0usize;
    for (i, c) in code[start..].char_indices() {
        match c {
            '[' => brackets += 1,
            ']' => brackets = brackets.saturating_sub(1),
            ';' if depth == 0 && brackets == 0 => return start + i + 1,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return start + i + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

#[test]
fn statements_are_found_in_code_and_not_in_tests_comments_or_labels() {
    let source = r##"
const ROWS: &str = "SELECT id FROM observations";
fn label() -> &'static str { "UPDATE" }
fn quote() -> char { '"' }
// "DELETE FROM observations" in a comment
fn raw() -> &'static str { r#"
    INSERT INTO t VALUES (1)"# }
fn begin(conn: &Connection) { conn.execute_batch("BEGIN").unwrap(); }
fn words() -> &'static str { "Select a file" }
#[cfg(test)]
mod tests {
    fn planted() { let _ = "DELETE FROM observations"; }
}
#[cfg(all(test, unix))]
fn also_test() { let _ = "DROP TABLE t"; }
"##;
    let found: Vec<String> = sql_literals(source).into_iter().map(|(line, sql)| format!("{line}: {sql}")).collect();
    assert_eq!(found, ["2: SELECT id FROM observations", "6: INSERT INTO t VALUES (1)", "8: BEGIN"]);
}

#[test]
fn test_modules_are_left_out_of_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("store")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod store;\nmod rules;\n#[cfg(test)]\nmod rules_tests;\n").unwrap();
    std::fs::write(src.join("store.rs"), "pub(crate) mod memories;\n").unwrap();
    std::fs::write(src.join("store/memories.rs"), "").unwrap();
    std::fs::write(src.join("rules.rs"), "").unwrap();
    let mut children: Vec<PathBuf> =
        child_modules(&src.join("lib.rs"), &std::fs::read_to_string(src.join("lib.rs")).unwrap());
    children.extend(child_modules(&src.join("store.rs"), &std::fs::read_to_string(src.join("store.rs")).unwrap()));
    let names: Vec<String> = children.iter().map(|p| p.strip_prefix(&src).unwrap().display().to_string()).collect();
    assert_eq!(names, ["store.rs", "rules.rs", "store/memories.rs"]);
}
