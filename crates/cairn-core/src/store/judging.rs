//! The SQL of judging (`crate::relations::judge` holds the rules): the judge's mark, a
//! memory's neighbours, verdicts written with who judged, the supersession graph.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params};

use serde::{Deserialize, Serialize};

use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{COMPACTION_SUMMARY, OBSERVATION_COLUMNS, Observation, SESSION_RECORD, new_sync_id};
use crate::store::Store;

/// Kinds that record what a session did, not a fact that can be replaced.
pub const SKIPPED_KINDS: &[&str] = &[SESSION_RECORD, "session_summary", COMPACTION_SUMMARY];
/// Who gave a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JudgeKind {
    /// A certain rule (the same topic key, the same text).
    Rule,
    /// The configured language model.
    Llm,
    /// An agent (`mem_judge`, `mem_compare`).
    Agent,
    /// A person (the CLI, the web page).
    Person,
}

impl JudgeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JudgeKind::Rule => "rule",
            JudgeKind::Llm => "llm",
            JudgeKind::Agent => "agent",
            JudgeKind::Person => "person",
        }
    }
}

/// A verdict from the newer memory of a pair to the older.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub relation: String,
    pub confidence: f64,
    pub reason: String,
    pub kind: JudgeKind,
    pub model: Option<String>,
}

/// Two memories to judge, the newer first (by when they were first saved).
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub newer: Observation,
    pub older: Observation,
    /// Close enough to be a candidate for a person when no judge is sure (shared words above
    /// the candidate score, or close vectors); a weak pair is only worth a model's look.
    pub strong: bool,
}

impl Pair {
    /// The pair of `a` and `b`, ordered by when each was first saved (then by id).
    pub fn of(a: Observation, b: Observation, strong: bool) -> Pair {
        if (a.created_at.as_str(), a.id) >= (b.created_at.as_str(), b.id) {
            Pair { newer: a, older: b, strong }
        } else {
            Pair { newer: b, older: a, strong }
        }
    }

    /// The pair's two ids, smaller first: the same for either order.
    pub fn key(&self) -> (i64, i64) {
        (self.newer.id.min(self.older.id), self.newer.id.max(self.older.id))
    }
}

/// What became of a pair.
#[derive(Debug, Clone, PartialEq)]
pub enum PairOutcome {
    Judged(Verdict),
    /// The model answered, but not surely enough: pending (a weak pair: `ignored`, kept only
    /// so the same model is not asked again).
    Unsure {
        model: String,
        reason: String,
    },
    /// No judge was sure (none configured, or it failed): pending for an agent or a person.
    Pending,
    /// A weak pair no model looked at: nothing is recorded.
    Dropped,
}

/// How many supersession links a cycle check follows at most (a longer chain is unheard of).
const CYCLE_SEARCH_LIMIT: usize = 10_000;

impl Store {
    /// The newest memory id the judge has looked at.
    pub fn judge_mark(&self) -> Result<i64> {
        Ok(self.conn().query_row("SELECT last_memory_id FROM judge_mark WHERE id = 1", [], |r| r.get(0))?)
    }

