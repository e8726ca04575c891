//! Git sync: the journal written as content-addressed chunks under `.cairn/` (or engram's
//! `.engram/`) in a repository, and chunks committed by others applied back.
//!
//! Layout (engram's, so each reads the other's):
//! `manifest.json` `{version: 1, chunks: [{id, created_by, created_at, sessions, memories,
//! prompts}]}` and `chunks/<id>.jsonl.gz`, the gzip of ONE JSON object `{sessions,
//! observations, prompts, relations?, mutations?}` whose sha256 starts with `id`.
//!
//! The folder comes from whoever commits to the repository: its files are read and written only
//! through `edge::chunk_folder::Folder` (no link followed, regular files only, sizes capped before reading).
//! An import reads and checks every chunk first and applies them afterwards, in batches of
//! bounded size, each in one write ([`ImportTarget`]): the daemon's writer never waits on a file.

#[cfg(all(test, unix))]
mod files_tests;

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{ApplyReport, Mutation};
use crate::edge::chunk_folder::Folder;
use crate::error::{CairnError, ErrorCode, Result};
use crate::store::{Store, sync_chunks};

/// The manifest and chunk format this cairn writes and reads.
pub const FORMAT_VERSION: i64 = 1;
/// Mutations per chunk: a first sync of a large store becomes several chunks of bounded size.
pub const CHUNK_MAX_MUTATIONS: usize = 5_000;
/// How much of a chunk folder sync reads. A file is refused before it is read when it is
/// larger than its cap, and reading stops one byte past it in case the file grows meanwhile.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadLimits {
    /// A `manifest.json` (an entry is about 150 bytes: some 100,000 chunks).
    pub manifest_bytes: u64,
    /// A chunk file, and its JSON once inflated (a gzip bomb, or not a chunk, past it).
    pub chunk_bytes: u64,
    /// The chunks an import holds in memory before it applies them (at least one chunk).
    pub batch_bytes: u64,
}

impl ReadLimits {
    pub(crate) const DEFAULT: ReadLimits =
        ReadLimits { manifest_bytes: 16 * 1024 * 1024, chunk_bytes: 256 * 1024 * 1024, batch_bytes: 64 * 1024 * 1024 };
}

const MANIFEST: &str = "manifest.json";

/// Which folder of the repository holds the chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Cairn,
    Engram,
}

impl Layout {
    pub fn folder(self) -> &'static str {
        match self {
            Layout::Cairn => ".cairn",
            Layout::Engram => ".engram",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChunkEntry {
    pub id: String,
    #[serde(default)]
    pub created_by: String,
    #[serde(default)]
    pub created_at: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub sessions: usize,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub memories: usize,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub prompts: usize,
}

/// A chunk's JSON. engram writes the three arrays (and `mutations` in its cloud mode); cairn
/// writes the arrays for engram and the mutations (with deletes and relations) for itself.
#[derive(Debug, Default, Serialize, Deserialize)]
struct ChunkData {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
    #[serde(default)]
    sessions: Vec<Value>,
    #[serde(default)]
    observations: Vec<Value>,
    #[serde(default)]
    prompts: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    relations: Vec<Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    mutations: Vec<Mutation>,
}

/// What `cairn sync` exports, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportRequest {
    /// The repository (the chunk folder goes inside it).
    pub directory: PathBuf,
    /// The project; none: the directory's project (unless `all`).
    #[serde(default)]
    pub project: Option<String>,
    /// Every enrolled project and every project with memories.
    #[serde(default)]
    pub all: bool,
    /// Write engram's `.engram/` instead of `.cairn/`.
    #[serde(default)]
    pub engram_layout: bool,
}

/// What `cairn sync` did for one project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProjectExport {
    pub project: String,
    /// Enrolled by this run (its first export carries everything it holds).
    pub enrolled_now: bool,
    /// Journal entries written (the latest version of each row).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub mutations: usize,
    pub chunks: Vec<ChunkEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExportSummary {
    /// `.cairn` or `.engram`, relative to the repository.
    pub folder: String,
    pub projects: Vec<ProjectExport>,
}

/// A chunk that was not applied, and why (the rest were).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RefusedChunk {
    pub folder: String,
    pub chunk_id: String,
    /// A stable error code (`sync_chunk_corrupt`, `sync_chunk_missing`, ...).
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ImportSummary {
    /// The folders read (`.cairn`, `.engram`).
    pub folders: Vec<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub chunks_applied: usize,
    /// Chunks applied before (or written here): skipped.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub chunks_already_applied: usize,
    pub refused: Vec<RefusedChunk>,
    /// Chunks left for the next run because the time limit was reached.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub chunks_left: usize,
    pub applied: ApplyReport,
}

/// One chunk folder of the repository, as `cairn sync --status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FolderStatus {
    pub folder: String,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub manifest_chunks: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub applied_chunks: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub pending_import: usize,
    /// Why the manifest could not be read, when it could not.
    pub error: Option<String>,
}

