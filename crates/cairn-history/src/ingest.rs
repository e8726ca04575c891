//! The ingest driver: every source of every host read in chunks, each chunk applied in its own
//! transaction together with the source's cursor (compare-and-swap: when another ingester moved
//! the cursor first, the chunk is dropped and the source re-read from the new cursor).
//!
//! `scan` walks everything (the daemon's periodic catch-up and the first backfill); `poke` reads
//! one file or one OpenCode session right now (a hook or the plugin says something changed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::model::{Cursor, HistoryHost, IngestBatch};
pub use super::store::SourceRef;
use super::store::{ApplyOutcome, HistoryDb};
use super::{claude, codex, gemini, opencode};
use cairn_base::error::{CairnError, Result};

/// Bytes of JSONL per chunk (one transaction each).
pub const CHUNK_BYTES: usize = 4 * 1024 * 1024;
/// OpenCode rows per table per chunk.
pub const CHUNK_ROWS: usize = 5_000;
/// Transcript chunks a scan's reader thread may have read and parsed ahead of the writer.
const READ_AHEAD: usize = 4;
/// A chunk whose cursor moved under it is retried this many times before the source is left
/// for the next scan (two ingesters racing forever would otherwise spin).
const MAX_STALE_RETRIES: u32 = 5;

/// Whether [`HistorySink::apply`] stored the chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkOutcome {
    Applied,
    /// The stored cursor was not the expected one: nothing written.
    Stale,
}

/// What the driver needs of the history store (`HistoryDb` implements it; tests use a map).
pub trait HistorySink {
    fn cursor(&self, source_key: &str) -> Result<Option<Cursor>>;
    fn apply(
        &mut self,
        source: &SourceRef,
        expected: Option<&Cursor>,
        batch: &IngestBatch,
        next: &Cursor,
    ) -> Result<SinkOutcome>;
    fn record_error(&mut self, source: &SourceRef, code: &str, message: &str) -> Result<()>;
    /// A scan starts: the sink may work in the background until [`HistorySink::end_bulk`].
    fn begin_bulk(&mut self) -> Result<()> {
        Ok(())
    }
    /// The scan is over: everything it applied is stored and searchable when this returns.
    fn end_bulk(&mut self) -> Result<()> {
        Ok(())
    }
}

impl HistorySink for HistoryDb {
    fn cursor(&self, source_key: &str) -> Result<Option<Cursor>> {
        HistoryDb::cursor(self, source_key)
    }

    fn apply(
        &mut self,
        source: &SourceRef,
        expected: Option<&Cursor>,
        batch: &IngestBatch,
        next: &Cursor,
    ) -> Result<SinkOutcome> {
        Ok(match HistoryDb::apply(self, source, expected, batch, next)? {
            ApplyOutcome::Applied(_) => SinkOutcome::Applied,
            ApplyOutcome::Stale => SinkOutcome::Stale,
        })
    }

    fn record_error(&mut self, source: &SourceRef, code: &str, message: &str) -> Result<()> {
        HistoryDb::record_error(self, source, code, message)
    }

    fn begin_bulk(&mut self) -> Result<()> {
        HistoryDb::begin_bulk(self)
    }

    fn end_bulk(&mut self) -> Result<()> {
        HistoryDb::end_bulk(self)
    }
}

/// Progress of a scan, reported after every chunk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// The source being read.
    pub source: String,
    pub sources_done: u64,
    pub sources_total: u64,
    /// Bytes of transcripts read so far and in all (OpenCode databases count as their size
    /// once done).
    pub bytes_done: u64,
    pub bytes_total: u64,
}

/// What a scan or poke did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ScanReport {
    /// Sources looked at.
    pub sources: u64,
    pub sessions: u64,
    pub messages: u64,
    pub parts: u64,
    /// Bytes of transcripts read.
    pub bytes: u64,
    /// Lines or rows skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Sources that failed this time.
    pub errors: Vec<SourceError>,
}

/// A source a scan could not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SourceError {
    pub source: String,
    /// An error code: `history_source_locked`, `history_source_unsupported`, `history_source_unreadable`.
    pub code: String,
}

