//! The semantic engine and hybrid fusion.
//!
//! Hybrid ranking is weighted reciprocal rank fusion: a memory scores
//! `W_LEXICAL / (K + lexical place) + W_SEMANTIC / (K + semantic place)`. Ranks, not raw
//! scores, are fused because BM25 and cosine live on unrelated scales that shift with every
//! corpus; a memory near the top of both lists wins, and one that only one ranking finds still
//! gets in. The constants were chosen on the dev half of `eval/coding-memory.json` (K 20–100
//! and a lexical weight up to 1.5 changed recall@5 by under 0.02; a similarity floor of 0.3
//! instead of 0.2 lost Spanish questions) and checked on two LoCoMo conversations; the test
//! half was not used for tuning (docs/BENCHMARKS.md).

use std::collections::HashMap;

use super::{Candidate, HitScores, MatchKind, SearchEngine, SearchQuery, passes_filters};
use crate::error::Result;
use crate::store::Store;

/// RRF's damping constant: larger flattens the difference between neighbouring places.
pub const RRF_K: f64 = 60.0;
/// Weight of the lexical ranking.
pub const W_LEXICAL: f64 = 1.0;
/// Weight of the semantic ranking.
pub const W_SEMANTIC: f64 = 1.0;
/// Cosine below which a memory is not considered related at all (all-MiniLM-L6-v2 puts
/// unrelated sentences around 0.0–0.15).
pub const MIN_SIMILARITY: f32 = 0.2;
/// Candidates each ranking contributes before fusion, per result wanted.
const DEPTH_PER_RESULT: usize = 3;
const MIN_DEPTH: usize = 30;

/// Nearest memories to the query's vector, filtered like every search.
pub struct SemanticEngine<'a> {
    pub vector: &'a [f32],
}

impl SearchEngine for SemanticEngine<'_> {
    fn name(&self) -> &'static str {
        "semantic"
    }

    fn candidates(&self, store: &Store, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        let Some(semantic) = store.semantic() else { return Ok(Vec::new()) };
        // Filters are checked against the table; fetch more when too many fall out.
        let mut fetch = limit * 2 + 16;
        loop {
            let nearest = semantic.nearest(self.vector, fetch);
            let mut exhausted = nearest.len() < fetch;
            let mut kept = Vec::with_capacity(limit);
            for (id, cosine) in nearest {
                if cosine < MIN_SIMILARITY {
                    exhausted = true;
                    break;
                }
                if passes_filters(store, id, query)?.is_some() {
                    kept.push(semantic_candidate(id, cosine));
                    if kept.len() == limit {
                        break;
                    }
                }
            }
            if kept.len() == limit || exhausted {
                return Ok(kept);
            }
            fetch *= 4;
        }
    }
}

fn semantic_candidate(id: i64, cosine: f32) -> Candidate {
    let scores = HitScores { lexical: None, semantic: Some(cosine), fused: f64::from(cosine) };
    Candidate { id, rank: -f64::from(cosine), snippet: String::new(), matched: MatchKind::Semantic, scores }
}

/// Lexical and semantic rankings fused.
pub struct HybridEngine<'a> {
    pub lexical: &'a dyn SearchEngine,
    pub semantic: SemanticEngine<'a>,
}

impl SearchEngine for HybridEngine<'_> {
    fn name(&self) -> &'static str {
        "hybrid"
    }

    fn candidates(&self, store: &Store, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        let depth = (limit * DEPTH_PER_RESULT).max(MIN_DEPTH);
        let lexical = self.lexical.candidates(store, query, depth)?;
        let semantic = self.semantic.candidates(store, query, depth)?;
        Ok(fuse(lexical, semantic, limit))
    }
}

/// Reciprocal rank fusion of two best-first lists.
pub fn fuse(lexical: Vec<Candidate>, semantic: Vec<Candidate>, limit: usize) -> Vec<Candidate> {
    let mut fused: HashMap<i64, Candidate> = HashMap::with_capacity(lexical.len() + semantic.len());
    for (place, candidate) in lexical.into_iter().enumerate() {
        let mut c = candidate;
        c.scores.fused = W_LEXICAL / (RRF_K + place as f64 + 1.0);
        fused.insert(c.id, c);
    }
    for (place, candidate) in semantic.into_iter().enumerate() {
        let share = W_SEMANTIC / (RRF_K + place as f64 + 1.0);
        fused
            .entry(candidate.id)
            .and_modify(|c| {
                c.scores.fused += share;
                c.scores.semantic = candidate.scores.semantic;
                c.matched = MatchKind::Hybrid;
            })
            .or_insert_with(|| {
                let mut c = candidate.clone();
                c.scores.fused = share;
                c
            });
    }
    let mut out: Vec<Candidate> = fused.into_values().collect();
    out.sort_by(|a, b| b.scores.fused.total_cmp(&a.scores.fused).then_with(|| b.id.cmp(&a.id)));
    out.truncate(limit);
    for c in &mut out {
        c.rank = -c.scores.fused;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[Candidate]) -> Vec<i64> {
        list.iter().map(|c| c.id).collect()
    }

    #[test]
    fn a_memory_both_rankings_find_beats_one_only_one_ranks_first() {
        let lexical = vec![Candidate::lexical(1, -9.0, "**a**".into()), Candidate::lexical(2, -5.0, String::new())];
        let semantic = vec![semantic_candidate(3, 0.8), semantic_candidate(2, 0.7)];
        let fused = fuse(lexical, semantic, 10);
        // 1 and 3 tie (each first in one ranking): the newer memory wins the tie.
        assert_eq!(ids(&fused), vec![2, 3, 1]);
        assert_eq!(fused[0].matched, MatchKind::Hybrid);
        assert_eq!(fused[0].scores.lexical, Some(5.0));
        assert_eq!(fused[0].scores.semantic, Some(0.7));
        assert_eq!(fused[2].snippet, "**a**", "lexical snippets survive fusion");
        assert_eq!(fused[1].matched, MatchKind::Semantic);
        assert!(fused.windows(2).all(|w| w[0].rank <= w[1].rank));
    }

    #[test]
    fn equal_places_tie_break_by_newest_id_and_limit_applies() {
        let fused = fuse(vec![Candidate::lexical(1, -1.0, String::new())], vec![semantic_candidate(2, 0.5)], 1);
        assert_eq!(ids(&fused), vec![2]);
    }

    #[test]
    fn one_empty_ranking_keeps_the_others_order() {
        let semantic = vec![semantic_candidate(5, 0.9), semantic_candidate(4, 0.6), semantic_candidate(9, 0.3)];
        assert_eq!(ids(&fuse(Vec::new(), semantic, 10)), vec![5, 4, 9]);
    }
}
