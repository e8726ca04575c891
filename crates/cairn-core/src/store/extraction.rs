//! The SQL of extraction (`crate::extract` holds the rules and the model's side): each
//! conversation's state (`extraction_state`), when extraction was first on, where a memory a
//! model wrote came from (`memory_provenance`), and the lookups a pass makes.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::history::extraction::Mark;
use crate::store::Store;

/// A conversation's extraction state, as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SessionState {
    pub mark: Option<Mark>,
    pub summary_mark: Option<Mark>,
    pub turns_since_summary: u32,
    pub brief_checked: bool,
    pub next_attempt_at: Option<String>,
}

/// A failing conversation, as `extraction_status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailingSession {
    pub session_id: String,
    pub project: String,
    pub attempts: u32,
    /// When it is tried again.
    pub next_attempt_at: Option<String>,
    pub last_error_code: Option<String>,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
}

/// What one commit moves in a conversation's state.
pub(crate) struct StateAdvance<'a> {
    pub session_id: &'a str,
    pub project: &'a str,
    /// The new mark (`None`: none yet).
    pub mark: Option<&'a Mark>,
    /// Turns to add to the count towards the next summary.
    pub turns: u32,
    /// A summary was written at the mark: the count starts again.
    pub summarized: bool,
    pub brief_checked: bool,
    pub facts_saved: i64,
    pub duplicates: i64,
    pub now: &'a str,
}

/// Extraction's totals over every conversation.
pub(crate) struct ExtractionTotals {
    /// Conversations extracted at least once.
    pub sessions: i64,
    pub facts_saved: i64,
    pub duplicates_skipped: i64,
    pub last_extracted_at: Option<String>,
}

/// A row of `memory_provenance`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProvenanceRow {
    pub observation_id: i64,
    /// `fact`, `summary` or `brief`.
    pub origin: String,
    pub session_id: Option<String>,
    /// The message ids, as a JSON array.
    pub message_ids: String,
    pub provider: String,
    pub model: String,
    pub created_at: String,
}

impl Store {
    /// When extraction was first on.
    pub fn extraction_since(&self) -> Result<Option<String>> {
        Ok(self
            .conn()
            .prepare_cached("SELECT value FROM extraction_meta WHERE key = 'since'")?
            .query_row([], |r| r.get(0))
            .optional()?)
    }

    /// Record that extraction is on from now (kept when it already was): the background worker
    /// calls it when it starts with a model.
    pub fn start_extraction(&mut self) -> Result<String> {
        let now = self.now();
        self.write(|tx| {
            tx.execute("INSERT OR IGNORE INTO extraction_meta (key, value) VALUES ('since', ?1)", [&now])?;
            Ok(tx.query_row("SELECT value FROM extraction_meta WHERE key = 'since'", [], |r| r.get(0))?)
        })
    }

