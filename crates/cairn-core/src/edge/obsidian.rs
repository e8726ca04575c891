//! `cairn export --obsidian DIR`: the store as an Obsidian vault folder.
//!
//! One note per live memory (YAML front matter, the content as body, `[[links]]` for its
//! relations), one hub note per project and per type linking their memories. [`plan`] turns an
//! [`ExportData`] into files (pure, no I/O); [`write_vault`] puts them on disk incrementally.
//!
//! A note the user edited in the vault is never overwritten: `.cairn-export.json` in DIR keeps
//! the sha256 of every file as cairn last wrote it; a file whose bytes no longer match is left
//! alone, cairn's new version goes beside it as `<name> (cairn).md`, and the report lists it
//! under `kept_edited`. Notes of deleted memories are removed only when unedited, likewise.
//! A file at a planned path that cairn never wrote is treated as edited, so losing the state
//! file loses nothing either.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{Observation, Relation};
use crate::text::{normalize_project, redact};
use crate::transfer::ExportData;

/// The state file in the vault folder: each file's sha256 as cairn last wrote it.
pub const STATE_FILE: &str = ".cairn-export.json";
/// Folder of the project and type hub notes.
pub const HUB_DIR: &str = "_hubs";
/// What is appended to a note's name when cairn's version goes beside an edited note.
pub const CAIRN_COPY_SUFFIX: &str = " (cairn)";
/// A slug is cut here (bytes, on a char boundary): with the id and ` (cairn).md` a name stays
/// far below the 255-byte limit of every common file system, whatever the script.
const MAX_SLUG_BYTES: usize = 80;
const STATE_VERSION: u32 = 1;
/// Windows refuses these as file or folder names, with or without an extension.
const WINDOWS_RESERVED: &[&str] = &[
    "con", "prn", "aux", "nul", "com0", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8", "com9", "lpt0",
    "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

/// One file of the vault: its path relative to DIR (`/`-separated) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub path: String,
    pub text: String,
}

/// What one export pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VaultReport {
    pub dir: String,
    /// Memory notes in the vault after this pass (one per live memory).
    pub notes: usize,
    /// Project and type hub notes.
    pub hubs: usize,
    /// Files created or rewritten by this pass (relative paths).
    pub written: Vec<String>,
    /// Files already as cairn would write them.
    pub unchanged: usize,
    /// Notes removed because their memory was deleted, renamed or moved (they were unedited).
    pub removed: Vec<String>,
    /// Notes cairn did not touch because they were edited in the vault.
    pub kept_edited: Vec<KeptNote>,
}

impl VaultReport {
    /// Whether this pass changed anything on disk or has something to say.
    pub fn changed_anything(&self) -> bool {
        !self.written.is_empty() || !self.removed.is_empty() || !self.kept_edited.is_empty()
    }
}

