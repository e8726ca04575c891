//! The SQL of relations between memories (`crate::relations` holds the rules: verdicts,
//! candidates, scans, the annotations' wording; `store::judging` the judge's own writes).

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::Store;
use crate::error::Result;
use crate::model::{RELATION_COLUMNS, Relation};

/// A relation with both memories' titles, for listings (re-exported as
/// `crate::relations::RelationRow`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RelationRow {
    pub id: i64,
    pub sync_id: String,
    pub relation: String,
    pub judgment_status: String,
    pub source_id: String,
    pub source_title: Option<String>,
    pub target_id: String,
    pub target_title: Option<String>,
    pub confidence: Option<f64>,
    pub created_at: String,
    pub updated_at: String,
    /// Why the verdict was given, in the judge's words (`None` while pending).
    #[serde(default)]
    pub reason: Option<String>,
    /// Who judged: `rule`, `llm`, `agent` or `person` (`None` while pending).
    #[serde(default)]
    pub marked_by_kind: Option<String>,
    /// The model that judged, when a model did.
    #[serde(default)]
    pub marked_by_model: Option<String>,
}

/// Which relations a listing reads, its values already normalised by the rules.
pub(crate) struct RelationQuery<'a> {
    pub(crate) status: Option<&'a str>,
    /// Created at or after (a normalised RFC 3339 time).
    pub(crate) since: Option<&'a str>,
    /// Either memory in this project.
    pub(crate) project: Option<&'a str>,
    /// Either memory this one.
    pub(crate) memory_id: Option<i64>,
    pub(crate) limit: usize,
    pub(crate) offset: usize,
}

/// An agent's verdict on a relation, redacted by the caller.
pub(crate) struct AgentVerdict<'a> {
    pub(crate) relation: &'a str,
    pub(crate) reason: Option<String>,
    pub(crate) evidence: Option<String>,
    pub(crate) confidence: Option<f64>,
    pub(crate) session_id: Option<&'a str>,
    /// `agent` or `person`: who gave it.
    pub(crate) judge: &'static str,
}

/// A direct comparison's verdict between two memories (by sync id), redacted by the caller.
pub(crate) struct ComparedPair<'a> {
    pub(crate) source: &'a str,
    pub(crate) target: &'a str,
    pub(crate) relation: &'a str,
    pub(crate) reasoning: Option<String>,
    pub(crate) confidence: f64,
    pub(crate) model: Option<String>,
}

/// A relation touching one of the memories asked about, with each side's id and title when
/// that memory is live.
pub(crate) struct AnnotatedRelation {
    pub(crate) source: String,
    pub(crate) target: String,
    pub(crate) relation: String,
    pub(crate) status: String,
    pub(crate) source_live: Option<(i64, String)>,
    pub(crate) target_live: Option<(i64, String)>,
}