/// The key applied chunks and journal sources are recorded under for a chunk folder.
pub fn folder_key(dir: &Path, layout: Layout) -> String {
    let root = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
    format!("git:{}", root.join(layout.folder()).display())
}

/// Folders being imported in this process: two sessions starting at once import once.
static IMPORTING: LazyLock<Mutex<HashSet<PathBuf>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

struct ImportGuard(PathBuf);

impl ImportGuard {
    fn take(dir: &Path) -> Result<ImportGuard> {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.to_owned());
        let mut held = IMPORTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !held.insert(key.clone()) {
            return Err(CairnError::new(ErrorCode::SyncBusy, "an import of this repository is already running")
                .with_hint("it applies the same chunks; run `cairn sync --status` when it is done"));
        }
        Ok(ImportGuard(key))
    }
}

impl Drop for ImportGuard {
    fn drop(&mut self) {
        IMPORTING.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.0);
    }
}

impl Store {
    /// `cairn sync`: the projects named (or the directory's), enrolled and exported.
    pub fn sync_export_request(&mut self, req: &ExportRequest) -> Result<ExportSummary> {
        let projects = if req.all {
            let mut all = self.sync_projects()?;
            all.extend(self.sync_known_projects()?);
            all.sort();
            all.dedup();
            all
        } else if let Some(project) = req.project.as_deref().filter(|p| !p.trim().is_empty()) {
            vec![project.to_owned()]
        } else {
            vec![crate::project::detect_project(&req.directory)?.project]
        };
        let layout = if req.engram_layout { Layout::Engram } else { Layout::Cairn };
        self.sync_export(&req.directory, &projects, layout)
    }

    /// Export the pending journal of `projects` (enrolling them first) as chunks under `dir`.
    pub fn sync_export(&mut self, dir: &Path, projects: &[String], layout: Layout) -> Result<ExportSummary> {
        let source = folder_key(dir, layout);
        let mut summary = ExportSummary { folder: layout.folder().to_owned(), projects: Vec::new() };
        for project in projects {
            let enrolment = self.sync_enrol(project)?;
            let target = format!("{source}#{}", enrolment.project);
            let mut done = ProjectExport {
                project: enrolment.project.clone(),
                enrolled_now: enrolment.first_time,
                mutations: 0,
                chunks: Vec::new(),
            };
            loop {
                let pending = self.sync_pending(&target, Some(&enrolment.project), CHUNK_MAX_MUTATIONS)?;
                let Some(last_seq) = pending.last().map(|m| m.seq) else { break };
                let mutations = latest_per_row(pending);
                done.mutations += mutations.len();
                let written = write_chunk(dir, layout, mutations, &self.now())?;
                let chunk_id = written.id;
                if let Some(entry) = written.entry {
                    done.chunks.push(entry);
                }
                // The chunk is on disk and in the manifest: record it as applied here (it
                // holds this store's own rows) and move the mark, together.
                let now = self.now();
                self.write(|tx| sync_chunks::record_chunk(tx, &source, &chunk_id, &now))?;
                self.sync_ack(&target, last_seq)?;
            }
            summary.projects.push(done);
        }
        Ok(summary)
    }

    /// Apply every chunk of `dir`'s `.cairn/` and `.engram/` not applied yet, one transaction
    /// per chunk. A chunk that cannot be read or applied is listed in `refused` and the rest are
    /// applied. With a time limit, stops between chunks once it is reached (`chunks_left`).
    pub fn sync_import(&mut self, dir: &Path, time_limit: Option<Duration>) -> Result<ImportSummary> {
        import_repository(dir, time_limit, self)
    }