/// A note kept as the user left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptNote {
    pub path: String,
    pub reason: KeptReason,
    /// Where cairn's current version was written instead, if it still exports one.
    pub cairn_copy: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeptReason {
    /// The memory changed, but so did the note in the vault.
    EditedInVault,
    /// The memory was deleted (or renamed), but the note was edited in the vault: kept, and
    /// no longer followed by cairn.
    EditedNoLongerExported,
    /// Something that is not a plain file (a folder, a symlink) sits at the note's path.
    NotAFile,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct VaultState {
    version: u32,
    /// The one project exported here (`--project`), `None` for all: a run for another would
    /// take the first one's notes for deleted memories.
    #[serde(default)]
    project: Option<String>,
    /// Relative path → sha256 hex of the bytes cairn wrote there.
    files: BTreeMap<String, String>,
}

/// Export `data` (the export of `project`, or of all projects) into the vault folder `dir`
/// (created if missing): plan, then write.
pub fn export_vault(data: &ExportData, dir: &Path, project: Option<&str>) -> Result<VaultReport> {
    let files = plan(data);
    let notes = files.iter().filter(|f| !f.path.starts_with(HUB_DIR)).count();
    let mut report = write_vault(dir, &files, project)?;
    report.notes = notes;
    report.hubs = files.len() - notes;
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// Planning: names, notes, hubs. Pure.

/// Every file of the vault for `data`, in a stable order. Deleted memories have no note.
pub fn plan(data: &ExportData) -> Vec<PlannedFile> {
    let mut live: Vec<&Observation> = data.observations.iter().filter(|o| o.deleted_at.is_none()).collect();
    live.sort_by_key(|o| o.id);
    let names = Names::assign(&live);
    let by_memory = relations_by_memory(&data.relations);
    let mut files: Vec<PlannedFile> = live
        .iter()
        .map(|o| PlannedFile {
            path: format!("{}/{}.md", note_folder(o), names.note[&o.sync_id]),
            text: render_note(o, &names, &by_memory),
        })
        .collect();
    for (project, hub) in &names.project_hub {
        let members: Vec<&Observation> = live.iter().copied().filter(|o| &o.project == project).collect();
        files.push(PlannedFile {
            path: format!("{HUB_DIR}/{hub}.md"),
            text: render_hub("project", &project_label(project), &members, &names, |o| o.kind.clone()),
        });
    }
    for (kind, hub) in &names.type_hub {
        let members: Vec<&Observation> = live.iter().copied().filter(|o| &o.kind == kind).collect();
        files.push(PlannedFile {
            path: format!("{HUB_DIR}/{hub}.md"),
            text: render_hub("type", kind, &members, &names, |o| project_label(&o.project)),
        });
    }
    files
}

/// The vault-wide unique base names (no `.md`) of notes and hubs, so a bare `[[name]]` link
/// resolves to exactly one file. Compared case-insensitively: macOS and Windows vaults are.
struct Names {
    note: HashMap<String, String>,
    title: HashMap<String, String>,
    project_hub: BTreeMap<String, String>,
    type_hub: BTreeMap<String, String>,
}

impl Names {
    fn assign(live: &[&Observation]) -> Names {
        let mut taken = HashSet::new();
        let projects: BTreeSet<&String> = live.iter().map(|o| &o.project).collect();
        let kinds: BTreeSet<&String> = live.iter().map(|o| &o.kind).collect();
        let project_hub = projects
            .into_iter()
            .map(|p| (p.clone(), unique(&mut taken, &format!("project-{}", slug_or(p, "none")), p)))
            .collect();
        let type_hub = kinds
            .into_iter()
            .map(|k| (k.clone(), unique(&mut taken, &format!("type-{}", slug_or(k, "none")), k)))
            .collect();
        let mut note = HashMap::new();
        let mut title = HashMap::new();
        for o in live {
            let base = format!("{}-{}", slug_or(&o.title, "untitled"), short_id(&o.sync_id));
            note.insert(o.sync_id.clone(), unique(&mut taken, &base, &o.sync_id));
            title.insert(o.sync_id.clone(), clean_title(&o.title));
        }
        Names { note, title, project_hub, type_hub }
    }

    fn link(&self, sync_id: &str) -> Option<String> {
        Some(wikilink(self.note.get(sync_id)?, &self.title[sync_id]))
    }
}

/// `base`, or `base-<hash of what it names>` when another note already has that name.
fn unique(taken: &mut HashSet<String>, base: &str, named: &str) -> String {
    let mut name = base.to_owned();
    if taken.contains(&name.to_lowercase()) {
        name = format!("{base}-{}", &sha256_hex(named.as_bytes())[..12]);
    }
    let mut n = 2;
    while taken.contains(&name.to_lowercase()) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.insert(name.to_lowercase());
    name
}

/// The random tail of a UUID v7 (its head is a timestamp, shared by memories of one minute).
fn short_id(sync_id: &str) -> String {
    let hex: String = sync_id.chars().filter(char::is_ascii_hexdigit).collect::<String>().to_lowercase();
    if hex.len() >= 8 { hex[hex.len() - 8..].to_owned() } else { slug_or(sync_id, "0") }
}

/// `<project>/<type>` folders, each a safe name.
fn note_folder(o: &Observation) -> String {
    let project =
        if o.project.is_empty() { "_no-project".to_owned() } else { safe_component(&slug_or(&o.project, "project")) };
    format!("{project}/{}", safe_component(&slug_or(&o.kind, "none")))
}

fn project_label(project: &str) -> String {
    if project.is_empty() { "(no project)".to_owned() } else { project.to_owned() }
}

/// Lowercase letters and digits of any script, runs of anything else as one `-`, cut at
/// 80 bytes: safe on every OS and in a wikilink (no `/ \ : * ? " < > | # ^ [ ]`).
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    let mut pending_dash = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            for lower in c.to_lowercase() {
                if out.len() + lower.len_utf8() > MAX_SLUG_BYTES {
                    return out.trim_end_matches('-').to_owned();
                }
                out.push(lower);
            }
        } else {
            pending_dash = true;
        }
    }
    out
}