impl Store {
    /// Record a pending relation from `source` to `target` (sync ids) under `sync_id`.
    pub(crate) fn insert_pending_relation(&mut self, sync_id: &str, source: &str, target: &str) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO relations (sync_id, source_id, target_id, relation, judgment_status, marked_by_actor,
                    marked_by_kind, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'pending', 'pending', 'cairn', 'system', ?4, ?4)",
                params![sync_id, source, target, now],
            )?;
            Ok(())
        })
    }

    pub(crate) fn relation_by_sync_id(&self, sync_id: &str) -> Result<Option<Relation>> {
        Ok(self
            .conn()
            .query_row(
                &format!("SELECT {RELATION_COLUMNS} FROM relations r WHERE r.sync_id = ?1"),
                [sync_id],
                Relation::from_row,
            )
            .optional()?)
    }

    pub(crate) fn relation_by_id(&self, id: i64) -> Result<Option<Relation>> {
        Ok(self
            .conn()
            .query_row(&format!("SELECT {RELATION_COLUMNS} FROM relations r WHERE r.id = ?1"), [id], Relation::from_row)
            .optional()?)
    }

    /// The title of the live memory `sync_id`.
    pub(crate) fn live_title_by_sync_id(&self, sync_id: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row("SELECT title FROM observations WHERE sync_id = ?1 AND deleted_at IS NULL", [sync_id], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// The project of the memory `sync_id`, deleted or not.
    pub(crate) fn project_by_sync_id(&self, sync_id: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row("SELECT project FROM observations WHERE sync_id = ?1", [sync_id], |r| r.get(0))
            .optional()?)
    }

    /// Record an agent's (or a person's) verdict on the relation `sync_id`.
    pub(crate) fn set_agent_verdict(&mut self, sync_id: &str, verdict: &AgentVerdict<'_>) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "UPDATE relations SET relation = ?2, reason = ?3, evidence = ?4, confidence = ?5,
                    judgment_status = 'judged', marked_by_actor = ?8, marked_by_kind = ?8,
                    marked_by_model = NULL, session_id = ?6, updated_at = ?7
                 WHERE sync_id = ?1",
                params![
                    sync_id,
                    verdict.relation,
                    verdict.reason,
                    verdict.evidence,
                    verdict.confidence,
                    verdict.session_id,
                    now,
                    verdict.judge
                ],
            )?;
            Ok(())
        })
    }

    /// The sync id of the relation last updated between `a` and `b`, either direction.
    pub(crate) fn relation_between(&self, a: &str, b: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT sync_id FROM relations WHERE (source_id = ?1 AND target_id = ?2) OR (source_id = ?2 AND target_id = ?1)
                 ORDER BY updated_at DESC LIMIT 1",
                params![a, b],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// Whether any relation links `a` and `b`, either direction.
    pub(crate) fn related(&self, a: &str, b: &str) -> Result<bool> {
        Ok(self.conn().query_row(
            "SELECT EXISTS(SELECT 1 FROM relations WHERE (source_id = ?1 AND target_id = ?2) OR (source_id = ?2 AND target_id = ?1))",
            params![a, b],
            |r| r.get(0),
        )?)
    }

    /// Write a comparison's verdict as the judged relation `sync_id` (inserted, or replacing
    /// what that relation said).
    pub(crate) fn upsert_compared_relation(&mut self, sync_id: &str, pair: &ComparedPair<'_>) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO relations (sync_id, source_id, target_id, relation, reason, confidence, judgment_status,
                    marked_by_actor, marked_by_kind, marked_by_model, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'judged', 'cairn', 'system', ?7, ?8, ?8)
                 ON CONFLICT(sync_id) DO UPDATE SET source_id = excluded.source_id, target_id = excluded.target_id,
                    relation = excluded.relation, reason = excluded.reason,
                    confidence = excluded.confidence, judgment_status = 'judged', marked_by_actor = 'cairn',
                    marked_by_kind = 'system', marked_by_model = excluded.marked_by_model, updated_at = excluded.updated_at",
                params![
                    sync_id,
                    pair.source,
                    pair.target,
                    pair.relation,
                    pair.reasoning,
                    pair.confidence,
                    pair.model,
                    now
                ],
            )?;
            Ok(())
        })
    }

    /// How many relations `query` matches, and its page of them, newest first.
    pub(crate) fn relation_rows(&self, query: &RelationQuery<'_>) -> Result<(i64, Vec<RelationRow>)> {
        let where_sql = "WHERE (?1 IS NULL OR r.judgment_status = ?1) AND (?2 IS NULL OR r.created_at >= ?2)
             AND (?3 IS NULL OR a.project = ?3 OR b.project = ?3) AND (?6 IS NULL OR a.id = ?6 OR b.id = ?6)";
        let from = "FROM relations r LEFT JOIN observations a ON a.sync_id = r.source_id
                    LEFT JOIN observations b ON b.sync_id = r.target_id";
        let total: i64 = self.conn().query_row(
            &format!("SELECT count(*) {from} {where_sql}"),
            params![query.status, query.since, query.project, None::<i64>, None::<i64>, query.memory_id],
            |r| r.get(0),
        )?;
        let mut stmt = self.conn().prepare(&format!(
            "SELECT r.id, r.sync_id, r.relation, r.judgment_status, r.source_id,
                    CASE WHEN a.deleted_at IS NULL THEN a.title END, r.target_id,
                    CASE WHEN b.deleted_at IS NULL THEN b.title END, r.confidence, r.created_at, r.updated_at,
                    r.reason, r.marked_by_kind, r.marked_by_model
             {from} {where_sql} ORDER BY r.created_at DESC, r.id DESC LIMIT ?4 OFFSET ?5"
        ))?;
        let rows = stmt.query_map(
            params![query.status, query.since, query.project, query.limit as i64, query.offset as i64, query.memory_id],
            |r| {
                Ok(RelationRow {
                    id: r.get(0)?,
                    sync_id: r.get(1)?,
                    relation: r.get(2)?,
                    judgment_status: r.get(3)?,
                    source_id: r.get(4)?,
                    source_title: r.get(5)?,
                    target_id: r.get(6)?,
                    target_title: r.get(7)?,
                    confidence: r.get(8)?,
                    created_at: r.get(9)?,
                    updated_at: r.get(10)?,
                    reason: r.get(11)?,
                    marked_by_kind: r.get(12)?,
                    marked_by_model: r.get(13)?,
                })
            },
        )?;
        Ok((total, rows.collect::<rusqlite::Result<_>>()?))
    }

    /// Relations touching `project` (all without one), counted by verdict and by judgment
    /// status.
    pub(crate) fn relation_counts(
        &self,
        project: Option<&str>,
    ) -> Result<(BTreeMap<String, i64>, BTreeMap<String, i64>)> {
        let mut by_relation = BTreeMap::new();
        let mut by_status = BTreeMap::new();
        for (column, map) in [("relation", &mut by_relation), ("judgment_status", &mut by_status)] {
            let mut stmt = self.conn().prepare(&format!(
                "SELECT r.{column}, count(*) FROM relations r
                 LEFT JOIN observations a ON a.sync_id = r.source_id LEFT JOIN observations b ON b.sync_id = r.target_id
                 WHERE ?1 IS NULL OR a.project = ?1 OR b.project = ?1 GROUP BY r.{column}"
            ))?;
            for row in stmt.query_map([&project], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
                let (k, v) = row?;
                map.insert(k, v);
            }
        }
        Ok((by_relation, by_status))
    }

    /// Ids of `project`'s live memories created at or after `since` (all without it), in order.
    pub(crate) fn live_ids_of_project(&self, project: &str, since: Option<&str>) -> Result<Vec<i64>> {
        let mut stmt = self.conn().prepare(
            "SELECT id FROM observations WHERE project = ?1 AND deleted_at IS NULL AND (?2 IS NULL OR created_at >= ?2) ORDER BY id",
        )?;
        Ok(stmt.query_map(params![project, since], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?)
    }

    /// The relations (orphaned ones left out) with either side among `sync_ids`.
    pub(crate) fn relations_touching(&self, sync_ids: &[String]) -> Result<Vec<AnnotatedRelation>> {
        if sync_ids.is_empty() {
            return Ok(Vec::new());
        }
        let placeholders = vec!["?"; sync_ids.len()].join(",");
        let sql = format!(
            "SELECT r.source_id, r.target_id, r.relation, r.judgment_status, a.id, a.title, a.deleted_at, b.id, b.title, b.deleted_at
             FROM relations r LEFT JOIN observations a ON a.sync_id = r.source_id LEFT JOIN observations b ON b.sync_id = r.target_id
             WHERE r.judgment_status != 'orphaned' AND (r.source_id IN ({placeholders}) OR r.target_id IN ({placeholders}))"
        );
        // Cached: a page of hits has the same length every time, so the same text.
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let args: Vec<&String> = sync_ids.iter().chain(sync_ids.iter()).collect();
        let rows = stmt.query_map(rusqlite::params_from_iter(args), |r| {
            Ok(AnnotatedRelation {
                source: r.get(0)?,
                target: r.get(1)?,
                relation: r.get(2)?,
                status: r.get(3)?,
                source_live: live_side(r, 4)?,
                target_live: live_side(r, 7)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// `(id, title)` of one side of a relation when that memory exists and is not deleted.
fn live_side(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Option<(i64, String)>> {
    let id: Option<i64> = r.get(at)?;
    let title: Option<String> = r.get(at + 1)?;
    let deleted: Option<String> = r.get(at + 2)?;
    Ok(match (id, title, deleted) {
        (Some(id), Some(title), None) => Some((id, title)),
        _ => None,
    })
}