impl ScanReport {
    fn add_batch(&mut self, batch: &IngestBatch) {
        self.sessions += batch.sessions.len() as u64;
        self.messages += batch.messages.len() as u64;
        self.parts += batch.parts.len() as u64;
        for (reason, n) in &batch.skipped {
            *self.skipped.entry(reason.clone()).or_default() += n;
        }
    }

    fn merge(&mut self, other: ScanReport) {
        self.sources += other.sources;
        self.sessions += other.sessions;
        self.messages += other.messages;
        self.parts += other.parts;
        self.bytes += other.bytes;
        for (reason, n) in other.skipped {
            *self.skipped.entry(reason).or_default() += n;
        }
        self.errors.extend(other.errors);
    }
}

/// What to read now. All empty: a full scan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PokeRequest {
    #[serde(default)]
    pub host: Option<HistoryHost>,
    /// A transcript file (Claude Code) or a database (OpenCode). No NUL: no file's path holds
    /// one, and every write refuses it (`nul_character`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, pattern = r"^[^\x00]*$"))]
    pub path: Option<PathBuf>,
    #[serde(default, alias = "sessionId")]
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[^\x00]*$"))]
    pub session_id: Option<String>,
}

/// The process environment, read in one place (settings' shape: a function of the name).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Read every source of every host. Never fails as a whole for one bad source: its error is
/// recorded on the source and listed in the report.
pub fn scan(
    db: &mut dyn HistorySink,
    env: &dyn Fn(&str) -> Option<String>,
    progress: &mut dyn FnMut(Progress),
) -> Result<ScanReport> {
    scan_until(db, env, progress, &|| false)
}

/// [`scan`] that stops between two chunks once `stop()` says so (daemon shutdown).
pub fn scan_until(
    db: &mut dyn HistorySink,
    env: &dyn Fn(&str) -> Option<String>,
    progress: &mut dyn FnMut(Progress),
    stop: &dyn Fn() -> bool,
) -> Result<ScanReport> {
    db.begin_bulk()?;
    let scanned = scan_sources(db, env, progress, stop);
    let ended = db.end_bulk();
    let report = scanned?;
    ended?;
    Ok(report)
}