fn slug_or(text: &str, fallback: &str) -> String {
    let s = slug(text);
    if s.is_empty() { fallback.to_owned() } else { s }
}

/// A folder name Windows accepts: its device names get a `_`.
fn safe_component(name: &str) -> String {
    if WINDOWS_RESERVED.contains(&name.to_lowercase().as_str()) { format!("{name}_") } else { name.to_owned() }
}

/// A title on one line, private blocks out (the store redacts on save; this keeps the vault
/// safe from a row written before that rule).
fn clean_title(title: &str) -> String {
    let (text, _) = redact(title);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `[[name|label]]`, with the characters that would end or split the link (or open HTML) taken
/// out of the label.
fn wikilink(name: &str, label: &str) -> String {
    let label = link_label(label);
    if label.is_empty() { format!("[[{name}]]") } else { format!("[[{name}|{label}]]") }
}

fn link_label(text: &str) -> String {
    let label: String = text.chars().map(|c| if matches!(c, '[' | ']' | '|' | '<' | '>') { ' ' } else { c }).collect();
    label.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A title as heading text: Markdown and HTML shown as typed, never rendered or linked.
fn escape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '|' | '~' | '$' | '=' | '^' | '!') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A YAML scalar: a JSON string is a valid double-quoted YAML string, escapes and all.
fn yaml_str(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// An Obsidian tag: letters, digits, `-` and `/` only, never all digits.
fn tag(prefix: &str, value: &str) -> String {
    format!("cairn/{prefix}/{}", slug_or(value, "none"))
}

/// A memory's note: front matter, title, content, relations, hub links.
pub fn render_note_for(o: &Observation, data: &ExportData) -> String {
    let live: Vec<&Observation> = data.observations.iter().filter(|o| o.deleted_at.is_none()).collect();
    render_note(o, &Names::assign(&live), &relations_by_memory(&data.relations))
}

fn render_note(o: &Observation, names: &Names, relations: &RelationsByMemory<'_>) -> String {
    let title = &names.title[&o.sync_id];
    let mut text = front_matter(o, title);
    text.push_str(&format!("\n# {}\n\n", escape_markdown(title)));
    let (content, _) = redact(&o.content);
    text.push_str(content.trim_end());
    text.push('\n');
    let related = related_lines(o, names, relations);
    if !related.is_empty() {
        text.push_str("\n## Related\n\n");
        for line in related {
            text.push_str(&format!("- {line}\n"));
        }
    }
    text.push_str(&format!(
        "\n---\n\n{} · {}\n",
        wikilink(&names.project_hub[&o.project], &format!("Project {}", project_label(&o.project))),
        wikilink(&names.type_hub[&o.kind], &format!("Type {}", o.kind)),
    ));
    text
}

fn front_matter(o: &Observation, title: &str) -> String {
    let mut fm = String::from("---\n");
    let mut field = |key: &str, value: String| fm.push_str(&format!("{key}: {value}\n"));
    field("cairn_id", yaml_str(&o.sync_id));
    field("local_id", o.id.to_string());
    field("title", yaml_str(title));
    field("type", yaml_str(&o.kind));
    field("project", yaml_str(&o.project));
    field("scope", yaml_str(if o.scope == crate::text::Scope::Personal { "personal" } else { "project" }));
    if let Some(topic) = &o.topic_key {
        field("topic_key", yaml_str(topic));
    }
    field("session_id", yaml_str(&o.session_id));
    if let Some(tool) = &o.tool_name {
        field("tool_name", yaml_str(tool));
    }
    field("created", yaml_str(&o.created_at));
    field("updated", yaml_str(&o.updated_at));
    field("revision_count", o.revision_count.to_string());
    field("duplicate_count", o.duplicate_count.to_string());
    field("pinned", o.pinned.to_string());
    if let Some(review) = &o.review_after {
        field("review_after", yaml_str(review));
    }
    // Obsidian offers an alias when a link is typed: one that would break that link is cleaned.
    field("aliases", format!("[{}]", yaml_str(&link_label(title))));
    let mut tags = vec![yaml_str("cairn"), yaml_str(&tag("type", &o.kind))];
    if !o.project.is_empty() {
        tags.push(yaml_str(&tag("project", &o.project)));
    }
    field("tags", format!("[{}]", tags.join(", ")));
    fm.push_str("---\n");
    fm
}

/// Each memory's relations (as source or target), so a note looks only at its own.
type RelationsByMemory<'a> = HashMap<&'a str, Vec<&'a Relation>>;

fn relations_by_memory(relations: &[Relation]) -> RelationsByMemory<'_> {
    let mut map: RelationsByMemory<'_> = HashMap::new();
    for r in relations {
        map.entry(r.source_id.as_str()).or_default().push(r);
        if r.target_id != r.source_id {
            map.entry(r.target_id.as_str()).or_default().push(r);
        }
    }
    map
}

/// One line per judged relation with another live memory; `not_conflict` verdicts and pending
/// candidates say nothing a reader can use.
fn related_lines(o: &Observation, names: &Names, relations: &RelationsByMemory<'_>) -> Vec<String> {
    let mut lines = Vec::new();
    for r in relations.get(o.sync_id.as_str()).into_iter().flatten() {
        if r.relation == "pending" || r.relation == "not_conflict" || r.judgment_status != "judged" {
            continue;
        }
        let verb = r.relation.replace('_', " ");
        if r.source_id == o.sync_id
            && let Some(link) = names.link(&r.target_id)
        {
            lines.push(format!("{verb} {link}"));
        } else if r.target_id == o.sync_id
            && let Some(link) = names.link(&r.source_id)
        {
            lines.push(format!("{link} {verb} this"));
        }
    }
    lines
}

/// A hub: its memories grouped by `group` (type for a project hub, project for a type hub).
fn render_hub(
    kind: &str,
    label: &str,
    members: &[&Observation],
    names: &Names,
    group: impl Fn(&Observation) -> String,
) -> String {
    let mut groups: BTreeMap<String, Vec<&Observation>> = BTreeMap::new();
    for o in members {
        groups.entry(group(o)).or_default().push(o);
    }
    let mut text = format!(
        "---\ncairn_hub: {}\nname: {}\ntags: [\"cairn\", \"cairn/hub\"]\n---\n\n",
        yaml_str(kind),
        yaml_str(label)
    );
    let heading = if kind == "project" { "Project" } else { "Type" };
    text.push_str(&format!("# {heading} {}\n", escape_markdown(label)));
    for (name, mut notes) in groups {
        notes.sort_by(|a, b| {
            names.title[&a.sync_id].to_lowercase().cmp(&names.title[&b.sync_id].to_lowercase()).then(a.id.cmp(&b.id))
        });
        text.push_str(&format!("\n## {}\n\n", escape_markdown(&name)));
        for o in notes {
            if let Some(link) = names.link(&o.sync_id) {
                text.push_str(&format!("- {link}\n"));
            }
        }
    }
    text
}

// ---------------------------------------------------------------------------------------------
// Writing: incremental, edits in the vault kept.

/// Put `files` in `dir`: write what changed, remove what cairn wrote and no longer exports,
/// never overwrite or remove a file edited since cairn wrote it.
pub fn write_vault(dir: &Path, files: &[PlannedFile], project: Option<&str>) -> Result<VaultReport> {
    prepare_dir(dir)?;
    let project = project.map(|p| normalize_project(p).0);
    let old = load_state(dir, project.as_deref())?;
    let new = VaultState { version: STATE_VERSION, project, files: BTreeMap::new() };
    let mut vault = Vault { dir, old: &old, new };
    let mut report = VaultReport { dir: dir.display().to_string(), ..VaultReport::default() };
    for file in files {
        vault.place(file, &mut report)?;
    }
    vault.remove_stale(&mut report)?;
    save_state(dir, &vault.new)?;
    Ok(report)
}

struct Vault<'a> {
    dir: &'a Path,
    old: &'a VaultState,
    new: VaultState,
}

