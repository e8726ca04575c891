-- The full-text index moves to a file of its own (history-fts.db, written by its own
-- connection and, during a scan, its own thread; see src/history/index.rs). What to index is
-- queued here, in the row writer's transaction: `new` rows lo..hi inserted by one batch,
-- `changed` and `deleted` one row each (lo = hi). The index file stores the last entry it
-- applied; a new index file is rebuilt from the rows (one `new` entry covering every part).
-- AUTOINCREMENT: the queue is emptied as the index catches up, and a number must never come
-- back below the index's mark.

DROP TABLE history_fts;

CREATE TABLE history_fts_queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    lo  INTEGER NOT NULL,
    hi  INTEGER NOT NULL,
    op  TEXT NOT NULL
);

-- Which archive the index file belongs to: an index file left beside a new history.db (the
-- old one deleted) holds another archive's rows, and is rebuilt.
CREATE TABLE history_fts_owner (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    token TEXT NOT NULL
);
INSERT INTO history_fts_owner (id, token) VALUES (1, lower(hex(randomblob(16))));
