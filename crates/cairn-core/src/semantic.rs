//! Semantic search: memories' sentence embeddings, stored in SQLite (migration 4) and held in
//! memory for a brute-force top-k scan.
//!
//! - Vectors are computed after a save returns (the daemon's background indexer, or
//!   `cairn reindex`), newest memories first; [`crate::Store::count_pending_embeddings`] says how many
//!   are still missing. A memory whose text changes loses its vector at once (a trigger), so a
//!   superseded revision is never what matches.
//! - The in-memory copy is quantised to i8 with a scale per vector: a quarter of the memory
//!   and bandwidth of f32, and a cosine error around 1e-3, far below what changes a ranking.
//! - The model is behind [`Embedder`]; when it is missing or failing, search says so and stays
//!   lexical. Nothing here ever fails a search.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use cairn_embed::{EmbedError, Embedder};
use rusqlite::Connection;

use crate::error::{CairnError, ErrorCode, Result};

/// Characters of a memory given to the model: MiniLM reads 256 tokens (about 1,200
/// characters of English); endpoints with longer windows get a little more.
const MAX_EMBED_CHARS: usize = 4_000;
/// Query vectors remembered (agents repeat their searches).
const QUERY_CACHE: usize = 512;
/// After an embedder error, queries stay lexical this long before trying again, so a dead
/// endpoint costs one timeout, not one per search.
const PAUSE_AFTER_ERROR: Duration = Duration::from_secs(30);

/// The text of a memory that is embedded.
pub fn embed_text(title: &str, content: &str) -> String {
    let mut text = String::with_capacity(title.len() + content.len().min(MAX_EMBED_CHARS) + 2);
    text.push_str(title.trim());
    text.push_str(".\n");
    text.push_str(crate::text::cut_at_char_boundary(content, MAX_EMBED_CHARS));
    text
}

/// A memory saved in a session whose content is at most this long (characters) is embedded
/// together with the memory saved right before it in the session. A short turn of a
/// conversation or a working session ("Yes, last Tuesday!", "that fixed it") means little
/// alone; what it answers says what it is about. Longer memories stand on their own, and
/// memories saved without a session (the project's catch-all `manual-save-…` session) have
/// no neighbour that is context. Chosen on the dev half of LoCoMo: recall@10 of hybrid search
/// 0.744 → 0.765 (every memory in a session: 0.758); see docs/BENCHMARKS.md.
pub const CONTEXT_MAX_CHARS: i64 = 250;
/// Bytes of the previous memory embedded with a short one: with the title and the
/// memory itself this stays well inside MiniLM's 256 tokens.
pub const CONTEXT_CHARS: usize = 300;

/// The text embedded for a memory, with the content of the memory saved before it in its
/// session when it gets context (empty when not). The previous memory is read when this one
/// is embedded: editing or deleting it later does not re-embed this one (its vector keeps the
/// old context until `cairn reindex --force`), an accepted staleness since a short memory's
/// own text, which is what search shows, is always current.
pub fn embed_text_in_context(title: &str, content: &str, context: &str) -> String {
    if context.is_empty() {
        return embed_text(title, content);
    }
    let context = crate::text::cut_at_char_boundary(context.trim(), CONTEXT_CHARS);
    let mut text = String::with_capacity(title.len() + context.len() + content.len() + 4);
    text.push_str(title.trim());
    text.push_str(".\n");
    text.push_str(context);
    text.push('\n');
    text.push_str(crate::text::cut_at_char_boundary(content, MAX_EMBED_CHARS));
    text
}

/// A memory waiting for its vector, with the text it had when read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingText {
    pub id: i64,
    pub title: String,
    pub content: String,
    /// The content of the memory saved right before this one in its session, when this one is
    /// short enough to need it; empty otherwise.
    pub context: String,
}

impl PendingText {
    pub fn text(&self) -> String {
        embed_text_in_context(&self.title, &self.content, &self.context)
    }
}