fn scan_sources(
    db: &mut dyn HistorySink,
    env: &dyn Fn(&str) -> Option<String>,
    progress: &mut dyn FnMut(Progress),
    stop: &dyn Fn() -> bool,
) -> Result<ScanReport> {
    let databases = opencode::locate(env);
    let transcripts = claude::locate(env).map(|p| claude::transcripts(&p)).unwrap_or_default();
    let others = other_transcripts(env);
    let mut tally = Progress {
        sources_total: (databases.len() + transcripts.len() + others.len()) as u64,
        bytes_total: databases
            .iter()
            .chain(&transcripts)
            .chain(others.iter().map(|(_, p)| p))
            .map(|p| file_size(p))
            .sum(),
        ..Progress::default()
    };
    let mut report = ScanReport::default();
    for path in &databases {
        if stop() {
            break;
        }
        tally.source = path.display().to_string();
        report.merge(ingest_database(db, path, stop)?);
        tally.sources_done += 1;
        tally.bytes_done += file_size(path);
        progress(tally.clone());
    }
    // The transcripts are read and parsed on a thread of their own, a few chunks ahead of this
    // one, which applies them: parsing was a quarter of the writer's time.
    let starts = transcripts
        .iter()
        .map(|path| {
            let source = SourceRef { key: path.display().to_string(), host: HistoryHost::ClaudeCode };
            Ok(if unchanged_since_cursor(db, &source, path)? { None } else { Some(db.cursor(&source.key)?) })
        })
        .collect::<Result<Vec<Option<Option<Cursor>>>>>()?;
    std::thread::scope(|scope| -> Result<()> {
        let (chunks, received) = std::sync::mpsc::sync_channel(READ_AHEAD);
        let to_read: Vec<(usize, &PathBuf, Option<Cursor>)> = (transcripts.iter().enumerate())
            .filter_map(|(i, path)| starts[i].clone().map(|start| (i, path, start)))
            .collect();
        std::thread::Builder::new()
            .name("cairn-history-read".to_owned())
            .spawn_scoped(scope, move || read_ahead(&to_read, &chunks))
            .map_err(|e| CairnError::internal(format!("cannot start the history reader: {e}")))?;
        let mut ahead = Some(received);
        for (i, path) in transcripts.iter().enumerate() {
            if stop() {
                break;
            }
            tally.source = path.display().to_string();
            let before = tally.bytes_done;
            let source = SourceRef { key: path.display().to_string(), host: HistoryHost::ClaudeCode };
            let mut one = ScanReport { sources: 1, ..ScanReport::default() };
            if starts[i].is_some() {
                let mut read = |bytes: u64| {
                    tally.bytes_done = before + bytes;
                    progress(tally.clone());
                };
                let applied = match &ahead {
                    Some(received) => apply_read_ahead(db, &source, i, received, &mut one, stop, &mut read)?,
                    None => Ahead::Lost,
                };
                if matches!(applied, Ahead::Lost | Ahead::Stopped) {
                    // The reader is gone, or the scan stops: what is read from now on is read here.
                    ahead = None;
                }
                if matches!(applied, Ahead::Lost | Ahead::Stale) {
                    drive(
                        db,
                        &source,
                        &mut one,
                        stop,
                        &mut |cursor| claude::read_file(path, cursor, CHUNK_BYTES),
                        &mut |r, b| {
                            r.bytes += b;
                            read(r.bytes);
                        },
                    )?;
                }
            }
            report.merge(one);
            tally.sources_done += 1;
            tally.bytes_done = before + file_size(path);
            progress(tally.clone());
        }
        // Hung up before the scope joins the reader: a reader waiting to hand over a chunk
        // then ends.
        drop(ahead);
        Ok(())
    })?;
    // Codex's rollouts and Gemini CLI's chats: fewer and smaller, read here one by one.
    for (host, path) in &others {
        if stop() {
            break;
        }
        tally.source = path.display().to_string();
        report.merge(ingest_file(db, *host, path, stop, &mut |_| {})?);
        tally.sources_done += 1;
        tally.bytes_done += file_size(path);
        progress(tally.clone());
    }
    Ok(report)
}

/// Codex's rollouts and Gemini CLI's chats, with their host.
fn other_transcripts(env: &dyn Fn(&str) -> Option<String>) -> Vec<(HistoryHost, PathBuf)> {
    let rollouts = codex::locate(env).map(|p| codex::rollouts(&p)).unwrap_or_default();
    let chats = gemini::locate(env).map(|p| gemini::chats(&p)).unwrap_or_default();
    rollouts
        .into_iter()
        .map(|p| (HistoryHost::Codex, p))
        .chain(chats.into_iter().map(|p| (HistoryHost::Gemini, p)))
        .collect()
}

/// Which host's transcript `path` is, by where it lies: Codex's sessions, Gemini CLI's chats,
/// else Claude Code's.
fn host_of(env: &dyn Fn(&str) -> Option<String>, path: &Path) -> HistoryHost {
    let under = |root: Option<PathBuf>| root.is_some_and(|r| path.starts_with(&r));
    if under(codex::locate(env)) {
        HistoryHost::Codex
    } else if under(gemini::locate(env)) && gemini::is_chat_name(path) {
        HistoryHost::Gemini
    } else {
        HistoryHost::ClaudeCode
    }
}

/// The reader of `host`'s transcripts.
fn read_transcript(host: HistoryHost, path: &Path, cursor: &Cursor) -> Result<(IngestBatch, Cursor, bool)> {
    match host {
        HistoryHost::Codex => codex::read_file(path, cursor, CHUNK_BYTES),
        HistoryHost::Gemini => gemini::read_file(path, cursor, CHUNK_BYTES),
        HistoryHost::ClaudeCode | HistoryHost::OpenCode => claude::read_file(path, cursor, CHUNK_BYTES),
    }
}

/// One chunk the reader thread read: the transcript's index in the scan, the cursor the chunk
/// was read from (`None`: the source had none), and the reader's answer.
type ChunkAhead = (usize, Option<Cursor>, Result<(IngestBatch, Cursor, bool)>);