    /// Apply chunks an import read, one transaction each, and record the errors it met.
    pub fn sync_apply_batch(&mut self, batch: ImportBatch) -> Result<ImportSummary> {
        let mut summary = ImportSummary::default();
        for chunk in batch.chunks {
            // Applied since the manifest was read (by another process importing the same folder).
            if self.sync_chunk_applied(&chunk.source, &chunk.id)? {
                summary.chunks_already_applied += 1;
                continue;
            }
            match self.import_chunk(&chunk) {
                Ok(report) => {
                    summary.chunks_applied += 1;
                    add(&mut summary.applied, &report);
                }
                Err(e) => {
                    summary.refused.push(refusal(chunk.layout, &chunk.id, &e));
                    self.sync_record_error(&chunk.source, &format!("chunk {}: {}", chunk.id, e.message))?;
                }
            }
        }
        for (source, message) in batch.errors {
            self.sync_record_error(&source, &message)?;
        }
        Ok(summary)
    }

    fn import_chunk(&mut self, chunk: &ReadChunk) -> Result<ApplyReport> {
        let now = self.now();
        self.apply_mutations_then(&chunk.source, &chunk.mutations, |tx| {
            sync_chunks::record_chunk(tx, &chunk.source, &chunk.id, &now)
        })
    }

    /// The folder's manifest against what was applied here; `None` without a manifest.
    pub(super) fn folder_status(&self, dir: &Path, layout: Layout) -> Result<Option<FolderStatus>> {
        let source = folder_key(dir, layout);
        let applied = self.sync_applied_chunks(&source)?;
        let last_error = self.sync_target_last_error(&source);
        let folder = layout.folder().to_owned();
        Ok(match open_manifest(dir, layout, ReadLimits::DEFAULT) {
            Ok(None) => None,
            Ok(Some((_, manifest))) => {
                let chunks = manifest.entries().chunks;
                let applied_here = chunks.iter().filter(|c| applied.contains(&c.id)).count();
                Some(FolderStatus {
                    folder,
                    manifest_chunks: chunks.len(),
                    applied_chunks: applied_here,
                    pending_import: chunks.len() - applied_here,
                    error: last_error,
                })
            }
            Err(e) => Some(FolderStatus {
                folder,
                manifest_chunks: 0,
                applied_chunks: applied.len(),
                pending_import: 0,
                error: Some(e.message),
            }),
        })
    }
}

fn add(total: &mut ApplyReport, one: &ApplyReport) {
    total.applied += one.applied;
    total.skipped += one.skipped;
    total.conflicts += one.conflicts;
    total.deferred += one.deferred;
    total.deferred_applied += one.deferred_applied;
}

fn refusal(layout: Layout, chunk_id: &str, e: &CairnError) -> RefusedChunk {
    RefusedChunk {
        folder: layout.folder().to_owned(),
        chunk_id: chunk_id.to_owned(),
        code: e.code.as_str().to_owned(),
        message: e.message.clone(),
    }
}

/// Only the latest journal entry of each row travels: the others are older versions that
/// the receiver would skip anyway.
fn latest_per_row(pending: Vec<Mutation>) -> Vec<Mutation> {
    let mut last: HashMap<(String, String), usize> = HashMap::new();
    for (i, m) in pending.iter().enumerate() {
        last.insert((m.entity.clone(), m.entity_key.clone()), i);
    }
    pending
        .into_iter()
        .enumerate()
        .filter(|(i, m)| last[&(m.entity.clone(), m.entity_key.clone())] == *i)
        .map(|(_, m)| m)
        .collect()
}

/// A chunk written, or found in the manifest already (the same content): `entry` is `None`.
struct WrittenChunk {
    id: String,
    entry: Option<ChunkEntry>,
}