    /// A conversation's state (the default: never extracted).
    pub(crate) fn extraction_state(&self, session_id: &str) -> Result<SessionState> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT mark_seq, mark_id, summary_seq, summary_id, turns_since_summary, brief_checked, next_attempt_at
                 FROM extraction_state WHERE session_id = ?1",
            )?
            .query_row([session_id], |r| {
                let mark = |seq: Option<i64>, id: Option<String>| seq.zip(id).map(|(seq, id)| Mark { seq, id });
                Ok(SessionState {
                    mark: mark(r.get(0)?, r.get(1)?),
                    summary_mark: mark(r.get(2)?, r.get(3)?),
                    turns_since_summary: r.get(4)?,
                    brief_checked: r.get(5)?,
                    next_attempt_at: r.get(6)?,
                })
            })
            .optional()?
            .unwrap_or_default())
    }

    /// Whether the conversation's host ended it (a session cairn records by the same id).
    pub(crate) fn session_ended(&self, session_id: &str) -> Result<bool> {
        Ok(self
            .conn()
            .prepare_cached("SELECT ended_at IS NOT NULL FROM sessions WHERE id = ?1")?
            .query_row([session_id], |r| r.get::<_, bool>(0))
            .optional()?
            .unwrap_or(false))
    }

    /// Whether cairn records a session `session_id`.
    pub(crate) fn session_known(&self, session_id: &str) -> Result<bool> {
        Ok(self
            .conn()
            .prepare_cached("SELECT EXISTS(SELECT 1 FROM sessions WHERE id = ?1)")?
            .query_row([session_id], |r| r.get(0))?)
    }

    /// The content of the newest live memory of `kind` under `topic`.
    pub(crate) fn newest_memory_content(&self, topic: &str, kind: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT content FROM observations WHERE topic_key = ?1 AND type = ?2 AND deleted_at IS NULL
                 ORDER BY updated_at DESC LIMIT 1",
            )?
            .query_row(params![topic, kind], |r| r.get(0))
            .optional()?)
    }

    /// Whether the project has a brief (a model's or anyone's: by its type, or under `topic`).
    pub(crate) fn has_brief_under(&self, project: &str, topic: &str) -> Result<bool> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT 1 FROM observations WHERE project = ?1 AND deleted_at IS NULL
                   AND (type IN ('project-brief', 'project_brief') OR topic_key = ?2) LIMIT 1",
            )?
            .query_row(params![project, topic], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// A live memory of `project` whose normalized text hashes to `hash`.
    pub(crate) fn live_memory_with_hash(&self, hash: &str, project: &str) -> Result<Option<i64>> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT id FROM observations WHERE normalized_hash = ?1 AND project = ?2 AND deleted_at IS NULL LIMIT 1",
            )?
            .query_row(params![hash, project], |r| r.get(0))
            .optional()?)
    }

    /// The live memories of `project` the full-text expression `fts` matches (`(id, title,
    /// content)`), the best `limit` first.
    pub(crate) fn live_memories_matching(
        &self,
        fts: &str,
        project: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT o.id, o.title, o.content FROM observations_fts f JOIN observations o ON o.id = f.rowid
             WHERE observations_fts MATCH ?1 AND o.project = ?2 AND o.deleted_at IS NULL
             ORDER BY f.rank LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![fts, project, limit as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Move a conversation's state after a commit (in the caller's transaction): its mark, its
    /// counts, and no error any more.
    pub(crate) fn advance_extraction_state(&self, a: &StateAdvance<'_>) -> Result<()> {
        self.conn().execute(
            "INSERT INTO extraction_state (session_id, project, mark_seq, mark_id, turns_since_summary,
                summary_seq, summary_id, brief_checked, facts_saved, duplicates_skipped, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, CASE WHEN ?10 THEN ?3 END, CASE WHEN ?10 THEN ?4 END, ?6, ?7, ?8, ?9)
             ON CONFLICT (session_id) DO UPDATE SET
                project = excluded.project, mark_seq = excluded.mark_seq, mark_id = excluded.mark_id,
                turns_since_summary = CASE WHEN ?10 THEN 0 ELSE turns_since_summary + ?5 END,
                summary_seq = CASE WHEN ?10 THEN excluded.mark_seq ELSE summary_seq END,
                summary_id = CASE WHEN ?10 THEN excluded.mark_id ELSE summary_id END,
                brief_checked = brief_checked OR excluded.brief_checked,
                facts_saved = facts_saved + ?7, duplicates_skipped = duplicates_skipped + ?8,
                attempts = 0, next_attempt_at = NULL, last_error_code = NULL, last_error = NULL,
                updated_at = ?9",
            params![
                a.session_id,
                a.project,
                a.mark.map(|m| m.seq),
                a.mark.map(|m| m.id.as_str()),
                a.turns,
                a.brief_checked,
                a.facts_saved,
                a.duplicates,
                a.now,
                a.summarized,
            ],
        )?;
        Ok(())
    }

    /// Failed attempts in a row at a conversation.
    pub(crate) fn extraction_attempts(&self, session_id: &str) -> Result<u32> {
        Ok(self
            .conn()
            .prepare_cached("SELECT attempts FROM extraction_state WHERE session_id = ?1")?
            .query_row([session_id], |r| r.get(0))
            .optional()?
            .unwrap_or(0))
    }

    /// Count one more failed attempt at a conversation, with its error, tried again at `next`.
    pub(crate) fn write_extraction_failure(
        &mut self,
        session_id: &str,
        next: &str,
        code: &str,
        message: &str,
        now: &str,
    ) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO extraction_state (session_id, attempts, next_attempt_at, last_error_code, last_error,
                    last_error_at, updated_at)
                 VALUES (?1, 1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT (session_id) DO UPDATE SET attempts = attempts + 1, next_attempt_at = ?2,
                    last_error_code = ?3, last_error = ?4, last_error_at = ?5, updated_at = ?5",
                params![session_id, next, code, message, now],
            )?;
            Ok(())
        })
    }

    /// Extraction's totals over every conversation.
    pub(crate) fn extraction_totals(&self) -> Result<ExtractionTotals> {
        Ok(self.conn().query_row(
            "SELECT count(mark_id), coalesce(sum(facts_saved), 0), coalesce(sum(duplicates_skipped), 0),
                max(CASE WHEN mark_id IS NOT NULL THEN updated_at END)
             FROM extraction_state",
            [],
            |r| {
                Ok(ExtractionTotals {
                    sessions: r.get(0)?,
                    facts_saved: r.get(1)?,
                    duplicates_skipped: r.get(2)?,
                    last_extracted_at: r.get(3)?,
                })
            },
        )?)
    }

    /// Live memories a model wrote. Read from the provenance rows, each memory looked up by
    /// its key: written as a join, SQLite walked every live memory to probe for a provenance
    /// row (63–100 ms at 1M memories, the whole of the dashboard's time).
    pub(crate) fn extracted_memory_count(&self) -> Result<i64> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM memory_provenance p
             WHERE EXISTS (SELECT 1 FROM observations o WHERE o.id = p.observation_id AND o.deleted_at IS NULL)",
            [],
            |r| r.get(0),
        )?)
    }

    /// Conversations whose last attempt failed, the next retry first; at most `limit`.
    pub(crate) fn failing_extractions(&self, limit: usize) -> Result<Vec<FailingSession>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT session_id, project, attempts, next_attempt_at, last_error_code, last_error, last_error_at
             FROM extraction_state WHERE next_attempt_at IS NOT NULL ORDER BY next_attempt_at, session_id LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit as i64], |r| {
            Ok(FailingSession {
                session_id: r.get(0)?,
                project: r.get(1)?,
                attempts: r.get(2)?,
                next_attempt_at: r.get(3)?,
                last_error_code: r.get(4)?,
                last_error: r.get(5)?,
                last_error_at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Directories cairn's own sessions ran in, with their project.
    pub(crate) fn session_directories(&self) -> Result<Vec<(String, Option<String>)>> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT DISTINCT directory, project FROM sessions WHERE directory != '' LIMIT 10000")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Memory `id`'s provenance row, if a model wrote it.
    pub(crate) fn provenance_row(&self, id: i64) -> Result<Option<ProvenanceRow>> {
        provenance_in(self.conn(), id)
    }
}

/// Memory `id`'s provenance row in `tx`, if a model wrote it.
pub(crate) fn provenance_in(tx: &Connection, id: i64) -> Result<Option<ProvenanceRow>> {
    Ok(tx
        .prepare_cached(
            "SELECT origin, session_id, message_ids, provider, model, created_at FROM memory_provenance
             WHERE observation_id = ?1",
        )?
        .query_row([id], |r| {
            Ok(ProvenanceRow {
                observation_id: id,
                origin: r.get(0)?,
                session_id: r.get(1)?,
                message_ids: r.get(2)?,
                provider: r.get(3)?,
                model: r.get(4)?,
                created_at: r.get(5)?,
            })
        })
        .optional()?)
}

/// Forget where memory `id` came from, in `tx` (its memory stays).
pub(crate) fn delete_provenance(tx: &Connection, id: i64) -> Result<()> {
    tx.prepare_cached("DELETE FROM memory_provenance WHERE observation_id = ?1")?.execute([id])?;
    Ok(())
}

/// Record (or replace) where memory `p.observation_id` came from, in `tx`.
pub(crate) fn record_provenance(tx: &Connection, p: &ProvenanceRow) -> Result<()> {
    tx.prepare_cached(
        "INSERT INTO memory_provenance (observation_id, origin, session_id, message_ids, provider, model, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (observation_id) DO UPDATE SET message_ids = excluded.message_ids,
            provider = excluded.provider, model = excluded.model, created_at = excluded.created_at",
    )?
    .execute(params![
        p.observation_id,
        p.origin,
        p.session_id,
        p.message_ids,
        p.provider,
        p.model,
        p.created_at
    ])?;
    Ok(())
}

/// Record where memory `p.observation_id` came from in `tx`, replacing the whole row.
pub(crate) fn replace_provenance(tx: &Connection, p: &ProvenanceRow) -> Result<()> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO memory_provenance
            (observation_id, origin, session_id, message_ids, provider, model, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![
        p.observation_id,
        p.origin,
        p.session_id,
        p.message_ids,
        p.provider,
        p.model,
        p.created_at
    ])?;
    Ok(())
}