/// The reader thread of a scan: each transcript from its cursor to its end, chunk by chunk,
/// handed over through `chunks` (which blocks when the writer is [`READ_AHEAD`] chunks behind).
/// Ends when every file is read or the writer hangs up. It only reads host files.
fn read_ahead(files: &[(usize, &PathBuf, Option<Cursor>)], chunks: &std::sync::mpsc::SyncSender<ChunkAhead>) {
    for (i, path, start) in files {
        let mut expected = start.clone();
        loop {
            let from = expected.clone().unwrap_or_default();
            let read = claude::read_file(path, &from, CHUNK_BYTES);
            let next = match &read {
                Ok((_, next, true)) => Some(next.clone()),
                _ => None,
            };
            if chunks.send((*i, expected, read)).is_err() {
                return;
            }
            match next {
                Some(next) => expected = Some(next),
                None => break,
            }
        }
    }
}

/// How a transcript's read-ahead chunks went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ahead {
    /// Every chunk applied (or the file's read error recorded): the file is done.
    Done,
    /// The cursor moved under a chunk (another ingester): read the file again from the stored
    /// cursor.
    Stale,
    /// The scan is stopping: the file is left where its last applied chunk put it (the rest of
    /// its chunks are not taken: the reader, hung up on, ends).
    Stopped,
    /// The reader thread is gone.
    Lost,
}

/// Apply the read-ahead chunks of transcript `index`, as [`drive`] would have read them.
fn apply_read_ahead(
    db: &mut dyn HistorySink,
    source: &SourceRef,
    index: usize,
    received: &std::sync::mpsc::Receiver<ChunkAhead>,
    report: &mut ScanReport,
    stop: &dyn Fn() -> bool,
    read: &mut dyn FnMut(u64),
) -> Result<Ahead> {
    let mut outcome = Ahead::Done;
    loop {
        let Ok((i, expected, chunk)) = received.recv() else { return Ok(Ahead::Lost) };
        debug_assert_eq!(i, index, "the reader reads the transcripts in the scan's order");
        let (batch, next, more) = match chunk {
            Ok(chunk) => chunk,
            Err(err) => {
                if outcome == Ahead::Done {
                    db.record_error(source, err.code.as_str(), &err.message)?;
                    report.errors.push(SourceError { source: source.key.clone(), code: err.code.as_str().to_owned() });
                }
                return Ok(outcome);
            }
        };
        // After a stale chunk, the rest of the file's chunks are only drained.
        if outcome == Ahead::Done
            && (expected.as_ref() != Some(&next) || !batch.is_empty() || !batch.skipped.is_empty())
        {
            if db.apply(source, expected.as_ref(), &batch, &next)? == SinkOutcome::Stale {
                outcome = Ahead::Stale;
            } else {
                let from = expected.unwrap_or_default();
                report.add_batch(&batch);
                report.bytes += next.offset.saturating_sub(if next.offset < from.offset { 0 } else { from.offset });
                read(report.bytes);
            }
        }
        if !more {
            return Ok(outcome);
        }
        if outcome == Ahead::Done && stop() {
            return Ok(Ahead::Stopped);
        }
    }
}

/// Read what one request names, now.
pub fn poke(
    db: &mut dyn HistorySink,
    env: &dyn Fn(&str) -> Option<String>,
    request: &PokeRequest,
) -> Result<ScanReport> {
    poke_until(db, env, request, &|| false)
}