/// Build, write and list one chunk of `mutations` (already one per row, in journal order) in
/// `repo`'s chunk folder.
fn write_chunk(repo: &Path, layout: Layout, mutations: Vec<Mutation>, now: &str) -> Result<WrittenChunk> {
    let mut chunk = ChunkData { version: Some(FORMAT_VERSION), ..ChunkData::default() };
    for m in &mutations {
        let hard = m.payload.get("hard_delete").and_then(Value::as_bool).unwrap_or(false);
        match m.entity.as_str() {
            "session" => chunk.sessions.push(m.payload.clone()),
            "observation" if !hard => chunk.observations.push(m.payload.clone()),
            "prompt" => chunk.prompts.push(m.payload.clone()),
            "relation" => chunk.relations.push(m.payload.clone()),
            _ => {}
        }
    }
    let counts = (chunk.sessions.len(), chunk.observations.len(), chunk.prompts.len());
    chunk.mutations = mutations.into_iter().map(|m| Mutation { seq: 0, ..m }).collect();
    let json = serde_json::to_vec(&chunk).map_err(|e| CairnError::internal(format!("chunk JSON: {e}")))?;
    let id = chunk_id(&json);
    // Made when missing; a link in its place (or at its manifest) is refused, not written through.
    let folder = Folder::create(repo, layout.folder())?;
    let mut manifest = ManifestFile::read(&folder, ReadLimits::DEFAULT)?.unwrap_or_default();
    if manifest.lists(&id) {
        return Ok(WrittenChunk { id, entry: None });
    }
    let chunks = folder.create_subfolder("chunks")?;
    let name = format!("{id}.jsonl.gz");
    let path = chunks.path().join(&name);
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&json).map_err(|e| io_error(&path, &e))?;
    let bytes = gz.finish().map_err(|e| io_error(&path, &e))?;
    chunks.write_atomically(&name, &bytes)?;
    let entry = ChunkEntry {
        id: id.clone(),
        created_by: super::created_by(),
        created_at: rfc3339_seconds(now),
        sessions: counts.0,
        memories: counts.1,
        prompts: counts.2,
    };
    manifest.chunks.push(serde_json::to_value(&entry).map_err(|e| CairnError::internal(e.to_string()))?);
    folder.write_atomically(MANIFEST, &manifest.to_json()?)?;
    Ok(WrittenChunk { id, entry: Some(entry) })
}

/// First 8 hex digits of the sha256 of the uncompressed chunk JSON.
fn chunk_id(json: &[u8]) -> String {
    hex::encode(Sha256::digest(json))[..8].to_owned()
}