/// Vectors in memory, i8-quantised, one slot per memory.
#[derive(Debug, Default)]
pub struct VectorIndex {
    dims: usize,
    ids: Vec<i64>,
    slot_of: HashMap<i64, usize>,
    /// Shared with the thread that scans half of them (`dot_i8_rows_shared`); written only
    /// under the index's write lock, when no scan holds them, so never copied.
    codes: Arc<Vec<i8>>,
    /// Per slot: the factor turning the i8 dot product back into a cosine; 0 = empty slot.
    scales: Vec<f32>,
    live: usize,
}

impl VectorIndex {
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Add or replace the vector of memory `id`. Vectors of another length are refused.
    pub fn upsert(&mut self, id: i64, vector: &[f32]) -> bool {
        if vector.is_empty() || (self.dims != 0 && vector.len() != self.dims) {
            return false;
        }
        self.dims = vector.len();
        let (codes, scale) = quantise(vector);
        if let Some(&slot) = self.slot_of.get(&id) {
            if self.scales[slot] == 0.0 {
                self.live += 1;
            }
            Arc::make_mut(&mut self.codes)[slot * self.dims..(slot + 1) * self.dims].copy_from_slice(&codes);
            self.scales[slot] = scale;
        } else {
            self.slot_of.insert(id, self.ids.len());
            self.ids.push(id);
            Arc::make_mut(&mut self.codes).extend_from_slice(&codes);
            self.scales.push(scale);
            self.live += 1;
        }
        true
    }

    pub fn remove(&mut self, id: i64) {
        if let Some(&slot) = self.slot_of.get(&id)
            && self.scales[slot] != 0.0
        {
            self.scales[slot] = 0.0;
            self.live -= 1;
        }
    }

    /// The `k` memories most similar to `query` (unit length), best first, with cosines.
    pub fn top(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        if query.len() != self.dims || k == 0 || self.live == 0 {
            return Vec::new();
        }
        let (q, q_scale) = quantise(query);
        let mut dots = Vec::with_capacity(self.ids.len());
        cairn_embed::dot_i8_rows_shared(&q, &self.codes, &mut dots);
        let mut scored: Vec<(f32, u32)> = Vec::with_capacity(self.live);
        for (slot, (&dot, &scale)) in dots.iter().zip(&self.scales).enumerate() {
            if scale != 0.0 {
                scored.push((dot as f32 * scale * q_scale, slot as u32));
            }
        }
        let k = k.min(scored.len());
        if k < scored.len() {
            scored.select_nth_unstable_by(k, |a, b| b.0.total_cmp(&a.0));
            scored.truncate(k);
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().map(|(score, slot)| (self.ids[slot as usize], score)).collect()
    }

    /// Cosines of `query` (unit length) with the vectors of `ids`; ids without a vector are
    /// left out. For re-ranking a few candidates, not for scanning.
    pub fn similarities(&self, query: &[f32], ids: &[i64]) -> HashMap<i64, f32> {
        let mut out = HashMap::with_capacity(ids.len());
        if query.len() != self.dims || self.live == 0 {
            return out;
        }
        let (q, q_scale) = quantise(query);
        let mut dot = Vec::with_capacity(1);
        for &id in ids {
            let Some(&slot) = self.slot_of.get(&id) else { continue };
            let scale = self.scales[slot];
            if scale == 0.0 {
                continue;
            }
            dot.clear();
            cairn_embed::dot_i8_rows(&q, &self.codes[slot * self.dims..(slot + 1) * self.dims], &mut dot);
            out.insert(id, dot[0] as f32 * scale * q_scale);
        }
        out
    }
}

/// i8 codes of a vector and the scale that maps them back (`v ≈ code · scale`).
fn quantise(v: &[f32]) -> (Vec<i8>, f32) {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 {
        return (vec![0; v.len()], f32::MIN_POSITIVE);
    }
    let scale = max / 127.0;
    (v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect(), scale)
}

/// Why semantic search is not answering right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// No model is configured or its files are missing.
    NoModel(String),
    /// The model is being loaded.
    ModelLoading,
    /// Vectors are being loaded into memory.
    Loading,
    /// No memory has a vector yet.
    NothingIndexed,
    /// The embedder failed recently.
    Failing(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NoModel(why) => write!(f, "{why}"),
            Unavailable::ModelLoading => f.write_str("the embedding model is loading"),
            Unavailable::Loading => f.write_str("the semantic index is loading"),
            Unavailable::NothingIndexed => f.write_str("no memory has an embedding yet (run `cairn reindex`)"),
            Unavailable::Failing(why) => write!(f, "the embedder failed: {why}"),
        }
    }
}

