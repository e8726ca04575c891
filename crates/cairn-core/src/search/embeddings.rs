//! Embedding passes over the context's model: loading the stored vectors, storing new ones, the
//! CLI's own run. Their SQL is `crate::store::embeddings`; the vectors in memory are
//! [`crate::semantic`]'s.

use crate::Core;
use crate::error::{CairnError, ErrorCode, Result};
use crate::semantic::PendingText;

impl Core {
    /// Read the attached model's stored vectors into memory (the daemon does this once, in
    /// the background). Returns how many.
    pub fn load_vectors(&self) -> Result<usize> {
        match &self.semantic {
            Some(semantic) => semantic.load(self.store.conn()),
            None => Ok(0),
        }
    }

    /// Embed up to `limit` pending memories with the attached model, in this process (the
    /// CLI's `reindex` when no daemon runs). Returns how many were stored.
    pub fn embed_pending(&mut self, limit: usize) -> Result<usize> {
        let Some(semantic) = self.semantic.clone() else {
            return Err(CairnError::new(ErrorCode::ModelMissing, "no embedding model is configured")
                .with_hint("run `cairn model install`, or set CAIRN_EMBEDDER=http with CAIRN_EMBED_URL"));
        };
        let pending = self.store.pending_embeddings(semantic.model_id(), limit)?;
        if pending.is_empty() {
            return Ok(0);
        }
        let items = semantic.embed_pending_texts(pending)?;
        self.store_embeddings(&items)
    }

    /// Store vectors with the attached model's id and add the ones stored to its in-memory
    /// index (the daemon's indexer embeds off the writer, then calls this on it).
    pub fn store_embeddings(&mut self, items: &[(PendingText, Vec<f32>)]) -> Result<usize> {
        let Some(semantic) = self.semantic.clone() else {
            return Err(CairnError::new(ErrorCode::ModelMissing, "no embedding model is configured"));
        };
        let stored = self.store.put_embeddings(semantic.model_id(), items)?;
        let fresh: Vec<(i64, Vec<f32>)> =
            items.iter().filter(|(p, _)| stored.contains(&p.id)).map(|(p, v)| (p.id, v.clone())).collect();
        semantic.remember(self.store.conn(), &fresh);
        Ok(stored.len())
    }
}