/// engram writes `created_at` as RFC 3339 in seconds.
fn rfc3339_seconds(ts: &str) -> String {
    match ts.split_once('.') {
        Some((seconds, _)) => format!("{seconds}Z"),
        None => ts.to_owned(),
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> CairnError {
    CairnError::internal(format!("{}: {e}", path.display()))
}

/// A `manifest.json` as read: its entries kept as written (an export appends its own and writes
/// the rest back untouched, malformed ones included: they are someone else's to fix).
#[derive(Debug, Default)]
struct ManifestFile {
    version: Option<Value>,
    chunks: Vec<Value>,
    /// Other top-level keys, written back as they were.
    rest: serde_json::Map<String, Value>,
}

/// A manifest's entries as an import sees them.
#[derive(Debug, Default)]
struct ManifestEntries {
    /// Each chunk once, in the manifest's order.
    chunks: Vec<ChunkEntry>,
    /// Entries that name no chunk: their position (from 1) and why.
    malformed: Vec<(usize, String)>,
}

impl ManifestFile {
    /// The folder's manifest; `None` when there is none.
    fn read(folder: &Folder, limits: ReadLimits) -> Result<Option<ManifestFile>> {
        let Some(bytes) = folder.read_file(MANIFEST, limits.manifest_bytes)? else { return Ok(None) };
        Self::parse(&folder.path().join(MANIFEST), &bytes).map(Some)
    }

    /// A manifest is refused whole only when it is not a JSON object with a list of chunks, or
    /// is from a newer format; a bad entry is refused alone ([`ManifestFile::entries`]).
    fn parse(path: &Path, bytes: &[u8]) -> Result<ManifestFile> {
        let invalid =
            |why: String| CairnError::new(ErrorCode::SyncManifestInvalid, format!("{} {why}", path.display()));
        let value: Value = serde_json::from_slice(bytes).map_err(|e| invalid(format!("is not JSON: {e}")))?;
        let Value::Object(mut rest) = value else { return Err(invalid("is not a JSON object".to_owned())) };
        let version = rest.remove("version");
        match version.as_ref().map(Value::as_i64) {
            None | Some(Some(..=FORMAT_VERSION)) => {}
            Some(Some(newer)) => {
                return Err(CairnError::new(
                    ErrorCode::SyncFormatTooNew,
                    format!("{} is format version {newer}; this cairn reads version {FORMAT_VERSION}", path.display()),
                )
                .with_hint("upgrade cairn to import these chunks"));
            }
            Some(None) => return Err(invalid("has a version that is not a whole number".to_owned())),
        }
        let chunks = match rest.remove("chunks") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(chunks)) => chunks,
            Some(_) => return Err(invalid("has a \"chunks\" that is not a list".to_owned())),
        };
        Ok(ManifestFile { version, chunks, rest })
    }

    fn lists(&self, id: &str) -> bool {
        self.chunks.iter().any(|c| c.get("id").and_then(Value::as_str) == Some(id))
    }

    /// The chunks listed, each once (a manifest naming one twice, or 5,000 times, applies it
    /// once), and the entries that name none.
    fn entries(&self) -> ManifestEntries {
        let mut entries = ManifestEntries::default();
        let mut seen = HashSet::new();
        for (i, value) in self.chunks.iter().enumerate() {
            match parse_entry(value) {
                Ok(entry) => {
                    if seen.insert(entry.id.clone()) {
                        entries.chunks.push(entry);
                    }
                }
                Err(why) => entries.malformed.push((i + 1, why)),
            }
        }
        entries
    }

    /// Pretty JSON, the version first (as engram writes it).
    fn to_json(&self) -> Result<Vec<u8>> {
        #[derive(Serialize)]
        struct Out<'a> {
            version: &'a Value,
            chunks: &'a [Value],
            #[serde(flatten)]
            rest: &'a serde_json::Map<String, Value>,
        }
        let version = self.version.clone().unwrap_or(Value::from(FORMAT_VERSION));
        let out = Out { version: &version, chunks: &self.chunks, rest: &self.rest };
        let mut text = serde_json::to_vec_pretty(&out).map_err(|e| CairnError::internal(e.to_string()))?;
        text.push(b'\n');
        Ok(text)
    }
}

/// One manifest entry, or why it names no chunk.
fn parse_entry(value: &Value) -> std::result::Result<ChunkEntry, String> {
    let entry: ChunkEntry = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    // The id names a file: anything but a short hex name could leave the folder.
    let id = &entry.id;
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("chunk id {id:?} is not a hex digest"));
    }
    Ok(entry)
}

/// The repository's chunk folder of `layout` and its manifest; `None` when either is missing.
fn open_manifest(repo: &Path, layout: Layout, limits: ReadLimits) -> Result<Option<(Folder, ManifestFile)>> {
    let Some(folder) = Folder::open(repo, layout.folder())? else { return Ok(None) };
    Ok(ManifestFile::read(&folder, limits)?.map(|manifest| (folder, manifest)))
}