/// A model's cosine scale, as hybrid search's fusion uses it (each model's is in
/// `search::rerank`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CosineScale {
    /// Below this a memory is not related to the query at all: it is no semantic candidate.
    pub min_similarity: f32,
    /// Above this a memory lends session context (the share of the cosine over it).
    pub context_floor: f64,
}

/// An embedder with its vectors: what a store needs for semantic search. Shared by the
/// daemon's connections and its background indexer. The model id is known at once (it names
/// the vectors); the model itself may load later, in the background.
pub struct Semantic {
    model_id: String,
    /// A cosine scale other than the model's, for studies (`cairn-eval --cosine-scale`).
    cosine_scale: OnceLock<CosineScale>,
    embedder: OnceLock<Arc<dyn Embedder>>,
    load_error: Mutex<Option<String>>,
    vectors: RwLock<Option<VectorIndex>>,
    query_cache: Mutex<HashMap<String, Arc<[f32]>>>,
    paused: Mutex<Option<(Instant, String)>>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic").field("model", &self.model_id).finish_non_exhaustive()
    }
}

impl Semantic {
    /// Semantic search with a model that is already loaded. Vectors are not: call
    /// [`Semantic::load`] (the daemon does it in the background) before search uses them.
    pub fn new(embedder: Arc<dyn Embedder>) -> Arc<Semantic> {
        let semantic = Semantic::pending(embedder.model_id().to_owned());
        let _ = semantic.embedder.set(embedder);
        semantic
    }

    /// Semantic search whose model (`model_id`) is still loading: see
    /// [`Semantic::set_embedder`] and [`Semantic::set_failed`].
    pub fn pending(model_id: String) -> Arc<Semantic> {
        Arc::new(Semantic {
            model_id,
            cosine_scale: OnceLock::new(),
            embedder: OnceLock::new(),
            load_error: Mutex::new(None),
            vectors: RwLock::new(None),
            query_cache: Mutex::new(HashMap::new()),
            paused: Mutex::new(None),
        })
    }

    /// The model finished loading.
    pub fn set_embedder(&self, embedder: Arc<dyn Embedder>) {
        if embedder.model_id() != self.model_id {
            tracing::warn!(expected = %self.model_id, loaded = embedder.model_id(), "the model loaded is not the one named");
        }
        let _ = self.embedder.set(embedder);
    }

