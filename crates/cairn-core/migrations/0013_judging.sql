-- Supersession judged on arrival: the judge's mark (the newest memory id it has looked at), so
-- every memory that arrives by any path (a save, extraction, a sync pull, an import, the spool)
-- is judged once, in the background, with no work added to the write itself.
--
-- An existing store starts its mark at its newest memory: older memories are judged by
-- `cairn conflicts scan --semantic`, not all at once after an upgrade.

CREATE TABLE judge_mark (
    id               INTEGER PRIMARY KEY CHECK (id = 1),
    last_memory_id   INTEGER NOT NULL,
    updated_at       TEXT
);
INSERT INTO judge_mark (id, last_memory_id) SELECT 1, coalesce(max(id), 0) FROM observations;

-- "Is this memory replaced?" is asked for every page of search hits: by target and verdict.
CREATE INDEX relations_target_verdict ON relations(target_id, relation, judgment_status);
