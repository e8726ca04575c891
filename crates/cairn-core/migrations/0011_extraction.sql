-- Memory that writes itself: what a model extracted from an archived conversation, and where
-- the extraction of each conversation stands.

-- One row per memory a model wrote (a fact, a session summary, a project brief): the
-- conversation and messages it came from and the provider and model that wrote it. A memory
-- with a row here is an extracted one; an agent's own saves have none. Dropped with the memory.
CREATE TABLE memory_provenance (
    observation_id  INTEGER PRIMARY KEY REFERENCES observations(id) ON DELETE CASCADE,
    -- `fact`, `summary` or `brief`.
    origin          TEXT NOT NULL,
    -- The archived conversation (history session id), when it came from one.
    session_id      TEXT,
    -- JSON array of the message ids the model cited.
    message_ids     TEXT NOT NULL DEFAULT '[]',
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX memory_provenance_session ON memory_provenance (session_id) WHERE session_id IS NOT NULL;

-- Per archived conversation: the last message extracted (the mark: `seq`, then `id`, the
-- archive's order), turns since the last summary, and the failures (retried with backoff).
-- Moved in the transaction that saves a window's facts, so a restart resumes from it and a
-- window is never half saved.
CREATE TABLE extraction_state (
    session_id           TEXT PRIMARY KEY,
    project              TEXT NOT NULL DEFAULT '',
    mark_seq             INTEGER,
    mark_id              TEXT,
    turns_since_summary  INTEGER NOT NULL DEFAULT 0,
    -- The last message the running summary covers (same order as the mark).
    summary_seq          INTEGER,
    summary_id           TEXT,
    brief_checked        INTEGER NOT NULL DEFAULT 0,
    facts_saved          INTEGER NOT NULL DEFAULT 0,
    duplicates_skipped   INTEGER NOT NULL DEFAULT 0,
    attempts             INTEGER NOT NULL DEFAULT 0,
    next_attempt_at      TEXT,
    last_error_code      TEXT,
    last_error           TEXT,
    last_error_at        TEXT,
    updated_at           TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX extraction_state_failing ON extraction_state (next_attempt_at) WHERE next_attempt_at IS NOT NULL;

-- `since`: when extraction was first on. The background worker extracts conversations active
-- after it; older ones only when asked (`cairn extract --all`), so turning a model on never
-- sends a whole archive's backlog to it unasked.
CREATE TABLE extraction_meta (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL
) WITHOUT ROWID;