/// Read, check and convert one chunk into mutations, in the order they apply; with the size of
/// its JSON.
fn read_chunk(folder: &Folder, id: &str, limits: ReadLimits) -> Result<(Vec<Mutation>, u64)> {
    let name = format!("{id}.jsonl.gz");
    let missing = || {
        CairnError::new(
            ErrorCode::SyncChunkMissing,
            format!(
                "the manifest lists chunk {id}, but {} is not there",
                folder.path().join("chunks").join(&name).display()
            ),
        )
        .with_hint("pull the commit that added it (git pull), then import again")
    };
    let chunks = folder.subfolder("chunks")?.ok_or_else(missing)?;
    let file = chunks.open_file(&name, limits.chunk_bytes)?.ok_or_else(missing)?;
    let cap = limits.chunk_bytes;
    let mut json = Vec::new();
    // One byte past the cap tells a chunk that is too large from one that fits.
    GzDecoder::new(file.take(cap.saturating_add(1))).take(cap.saturating_add(1)).read_to_end(&mut json).map_err(
        |e| CairnError::new(ErrorCode::SyncChunkCorrupt, format!("chunk {id} is not a complete gzip file: {e}")),
    )?;
    let size = json.len() as u64;
    if size > cap {
        return Err(CairnError::new(
            ErrorCode::SyncFileTooLarge,
            format!(
                "chunk {id} ({}) inflates past {cap} bytes; sync reads at most that",
                chunks.path().join(&name).display()
            ),
        )
        .with_hint("it is not a chunk cairn or engram wrote: remove it from the manifest and the folder"));
    }
    if chunk_id(&json)[..id.len().min(8)] != id[..id.len().min(8)] {
        return Err(CairnError::new(
            ErrorCode::SyncChunkHashMismatch,
            format!("chunk {id}'s content hashes to {}, not to its name", chunk_id(&json)),
        ));
    }
    let value: Value = serde_json::from_slice(&json)
        .map_err(|e| CairnError::new(ErrorCode::SyncChunkCorrupt, format!("chunk {id} is not JSON: {e}")))?;
    if let Some(version) = value.get("version").and_then(Value::as_i64).filter(|v| *v > FORMAT_VERSION) {
        return Err(CairnError::new(
            ErrorCode::SyncFormatTooNew,
            format!("chunk {id} is format version {version}; this cairn reads version {FORMAT_VERSION}"),
        )
        .with_hint("upgrade cairn to import it"));
    }
    let chunk: ChunkData = serde_json::from_value(value)
        .map_err(|e| CairnError::new(ErrorCode::SyncMutationInvalid, format!("chunk {id} has the wrong shape: {e}")))?;
    Ok((chunk_mutations(chunk), size))
}

/// Where an import applies the chunks it read: the store itself, or (in the daemon) the
/// store's writer, which is asked only once the files of a batch are read and checked.
pub trait ImportTarget {
    /// The chunks of a folder (its [`folder_key`]) applied already.
    fn applied_chunks(&mut self, source: &str) -> Result<HashSet<String>>;
    /// Apply a batch, in one write ([`Store::sync_apply_batch`]).
    fn apply_batch(&mut self, batch: ImportBatch) -> Result<ImportSummary>;
}

impl ImportTarget for Store {
    fn applied_chunks(&mut self, source: &str) -> Result<HashSet<String>> {
        self.sync_applied_chunks(source)
    }

    fn apply_batch(&mut self, batch: ImportBatch) -> Result<ImportSummary> {
        self.sync_apply_batch(batch)
    }
}

/// Chunks read and checked, and the errors met reading them (recorded on their folder).
#[derive(Debug, Default)]
pub struct ImportBatch {
    chunks: Vec<ReadChunk>,
    errors: Vec<(String, String)>,
}

#[derive(Debug)]
struct ReadChunk {
    layout: Layout,
    source: String,
    id: String,
    mutations: Vec<Mutation>,
}

impl ImportSummary {
    fn absorb(&mut self, part: ImportSummary) {
        self.chunks_applied += part.chunks_applied;
        self.chunks_already_applied += part.chunks_already_applied;
        self.refused.extend(part.refused);
        self.chunks_left += part.chunks_left;
        add(&mut self.applied, &part.applied);
    }
}

/// A folder of the repository being imported.
struct ImportFolder {
    layout: Layout,
    source: String,
    folder: Folder,
}

/// Apply every chunk of `dir`'s `.cairn/` and `.engram/` not applied yet through `target`:
/// each chunk is read and checked before any is applied, and the chunks read are applied in
/// batches of bounded size, one write each. A chunk (or manifest entry) that cannot be read or
/// applied is listed in `refused`, the rest are applied. With a time limit, stops reading
/// between chunks once it is reached (`chunks_left`).
pub fn import_repository(
    dir: &Path,
    time_limit: Option<Duration>,
    target: &mut dyn ImportTarget,
) -> Result<ImportSummary> {
    import_with_limits(dir, time_limit, target, ReadLimits::DEFAULT)
}