/// What sits at a planned path.
enum OnDisk {
    Missing,
    NotAFile,
    /// The sha256 of its bytes.
    File(String),
}

impl Vault<'_> {
    fn place(&mut self, file: &PlannedFile, report: &mut VaultReport) -> Result<()> {
        let hash = sha256_hex(file.text.as_bytes());
        let last_written = self.old.files.get(&file.path);
        let full = self.dir.join(&file.path);
        let on_disk = match std::fs::symlink_metadata(&full) {
            Err(e) if e.kind() == ErrorKind::NotFound => OnDisk::Missing,
            Err(e) => return Err(io_error(&full, &e)),
            Ok(m) if !m.is_file() => OnDisk::NotAFile,
            // Unchanged since cairn wrote it: no need to read it back.
            Ok(_) if last_written == Some(&hash) => {
                self.new.files.insert(file.path.clone(), hash);
                report.unchanged += 1;
                return Ok(());
            }
            Ok(_) => OnDisk::File(sha256_hex(&std::fs::read(&full).map_err(|e| io_error(&full, &e))?)),
        };
        match on_disk {
            OnDisk::Missing => self.write(&file.path, &file.text, hash, report),
            OnDisk::File(disk) if disk == hash => {
                self.new.files.insert(file.path.clone(), hash);
                report.unchanged += 1;
                Ok(())
            }
            OnDisk::File(disk) if last_written == Some(&disk) => self.write(&file.path, &file.text, hash, report),
            OnDisk::File(_) => self.keep_edited(file, KeptReason::EditedInVault, report),
            OnDisk::NotAFile => self.keep_edited(file, KeptReason::NotAFile, report),
        }
    }

    /// Leave the user's file, still followed (its last-written hash kept), and put cairn's
    /// version beside it unless that copy was edited too.
    fn keep_edited(&mut self, file: &PlannedFile, reason: KeptReason, report: &mut VaultReport) -> Result<()> {
        if let Some(last) = self.old.files.get(&file.path) {
            self.new.files.insert(file.path.clone(), last.clone());
        }
        let copy = PlannedFile { path: cairn_copy_path(&file.path), text: file.text.clone() };
        let hash = sha256_hex(copy.text.as_bytes());
        let full = self.dir.join(&copy.path);
        let copy_free = match std::fs::symlink_metadata(&full) {
            Err(e) if e.kind() == ErrorKind::NotFound => true,
            Err(e) => return Err(io_error(&full, &e)),
            Ok(m) if !m.is_file() => false,
            Ok(_) => {
                let disk = sha256_hex(&std::fs::read(&full).map_err(|e| io_error(&full, &e))?);
                disk == hash || self.old.files.get(&copy.path) == Some(&disk)
            }
        };
        let cairn_copy = if copy_free {
            let mut ignored = VaultReport::default();
            self.write(&copy.path, &copy.text, hash, &mut ignored)?;
            Some(copy.path)
        } else {
            None
        };
        report.kept_edited.push(KeptNote { path: file.path.clone(), reason, cairn_copy });
        Ok(())
    }

    fn write(&mut self, path: &str, text: &str, hash: String, report: &mut VaultReport) -> Result<()> {
        let full = self.dir.join(path);
        let already = std::fs::read(&full).ok().is_some_and(|bytes| sha256_hex(&bytes) == hash);
        if already {
            report.unchanged += 1;
        } else {
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent).map_err(|e| io_error(parent, &e))?;
            }
            write_atomically(&full, text.as_bytes())?;
            report.written.push(path.to_owned());
        }
        self.new.files.insert(path.to_owned(), hash);
        Ok(())
    }

    /// Files cairn wrote before and does not write now: removed if unedited, else kept.
    fn remove_stale(&self, report: &mut VaultReport) -> Result<()> {
        let stale: Vec<(&String, &String)> =
            self.old.files.iter().filter(|(path, _)| !self.new.files.contains_key(*path)).collect();
        for (path, last) in stale {
            let full = self.dir.join(path);
            match std::fs::symlink_metadata(&full) {
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(&full, &e)),
                Ok(m) if !m.is_file() => continue,
                Ok(_) => {}
            }
            let disk = sha256_hex(&std::fs::read(&full).map_err(|e| io_error(&full, &e))?);
            if &disk == last {
                std::fs::remove_file(&full).map_err(|e| io_error(&full, &e))?;
                remove_empty_parents(self.dir, &full);
                report.removed.push(path.clone());
            } else if !path.ends_with(&format!("{CAIRN_COPY_SUFFIX}.md")) {
                report.kept_edited.push(KeptNote {
                    path: path.clone(),
                    reason: KeptReason::EditedNoLongerExported,
                    cairn_copy: None,
                });
            }
        }
        Ok(())
    }
}

