//! The SQL of the vectors (`crate::semantic` holds them in memory, `crate::search::embeddings`
//! runs the passes): which memories still need one, storing them, counting, clearing.

use rusqlite::params;

use crate::error::Result;
use crate::store::Store;

/// A memory saved in a session whose content is at most this long (characters) is embedded
/// together with the memory saved right before it in the session. A short turn of a
/// conversation or a working session ("Yes, last Tuesday!", "that fixed it") means little
/// alone; what it answers says what it is about. Longer memories stand on their own, and
/// memories saved without a session (the project's catch-all `manual-save-…` session) have
/// no neighbour that is context. Chosen on the dev half of LoCoMo: recall@10 of hybrid search
/// 0.744 → 0.765 (every memory in a session: 0.758); see docs/BENCHMARKS.md.
pub const CONTEXT_MAX_CHARS: i64 = 250;

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

/// A vector as stored: f32 little-endian.
pub fn encode(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A stored vector back (a trailing partial value is dropped).
pub fn decode(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// A live memory without a vector of model `?1`, with the text it is embedded with (the
/// content of the memory before it in its session when it is short: `?3`, `?4`).
const PENDING_SQL: &str = "SELECT o.id, o.title, o.content,
       CASE WHEN length(o.content) <= ?3 AND o.session_id NOT LIKE ?4 THEN
         (SELECT p.content FROM observations p WHERE p.session_id = o.session_id AND p.id < o.id
            AND p.deleted_at IS NULL ORDER BY p.id DESC LIMIT 1)
       END
     FROM observations o
     WHERE o.deleted_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.observation_id = o.id AND e.model = ?1)";

fn read_pending(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingText> {
    Ok(PendingText {
        id: r.get(0)?,
        title: r.get(1)?,
        content: r.get(2)?,
        context: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
    })
}

impl Store {
    /// Memories of the current model still without a vector, newest first.
    pub fn pending_embeddings(&self, model: &str, limit: usize) -> Result<Vec<PendingText>> {
        let mut stmt = self.conn().prepare_cached(&format!("{PENDING_SQL} ORDER BY o.id DESC LIMIT ?2"))?;
        let in_catch_all = crate::model::catch_all_sessions_like();
        let rows = stmt.query_map(params![model, limit as i64, CONTEXT_MAX_CHARS, in_catch_all], read_pending)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Those of `ids` still without a vector of `model` (the daemon's fresh lane, after it
    /// claimed them: a vector stored meanwhile by the other lane shows here).
    pub fn pending_embeddings_of(&self, model: &str, ids: &[i64]) -> Result<Vec<PendingText>> {
        let mut stmt = self.conn().prepare_cached(&format!("{PENDING_SQL} AND o.id = ?2"))?;
        let in_catch_all = crate::model::catch_all_sessions_like();
        let mut pending = Vec::with_capacity(ids.len());
        for &id in ids {
            let rows = stmt.query_map(params![model, id, CONTEXT_MAX_CHARS, in_catch_all], read_pending)?;
            for row in rows {
                pending.push(row?);
            }
        }
        Ok(pending)
    }

    /// The newest `seq` of the change log (0 when empty): where a follower of it starts.
    /// SQLite's `data_version` of this connection: it moves whenever another connection commits
    /// to the database (this daemon's writer, another process). Unmoved, nothing anyone could
    /// have written has changed what this connection reads.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self.conn().query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    pub fn newest_change(&self) -> Result<i64> {
        crate::store::index_feed::newest_change_seq(self.conn())
    }

    /// The memories changed (saved, revised, deleted) after change `seq`, each once, the most
    /// recently changed first, at most `limit`; and the newest `seq` read.
    pub fn changed_since(&self, seq: i64, limit: usize) -> Result<(i64, Vec<i64>)> {
        let newest = self.newest_change()?.max(seq);
        let mut stmt = self.conn().prepare_cached(
            "SELECT observation_id FROM observation_changes WHERE seq > ?1 AND seq <= ?2
             GROUP BY observation_id ORDER BY max(seq) DESC LIMIT ?3",
        )?;
        let ids = stmt.query_map(params![seq, newest, limit as i64], |r| r.get(0))?;
        Ok((newest, ids.collect::<rusqlite::Result<_>>()?))
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
