//! `cairn gc`: what the memory store and the history archive can give back to the file
//! system, and (unless it is a dry run) giving it back.
//!
//! What goes, each by a rule written elsewhere that says it is no longer needed:
//! - vectors of an embedding model other than the one in use: search reads only the current
//!   model's, and the daemon re-embeds every memory with it (`search::semantic`);
//! - spool event ids applied longer ago than [`crate::spool::REMEMBER_APPLIED`]: the spool
//!   forgets them after that anyway (`Store::prune_spool_events`).
//!
//! What stays, and why (the report says so):
//! - the sync journal: a target added later (a new hub, a git folder) reads it from its first
//!   entry, so no entry is ever "applied everywhere";
//! - the tombstones of hard-deleted synced memories: no sync horizon says when no peer can
//!   still send an older copy of one, so dropping a tombstone could bring a memory back.
//!
//! Then both files are rebuilt (`VACUUM`): the memory store's (only when the connection is
//! outside a transaction: the daemon's writer runs a group of writes in one, and `gc` is then
//! asked to run again) and the archive's. A `VACUUM` writes through the WAL, so a gc killed
//! half-way leaves either file as it was or as it became, never a mix.

use serde::{Deserialize, Serialize};

use crate::Core;
use crate::error::Result;

/// What `gc` is asked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcRequest {
    /// Count what would go and estimate the sizes after; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Rows of one kind that went (or would go), with their bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GcRows {
    pub rows: u64,
    pub bytes: u64,
}

/// Rows kept on purpose, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GcKept {
    pub what: String,
    pub rows: u64,
    pub why: String,
}

/// A file's size before and after (after: estimated on a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GcFile {
    pub before_bytes: u64,
    pub after_bytes: u64,
    /// Whether it was rebuilt (`VACUUM`).
    pub vacuumed: bool,
}

/// What `gc` reclaimed (or, dry, would reclaim).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GcReport {
    pub dry_run: bool,
    /// The embedding model whose vectors are kept; `None`: no model here, every vector kept.
    pub model_in_use: Option<String>,
    pub old_model_vectors: GcRows,
    pub applied_spool_events: GcRows,
    pub kept: Vec<GcKept>,
    /// `cairn.db` (its pages; the WAL is emptied by the rebuild).
    pub memory_store: GcFile,
    /// `history.db` and `history-fts.db`; `None` when the data dir has no archive.
    pub history_archive: Option<GcFile>,
    /// What the user may want to know (a rebuild skipped, vectors kept for want of a model).
    pub notes: Vec<String>,
}

const JOURNAL_KEPT: &str = "a sync target added later reads the journal from its first entry";
const TOMBSTONES_KEPT: &str = "no sync horizon says when no peer can still send an older copy of a deleted memory";

impl Core {
    /// Reclaim as [`GcRequest`] says.
    pub fn gc(&mut self, request: &GcRequest) -> Result<GcReport> {
        let dry_run = request.dry_run;
        let mut report = GcReport { dry_run, ..GcReport::default() };
        self.check_room(dry_run, &mut report.notes)?;
        let before = self.store.pages()?;
        report.memory_store.before_bytes = before.file_bytes;

        report.model_in_use = self.semantic.as_ref().map(|s| s.model_id().to_owned());
        if let Some(model) = report.model_in_use.clone() {
            let old = self.store.vectors_of_other_models(&model)?;
            report.old_model_vectors = GcRows { rows: old.count, bytes: old.bytes };
            if !dry_run && old.count > 0 {
                self.store.clear_embeddings(Some(&model))?;
            }
        } else {
            report.notes.push("no embedding model here: vectors of every model kept".to_owned());
        }

        let cutoff = crate::clock::format_ts(self.store.clock().now() - crate::spool::REMEMBER_APPLIED);
        let spool = self.store.spool_events_before(&cutoff)?;
        report.applied_spool_events = GcRows { rows: spool.count, bytes: spool.bytes };
        if !dry_run && spool.count > 0 {
            self.store.prune_spool_events()?;
        }

        let (journal, tombstones) = self.store.sync_rows_kept()?;
        report.kept = vec![
            GcKept { what: "sync journal".into(), rows: journal, why: JOURNAL_KEPT.into() },
            GcKept { what: "sync tombstones".into(), rows: tombstones, why: TOMBSTONES_KEPT.into() },
        ];

        report.memory_store = self.rebuild_store(dry_run, &report, before)?;
        if !dry_run && !report.memory_store.vacuumed {
            report.notes.push("the memory store was not rebuilt: other writes were in flight; run gc again".into());
        }
        report.history_archive = self.rebuild_archive(dry_run)?;
        Ok(report)
    }

    /// Room for the rebuilds, checked before anything changes: a rebuild that would not fit
    /// refuses the gc (`disk_full`); a dry run says so in a note.
    fn check_room(&mut self, dry_run: bool, notes: &mut Vec<String>) -> Result<()> {
        let Some(dir) = self.store.data_dir().map(std::path::Path::to_path_buf) else { return Ok(()) };
        let Some(room) = crate::room::room_for(&dir) else { return Ok(()) };
        let mut files = vec![("cairn.db", self.store.pages()?.live_bytes())];
        if dir.join(crate::history::HISTORY_DB_FILE).is_file() {
            files.push(("the history archive", self.history.db()?.largest_live_bytes()?));
        }
        for (file, live) in files {
            match crate::room::shortfall(live, &room) {
                Some(why) if dry_run => notes.push(format!("a rebuild of {file} would be refused: it {why}")),
                Some(why) => return Err(crate::room::no_room(file, &why)),
                None => {}
            }
        }
        Ok(())
    }

    fn rebuild_store(&mut self, dry_run: bool, report: &GcReport, before: crate::store::gc::Pages) -> Result<GcFile> {
        if dry_run {
            let freed = report.old_model_vectors.bytes + report.applied_spool_events.bytes + before.free_bytes;
            return Ok(GcFile {
                before_bytes: before.file_bytes,
                after_bytes: before.file_bytes.saturating_sub(freed),
                vacuumed: false,
            });
        }
        let vacuumed = self.store.outside_transaction();
        if vacuumed {
            self.store.vacuum_and_checkpoint()?;
        }
        Ok(GcFile { before_bytes: before.file_bytes, after_bytes: self.store.pages()?.file_bytes, vacuumed })
    }

    /// The archive rebuilt, when the data dir has one (a dry run never creates it).
    fn rebuild_archive(&mut self, dry_run: bool) -> Result<Option<GcFile>> {
        let exists = self.store.data_dir().is_none_or(|dir| dir.join(crate::history::HISTORY_DB_FILE).is_file());
        if !exists {
            return Ok(None);
        }
        let db = self.history.db()?;
        let before = db.pages()?;
        if dry_run {
            let after = before.file_bytes - before.free_bytes;
            return Ok(Some(GcFile { before_bytes: before.file_bytes, after_bytes: after, vacuumed: false }));
        }
        db.vacuum()?;
        Ok(Some(GcFile { before_bytes: before.file_bytes, after_bytes: db.pages()?.file_bytes, vacuumed: true }))
    }
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
