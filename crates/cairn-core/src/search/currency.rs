//! The newest fact first: what a page of hits does with facts that changed.
//!
//! - A hit another live memory has replaced (a judged `supersedes`, followed down its chain)
//!   comes after the memory that replaced it; when that memory did not match, it is brought
//!   in, in the replaced hit's place ([`MatchKind::Replacement`]). The replaced hit stays, as
//!   history, annotated `superseded_by: #id` by the door.
//! - A question about the present ("what do we use now", "currently", "latest", "still") puts
//!   the newest of near-duplicate hits first even before any judge has run: among the top hits,
//!   those about the same thing (high mutual similarity: their vectors when they have them,
//!   else their words) take the places the group holds, newest first.
//!
//! The thresholds were chosen on the dev half of `eval/knowledge-updates.json`; its test half
//! was never looked at while choosing (docs/BENCHMARKS.md).

use std::collections::HashMap;

use super::{MatchKind, SearchHit, SearchQuery, passes_filters};
use crate::Core;
use crate::error::Result;
use crate::model::Observation;

/// Hits of a page the recency prior looks at (near-duplicates further down do not matter).
pub const PRESENT_WINDOW: usize = 10;
/// Where two memories are about the same thing on a model's cosine scale: this share of the
/// way from its context floor (what any two memories of a project reach) to 1. On the dev half
/// with multilingual-e5-small (floor 0.80): 0.886, above every pair of one case (0.887–0.937)
/// and all but two pairs of different cases; with all-MiniLM-L6-v2 (floor 0.30): 0.60.
pub const SAME_THING_SHARE: f32 = 0.43;
/// Least word overlap ([`super::overlap::similarity`]) for hits without vectors.
pub const SAME_THING_WORDS: f64 = 0.20;

/// Whether `query` asks about the present: "now", "currently", "these days", "latest",
/// "still", "anymore", "nowadays" (and the same in the languages the coding set asks in).
pub fn asks_now(query: &str) -> bool {
    let words: Vec<String> = super::index::tokenize(query).collect();
    let single = words.iter().any(|w| {
        matches!(
            w.as_str(),
            "now"
                | "currently"
                | "current"
                | "latest"
                | "still"
                | "anymore"
                | "nowadays"
                | "today"
                | "ahora"
                | "actualmente"
                | "actual"
                | "todavia"
                | "agora"
                | "atualmente"
                | "jetzt"
                | "aktuell"
                | "derzeit"
                | "maintenant"
                | "actuellement"
        )
    });
    single || words.windows(2).any(|p| matches!((p[0].as_str(), p[1].as_str()), ("these", "days") | ("at", "present")))
}

/// Least cosine between two memories' vectors for them to be about the same thing, on this
/// model's scale ([`SAME_THING_SHARE`]).
pub fn same_thing_cosine(semantic: &crate::semantic::Semantic) -> f32 {
    let floor = super::rerank::cosine_scale_of(semantic).context_floor as f32;
    floor + (1.0 - floor) * SAME_THING_SHARE
}

impl Core {
    /// Reorder a page of hits so the current fact comes first (see the module doc).
    pub(crate) fn newest_first(&self, query: &SearchQuery, hits: &mut Vec<SearchHit>) -> Result<()> {
        if hits.is_empty() {
            return Ok(());
        }
        let limit = query.effective_limit();
        self.replacements_first(query, hits)?;
        if asks_now(&query.text) {
            self.recency_prior(hits)?;
        }
        hits.truncate(limit.max(1));
        Ok(())
    }