/// [`poke`] that stops between two chunks once `stop()` says so: what it read is kept, and the
/// next poke or scan goes on from there (an op that only wants a session fresh gives it a time
/// budget, since a first read of a large host database is a backfill).
pub fn poke_until(
    db: &mut dyn HistorySink,
    env: &dyn Fn(&str) -> Option<String>,
    request: &PokeRequest,
    stop: &dyn Fn() -> bool,
) -> Result<ScanReport> {
    match (request.host, &request.path, &request.session_id) {
        (_, Some(path), _) if is_database(path) => ingest_database(db, path, stop),
        (_, Some(path), _) => ingest_file(db, host_of(env, path), path, stop, &mut |_| {}),
        (Some(HistoryHost::Codex), None, Some(session)) => {
            let path = codex::locate(env)
                .map(|p| codex::rollouts(&p))
                .unwrap_or_default()
                .into_iter()
                .find(|p| codex::identify(p).as_deref() == Some(session.as_str()))
                .ok_or_else(|| {
                    CairnError::new(
                        cairn_base::ErrorCode::HistorySessionNotFound,
                        format!("no Codex rollout for session {session}"),
                    )
                })?;
            ingest_file(db, HistoryHost::Codex, &path, stop, &mut |_| {})
        }
        (Some(host @ (HistoryHost::Codex | HistoryHost::Gemini)), None, _) => {
            let mut report = ScanReport::default();
            for (_, path) in other_transcripts(env).into_iter().filter(|(h, _)| *h == host) {
                report.merge(ingest_file(db, host, &path, stop, &mut |_| {})?);
            }
            Ok(report)
        }
        (Some(HistoryHost::ClaudeCode), None, Some(session)) => {
            let path = find_transcript(env, session)?;
            ingest_transcript(db, &path, stop, &mut |_| {})
        }
        // One OpenCode session: the incremental read of the databases holds exactly what is new
        // in it (and in any other session), which is cheaper than re-reading the session.
        (Some(HistoryHost::OpenCode), None, _) => {
            let mut report = ScanReport::default();
            for path in opencode::locate(env) {
                report.merge(ingest_database(db, &path, stop)?);
            }
            Ok(report)
        }
        (None, None, Some(session)) => match find_transcript(env, session) {
            Ok(path) => ingest_transcript(db, &path, stop, &mut |_| {}),
            Err(_) => poke_until(db, env, &PokeRequest { host: Some(HistoryHost::OpenCode), ..request.clone() }, stop),
        },
        _ => scan_until(db, env, &mut |_| {}, stop),
    }
}

/// A poke that came through a door (HTTP, MCP, a hook) names a host's own transcript or
/// database, nothing else: the daemon reads files no client could otherwise read, and the
/// archive then serves them. (`cairn history ingest --path` in the user's own process may read
/// any file.)
pub fn check_host_source(env: &dyn Fn(&str) -> Option<String>, request: &PokeRequest) -> Result<()> {
    if let Some(session) = request.session_id.as_deref() {
        super::query::check_id("session_id", session)?;
    }
    let Some(path) = &request.path else { return Ok(()) };
    let refuse = || {
        let message = format!("{} is not a host's transcript or database", path.display());
        CairnError::new(cairn_base::ErrorCode::FileNotFound, message).with_hint(
            "give a Claude Code transcript under <CLAUDE_CONFIG_DIR or ~/.claude>/projects, a Codex rollout under \
             <CODEX_HOME or ~/.codex>/sessions, a Gemini CLI chat under ~/.gemini/tmp, or an OpenCode database",
        )
    };
    let real = path.canonicalize().map_err(|_| refuse())?;
    let under = |root: Option<PathBuf>, ok: &dyn Fn(&Path) -> bool| {
        root.and_then(|root| root.canonicalize().ok()).is_some_and(|root| real.starts_with(root) && ok(&real))
    };
    let jsonl = |p: &Path| p.extension().is_some_and(|e| e == "jsonl");
    let host_file = under(claude::locate(env), &jsonl)
        || under(codex::locate(env), &|p| codex::identify(p).is_some())
        || under(gemini::locate(env), &gemini::is_chat_name);
    let an_opencode_db = opencode::locate(env).iter().filter_map(|db| db.canonicalize().ok()).any(|db| db == real);
    if host_file || an_opencode_db { Ok(()) } else { Err(refuse()) }
}

fn is_database(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "db")
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// `projects/*/<session>.jsonl`, or a sub-agent's `projects/*/*/subagents/<agent-id>.jsonl`.
fn find_transcript(env: &dyn Fn(&str) -> Option<String>, session: &str) -> Result<PathBuf> {
    if !super::text::valid_id(session) {
        return Err(CairnError::invalid(format!("not a session id: {session:?}")));
    }
    let projects = claude::locate(env).ok_or_else(|| CairnError::invalid("no Claude Code config dir (HOME unset)"))?;
    let name = format!("{session}.jsonl");
    claude::transcripts(&projects).into_iter().find(|p| p.file_name().is_some_and(|n| n == name.as_str())).ok_or_else(
        || {
            CairnError::new(
                cairn_base::ErrorCode::HistorySessionNotFound,
                format!("no Claude Code transcript for session {session}"),
            )
        },
    )
}

