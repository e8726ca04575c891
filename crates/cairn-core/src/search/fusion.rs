//! The semantic engine and hybrid fusion.
//!
//! Hybrid ranking is weighted reciprocal rank fusion: a memory scores
//! `W_LEXICAL / (K + lexical place) + W_SEMANTIC / (K + semantic place)`. Ranks, not raw
//! scores, are fused because BM25 and cosine live on unrelated scales that shift with every
//! corpus; a memory near the top of both lists wins, and one that only one ranking finds still
//! gets in.
//!
//! Before fusion each ranking gets *session context*: a memory passes a share of its score to
//! the memory saved right after it in the same session ([`CONTEXT_NEXT`]) and a smaller share
//! to the one right before ([`CONTEXT_PREV`]). In a conversation or a working session the
//! answer follows the question and the outcome follows the attempt, and they rarely repeat
//! its words: "what was John's reaction to sealing the deal?" matches Tim's "how did it feel
//! to seal the deal?", and John's reply is the memory wanted. A memory found only this way is
//! reported as [`MatchKind::Context`]. Memories saved without a session share their
//! project's catch-all `manual-save-…` session, which is no context, so they take no part.
//!
//! The fused ranking's top is then re-ordered by a model that also sees the scores and the
//! memories ([`rerank`]); a hit's `scores.fused` is that model's relevance, 0–1.
//!
//! The constants were chosen on the dev halves of `eval/coding-memory.json` (the cosine floors
//! are per model: [`rerank::CosineScale`]) and of LoCoMo (conversations 0–4: K 10 instead of 60 with
//! 50 candidates a ranking instead of 30, and the context shares, raised recall@10 from 0.69
//! to 0.74 without changing the coding set); the test halves were not used for tuning
//! (docs/BENCHMARKS.md).

use std::collections::HashMap;

use super::snippet::Matcher;
use super::{
    Candidate, HitScores, MatchKind, SearchEngine, SearchQuery, passes_filters, query, rerank, temporal, timing,
};
use crate::Core;
use crate::error::Result;
use crate::store::Store;
use crate::store::search::MemoryHead;

/// RRF's damping constant: larger flattens the difference between neighbouring places. 60
/// (the usual value) let a memory both rankings put around 20th outrank one that either put
/// in its top five.
pub const RRF_K: f64 = 10.0;
/// Weight of the lexical ranking.
pub const W_LEXICAL: f64 = 1.0;
/// Weight of the semantic ranking.
pub const W_SEMANTIC: f64 = 1.0;
/// Candidates each ranking contributes before fusion, per result wanted.
const DEPTH_PER_RESULT: usize = 3;
const MIN_DEPTH: usize = 50;
/// Share of a memory's score (BM25, or cosine above the model's context floor,
/// [`rerank::CosineScale`]) given to the memory saved right after it in the same session.
pub const CONTEXT_NEXT: f64 = 0.3;
/// Share given to the memory saved right before it.
pub const CONTEXT_PREV: f64 = 0.1;

/// Nearest memories to the query's vector, filtered like every search.
pub struct SemanticEngine<'a> {
    pub vector: &'a [f32],
    /// The shortlist of the first read, when it was read ahead (beside the lexical ranking,
    /// `first_fetch`); used only when it was read for the same number of memories.
    pub ahead: Option<&'a crate::semantic::Shortlist>,
}