    /// Live memories past the judge's mark, oldest first (session summaries and records are no
    /// facts to compare). Returns them and the highest id looked at (deleted ones included).
    pub fn judge_arrivals(&self, limit: usize) -> Result<(Vec<Observation>, Option<i64>)> {
        let mark = self.judge_mark()?;
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE o.id > ?1 ORDER BY o.id LIMIT ?2"
        ))?;
        let rows: Vec<Observation> =
            stmt.query_map(params![mark, limit as i64], Observation::from_row)?.collect::<rusqlite::Result<_>>()?;
        let last = rows.last().map(|o| o.id);
        let live = rows.into_iter().filter(|o| o.deleted_at.is_none() && !SKIPPED_KINDS.contains(&o.kind.as_str()));
        Ok((live.collect(), last))
    }

    /// The stored vector of a memory under `model`, if it has one.
    pub fn stored_vector(&self, id: i64, model: &str) -> Result<Option<Vec<f32>>> {
        let blob: Option<Vec<u8>> = self
            .conn()
            .prepare_cached("SELECT vector FROM embeddings WHERE observation_id = ?1 AND model = ?2")?
            .query_row(params![id, model], |r| r.get(0))
            .optional()?;
        Ok(blob.map(|b| crate::store::embeddings::decode(&b)))
    }

    /// Live memories of `of`'s project and scope among `ids` (the neighbour candidates).
    pub(crate) fn same_place(&self, of: &Observation, ids: &[i64]) -> Result<Vec<Observation>> {
        let mut rows = self.get_many(ids.iter().copied().filter(|id| *id != of.id))?;
        let mut kept: Vec<Observation> = ids
            .iter()
            .filter_map(|id| rows.remove(id))
            .filter(|o| o.project == of.project && o.scope == of.scope)
            .filter(|o| !SKIPPED_KINDS.contains(&o.kind.as_str()))
            .collect();
        kept.dedup_by_key(|o| o.id);
        Ok(kept)
    }

    /// Whether the pair needs no more judging here: a verdict on it (by anyone, in either
    /// direction), or a model that already looked and was unsure (`model`: only that model's
    /// doubt counts, another model may try).
    pub(crate) fn pair_settled(&self, a: &str, b: &str, model: Option<&str>) -> Result<bool> {
        Ok(self.conn().prepare_cached(
            "SELECT EXISTS(SELECT 1 FROM relations WHERE ((source_id = ?1 AND target_id = ?2) OR (source_id = ?2 AND target_id = ?1))
                AND (judgment_status = 'judged' OR (marked_by_kind = 'llm' AND marked_by_model IS ?3)))",
        )?
        .query_row(params![a, b, model], |r| r.get(0))?)
    }

    /// Record what the judge made of each pair, and move its mark to `through` (when given), in
    /// one transaction: a restart never judges a memory twice nor skips one.
    pub fn record_judgments(&mut self, outcomes: &[(Pair, PairOutcome)], through: Option<i64>) -> Result<usize> {
        let now = self.now();
        self.write(|tx| {
            let mut recorded = 0;
            for (pair, outcome) in outcomes {
                recorded += usize::from(record_one(tx, pair, outcome, &now)?);
            }
            if let Some(through) = through {
                tx.execute(
                    "UPDATE judge_mark SET last_memory_id = max(last_memory_id, ?1), updated_at = ?2 WHERE id = 1",
                    params![through, now],
                )?;
            }
            Ok(recorded)
        })
    }

    /// Refuse `newer supersedes older` when `older` already replaces `newer`, directly or
    /// through others.
    /// `replacing`: the relation this verdict overwrites, whose old direction no longer counts.
    pub(crate) fn check_no_cycle(&self, newer: &str, older: &str, replacing: Option<&str>) -> Result<()> {
        if newer == older || supersedes_path(self.conn(), older, newer, replacing)? {
            return Err(cycle_error(newer, older));
        }
        Ok(())
    }

    /// Of these memories (sync ids), the ones a live memory has replaced, each with the newest
    /// live memory that replaced it (sync id and local id). A pair that replaces each other
    /// (two machines judged it both ways) is contested: neither is hidden.
    pub fn superseded_among(&self, sync_ids: &[String]) -> Result<HashMap<String, (String, i64)>> {
        let mut out = HashMap::new();
        if sync_ids.is_empty() {
            return Ok(out);
        }
        let placeholders = vec!["?"; sync_ids.len()].join(",");
        let mut stmt = self.conn().prepare_cached(&format!(
            "SELECT r.target_id, r.source_id, s.id FROM relations r JOIN observations s ON s.sync_id = r.source_id
             WHERE r.target_id IN ({placeholders}) AND r.relation = 'supersedes' AND r.judgment_status = 'judged'
               AND s.deleted_at IS NULL AND r.source_id != r.target_id
               AND NOT EXISTS (SELECT 1 FROM relations back WHERE back.source_id = r.target_id
                   AND back.target_id = r.source_id AND back.relation = 'supersedes' AND back.judgment_status = 'judged')
             ORDER BY s.created_at, s.id"
        ))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(sync_ids), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
        })?;
        for row in rows {
            let (target, source, id) = row?;
            // Ordered oldest first: the newest replacement is the one kept.
            out.insert(target, (source, id));
        }
        Ok(out)
    }

    /// Of these memories (local ids), the ones a live memory has replaced, with the id of the
    /// newest memory that replaced it: what context assembly marks or leaves out.
    pub fn superseded_ids(&self, ids: &[i64]) -> Result<HashMap<i64, i64>> {
        let rows = self.get_many(ids.iter().copied())?;
        let by_sync: HashMap<String, i64> = rows.values().map(|o| (o.sync_id.clone(), o.id)).collect();
        let sync_ids: Vec<String> = by_sync.keys().cloned().collect();
        Ok(self
            .current_of(&sync_ids)?
            .into_iter()
            .filter_map(|(sync_id, current)| Some((*by_sync.get(&sync_id)?, current)))
            .collect())
    }

    /// The memories that are current in place of `ids`: each superseded one followed to the
    /// newest live memory of its chain (a chain is short; a contested link stops it).
    pub fn current_of(&self, sync_ids: &[String]) -> Result<HashMap<String, i64>> {
        let mut current = HashMap::new();
        for start in sync_ids {
            let mut at = start.clone();
            let mut seen = HashSet::from([at.clone()]);
            let mut last_id = None;
            while let Some((next, id)) = self.superseded_among(std::slice::from_ref(&at))?.remove(&at) {
                if !seen.insert(next.clone()) {
                    break;
                }
                last_id = Some(id);
                at = next;
            }
            if let Some(id) = last_id {
                current.insert(start.clone(), id);
            }
        }
        Ok(current)
    }

    /// Memories of a project for a scan, oldest first.
    pub fn scan_memories(&self, project: &str, since: Option<&str>) -> Result<Vec<Observation>> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o WHERE o.project = ?1 AND o.deleted_at IS NULL
               AND (?2 IS NULL OR o.created_at >= ?2) ORDER BY o.id"
        ))?;
        let rows = stmt.query_map(params![project, since], Observation::from_row)?;
        let all: Vec<Observation> = rows.collect::<rusqlite::Result<_>>()?;
        Ok(all.into_iter().filter(|o| !SKIPPED_KINDS.contains(&o.kind.as_str())).collect())
    }
}

