//! Relations between memories (engram §7): candidates found on save, verdicts by agents
//! (`judge`) or by a direct comparison (`compare`), listings, stats, retroactive scans and the
//! annotations shown next to search results.
//!
//! Candidates are retrieved by BM25 over the saved memory's title words and scored by a
//! normalised overlap (Dice coefficient of lightly stemmed words, title 60 %, content 40 %),
//! 0..1 whatever the corpus size. Engram compared raw BM25 to a fixed floor, which kept noise
//! and dropped true duplicates (§7.2).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{CairnError, ErrorCode, Result};
use crate::model::{Relation, new_sync_id};
use crate::search::index::{IndexFilter, SharedIndex};
use crate::search::query;
use crate::store::Store;
use crate::store::relations::{AgentVerdict, AnnotatedRelation, ComparedPair, RelationQuery};
use crate::text::{normalize_project, redact_opt};

pub mod judge;

/// How much two memories say the same (word overlap, 0..1).
pub use crate::search::overlap::similarity;

/// Verdicts an agent or a person may give.
pub const VERDICTS: &[&str] = &["related", "compatible", "scoped", "conflicts_with", "supersedes", "not_conflict"];
/// Candidates scoring below this share too little to be worth a look.
pub const CANDIDATE_MIN_SCORE: f64 = 0.5;
/// Candidates reported per save.
pub const CANDIDATE_LIMIT: usize = 3;
/// Pairs a semantic scan judges when not told (engram's `max_semantic`).
pub const DEFAULT_MAX_SEMANTIC: usize = 100;

/// A memory that may duplicate or contradict the one just saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Candidate {
    pub id: i64,
    pub sync_id: String,
    pub title: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// 0..1: how much of the saved memory's title match this one reproduces.
    pub score: f64,
    /// The pending relation to judge.
    pub judgment_id: String,
    pub topic_key: Option<String>,
}

/// A verdict to record on a pending relation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Judgment {
    pub judgment_id: String,
    pub relation: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub evidence: Option<String>,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub session_id: Option<String>,
    /// Given by a person (the web page, the TUI), not an agent: recorded as `person`.
    #[serde(default)]
    pub by_person: bool,
}

/// A direct verdict between two memories.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub memory_id_a: i64,
    pub memory_id_b: i64,
    pub relation: String,
    pub confidence: f64,
    pub reasoning: String,
    #[serde(default)]
    pub model: Option<String>,
}

/// A relation with both memories' titles, for listings.
pub use crate::store::relations::RelationRow;

