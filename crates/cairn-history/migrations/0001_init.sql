-- The conversation-history archive (history.db, beside cairn.db). Rows are keyed by
-- (session_id, id): Claude Code copies records with their uuids into a resumed session's
-- file, so a message or part id alone is not unique across sessions.

CREATE TABLE history_sessions (
    id          TEXT PRIMARY KEY,
    host        TEXT NOT NULL,
    project     TEXT,
    directory   TEXT,
    parent_id   TEXT,
    title       TEXT,
    agent       TEXT,
    model       TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX history_sessions_updated ON history_sessions (updated_at);
CREATE INDEX history_sessions_project ON history_sessions (project, updated_at);
CREATE INDEX history_sessions_parent ON history_sessions (parent_id) WHERE parent_id IS NOT NULL;

CREATE TABLE history_messages (
    rowid       INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL,
    id          TEXT NOT NULL,
    role        TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    -- 0 before the session's first turn; NULL only inside `apply`, until numbered.
    turn_number INTEGER,
    summary     INTEGER NOT NULL DEFAULT 0,
    compaction  INTEGER NOT NULL DEFAULT 0,
    synthetic   INTEGER NOT NULL DEFAULT 0,
    finish      TEXT,
    tokens      TEXT,
    model       TEXT,
    agent       TEXT,
    created_at  TEXT NOT NULL,
    UNIQUE (session_id, id)
);
-- Every window (browse, visibility boundary, numbering) walks a session in (seq, id) order.
CREATE INDEX history_messages_order ON history_messages (session_id, seq, id);
CREATE INDEX history_messages_turn ON history_messages (session_id, turn_number, seq);

CREATE TABLE history_parts (
    rowid       INTEGER PRIMARY KEY,
    session_id  TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    id          TEXT NOT NULL,
    idx         INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    text        TEXT,
    tool        TEXT,
    call_id     TEXT,
    status      TEXT,
    input       TEXT,
    output      TEXT,
    mime        TEXT,
    path        TEXT,
    pruned      INTEGER NOT NULL DEFAULT 0,
    -- Bumped at each change, so an upsert's RETURNING tells an insert (0) from an update.
    version     INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, id)
);
CREATE INDEX history_parts_message ON history_parts (session_id, message_id, idx);
CREATE INDEX history_parts_call ON history_parts (session_id, call_id) WHERE call_id IS NOT NULL;

-- Contentless: the text lives in history_parts; the index holds at most the first 32 KiB of
-- each part. `kind` (text | reasoning | tool) and `session` are column filters, so a
-- session-scoped search never ranks another session's rows.
CREATE VIRTUAL TABLE history_fts USING fts5(
    body,
    kind,
    session,
    content = '',
    contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

-- One row per source (a JSONL file, or an OpenCode database#session): where its reader stopped.
CREATE TABLE history_sources (
    key         TEXT PRIMARY KEY,
    host        TEXT NOT NULL,
    cursor      TEXT NOT NULL,
    batches     INTEGER NOT NULL DEFAULT 0,
    messages    INTEGER NOT NULL DEFAULT 0,
    parts       INTEGER NOT NULL DEFAULT 0,
    last_error_code TEXT,
    last_error  TEXT,
    error_at    TEXT,
    updated_at  TEXT NOT NULL
);

CREATE TABLE history_skips (
    source  TEXT NOT NULL,
    host    TEXT NOT NULL,
    reason  TEXT NOT NULL,
    count   INTEGER NOT NULL,
    PRIMARY KEY (source, reason)
);

-- Sessions erased with `forget`: a later scan of a host file that still holds them skips them.
CREATE TABLE history_forgotten (
    session_id   TEXT PRIMARY KEY,
    forgotten_at TEXT NOT NULL
);
