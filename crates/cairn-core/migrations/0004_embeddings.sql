-- Sentence embeddings of memories, one per memory, with the model that made it. A vector
-- is dropped the moment its memory's text changes or the memory is deleted, so a stale vector
-- never outlives its text; a background indexer computes the missing ones.

CREATE TABLE embeddings (
    observation_id  INTEGER PRIMARY KEY,
    model           TEXT NOT NULL,
    dims            INTEGER NOT NULL,
    -- f32 little-endian, unit length.
    vector          BLOB NOT NULL,
    created_at      TEXT NOT NULL
);

CREATE TRIGGER embeddings_text_changed AFTER UPDATE OF title, content ON observations
WHEN old.title IS NOT new.title OR old.content IS NOT new.content
BEGIN
    DELETE FROM embeddings WHERE observation_id = new.id;
END;

CREATE TRIGGER embeddings_soft_deleted AFTER UPDATE OF deleted_at ON observations
WHEN new.deleted_at IS NOT NULL
BEGIN
    DELETE FROM embeddings WHERE observation_id = new.id;
END;

CREATE TRIGGER embeddings_hard_deleted AFTER DELETE ON observations BEGIN
    DELETE FROM embeddings WHERE observation_id = old.id;
END;
