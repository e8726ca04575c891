//! The store's side of the vectors: which memories still need one, storing them, and the CLI's
//! own embedding run. The vectors themselves (in memory) are [`crate::semantic`]'s.

use rusqlite::params;

use crate::Core;
use crate::error::{CairnError, ErrorCode, Result};
use crate::semantic::{CONTEXT_MAX_CHARS, PendingText, encode};
use crate::store::Store;

impl Store {
    /// Memories of the current model still without a vector, newest first.
    pub fn pending_embeddings(&self, model: &str, limit: usize) -> Result<Vec<PendingText>> {
        let mut stmt = self.conn().prepare_cached(
            "SELECT o.id, o.title, o.content,
               CASE WHEN length(o.content) <= ?3 AND o.session_id NOT LIKE ?4 THEN
                 (SELECT p.content FROM observations p WHERE p.session_id = o.session_id AND p.id < o.id
                    AND p.deleted_at IS NULL ORDER BY p.id DESC LIMIT 1)
               END
             FROM observations o
             WHERE o.deleted_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.observation_id = o.id AND e.model = ?1)
             ORDER BY o.id DESC LIMIT ?2",
        )?;
        let in_catch_all = crate::model::catch_all_sessions_like();
        let rows = stmt.query_map(params![model, limit as i64, CONTEXT_MAX_CHARS, in_catch_all], |r| {
            Ok(PendingText {
                id: r.get(0)?,
                title: r.get(1)?,
                content: r.get(2)?,
                context: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// How many vectors of `model` are stored.
    pub fn count_embeddings(&self, model: &str) -> Result<i64> {
        Ok(self.conn().query_row("SELECT count(*) FROM embeddings WHERE model = ?1", [model], |r| r.get(0))?)
    }

    /// How many live memories have no vector of `model`.
    pub fn count_pending_embeddings(&self, model: &str) -> Result<i64> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM observations o WHERE o.deleted_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.observation_id = o.id AND e.model = ?1)",
            [model],
            |r| r.get(0),
        )?)
    }

    /// Store vectors computed from `PendingText`s. A memory whose text changed since it was
    /// read (or that was deleted) is skipped: its vector would describe old text. Returns the
    /// ids stored.
    pub fn put_embeddings(&mut self, model: &str, items: &[(PendingText, Vec<f32>)]) -> Result<Vec<i64>> {
        let now = self.now();
        self.write(|conn| {
            let mut stmt = conn.prepare_cached(
                "INSERT OR REPLACE INTO embeddings (observation_id, model, dims, vector, created_at)
                 SELECT id, ?2, ?3, ?4, ?5 FROM observations
                 WHERE id = ?1 AND deleted_at IS NULL AND title = ?6 AND content = ?7",
            )?;
            let mut stored = Vec::with_capacity(items.len());
            for (pending, vector) in items {
                let n = stmt.execute(params![
                    pending.id,
                    model,
                    vector.len() as i64,
                    encode(vector),
                    now,
                    pending.title,
                    pending.content
                ])?;
                if n == 1 {
                    stored.push(pending.id);
                }
            }
            Ok(stored)
        })
    }

    /// Drop vectors: all of them, or those of other models than `keep_model`.
    pub fn clear_embeddings(&mut self, keep_model: Option<&str>) -> Result<usize> {
        self.write(|conn| {
            Ok(match keep_model {
                Some(model) => conn.execute("DELETE FROM embeddings WHERE model != ?1", [model])?,
                None => conn.execute("DELETE FROM embeddings", [])?,
            })
        })
    }
}

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