pub(crate) fn import_with_limits(
    dir: &Path,
    time_limit: Option<Duration>,
    target: &mut dyn ImportTarget,
    limits: ReadLimits,
) -> Result<ImportSummary> {
    let _guard = ImportGuard::take(dir)?;
    let deadline = time_limit.map(|limit| Instant::now() + limit);
    let mut summary = ImportSummary::default();
    let mut batch = ImportBatch::default();
    let mut folders = Vec::new();
    let mut pending: Vec<(usize, String)> = Vec::new();
    for layout in [Layout::Cairn, Layout::Engram] {
        let source = folder_key(dir, layout);
        let (folder, manifest) = match open_manifest(dir, layout, limits) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(e) => {
                summary.folders.push(layout.folder().to_owned());
                refuse(&mut summary, &mut batch, layout, &source, MANIFEST, &e);
                continue;
            }
        };
        summary.folders.push(layout.folder().to_owned());
        let entries = manifest.entries();
        for (position, why) in &entries.malformed {
            let e = CairnError::new(
                ErrorCode::SyncManifestEntryInvalid,
                format!(
                    "{} entry {position} of {}: {why}",
                    folder.path().join(MANIFEST).display(),
                    manifest.chunks.len()
                ),
            );
            refuse(&mut summary, &mut batch, layout, &source, &format!("{MANIFEST}#{position}"), &e);
        }
        let applied = target.applied_chunks(&source)?;
        for entry in entries.chunks {
            if applied.contains(&entry.id) {
                summary.chunks_already_applied += 1;
            } else {
                pending.push((folders.len(), entry.id));
            }
        }
        folders.push(ImportFolder { layout, source, folder });
    }
    let mut batch_bytes = 0;
    for (i, (index, id)) in pending.iter().enumerate() {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            summary.chunks_left += pending.len() - i;
            break;
        }
        let ImportFolder { layout, source, folder } = &folders[*index];
        match read_chunk(folder, id, limits) {
            Ok((mutations, size)) => {
                batch.chunks.push(ReadChunk { layout: *layout, source: source.clone(), id: id.clone(), mutations });
                batch_bytes += size;
            }
            Err(e) => refuse(&mut summary, &mut batch, *layout, source, id, &e),
        }
        if batch_bytes >= limits.batch_bytes {
            summary.absorb(target.apply_batch(std::mem::take(&mut batch))?);
            batch_bytes = 0;
        }
    }
    if !batch.chunks.is_empty() || !batch.errors.is_empty() {
        summary.absorb(target.apply_batch(batch)?);
    }
    Ok(summary)
}

/// A chunk (or the manifest, or one of its entries) not applied: listed, and recorded on its
/// folder with the batch.
fn refuse(
    summary: &mut ImportSummary,
    batch: &mut ImportBatch,
    layout: Layout,
    source: &str,
    what: &str,
    e: &CairnError,
) {
    summary.refused.push(refusal(layout, what, e));
    let message = if what == MANIFEST { e.message.clone() } else { format!("chunk {what}: {}", e.message) };
    batch.errors.push((source.to_owned(), message));
}

/// The chunk's own mutations when it has them; else mutations made from its arrays (engram's
/// local chunks): sessions first, then memories (a `deleted_at` is a delete), prompts and
/// relations.
fn chunk_mutations(chunk: ChunkData) -> Vec<Mutation> {
    if !chunk.mutations.is_empty() {
        let mut mutations = chunk.mutations;
        // Sessions first: a memory needs its session (a stub is made otherwise).
        mutations.sort_by_key(|m| u8::from(m.entity != "session"));
        return mutations;
    }
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut out = Vec::new();
    for s in chunk.sessions {
        out.push(Mutation {
            seq: 0,
            project: text(&s, "project"),
            entity: "session".into(),
            entity_key: text(&s, "id"),
            op: "upsert".into(),
            payload: s,
        });
    }
    for o in chunk.observations {
        let deleted = o.get("deleted_at").is_some_and(|d| d.as_str().is_some_and(|d| !d.is_empty()));
        out.push(Mutation {
            seq: 0,
            project: text(&o, "project"),
            entity: "observation".into(),
            entity_key: text(&o, "sync_id"),
            op: if deleted { "delete" } else { "upsert" }.into(),
            payload: o,
        });
    }
    for p in chunk.prompts {
        out.push(Mutation {
            seq: 0,
            project: text(&p, "project"),
            entity: "prompt".into(),
            entity_key: text(&p, "sync_id"),
            op: "upsert".into(),
            payload: p,
        });
    }
    for r in chunk.relations {
        out.push(Mutation {
            seq: 0,
            project: text(&r, "project"),
            entity: "relation".into(),
            entity_key: text(&r, "sync_id"),
            op: "upsert".into(),
            payload: r,
        });
    }
    out
}