/// One relation with the titles of its two memories (`None` when a memory is gone or deleted),
/// so a reader sees what it links without two more lookups.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// `TitledRelation`: the daemon's `RelationDetail` adds engram's names for the same facts.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = TitledRelation))]
pub struct RelationDetail {
    #[serde(flatten)]
    pub relation: Relation,
    pub source_title: Option<String>,
    pub target_title: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelationFilter {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    /// RFC 3339: relations created at or after.
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
    #[serde(default)]
    pub offset: Option<usize>,
    /// Only relations of this memory (either side).
    #[serde(default)]
    pub memory_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RelationPage {
    pub total: i64,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub limit: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub offset: usize,
    pub relations: Vec<RelationRow>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RelationStats {
    pub project: Option<String>,
    pub by_relation: std::collections::BTreeMap<String, i64>,
    pub by_judgment_status: std::collections::BTreeMap<String, i64>,
    /// Sync-deferred relations (none until sync exists).
    pub deferred: i64,
    pub dead: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanRequest {
    pub project: String,
    #[serde(default)]
    pub since: Option<String>,
    #[serde(default)]
    pub apply: bool,
    #[serde(default)]
    pub max_insert: Option<usize>,
    /// Judge the pairs with the configured model (and the rules) instead of only listing them.
    #[serde(default)]
    pub semantic: bool,
    /// Semantic: most pairs judged in this call (default [`DEFAULT_MAX_SEMANTIC`]).
    #[serde(default)]
    pub max_semantic: Option<usize>,
    /// Semantic: pairs of the list to skip (a previous call's `next_offset`).
    #[serde(default)]
    pub offset: Option<usize>,
}

/// A retroactive relation scan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
// `ScanCounts`: the daemon's `ScanResult` adds engram's LLM-scan counters.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = ScanCounts))]
pub struct ScanResult {
    pub project: String,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub inspected: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub candidates_found: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub already_related: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub inserted: usize,
    pub capped: bool,
    pub dry_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// Semantic: pairs given a verdict (by a rule or the model).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub semantic_judged: usize,
    /// Semantic: pairs the model was unsure of (left pending for a person or an agent).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub semantic_skipped: usize,
    /// Semantic: model calls that failed (the pairs stay pending).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub semantic_errors: usize,
    /// Semantic: pairs still to judge after this call.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub semantic_remaining: usize,
    /// Semantic: the `offset` of the next call (pairs that stay listed are skipped).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub next_offset: usize,
}

/// A scan's `since`: blank is no limit; a value that is not a time is refused (read as "no
/// limit", an applied scan would pair up every memory of the project).
fn checked_since(since: Option<&str>) -> Result<Option<String>> {
    match since.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => Ok(Some(
            crate::clock::normalize_ts(s)
                .ok_or_else(|| CairnError::invalid(format!("since {s:?} is not an RFC 3339 time")))?,
        )),
        None => Ok(None),
    }
}

fn validate_verdict(relation: &str) -> Result<()> {
    if VERDICTS.contains(&relation) {
        return Ok(());
    }
    Err(CairnError::invalid(format!("{relation:?} is not a verdict"))
        .with_hint(format!("use one of: {}", VERDICTS.join(", "))))
}

fn relation_not_found(what: &str) -> CairnError {
    CairnError::new(ErrorCode::RelationNotFound, format!("relation {what} not found"))
}

impl Store {
    /// Memories of the same project and scope that look like the memory `id`, scored 0..1.
    /// With `record`, each becomes a pending relation to judge.
    /// Ranked on `index` when one is given and built (narrowed to the project and scope), else
    /// on FTS5.
    pub fn find_candidates(
        &mut self,
        id: i64,
        limit: usize,
        record: bool,
        index: Option<&std::sync::Arc<SharedIndex>>,
    ) -> Result<Vec<Candidate>> {
        let saved = self.get(id)?;
        let scored = self.lexical_neighbours(&saved, limit, CANDIDATE_MIN_SCORE, index)?;
        let mut found = Vec::new();
        for (score, other) in scored {
            let judgment_id = if record { self.insert_pending(&saved.sync_id, &other.sync_id)? } else { String::new() };
            found.push(Candidate {
                id: other.id,
                sync_id: other.sync_id,
                title: other.title,
                kind: other.kind,
                score: (score * 1000.0).round() / 1000.0,
                judgment_id,
                topic_key: other.topic_key,
            });
        }
        Ok(found)
    }

    /// Memories of `saved`'s project and scope sharing words with it (BM25 over its title),
    /// scored by [`similarity`], at least `floor`, best first, at most `limit`. Ranked on
    /// `index` when it is given and built (see [`Store::ranked_by_title`]).
    pub(crate) fn lexical_neighbours(
        &self,
        saved: &crate::model::Observation,
        limit: usize,
        floor: f64,
        index: Option<&std::sync::Arc<SharedIndex>>,
    ) -> Result<Vec<(f64, crate::model::Observation)>> {
        let ranked = self.ranked_by_title(saved, limit * 20 + 20, index)?;
        let mut rows = self.get_many(ranked.iter().copied().filter(|&id| id != saved.id))?;
        let mut scored = Vec::new();
        for id in ranked {
            let Some(other) = rows.remove(&id) else { continue };
            if other.project != saved.project || other.scope != saved.scope {
                continue;
            }
            let score = similarity(saved, &other);
            if score >= floor {
                scored.push((score, other));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(limit);
        Ok(scored)
    }

    /// The ids of the `depth` memories whose words rank nearest `saved`'s title, best first.
    /// On the daemon's in-memory index when it is built, narrowed to `saved`'s project and
    /// scope; else on FTS5 over every memory, which at a million memories took ~300 ms per
    /// memory judged (a title's common words match most of the table and FTS5 scores every
    /// match), so the judge's backlog after an import held a core for days.
    fn ranked_by_title(
        &self,
        saved: &crate::model::Observation,
        depth: usize,
        index: Option<&std::sync::Arc<SharedIndex>>,
    ) -> Result<Vec<i64>> {
        let terms = query::parse(&saved.title);
        // The index does not match phrases; FTS5 does.
        let phrase = terms.iter().any(|t| matches!(t, query::Term::Phrase(_)));
        if let Some(index) = index.filter(|_| !phrase) {
            let filter = IndexFilter { project: Some(saved.project.clone()), kind: None, scope: Some(saved.scope) };
            if let Some(found) = index.search(self.conn(), &terms, &filter, depth)? {
                return Ok(found.into_iter().map(|(id, _)| id).collect());
            }
        }
        let Some(expr) = query::to_fts(&terms) else { return Ok(Vec::new()) };
        Ok(self.fts_ranked(&expr, depth)?.into_iter().map(|(id, _)| id).collect())
    }

    fn insert_pending(&mut self, source: &str, target: &str) -> Result<String> {
        let sync_id = new_sync_id();
        self.insert_pending_relation(&sync_id, source, target)?;
        Ok(sync_id)
    }

    pub fn get_relation_by_sync_id(&self, sync_id: &str) -> Result<Relation> {
        self.relation_by_sync_id(sync_id)?.ok_or_else(|| relation_not_found(&format!("{sync_id:?}")))
    }

    pub fn get_relation(&self, id: i64) -> Result<Relation> {
        self.relation_by_id(id)?.ok_or_else(|| relation_not_found(&format!("#{id}")))
    }

    /// A relation and the titles of the memories it links.
    pub fn relation_detail(&self, id: i64) -> Result<RelationDetail> {
        let relation = self.get_relation(id)?;
        let source_title = self.live_title_by_sync_id(&relation.source_id)?;
        let target_title = self.live_title_by_sync_id(&relation.target_id)?;
        Ok(RelationDetail { relation, source_title, target_title })
    }

    /// Record an agent's verdict on a pending (or earlier judged) relation.
    pub fn judge(&mut self, j: &Judgment) -> Result<Relation> {
        let (j, _) = self.redacted(j);
        let j = &j;
        validate_verdict(&j.relation)?;
        if let Some(c) = j.confidence.filter(|c| !(0.0..=1.0).contains(c)) {
            return Err(CairnError::invalid(format!("confidence {c} is outside 0..1")));
        }
        let current = self.get_relation_by_sync_id(&j.judgment_id)?;
        self.require_same_project(&current.source_id, &current.target_id)?;
        if j.relation == "supersedes" {
            self.check_no_cycle(&current.source_id, &current.target_id, Some(&current.sync_id))?;
        }
        let verdict = AgentVerdict {
            relation: &j.relation,
            reason: redact_opt(j.reason.as_deref()),
            evidence: redact_opt(j.evidence.as_deref()),
            confidence: j.confidence,
            // A blank session id names no session.
            session_id: j.session_id.as_deref().filter(|s| !s.trim().is_empty()),
            judge: if j.by_person { "person" } else { "agent" },
        };
        self.set_agent_verdict(&j.judgment_id, &verdict)?;
        self.get_relation_by_sync_id(&j.judgment_id)
    }

    /// Record a verdict between two memories directly; one relation per unordered pair.
    pub fn compare(&mut self, c: &Comparison) -> Result<Relation> {
        let (c, _) = self.redacted(c);
        let c = &c;
        validate_verdict(&c.relation)?;
        if !(0.0..=1.0).contains(&c.confidence) {
            return Err(CairnError::invalid(format!("confidence {} is outside 0..1", c.confidence)));
        }
        if c.reasoning.trim().is_empty() {
            return Err(CairnError::empty("reasoning"));
        }
        if c.memory_id_a == c.memory_id_b {
            return Err(CairnError::invalid("a memory cannot be compared with itself"));
        }
        let a = self.get(c.memory_id_a)?;
        let b = self.get(c.memory_id_b)?;
        self.require_same_project(&a.sync_id, &b.sync_id)?;
        let existing = self.relation_between(&a.sync_id, &b.sync_id)?;
        if c.relation == "supersedes" {
            self.check_no_cycle(&a.sync_id, &b.sync_id, existing.as_deref())?;
        }
        let sync_id = existing.unwrap_or_else(new_sync_id);
        let pair = ComparedPair {
            source: &a.sync_id,
            target: &b.sync_id,
            relation: &c.relation,
            reasoning: redact_opt(Some(&c.reasoning)),
            confidence: c.confidence,
            model: redact_opt(c.model.as_deref()),
        };
        self.upsert_compared_relation(&sync_id, &pair)?;
        self.get_relation_by_sync_id(&sync_id)
    }

    /// Relations across projects are refused: a verdict only makes sense within one.
    fn require_same_project(&self, a: &str, b: &str) -> Result<()> {
        match (self.project_by_sync_id(a)?, self.project_by_sync_id(b)?) {
            (Some(pa), Some(pb)) if !pa.is_empty() && !pb.is_empty() && pa != pb => {
                Err(CairnError::invalid(format!("the memories belong to different projects ({pa:?} and {pb:?})")))
            }
            _ => Ok(()),
        }
    }

    /// A page of relations, newest first.
    pub fn list_relations(&self, filter: &RelationFilter) -> Result<RelationPage> {
        let limit = filter.limit.unwrap_or(50).clamp(1, 500);
        // Past i64::MAX there is nothing to skip to (and `as i64` would wrap to the first page).
        let offset = filter.offset.unwrap_or(0).min(i64::MAX as usize);
        let since = match &filter.since {
            Some(s) => Some(
                crate::clock::normalize_ts(s)
                    .ok_or_else(|| CairnError::invalid(format!("since {s:?} is not an RFC 3339 time")))?,
            ),
            None => None,
        };
        let project = filter.project.as_deref().map(|p| normalize_project(p).0);
        let query = RelationQuery {
            status: filter.status.as_deref(),
            since: since.as_deref(),
            project: project.as_deref(),
            memory_id: filter.memory_id,
            limit,
            offset,
        };
        let (total, relations) = self.relation_rows(&query)?;
        Ok(RelationPage { total, limit, offset, relations })
    }

    pub fn relation_stats(&self, project: Option<&str>) -> Result<RelationStats> {
        let project = project.map(|p| normalize_project(p).0);
        let (by_relation, by_judgment_status) = self.relation_counts(project.as_deref())?;
        let stats = RelationStats { project, by_relation, by_judgment_status, ..RelationStats::default() };
        Ok(stats)
    }

    /// Look for relation candidates across a project's memories; with `apply`, record the pairs
    /// not already related (up to `max_insert`). Ranked on `index` when one is given.
    pub fn scan_relations(
        &mut self,
        req: &ScanRequest,
        index: Option<&std::sync::Arc<SharedIndex>>,
    ) -> Result<ScanResult> {
        let project = normalize_project(&req.project).0;
        if project.is_empty() {
            return Err(CairnError::empty("project"));
        }
        let max_insert = req.max_insert.unwrap_or(100);
        let since = checked_since(req.since.as_deref())?;
        let ids = self.live_ids_of_project(&project, since.as_deref())?;
        let mut result = ScanResult { project, dry_run: !req.apply, ..ScanResult::default() };
        // Each pair once: A finds B and B finds A.
        let mut seen_pairs = std::collections::HashSet::new();
        for id in ids {
            result.inspected += 1;
            let source = self.get(id)?.sync_id;
            for candidate in self.find_candidates(id, 10, false, index)? {
                if !seen_pairs.insert((id.min(candidate.id), id.max(candidate.id))) {
                    continue;
                }
                result.candidates_found += 1;
                if self.related(&source, &candidate.sync_id)? {
                    result.already_related += 1;
                    continue;
                }
                if !req.apply {
                    continue;
                }
                if result.inserted >= max_insert {
                    result.capped = true;
                    continue;
                }
                self.insert_pending(&source, &candidate.sync_id)?;
                result.inserted += 1;
            }
        }
        if result.capped {
            result.warning = Some(format!("stopped inserting at max_insert={max_insert}; run again to continue"));
        }
        Ok(result)
    }

    /// Lines to show under search results (engram §7.5), keyed by memory sync id.
    pub fn relation_annotations(&self, sync_ids: &[String]) -> Result<HashMap<String, Vec<String>>> {
        let mut notes: HashMap<String, Vec<String>> = HashMap::new();
        if sync_ids.is_empty() {
            return Ok(notes);
        }
        for row in self.relations_touching(sync_ids)? {
            let AnnotatedRelation { source, target, relation, status, source_live: a, target_live: b } = row;
            let label = |s: &Option<(i64, String)>, sync_id: &str| match s {
                Some((id, title)) => format!("#{id} ({title})"),
                None => format!("{sync_id} (deleted)"),
            };
            let mut add = |key: &str, line: String| {
                if sync_ids.iter().any(|s| s == key) {
                    notes.entry(key.to_owned()).or_default().push(line);
                }
            };
            match (status.as_str(), relation.as_str()) {
                ("judged", "supersedes") => {
                    add(&source, format!("supersedes: {}", label(&b, &target)));
                    // A deleted replacement replaces nothing: the older memory is current again.
                    if a.is_some() {
                        add(&target, format!("superseded_by: {}", label(&a, &source)));
                    }
                }
                ("judged", "conflicts_with") => add(&source, format!("conflicts: {}", label(&b, &target))),
                ("pending", _) => {
                    add(&source, format!("conflict: contested by {} (pending)", label(&b, &target)));
                    add(&target, format!("conflict: contested by {} (pending)", label(&a, &source)));
                }
                _ => {}
            }
        }
        Ok(notes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{obs, store_with_clock};

    #[test]
    fn near_duplicates_become_pending_candidates_noise_does_not() {
        let (mut s, _) = store_with_clock();
        let a = s.save(&obs("p", "Redis connection pool exhausted under load", "raised pool to 50")).unwrap();
        s.save(&obs("p", "Unrelated: pool party planning", "bring snacks")).unwrap();
        s.save(&obs("q", "Redis connection pool exhausted under load", "other project")).unwrap();
        let b = s.save(&obs("p", "Redis connection pool exhausted during peak load", "pool to 80 now")).unwrap();
        let found = s.find_candidates(b.id, CANDIDATE_LIMIT, true, None).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].id, a.id);
        assert!(found[0].score >= CANDIDATE_MIN_SCORE && found[0].score <= 1.0);
        let rel = s.get_relation_by_sync_id(&found[0].judgment_id).unwrap();
        assert_eq!(rel.judgment_status, "pending");
        let notes = s.relation_annotations(std::slice::from_ref(&a.sync_id)).unwrap();
        assert!(notes[&a.sync_id][0].contains("pending"));
    }

    #[test]
    fn look_alikes_ranked_on_the_index_stay_in_the_project_where_fts5_ranks_them_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("cairn.db")).unwrap();
        let a = s.save(&obs("p", "Redis connection pool exhausted under load", "raised pool to 50")).unwrap();
        s.save(&obs("p", "Unrelated: pool party planning", "bring snacks")).unwrap();
        // Another project says the same thing many times over.
        for i in 0..150 {
            s.save(&obs("q", &format!("Redis connection pool exhausted under load {i}"), "raised pool")).unwrap();
        }
        let b = s.save(&obs("p", "Redis connection pool exhausted during peak load", "pool to 80 now")).unwrap();
        let index = std::sync::Arc::new(SharedIndex::default());
        index.set(s.build_index().unwrap());
        let ids = |found: Vec<Candidate>| found.into_iter().map(|c| c.id).collect::<Vec<_>>();
        let on_index = s.find_candidates(b.id, CANDIDATE_LIMIT, false, Some(&index)).unwrap();
        assert_eq!(ids(on_index), vec![a.id]);
        // FTS5 ranks all projects together: its depth went to q's 150 look-alikes.
        let on_fts = s.find_candidates(b.id, CANDIDATE_LIMIT, false, None).unwrap();
        assert_eq!(ids(on_fts), Vec::<i64>::new());
    }

    #[test]
    fn relation_detail_names_both_memories() {
        let (mut s, _) = store_with_clock();
        let a = s.save(&obs("p", "Use Postgres 15", "pinned")).unwrap();
        let b = s.save(&obs("p", "Use Postgres 16", "moved")).unwrap();
        let comparison = Comparison {
            memory_id_a: b.id,
            memory_id_b: a.id,
            relation: "supersedes".into(),
            confidence: 0.9,
            reasoning: "newer".into(),
            model: None,
        };
        let rel = s.compare(&comparison).unwrap();
        let detail = s.relation_detail(rel.id).unwrap();
        assert_eq!(detail.source_title.as_deref(), Some("Use Postgres 16"));
        assert_eq!(detail.target_title.as_deref(), Some("Use Postgres 15"));
        s.delete(a.id, false).unwrap();
        assert_eq!(s.relation_detail(rel.id).unwrap().target_title, None);
        assert_eq!(s.relation_detail(999).unwrap_err().code, ErrorCode::RelationNotFound);
    }

    #[test]
    fn judge_compare_list_stats() {
        let (mut s, _) = store_with_clock();
        let a = s.save(&obs("p", "Use Postgres 15", "pinned")).unwrap();
        let b = s.save(&obs("p", "Use Postgres 16", "moved")).unwrap();
        let c = s.save(&obs("q", "Elsewhere", "x")).unwrap();
        let rel = s
            .compare(&Comparison {
                memory_id_a: b.id,
                memory_id_b: a.id,
                relation: "supersedes".into(),
                confidence: 0.9,
                reasoning: "newer".into(),
                model: None,
            })
            .unwrap();
        let again = s
            .compare(&Comparison {
                memory_id_a: a.id,
                memory_id_b: b.id,
                relation: "supersedes".into(),
                confidence: 0.8,
                reasoning: "still".into(),
                model: None,
            })
            .unwrap();
        assert_eq!(rel.sync_id, again.sync_id, "one relation per pair");
        // Re-judged the other way: the verdict is what was said last (a before, b after).
        let notes = s.relation_annotations(&[a.sync_id.clone(), b.sync_id.clone()]).unwrap();
        assert!(notes[&a.sync_id][0].starts_with("supersedes: #2"), "{notes:?}");
        assert!(notes[&b.sync_id][0].starts_with("superseded_by: #1"), "{notes:?}");
        let bad = Comparison {
            memory_id_a: a.id,
            memory_id_b: c.id,
            relation: "related".into(),
            confidence: 0.5,
            reasoning: "x".into(),
            model: None,
        };
        assert_eq!(s.compare(&bad).unwrap_err().code, ErrorCode::InvalidArgument);
        let wrong = Judgment { judgment_id: rel.sync_id.clone(), relation: "maybe".into(), ..Default::default() };
        assert_eq!(s.judge(&wrong).unwrap_err().code, ErrorCode::InvalidArgument);
        let missing = Judgment { judgment_id: "nope".into(), relation: "related".into(), ..Default::default() };
        assert_eq!(s.judge(&missing).unwrap_err().code, ErrorCode::RelationNotFound);
        let page = s.list_relations(&RelationFilter { project: Some("p".into()), ..Default::default() }).unwrap();
        assert_eq!(page.total, 1);
        let of_a = s.list_relations(&RelationFilter { memory_id: Some(a.id), ..Default::default() }).unwrap();
        assert_eq!(of_a.total, 1, "a relation is listed for either of its memories");
        let of_c = s.list_relations(&RelationFilter { memory_id: Some(c.id), ..Default::default() }).unwrap();
        assert_eq!(of_c.total, 0);
        assert_eq!(page.relations[0].source_title.as_deref(), Some("Use Postgres 15"), "as re-judged last");
        assert_eq!(s.relation_stats(Some("p")).unwrap().by_relation["supersedes"], 1);
    }

    #[test]
    fn scan_dry_run_then_apply() {
        let (mut s, _) = store_with_clock();
        s.save(&obs("p", "Flaky login test on CI", "a")).unwrap();
        s.save(&obs("p", "Flaky login test on CI again", "b")).unwrap();
        let dry = s.scan_relations(&ScanRequest { project: "p".into(), ..Default::default() }, None).unwrap();
        assert!(dry.dry_run && dry.candidates_found >= 1 && dry.inserted == 0);
        let applied =
            s.scan_relations(&ScanRequest { project: "p".into(), apply: true, ..Default::default() }, None).unwrap();
        assert_eq!(applied.inserted, 1, "{applied:?}");
        let again =
            s.scan_relations(&ScanRequest { project: "p".into(), apply: true, ..Default::default() }, None).unwrap();
        assert_eq!(again.inserted, 0);
    }

    /// Found by fuzzing the HTTP API: a blank session id was stored, and came back as one.
    #[test]
    fn a_blank_session_id_on_a_verdict_is_none() {
        let (mut s, _) = store_with_clock();
        let a = s.save(&obs("p", "Use Postgres 15", "pinned")).unwrap();
        let b = s.save(&obs("p", "Use Postgres 16", "moved")).unwrap();
        let rel = s
            .compare(&Comparison {
                memory_id_a: b.id,
                memory_id_b: a.id,
                relation: "related".into(),
                confidence: 0.5,
                reasoning: "same topic".into(),
                model: None,
            })
            .unwrap();
        let judged = s
            .judge(&Judgment {
                judgment_id: rel.sync_id.clone(),
                relation: "supersedes".into(),
                session_id: Some("  ".into()),
                ..Judgment::default()
            })
            .unwrap();
        assert_eq!(judged.session_id, None);
    }

    /// Found by fuzzing the HTTP API: a `since` that is no time was read as "since ever".
    #[test]
    fn scan_refuses_a_since_that_is_not_a_time() {
        let (mut s, _) = store_with_clock();
        s.save(&obs("p", "Flaky login test on CI", "a")).unwrap();
        let req = ScanRequest { project: "p".into(), since: Some("0".into()), apply: true, ..Default::default() };
        assert_eq!(s.scan_relations(&req, None).unwrap_err().code, ErrorCode::InvalidArgument);
        let blank = ScanRequest { project: "p".into(), since: Some(" ".into()), ..Default::default() };
        assert!(s.scan_relations(&blank, None).is_ok(), "blank means no limit");
    }
}