    /// The model could not be loaded: search stays lexical and says why when asked.
    pub fn set_failed(&self, why: String) {
        *self.load_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Search with this cosine scale instead of the model's: how an evaluation tries floors
    /// for a model before any are chosen for it. Only the first call counts.
    pub fn override_cosine_scale(&self, scale: CosineScale) {
        let _ = self.cosine_scale.set(scale);
    }

    /// The scale given by [`Semantic::override_cosine_scale`], if any.
    pub fn cosine_scale_override(&self) -> Option<CosineScale> {
        self.cosine_scale.get().copied()
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.get()
    }

    /// One line on the state of semantic search, for stats and doctor.
    pub fn status(&self) -> String {
        match self.availability() {
            Ok(()) => "ready".to_owned(),
            Err(why) => why.to_string(),
        }
    }

    /// Read every vector of this model from the database into memory.
    pub fn load(&self, conn: &Connection) -> Result<usize> {
        let mut index = VectorIndex::default();
        let mut stmt = conn.prepare("SELECT observation_id, vector FROM embeddings WHERE model = ?1")?;
        let mut rows = stmt.query([self.model_id()])?;
        while let Some(row) = rows.next()? {
            let id: i64 = row.get(0)?;
            let blob: Vec<u8> = row.get(1)?;
            index.upsert(id, &decode(&blob));
        }
        let n = index.len();
        *self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(index);
        Ok(n)
    }

    pub fn is_loaded(&self) -> bool {
        self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// Vectors in memory.
    pub fn indexed(&self) -> usize {
        self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map_or(0, VectorIndex::len)
    }

    /// Record freshly stored vectors (the indexer calls this after its commit).
    pub fn remember(&self, stored: &[(i64, Vec<f32>)]) {
        let mut guard = self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = guard.as_mut() {
            for (id, v) in stored {
                index.upsert(*id, v);
            }
        }
    }

    /// Drop memories' vectors from memory (they were deleted or changed).
    pub fn forget(&self, ids: &[i64]) {
        let mut guard = self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = guard.as_mut() {
            for &id in ids {
                index.remove(id);
            }
        }
    }

    /// Forget cached query vectors (benchmarks measure the model, not the cache).
    pub fn clear_query_cache(&self) {
        self.query_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// Drop every vector from memory (after `reindex --force` dropped them from the table).
    pub fn forget_all(&self) {
        let mut guard = self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_some() {
            *guard = Some(VectorIndex::default());
        }
    }

    /// Whether semantic search can answer now.
    pub fn availability(&self) -> std::result::Result<(), Unavailable> {
        if self.embedder.get().is_none() {
            let error = self.load_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            return Err(error.map_or(Unavailable::ModelLoading, Unavailable::NoModel));
        }
        if let Some((until, why)) = self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()
            && Instant::now() < *until
        {
            return Err(Unavailable::Failing(why.clone()));
        }
        match self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
            None => Err(Unavailable::Loading),
            Some(index) if index.is_empty() => Err(Unavailable::NothingIndexed),
            Some(_) => Ok(()),
        }
    }

    /// The query's vector (cached), or why there is none.
    pub fn embed_query(&self, text: &str) -> std::result::Result<Arc<[f32]>, Unavailable> {
        let key = text.trim();
        if let Some(v) = self.query_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key) {
            return Ok(Arc::clone(v));
        }
        let truncated = crate::text::cut_at_char_boundary(key, MAX_EMBED_CHARS);
        let Some(embedder) = self.embedder.get() else { return Err(Unavailable::ModelLoading) };
        // As a query: models trained with prompts (e5) embed queries and memories differently.
        match embedder.embed_queries(&[truncated]) {
            Ok(mut vectors) if vectors.len() == 1 => {
                let v: Arc<[f32]> = vectors.remove(0).into();
                let mut cache = self.query_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if cache.len() >= QUERY_CACHE {
                    cache.clear();
                }
                cache.insert(key.to_owned(), Arc::clone(&v));
                Ok(v)
            }
            Ok(_) => Err(self.pause("the embedder returned no vector".into())),
            Err(e) => Err(self.pause(e.to_string())),
        }
    }

    /// Vectors for memories waiting for one (embedded as passages), paired with the text they
    /// were made from.
    pub fn embed_pending_texts(&self, pending: Vec<PendingText>) -> Result<Vec<(PendingText, Vec<f32>)>> {
        let embedder = self.embedder().ok_or_else(|| {
            CairnError::new(ErrorCode::ModelMissing, format!("the embedding model is not loaded: {}", self.status()))
        })?;
        let texts: Vec<String> = pending.iter().map(PendingText::text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = embedder.embed(&refs).map_err(|e| embed_error(&e))?;
        if vectors.len() != pending.len() {
            return Err(CairnError::new(
                ErrorCode::EmbedderUnavailable,
                format!("the embedder returned {} vectors for {} texts", vectors.len(), pending.len()),
            ));
        }
        Ok(pending.into_iter().zip(vectors).collect())
    }

    fn pause(&self, why: String) -> Unavailable {
        tracing::warn!(error = %why, "semantic search paused after an embedder error; searching lexically");
        *self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Instant::now() + PAUSE_AFTER_ERROR, why.clone()));
        Unavailable::Failing(why)
    }

    /// Cosines of a query vector with the vectors of some memories (see
    /// [`VectorIndex::similarities`]).
    pub fn similarities(&self, query: &[f32], ids: &[i64]) -> HashMap<i64, f32> {
        self.vectors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map_or_else(HashMap::new, |index| index.similarities(query, ids))
    }

    /// Nearest memories to a query vector.
    pub fn nearest(&self, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        self.vectors
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map_or_else(Vec::new, |index| index.top(query, k))
    }
}