    /// Each replaced hit after the memory that replaced it (brought in when it did not match).
    fn replacements_first(&self, query: &SearchQuery, hits: &mut Vec<SearchHit>) -> Result<()> {
        let sync_ids: Vec<String> = hits.iter().map(|h| h.observation.sync_id.clone()).collect();
        let current = self.store.current_of(&sync_ids)?;
        if current.is_empty() {
            return Ok(());
        }
        let wanted: Vec<i64> = current.values().copied().collect();
        let mut fetched = self.store.get_many(wanted.into_iter())?;
        let mut i = 0;
        while i < hits.len() {
            let Some(&replacement) = current.get(&hits[i].observation.sync_id) else {
                i += 1;
                continue;
            };
            match hits.iter().position(|h| h.observation.id == replacement) {
                // Already before it.
                Some(at) if at < i => i += 1,
                Some(at) => {
                    let moved = hits.remove(at);
                    hits.insert(i, moved);
                    i += 2;
                }
                None => {
                    let Some(observation) = fetched.remove(&replacement) else {
                        i += 1;
                        continue;
                    };
                    if passes_filters(&self.store, observation.id, query)?.is_none() {
                        i += 1;
                        continue;
                    }
                    let replaced = &hits[i];
                    let hit = SearchHit {
                        snippet: crate::text::preview(&observation.content, 160),
                        observation,
                        matched: MatchKind::Replacement,
                        ..replaced.clone()
                    };
                    hits.insert(i, hit);
                    i += 2;
                }
            }
        }
        Ok(())
    }

    /// Among the top hits, each hit and the later hits about the same thing as it take the
    /// places they hold, newest first. Only direct likeness groups (not a chain of them): a
    /// chain would join facts that are not about one thing.
    fn recency_prior(&self, hits: &mut [SearchHit]) -> Result<()> {
        let window = hits.len().min(PRESENT_WINDOW);
        let mut placed: Vec<Option<SearchHit>> = hits[..window].iter().cloned().map(Some).collect();
        let owned: Vec<Observation> = hits[..window].iter().map(|h| h.observation.clone()).collect();
        let top: Vec<&Observation> = owned.iter().collect();
        let same = self.same_thing(&top)?;
        let mut order: Vec<Option<usize>> = (0..window).map(Some).collect();
        let mut done = vec![false; window];
        for i in 0..window {
            if done[i] {
                continue;
            }
            let group: Vec<usize> =
                std::iter::once(i).chain((i + 1..window).filter(|&j| !done[j] && same(i, j))).collect();
            let mut members = group.clone();
            members.sort_by(|&a, &b| {
                (top[b].created_at.as_str(), top[b].id).cmp(&(top[a].created_at.as_str(), top[a].id))
            });
            for (&place, &member) in group.iter().zip(&members) {
                order[place] = Some(member);
                done[place] = true;
            }
        }
        let reordered: Vec<SearchHit> = order.iter().filter_map(|m| m.and_then(|m| placed[m].take())).collect();
        for (slot, hit) in hits[..window].iter_mut().zip(reordered) {
            *slot = hit;
        }
        Ok(())
    }

    /// Whether two of `top` (by place) are about the same thing: same project and scope, and
    /// close vectors when both have one, else enough shared words.
    fn same_thing<'a>(&self, top: &'a [&'a Observation]) -> Result<impl Fn(usize, usize) -> bool + 'a> {
        let mut vectors: HashMap<usize, Vec<f32>> = HashMap::new();
        let mut threshold = 1.0;
        if let Some(semantic) = &self.semantic {
            threshold = same_thing_cosine(semantic);
            for (i, o) in top.iter().enumerate() {
                if let Some(v) = self.store.stored_vector(o.id, semantic.model_id())? {
                    vectors.insert(i, v);
                }
            }
        }
        Ok(move |i: usize, j: usize| {
            let (a, b) = (top[i], top[j]);
            if a.project != b.project || a.scope != b.scope {
                return false;
            }
            match (vectors.get(&i), vectors.get(&j)) {
                (Some(x), Some(y)) => cosine(x, y) >= threshold,
                _ => super::overlap::similarity(a, b) >= SAME_THING_WORDS,
            }
        })
    }
}

/// Cosine of two unit vectors (the stored ones are unit length).
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_about_the_present_are_told_apart() {
        for q in [
            "what cache key scheme do we use now",
            "Which ORM are we currently on?",
            "latest deploy target",
            "do we still pin Node 18",
            "what do we run these days for migrations",
            "¿Qué base de datos usamos ahora?",
        ] {
            assert!(asks_now(q), "{q}");
        }
        for q in ["why did the cache key change", "when did we move to Redis", "knowledge snow"] {
            assert!(!asks_now(q), "{q}");
        }
    }
}