/// Tail one Claude Code transcript to its end, chunk by chunk. `read` gets the bytes read so far.
fn ingest_transcript(
    db: &mut dyn HistorySink,
    path: &Path,
    stop: &dyn Fn() -> bool,
    read: &mut dyn FnMut(u64),
) -> Result<ScanReport> {
    ingest_file(db, HistoryHost::ClaudeCode, path, stop, read)
}

/// Tail one transcript of `host` to its end, chunk by chunk. `read` gets the bytes read so far.
fn ingest_file(
    db: &mut dyn HistorySink,
    host: HistoryHost,
    path: &Path,
    stop: &dyn Fn() -> bool,
    read: &mut dyn FnMut(u64),
) -> Result<ScanReport> {
    let source = SourceRef { key: path.display().to_string(), host };
    let mut report = ScanReport { sources: 1, ..ScanReport::default() };
    if unchanged_since_cursor(db, &source, path)? {
        return Ok(report);
    }
    drive(db, &source, &mut report, stop, &mut |cursor| read_transcript(host, path, cursor), &mut |r, b| {
        r.bytes += b;
        read(r.bytes);
    })?;
    Ok(report)
}

/// A transcript whose size and mtime are what the cursor saw, all read: nothing to do, and no
/// need to open it (a backfill of thousands of idle files costs a `stat` each).
fn unchanged_since_cursor(db: &dyn HistorySink, source: &SourceRef, path: &Path) -> Result<bool> {
    let Some(cursor) = db.cursor(&source.key)? else { return Ok(false) };
    let Ok(meta) = std::fs::metadata(path) else { return Ok(false) };
    Ok(cursor.offset == meta.len() && cursor.size == meta.len() && cursor.mtime_ms == claude::mtime_ms(&meta))
}

fn ingest_database(db: &mut dyn HistorySink, path: &Path, stop: &dyn Fn() -> bool) -> Result<ScanReport> {
    let source = SourceRef { key: path.display().to_string(), host: HistoryHost::OpenCode };
    let mut report = ScanReport { sources: 1, ..ScanReport::default() };
    drive(db, &source, &mut report, stop, &mut |cursor| opencode::read(path, cursor, CHUNK_ROWS), &mut |_, _| {})?;
    Ok(report)
}

type ReadChunk<'a> = dyn FnMut(&Cursor) -> Result<(IngestBatch, Cursor, bool)> + 'a;

/// Read → apply(compare-and-swap) → repeat while the reader says more. A reader error is
/// recorded on the source and reported, not returned: one locked database must not stop a
/// scan. Store errors are returned.
fn drive(
    db: &mut dyn HistorySink,
    source: &SourceRef,
    report: &mut ScanReport,
    stop: &dyn Fn() -> bool,
    read: &mut ReadChunk,
    on_bytes: &mut dyn FnMut(&mut ScanReport, u64),
) -> Result<()> {
    let mut stale = 0;
    loop {
        let expected = db.cursor(&source.key)?;
        let from = expected.clone().unwrap_or_default();
        let (batch, next, more) = match read(&from) {
            Ok(chunk) => chunk,
            Err(err) => {
                db.record_error(source, err.code.as_str(), &err.message)?;
                report.errors.push(SourceError { source: source.key.clone(), code: err.code.as_str().to_owned() });
                return Ok(());
            }
        };
        if expected.as_ref() != Some(&next) || !batch.is_empty() || !batch.skipped.is_empty() {
            if db.apply(source, expected.as_ref(), &batch, &next)? == SinkOutcome::Stale {
                stale += 1;
                if stale > MAX_STALE_RETRIES {
                    return Ok(());
                }
                continue;
            }
            report.add_batch(&batch);
            on_bytes(report, next.offset.saturating_sub(if next.offset < from.offset { 0 } else { from.offset }));
        }
        if !more || stop() {
            return Ok(());
        }
    }
}

#[cfg(test)]
#[path = "ingest_tests.rs"]
mod tests;