/// A vector as stored: f32 little-endian.
pub fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector back (a trailing partial value is dropped).
pub fn decode(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// An embedder failure as a cairn error (for `cairn reindex` and `cairn model`).
pub fn embed_error(err: &EmbedError) -> CairnError {
    let (code, hint) = match err {
        EmbedError::ModelMissing { .. } => (ErrorCode::ModelMissing, "run `cairn model install`"),
        EmbedError::ModelInvalid(_) => (ErrorCode::ModelInvalid, "reinstall it: `cairn model install`"),
        EmbedError::ChecksumMismatch { .. } => {
            (ErrorCode::ChecksumMismatch, "the file is corrupt or not the expected one; download it again")
        }
        EmbedError::Endpoint(_) => {
            (ErrorCode::EmbedderUnavailable, "check CAIRN_EMBED_URL and that the endpoint is running")
        }
        EmbedError::Dimension { .. } => (
            ErrorCode::EmbedderUnavailable,
            "the endpoint's model changed; set CAIRN_EMBED_MODEL or run `cairn reindex --force`",
        ),
        EmbedError::Io(_) => (ErrorCode::Internal, "check the model directory's permissions"),
    };
    CairnError::new(code, err.to_string()).with_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let mut v = v.to_vec();
        cairn_embed::normalise(&mut v);
        v
    }

    #[test]
    fn quantised_scan_ranks_like_exact_cosine() {
        let mut index = VectorIndex::default();
        let docs = [unit(&[1.0, 0.0, 0.0, 0.2]), unit(&[0.7, 0.7, 0.0, 0.0]), unit(&[0.0, 0.0, 1.0, 0.0])];
        for (i, d) in docs.iter().enumerate() {
            assert!(index.upsert(i as i64 + 1, d));
        }
        let q = unit(&[0.9, 0.3, 0.0, 0.1]);
        let top = index.top(&q, 3);
        let ids: Vec<i64> = top.iter().map(|t| t.0).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        for (id, score) in top {
            let exact = cairn_embed::dot(&q, &docs[id as usize - 1]);
            assert!((score - exact).abs() < 0.02, "{score} vs {exact}");
        }
    }

    #[test]
    fn similarities_of_chosen_memories_equal_the_scan() {
        let mut index = VectorIndex::default();
        let docs = [unit(&[1.0, 0.0, 0.0, 0.2]), unit(&[0.7, 0.7, 0.0, 0.0]), unit(&[0.0, 0.0, 1.0, 0.0])];
        for (i, d) in docs.iter().enumerate() {
            index.upsert(i as i64 + 1, d);
        }
        index.remove(3);
        let q = unit(&[0.9, 0.3, 0.0, 0.1]);
        let scanned: HashMap<i64, f32> = index.top(&q, 3).into_iter().collect();
        let chosen = index.similarities(&q, &[2, 1, 3, 42]);
        assert_eq!(chosen.len(), 2, "a removed memory and an unknown id have no similarity");
        for (id, cosine) in chosen {
            assert_eq!(cosine, scanned[&id]);
        }
        assert!(index.similarities(&[1.0, 0.0], &[1]).is_empty(), "a query of another length matches nothing");
    }

    #[test]
    fn removed_and_replaced_vectors() {
        let mut index = VectorIndex::default();
        index.upsert(1, &unit(&[1.0, 0.0]));
        index.upsert(2, &unit(&[0.0, 1.0]));
        index.remove(1);
        assert_eq!(index.len(), 1);
        assert_eq!(index.top(&unit(&[1.0, 0.0]), 5).iter().map(|t| t.0).collect::<Vec<_>>(), vec![2]);
        index.upsert(1, &unit(&[1.0, 0.1]));
        assert_eq!(index.top(&unit(&[1.0, 0.0]), 1)[0].0, 1);
        assert!(!index.upsert(3, &[1.0, 0.0, 0.0]), "another length is refused");
        assert!(index.top(&[1.0], 1).is_empty());
    }

    #[test]
    fn embed_text_is_bounded() {
        let t = embed_text("Title", &"é".repeat(10_000));
        assert!(t.len() <= MAX_EMBED_CHARS + 10);
        assert!(t.starts_with("Title.\n"));
    }
}