/// Whether `from` reaches `to` over judged `supersedes` links.
fn supersedes_path(conn: &Connection, from: &str, to: &str, except: Option<&str>) -> Result<bool> {
    let mut stmt = conn.prepare_cached(
        "SELECT target_id FROM relations WHERE source_id = ?1 AND relation = 'supersedes' AND judgment_status = 'judged'
            AND sync_id IS NOT ?2",
    )?;
    let mut seen: HashSet<String> = HashSet::from([from.to_owned()]);
    let mut frontier = vec![from.to_owned()];
    while let Some(at) = frontier.pop() {
        let next: Vec<String> = stmt.query_map(params![at, except], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        for n in next {
            if n == to {
                return Ok(true);
            }
            if seen.len() < CYCLE_SEARCH_LIMIT && seen.insert(n.clone()) {
                frontier.push(n);
            }
        }
    }
    Ok(false)
}

fn cycle_error(newer: &str, older: &str) -> CairnError {
    CairnError::new(
        ErrorCode::SupersessionCycle,
        format!("{newer} cannot supersede {older}: {older} already supersedes it (directly or through others)"),
    )
    .with_hint("judge the pair conflicts_with instead, or re-judge the older verdict first")
}

/// Write one pair's outcome; `false` when nothing was written (a pending pair already pending).
fn record_one(tx: &Connection, pair: &Pair, outcome: &PairOutcome, now: &str) -> Result<bool> {
    let (newer, older) = (&pair.newer.sync_id, &pair.older.sync_id);
    let pending = pending_in(tx, newer, older)?;
    match outcome {
        PairOutcome::Judged(verdict) => {
            if verdict.relation == "supersedes"
                && (newer == older || supersedes_path(tx, older, newer, pending.as_deref())?)
            {
                // A cycle is refused: the pair stays for a person to look at.
                let reason = format!("left pending: {}", cycle_error(newer, older).message);
                return write_pending(tx, pending, newer, older, Some(&reason), now);
            }
            let sync_id = pending.unwrap_or_else(new_sync_id);
            tx.execute(
                "INSERT INTO relations (sync_id, source_id, target_id, relation, reason, confidence, judgment_status,
                    marked_by_actor, marked_by_kind, marked_by_model, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'judged', 'cairn', ?7, ?8, ?9, ?9)
                 ON CONFLICT(sync_id) DO UPDATE SET source_id = excluded.source_id, target_id = excluded.target_id,
                    relation = excluded.relation, reason = excluded.reason, confidence = excluded.confidence,
                    judgment_status = 'judged', marked_by_actor = 'cairn', marked_by_kind = excluded.marked_by_kind,
                    marked_by_model = excluded.marked_by_model, updated_at = excluded.updated_at",
                params![
                    sync_id,
                    newer,
                    older,
                    verdict.relation,
                    crate::text::redact_opt(Some(&verdict.reason)),
                    verdict.confidence,
                    verdict.kind.as_str(),
                    verdict.model,
                    now
                ],
            )?;
            Ok(true)
        }
        PairOutcome::Unsure { model, reason } => {
            // The model's doubt is recorded on the pending row, so the same model is not asked
            // again; a person, an agent or another model still may judge it.
            // A weak pair nobody is asked about is `ignored` (engram's status nothing else sets).
            let status = if pair.strong || pending.is_some() { "pending" } else { "ignored" };
            let sync_id = pending.unwrap_or_else(new_sync_id);
            tx.execute(
                "INSERT INTO relations (sync_id, source_id, target_id, relation, reason, judgment_status,
                    marked_by_actor, marked_by_kind, marked_by_model, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'pending', ?4, ?7, 'cairn', 'llm', ?5, ?6, ?6)
                 ON CONFLICT(sync_id) DO UPDATE SET reason = excluded.reason, marked_by_kind = 'llm',
                    marked_by_model = excluded.marked_by_model, updated_at = excluded.updated_at",
                params![sync_id, newer, older, crate::text::redact_opt(Some(reason)), model, now, status],
            )?;
            Ok(true)
        }
        PairOutcome::Pending => write_pending(tx, pending, newer, older, None, now),
        PairOutcome::Dropped => Ok(false),
    }
}

