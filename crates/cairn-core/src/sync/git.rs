//! Git sync: the journal written as content-addressed chunks under `.cairn/` (or engram's
//! `.engram/`) in a repository, and chunks committed by others applied back.
//!
//! Layout (engram's, so each reads the other's):
//! `manifest.json` `{version: 1, chunks: [{id, created_by, created_at, sessions, memories,
//! prompts}]}` and `chunks/<id>.jsonl.gz`, the gzip of ONE JSON object `{sessions,
//! observations, prompts, relations?, mutations?}` whose sha256 starts with `id`.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use rusqlite::params;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{ApplyReport, Mutation};
use crate::error::{CairnError, ErrorCode, Result};
use crate::store::Store;

/// The manifest and chunk format this cairn writes and reads.
pub const FORMAT_VERSION: i64 = 1;
/// Mutations per chunk: a first sync of a large store becomes several chunks of bounded size.
pub const CHUNK_MAX_MUTATIONS: usize = 5_000;
/// A chunk inflating past this is refused (a gzip bomb, or not a chunk).
const CHUNK_MAX_BYTES: u64 = 256 * 1024 * 1024;

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
pub struct Manifest {
    pub version: i64,
    #[serde(default)]
    pub chunks: Vec<ChunkEntry>,
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

/// One export target (a chunk folder and project, or a hub).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TargetStatus {
    pub target_key: String,
    pub last_exported_seq: i64,
    /// Journal entries not yet sent there.
    pub pending: i64,
    pub last_run_at: Option<String>,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SyncStatus {
    /// Whether any project syncs.
    pub enabled: bool,
    pub projects: Vec<String>,
    pub node_id: String,
    /// The journal's last seq.
    pub journal_seq: i64,
    pub targets: Vec<TargetStatus>,
    /// The repository's chunk folders, when a directory was given.
    pub folders: Vec<FolderStatus>,
    /// Relations waiting for their memories, and those given up.
    pub deferred_pending: i64,
    pub deferred_dead: i64,
    /// The hub this data dir syncs with (`cairn remote`), when one is set.
    pub remote: Option<super::remote::RemoteStatus>,
    /// Why `[sync]` in config.toml could not be read, when it could not.
    pub remote_config_error: Option<String>,
}

/// Who wrote a chunk: `$USER`, `$USERNAME`, the host name, else `unknown` (engram's rule).
pub fn created_by() -> String {
    ["USER", "USERNAME", "HOSTNAME"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
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
        let folder = dir.join(layout.folder());
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
                let written = write_chunk(&folder, mutations, &self.now())?;
                let chunk_id = written.id;
                if let Some(entry) = written.entry {
                    done.chunks.push(entry);
                }
                // The chunk is on disk and in the manifest: record it as applied here (it
                // holds this store's own rows) and move the mark, together.
                let now = self.now();
                self.write(|tx| {
                    tx.execute(
                        "INSERT OR IGNORE INTO sync_chunks (target_key, chunk_id, applied_at) VALUES (?1, ?2, ?3)",
                        params![source, chunk_id, now],
                    )?;
                    Ok(())
                })?;
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
        let _guard = ImportGuard::take(dir)?;
        let deadline = time_limit.map(|limit| Instant::now() + limit);
        let mut summary = ImportSummary::default();
        for layout in [Layout::Cairn, Layout::Engram] {
            let folder = dir.join(layout.folder());
            if !folder.join("manifest.json").exists() {
                continue;
            }
            summary.folders.push(layout.folder().to_owned());
            let source = folder_key(dir, layout);
            let manifest = match read_manifest(&folder) {
                Ok(m) => m,
                Err(e) => {
                    summary.refused.push(refusal(layout, "manifest.json", &e));
                    self.sync_record_error(&source, &e.message)?;
                    continue;
                }
            };
            let applied = self.applied_chunks(&source)?;
            for entry in &manifest.chunks {
                if applied.contains(&entry.id) {
                    summary.chunks_already_applied += 1;
                    continue;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    summary.chunks_left += 1;
                    continue;
                }
                match self.import_chunk(&folder, &source, entry) {
                    Ok(report) => {
                        summary.chunks_applied += 1;
                        add(&mut summary.applied, &report);
                    }
                    Err(e) => {
                        summary.refused.push(refusal(layout, &entry.id, &e));
                        self.sync_record_error(&source, &format!("chunk {}: {}", entry.id, e.message))?;
                    }
                }
            }
        }
        Ok(summary)
    }

    fn applied_chunks(&self, source: &str) -> Result<HashSet<String>> {
        let mut stmt = self.conn().prepare("SELECT chunk_id FROM sync_chunks WHERE target_key = ?1")?;
        let rows = stmt.query_map([source], |r| r.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn import_chunk(&mut self, folder: &Path, source: &str, entry: &ChunkEntry) -> Result<ApplyReport> {
        let mutations = read_chunk(folder, &entry.id)?;
        let now = self.now();
        let chunk_id = entry.id.clone();
        self.apply_mutations_then(source, &mutations, |tx| {
            tx.execute(
                "INSERT OR IGNORE INTO sync_chunks (target_key, chunk_id, applied_at) VALUES (?1, ?2, ?3)",
                params![source, chunk_id, now],
            )?;
            Ok(())
        })
    }

    /// Enrolled projects, export targets and their pending counts, and (with `dir`) the
    /// repository's chunk folders.
    pub fn sync_status(&self, dir: Option<&Path>) -> Result<SyncStatus> {
        let projects = self.sync_projects()?;
        let mut stmt = self.conn().prepare(
            "SELECT target_key, last_exported_seq, last_run_at, last_error FROM sync_targets ORDER BY target_key",
        )?;
        let rows: Vec<(String, i64, Option<String>, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut targets = Vec::with_capacity(rows.len());
        for (target_key, last_exported_seq, last_run_at, last_error) in rows {
            let project = target_key.split_once('#').map(|(_, p)| p.to_owned());
            let pending = self.sync_pending_count(&target_key, project.as_deref())?;
            targets.push(TargetStatus { target_key, last_exported_seq, pending, last_run_at, last_error });
        }
        let mut folders = Vec::new();
        if let Some(dir) = dir {
            for layout in [Layout::Cairn, Layout::Engram] {
                let folder = dir.join(layout.folder());
                if folder.join("manifest.json").exists() {
                    folders.push(self.folder_status(dir, layout)?);
                }
            }
        }
        let (remote, remote_config_error) = match self.data_dir().map(crate::settings::load_remote) {
            Some(Ok(Some(settings))) => (Some(self.remote_status(&settings)?), None),
            Some(Err(e)) => (None, Some(e.message)),
            _ => (None, None),
        };
        let deferred = |status: &str| -> Result<i64> {
            Ok(self.conn().query_row("SELECT count(*) FROM sync_deferred WHERE status = ?1", [status], |r| r.get(0))?)
        };
        Ok(SyncStatus {
            enabled: !projects.is_empty(),
            projects,
            node_id: self.sync_node_id()?,
            journal_seq: self.conn().query_row("SELECT coalesce(max(seq), 0) FROM sync_journal", [], |r| r.get(0))?,
            targets,
            folders,
            deferred_pending: deferred("pending")?,
            deferred_dead: deferred("dead")?,
            remote,
            remote_config_error,
        })
    }

    fn folder_status(&self, dir: &Path, layout: Layout) -> Result<FolderStatus> {
        let source = folder_key(dir, layout);
        let applied = self.applied_chunks(&source)?;
        let last_error: Option<String> = self
            .conn()
            .query_row("SELECT last_error FROM sync_targets WHERE target_key = ?1", [&source], |r| r.get(0))
            .unwrap_or(None);
        Ok(match read_manifest(&dir.join(layout.folder())) {
            Ok(manifest) => FolderStatus {
                folder: layout.folder().to_owned(),
                manifest_chunks: manifest.chunks.len(),
                applied_chunks: manifest.chunks.iter().filter(|c| applied.contains(&c.id)).count(),
                pending_import: manifest.chunks.iter().filter(|c| !applied.contains(&c.id)).count(),
                error: last_error,
            },
            Err(e) => FolderStatus {
                folder: layout.folder().to_owned(),
                manifest_chunks: 0,
                applied_chunks: applied.len(),
                pending_import: 0,
                error: Some(e.message),
            },
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

/// Build, write and list one chunk of `mutations` (already one per row, in journal order).
fn write_chunk(folder: &Path, mutations: Vec<Mutation>, now: &str) -> Result<WrittenChunk> {
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
    let mut manifest = read_manifest(folder)?;
    if manifest.chunks.iter().any(|c| c.id == id) {
        return Ok(WrittenChunk { id, entry: None });
    }
    let chunks = folder.join("chunks");
    std::fs::create_dir_all(&chunks).map_err(|e| io_error(&chunks, &e))?;
    let path = chunks.join(format!("{id}.jsonl.gz"));
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(&json).map_err(|e| io_error(&path, &e))?;
    let bytes = gz.finish().map_err(|e| io_error(&path, &e))?;
    write_atomically(&path, &bytes)?;
    let entry = ChunkEntry {
        id: id.clone(),
        created_by: created_by(),
        created_at: rfc3339_seconds(now),
        sessions: counts.0,
        memories: counts.1,
        prompts: counts.2,
    };
    manifest.chunks.push(entry.clone());
    let mut text = serde_json::to_vec_pretty(&manifest).map_err(|e| CairnError::internal(e.to_string()))?;
    text.push(b'\n');
    write_atomically(&folder.join("manifest.json"), &text)?;
    Ok(WrittenChunk { id, entry: Some(entry) })
}

/// First 8 hex digits of the sha256 of the uncompressed chunk JSON.
fn chunk_id(json: &[u8]) -> String {
    cairn_embed::hex(&Sha256::digest(json))[..8].to_owned()
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

/// Write through a temporary file and a rename: a reader (or a crash) never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| io_error(&tmp, &e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_error(path, &e))
}

/// The folder's manifest; none yet is an empty one.
pub fn read_manifest(folder: &Path) -> Result<Manifest> {
    let path = folder.join("manifest.json");
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Manifest { version: FORMAT_VERSION, chunks: Vec::new() });
        }
        Err(e) => return Err(io_error(&path, &e)),
    };
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| CairnError::new(ErrorCode::SyncManifestInvalid, format!("{} is not JSON: {e}", path.display())))?;
    let version = value.get("version").and_then(Value::as_i64).unwrap_or(FORMAT_VERSION);
    if version > FORMAT_VERSION {
        return Err(CairnError::new(
            ErrorCode::SyncFormatTooNew,
            format!("{} is format version {version}; this cairn reads version {FORMAT_VERSION}", path.display()),
        )
        .with_hint("upgrade cairn to import these chunks"));
    }
    let manifest: Manifest = serde_json::from_value(value).map_err(|e| {
        CairnError::new(ErrorCode::SyncManifestInvalid, format!("{} has the wrong shape: {e}", path.display()))
    })?;
    Ok(manifest)
}

/// Read, check and convert one chunk into mutations, in the order they apply.
fn read_chunk(folder: &Path, id: &str) -> Result<Vec<Mutation>> {
    // The id names a file: anything but a short hex name could leave the folder.
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CairnError::new(ErrorCode::SyncManifestInvalid, format!("chunk id {id:?} is not a hex digest")));
    }
    let path = folder.join("chunks").join(format!("{id}.jsonl.gz"));
    let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => CairnError::new(
            ErrorCode::SyncChunkMissing,
            format!("the manifest lists chunk {id}, but {} is not there", path.display()),
        )
        .with_hint("pull the commit that added it (git pull), then import again"),
        _ => io_error(&path, &e),
    })?;
    let mut json = Vec::new();
    GzDecoder::new(file).take(CHUNK_MAX_BYTES).read_to_end(&mut json).map_err(|e| {
        CairnError::new(ErrorCode::SyncChunkCorrupt, format!("chunk {id} is not a complete gzip file: {e}"))
    })?;
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
    Ok(chunk_mutations(chunk))
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