/// `a/b/name.md` → `a/b/name (cairn).md`.
pub fn cairn_copy_path(path: &str) -> String {
    let stem = path.strip_suffix(".md").unwrap_or(path);
    format!("{stem}{CAIRN_COPY_SUFFIX}.md")
}

/// Folders emptied by a removal go too, up to (not including) the vault folder.
fn remove_empty_parents(dir: &Path, file: &Path) {
    let mut parent = file.parent();
    while let Some(p) = parent {
        if p == dir || !p.starts_with(dir) || std::fs::remove_dir(p).is_err() {
            break;
        }
        parent = p.parent();
    }
}

/// DIR must be a folder cairn can write in; created when missing.
fn prepare_dir(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => {
            return Err(CairnError::new(ErrorCode::VaultNotADirectory, format!("{} is not a folder", dir.display()))
                .with_hint("give a folder (it is created when missing), e.g. a folder inside your Obsidian vault"));
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
        }
        Err(e) => return Err(io_error(dir, &e)),
    }
    // Fail before the first note rather than half way through.
    let probe = dir.join(".cairn-export.probe");
    std::fs::write(&probe, b"").map_err(|e| io_error(dir, &e))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

fn load_state(dir: &Path, project: Option<&str>) -> Result<VaultState> {
    let path = dir.join(STATE_FILE);
    let bytes = match std::fs::read(&path) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Ok(VaultState {
                version: STATE_VERSION,
                project: project.map(str::to_owned),
                files: BTreeMap::new(),
            });
        }
        Err(e) => return Err(io_error(&path, &e)),
        Ok(bytes) => bytes,
    };
    let invalid = |why: String| {
        CairnError::new(ErrorCode::VaultStateInvalid, format!("{} is not cairn's export state: {why}", path.display()))
            .with_hint(format!(
                "move {STATE_FILE} aside to start over: notes that differ from cairn's are then kept, \
                 with cairn's version beside them"
            ))
    };
    let state: VaultState = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    if state.version != STATE_VERSION {
        return Err(invalid(format!("version {} (this cairn writes {STATE_VERSION})", state.version)));
    }
    // The state names files cairn may remove: only notes inside DIR.
    if let Some(bad) = state.files.keys().find(|p| !is_vault_note_path(p)) {
        return Err(invalid(format!("it names {bad:?}, which is not a note inside the folder")));
    }
    if state.project.as_deref() != project {
        let named = |p: Option<&str>| p.map_or("all projects".to_owned(), |p| format!("project {p:?}"));
        return Err(CairnError::new(
            ErrorCode::VaultProjectMismatch,
            format!(
                "{} holds the export of {}, not of {}",
                dir.display(),
                named(state.project.as_deref()),
                named(project)
            ),
        )
        .with_hint("export each project (or all of them) to a folder of its own"));
    }
    Ok(state)
}

/// A relative path of plain components ending in `.md`: never `..`, a root or a drive.
fn is_vault_note_path(path: &str) -> bool {
    path.ends_with(".md")
        && !path.contains('\\')
        && Path::new(path).components().all(|c| matches!(c, Component::Normal(_)))
}

fn save_state(dir: &Path, state: &VaultState) -> Result<()> {
    let text = serde_json::to_string_pretty(state)?;
    write_atomically(&dir.join(STATE_FILE), text.as_bytes())
}

/// Write beside the target and rename: a note is never seen half written.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp: PathBuf = path.with_file_name(format!(".{name}.cairn-partial"));
    std::fs::write(&tmp, bytes).map_err(|e| io_error(path, &e))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_error(path, &e)
    })
}

fn io_error(path: &Path, err: &std::io::Error) -> CairnError {
    if matches!(err.kind(), ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem) {
        CairnError::new(ErrorCode::VaultNotWritable, format!("cannot write {}: {err}", path.display()))
            .with_hint("check the folder's permissions, or export to another folder")
    } else {
        CairnError::internal(format!("{}: {err}", path.display()))
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}