impl<'a> SemanticEngine<'a> {
    /// The engine of a query vector, every shortlist read when asked for.
    pub fn new(vector: &'a [f32]) -> SemanticEngine<'a> {
        SemanticEngine { vector, ahead: None }
    }
}

/// How many nearest memories the semantic ranking reads first for `limit` candidates (more
/// when the filters drop too many).
pub(crate) fn first_fetch(limit: usize) -> usize {
    limit * 2 + 16
}

impl SearchEngine for SemanticEngine<'_> {
    fn name(&self) -> &'static str {
        "semantic"
    }

    fn candidates(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        let Some(semantic) = &core.semantic else { return Ok(Vec::new()) };
        let floor = rerank::cosine_scale_of(semantic).min_similarity;
        // Filters are checked against the table; fetch more when too many fall out.
        let mut fetch = first_fetch(limit);
        let mut ahead = self.ahead.filter(|s| s.k() == fetch);
        loop {
            let nearest = timing::phase("semantic.nearest", || match ahead.take() {
                Some(shortlist) => semantic.nearest_in(core.store.conn(), self.vector, shortlist),
                None => semantic.nearest(core.store.conn(), self.vector, fetch),
            });
            let mut exhausted = nearest.len() < fetch;
            let mut kept = Vec::with_capacity(limit);
            for (id, cosine) in nearest {
                if cosine < floor {
                    exhausted = true;
                    break;
                }
                if timing::phase("semantic.filter", || passes_filters(&core.store, id, query))?.is_some() {
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
    let scores = HitScores { lexical: None, semantic: Some(cosine), fused: f64::from(cosine), deep: None };
    Candidate { id, rank: -f64::from(cosine), snippet: String::new(), matched: MatchKind::Semantic, scores }
}

/// How many candidates each ranking gives the fusion of a `limit`-hit page.
pub(crate) fn ranking_depth(limit: usize) -> usize {
    (limit * DEPTH_PER_RESULT).max(MIN_DEPTH)
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

    /// The fused pool, re-ordered by the [`rerank`] model fitted for the embedding model;
    /// `scores.fused` is its relevance. With a model that has no fitted weights, the fusion's
    /// order.
    fn candidates(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        let Some(fitted) = core.semantic.as_ref().and_then(|s| rerank::fitted_for(s.model_id())) else {
            return self.fused(core, query, limit);
        };
        let (pool, read): (Vec<Candidate>, Vec<rerank::Candidate>) =
            timing::phase("pool", || self.pool(core, query, limit))?.into_iter().unzip();
        let mut scored: Vec<(f64, Candidate)> = fitted
            .relevance(&read)
            .into_iter()
            .zip(pool)
            .map(|(relevance, mut c)| {
                c.scores.fused = relevance;
                c.rank = -relevance;
                (relevance, c)
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.id.cmp(&a.1.id)));
        Ok(scored.into_iter().take(limit).map(|(_, c)| c).collect())
    }
}

/// The fused ranking and what the re-ranking features are made of.
struct Fusion {
    /// The fused ranking's top, best first.
    pool: Vec<Candidate>,
    /// Places in each ranking (with session context).
    lexical_places: HashMap<i64, usize>,
    semantic_places: HashMap<i64, usize>,
    /// BM25 of the lexical ranking's memories, and the best of them.
    bm25: HashMap<i64, f64>,
    best_bm25: f64,
    /// The memories either ranking found (sorted), whose neighbours were looked up.
    ranked: Vec<i64>,
    neighbours: Neighbours,
}

impl HybridEngine<'_> {
    /// The ranking before re-ranking: both rankings with session context, fused by RRF. For
    /// benchmarks and studies; search uses [`HybridEngine::pool`].
    pub fn fused(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        let mut pool = self.fusion(core, query, limit)?.pool;
        pool.truncate(limit);
        Ok(pool)
    }

    fn fusion(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Fusion> {
        let store = &core.store;
        let depth = ranking_depth(limit);
        let lexical = self.lexical.candidates(core, query, depth)?;
        let semantic = timing::phase("semantic", || self.semantic.candidates(core, query, depth))?;
        let bm25: HashMap<i64, f64> = lexical.iter().filter_map(|c| Some((c.id, c.scores.lexical?))).collect();
        let best_bm25 = bm25.values().copied().fold(0.0, f64::max);
        let mut ids: Vec<i64> = lexical.iter().chain(&semantic).map(|c| c.id).collect();
        ids.sort_unstable();
        ids.dedup();
        let neighbours = timing::phase("neighbours", || session_neighbours(store, &ids))?;
        let context_floor =
            core.semantic.as_ref().map_or(rerank::DEFAULT_COSINE, |s| rerank::cosine_scale_of(s)).context_floor;
        let lexical = with_context(store, query, lexical, |c| c.scores.lexical.unwrap_or(0.0), &neighbours)?;
        let semantic = with_context(
            store,
            query,
            semantic,
            |c| c.scores.semantic.map_or(0.0, |s| (f64::from(s) - context_floor).max(0.0)),
            &neighbours,
        )?;
        let places = |list: &[Candidate]| -> HashMap<i64, usize> {
            list.iter().enumerate().map(|(place, c)| (c.id, place)).collect()
        };
        let (lexical_places, semantic_places) = (places(&lexical), places(&semantic));
        let pool = fuse(lexical, semantic, limit.max(rerank::POOL));
        Ok(Fusion { pool, lexical_places, semantic_places, bm25, best_bm25, ranked: ids, neighbours })
    }

    /// The top of the fused ranking (at least [`rerank::POOL`], `limit` when larger), in fused
    /// order, each candidate with what the re-ranking reads of it.
    pub fn pool(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<(Candidate, rerank::Candidate)>> {
        let mut fusion = self.fusion(core, query, limit)?;
        // Memories only session context brought into the pool have not had their neighbours
        // looked up, nor have the neighbours of the pool (for the memories two saves away).
        let context_only: Vec<i64> =
            fusion.pool.iter().map(|c| c.id).filter(|id| fusion.ranked.binary_search(id).is_err()).collect();
        fusion.neighbours.extend(session_neighbours(&core.store, &context_only)?);
        let unlooked: Vec<i64> = fusion
            .pool
            .iter()
            .filter_map(|c| fusion.neighbours.get(&c.id))
            .flat_map(|&(prev, next)| prev.into_iter().chain(next))
            .filter(|id| !fusion.neighbours.contains_key(id))
            .collect();
        fusion.neighbours.extend(session_neighbours(&core.store, &unlooked)?);
        let read = timing::phase("gather", || Read::gather(core, &fusion, self.semantic.vector, query))?;
        let near = near_in_pool(&fusion.pool, &fusion.neighbours);
        let pool = std::mem::take(&mut fusion.pool);
        Ok(pool
            .into_iter()
            .zip(near)
            .enumerate()
            .map(|(place, (c, near))| {
                let features = fusion.features(place, c.id, &read);
                (c, rerank::Candidate { features, near })
            })
            .collect())
    }
}

/// For each memory of the pool, the places in the pool of the memories at most
/// [`rerank::NEAR`] saves before or after it in its session.
fn near_in_pool(pool: &[Candidate], neighbours: &Neighbours) -> Vec<Vec<usize>> {
    let places: HashMap<i64, usize> = pool.iter().enumerate().map(|(place, c)| (c.id, place)).collect();
    // The pool's memories met walking `NEAR` saves back (or forward) from `start`.
    let walk = |start: i64, forward: bool| {
        let mut found = Vec::with_capacity(rerank::NEAR);
        let mut at = start;
        for _ in 0..rerank::NEAR {
            let Some(&(prev, next)) = neighbours.get(&at) else { break };
            let Some(step) = (if forward { next } else { prev }) else { break };
            found.extend(places.get(&step).copied());
            at = step;
        }
        found
    };
    pool.iter()
        .map(|c| {
            let mut near = walk(c.id, false);
            near.extend(walk(c.id, true));
            near
        })
        .collect()
}

impl Fusion {
    /// BM25 over the best BM25 of the lexical ranking; 0 outside it.
    fn relative_bm25(&self, id: Option<i64>) -> f64 {
        match id.and_then(|id| self.bm25.get(&id)) {
            Some(s) if self.best_bm25 > 0.0 => s / self.best_bm25,
            _ => 0.0,
        }
    }

    /// The features of the candidate at `place` of the pool, in [`rerank::NAMES`] order.
    fn features(&self, place: usize, id: i64, read: &Read) -> rerank::Features {
        let by_place = |places: &HashMap<i64, usize>| places.get(&id).map_or(0.0, |&p| reciprocal_place(p));
        let (prev, next) = self.neighbours.get(&id).copied().unwrap_or((None, None));
        let (title_match, length, coverage, says_when) = read.texts.get(&id).map_or((false, 0, 0.0, false), |t| {
            // Only the lexical ranking's memories: the others hold few of the words.
            let coverage = if self.bm25.contains_key(&id) { read.matcher.coverage(&[&t.title, &t.head]) } else { 0.0 };
            let says_when = read.asks_when && temporal::mentions_time(&t.head);
            (read.matcher.matches_any(&t.title), t.length, coverage, says_when)
        });
        let bm25 = self.relative_bm25(Some(id));
        [
            reciprocal_place(place),
            by_place(&self.lexical_places),
            by_place(&self.semantic_places),
            bm25,
            read.cosine(Some(id)),
            read.cosine(prev),
            read.cosine(next),
            self.relative_bm25(prev),
            self.relative_bm25(next),
            f64::from(u8::from(title_match)),
            (1.0 + length as f64).ln(),
            f64::from(u8::from(self.neighbours.contains_key(&id))),
            coverage,
            bm25 * coverage,
            f64::from(u8::from(says_when)),
        ]
    }
}

/// 1 / (K + place), the share a place earns in RRF.
fn reciprocal_place(place: usize) -> f64 {
    1.0 / (RRF_K + place as f64 + 1.0)
}

/// What re-ranking reads besides the fusion: cosines of the pool and of its neighbours, the
/// pool's texts, and the query's words.
struct Read {
    cosines: HashMap<i64, f32>,
    texts: HashMap<i64, MemoryHead>,
    matcher: Matcher,
    /// Whether the query asks when something happened.
    asks_when: bool,
}

impl Read {
    fn gather(core: &Core, fusion: &Fusion, vector: &[f32], query: &SearchQuery) -> Result<Read> {
        let ids: Vec<i64> = fusion.pool.iter().map(|c| c.id).collect();
        let mut wanted = ids.clone();
        for id in &ids {
            if let Some(&(prev, next)) = fusion.neighbours.get(id) {
                wanted.extend(prev.into_iter().chain(next));
            }
        }
        let cosines =
            core.semantic.as_ref().map(|s| s.similarities(core.store.conn(), vector, &wanted)).unwrap_or_default();
        Ok(Read {
            cosines,
            texts: core.store.memory_heads(&ids, COVERAGE_CHARS)?,
            matcher: Matcher::new(&query::parse(&query.text)),
            asks_when: temporal::asks_when(&query.text),
        })
    }

    /// Cosine with the query; 0 without a vector.
    fn cosine(&self, id: Option<i64>) -> f64 {
        id.and_then(|id| self.cosines.get(&id)).map_or(0.0, |&c| f64::from(c))
    }
}

/// Characters of a memory's content searched for the query's words when re-ranking: enough
/// for most memories, and a pool holding a 4 MiB memory costs no more than one holding a
/// note.
const COVERAGE_CHARS: i64 = 2_000;

/// Memory id → the memories saved right before and right after it in its session.
pub(crate) use crate::store::search::Neighbours;

/// The memories saved just before and just after each of `ids` in the same session, for
/// session context. Memories saved without a session share their project's catch-all
/// `manual-save-…` session: that is no context, so they have none.
pub(crate) fn session_neighbours(store: &Store, ids: &[i64]) -> Result<Neighbours> {
    store.session_neighbours_of(ids, crate::model::catch_all_sessions_like())
}

/// One ranking with session context, best first: each memory passes a share of its strength
/// to the memory saved right after it in its session and a smaller share to the one right
/// before; a neighbour the ranking did not have joins it (when it passes the filters).
fn with_context(
    store: &Store,
    query: &SearchQuery,
    list: Vec<Candidate>,
    strength: impl Fn(&Candidate) -> f64,
    neighbours: &Neighbours,
) -> Result<Vec<Candidate>> {
    let mut scored: HashMap<i64, (f64, Candidate)> = list.iter().map(|c| (c.id, (strength(c), c.clone()))).collect();
    for c in &list {
        let Some(&(prev, next)) = neighbours.get(&c.id) else { continue };
        let s = strength(c);
        for (neighbour, share) in [(next, CONTEXT_NEXT), (prev, CONTEXT_PREV)] {
            let Some(id) = neighbour.filter(|_| s > 0.0) else { continue };
            if let Some(entry) = scored.get_mut(&id) {
                entry.0 += share * s;
            } else if passes_filters(store, id, query)?.is_some() {
                let scores = HitScores { lexical: None, semantic: None, fused: 0.0, deep: None };
                let found = Candidate { id, rank: 0.0, snippet: String::new(), matched: MatchKind::Context, scores };
                scored.insert(id, (share * s, found));
            }
        }
    }
    let mut out: Vec<(f64, Candidate)> = scored.into_values().collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.id.cmp(&a.1.id)));
    Ok(out.into_iter().map(|(_, c)| c).collect())
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
                c.matched = match (c.scores.lexical.is_some(), c.scores.semantic.is_some()) {
                    (true, true) => MatchKind::Hybrid,
                    (true, false) => MatchKind::Lexical,
                    (false, true) => MatchKind::Semantic,
                    (false, false) => MatchKind::Context,
                };
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