fn write_pending(
    tx: &Connection,
    pending: Option<String>,
    newer: &str,
    older: &str,
    reason: Option<&str>,
    now: &str,
) -> Result<bool> {
    if let Some(sync_id) = pending {
        if let Some(reason) = reason {
            tx.execute(
                "UPDATE relations SET reason = ?2, updated_at = ?3 WHERE sync_id = ?1",
                params![sync_id, reason, now],
            )?;
        }
        return Ok(reason.is_some());
    }
    tx.execute(
        "INSERT INTO relations (sync_id, source_id, target_id, relation, reason, judgment_status, marked_by_actor,
            marked_by_kind, created_at, updated_at)
         VALUES (?1, ?2, ?3, 'pending', ?4, 'pending', 'cairn', 'system', ?5, ?5)",
        params![new_sync_id(), newer, older, reason, now],
    )?;
    Ok(true)
}

fn pending_in(tx: &Connection, a: &str, b: &str) -> Result<Option<String>> {
    Ok(tx
        .prepare_cached(
            "SELECT sync_id FROM relations WHERE ((source_id = ?1 AND target_id = ?2) OR (source_id = ?2 AND target_id = ?1))
                AND judgment_status = 'pending' ORDER BY updated_at DESC, id DESC LIMIT 1",
        )?
        .query_row(params![a, b], |r| r.get(0))
        .optional()?)
}
