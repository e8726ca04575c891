-- cairn schema v1. Never edit after it lands: add a new numbered file instead.

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    project     TEXT NOT NULL DEFAULT '',
    directory   TEXT NOT NULL DEFAULT '',
    agent       TEXT NOT NULL DEFAULT '',
    parent_id   TEXT,
    started_at  TEXT NOT NULL,
    ended_at    TEXT,
    summary     TEXT
);
CREATE INDEX sessions_project ON sessions(project, started_at DESC);
CREATE INDEX sessions_parent ON sessions(parent_id);

CREATE TABLE observations (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    sync_id          TEXT NOT NULL UNIQUE,
    session_id       TEXT NOT NULL REFERENCES sessions(id),
    type             TEXT NOT NULL,
    title            TEXT NOT NULL,
    content          TEXT NOT NULL,
    tool_name        TEXT,
    project          TEXT NOT NULL DEFAULT '',
    scope            TEXT NOT NULL DEFAULT 'project' CHECK (scope IN ('project', 'personal')),
    topic_key        TEXT,
    normalized_hash  TEXT NOT NULL,
    revision_count   INTEGER NOT NULL DEFAULT 1,
    duplicate_count  INTEGER NOT NULL DEFAULT 1,
    pinned           INTEGER NOT NULL DEFAULT 0,
    last_seen_at     TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    deleted_at       TEXT,
    review_after     TEXT
);
CREATE INDEX observations_session ON observations(session_id, id);
CREATE INDEX observations_session_recent ON observations(session_id, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX observations_project_recent ON observations(project, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX observations_recent ON observations(created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX observations_topic ON observations(topic_key, project, scope, updated_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX observations_dedupe ON observations(normalized_hash, project, scope, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX observations_scope_recent ON observations(scope, created_at DESC) WHERE deleted_at IS NULL;
CREATE INDEX observations_pinned ON observations(updated_at DESC) WHERE pinned = 1 AND deleted_at IS NULL;

-- Earlier versions of a memory revised through its topic_key (or an update): nothing an agent
-- once saved is silently lost.
CREATE TABLE observation_revisions (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    observation_id  INTEGER NOT NULL REFERENCES observations(id) ON DELETE CASCADE,
    revision        INTEGER NOT NULL,
    type            TEXT NOT NULL,
    title           TEXT NOT NULL,
    content         TEXT NOT NULL,
    replaced_at     TEXT NOT NULL
);
CREATE INDEX observation_revisions_obs ON observation_revisions(observation_id, revision);

-- The FTS index reads its text through this view, so soft-deleted rows are simply not in it
-- and FTS5's own integrity check holds.
CREATE VIEW observations_live AS
    SELECT id, title, content, type, project, topic_key, tool_name, scope
    FROM observations WHERE deleted_at IS NULL;

-- project, type and scope are indexed so filters run inside FTS5 (an intersection of doclists)
-- instead of ranking every match and discarding most of them.
CREATE VIRTUAL TABLE observations_fts USING fts5(
    title, content, type, project, topic_key, tool_name, scope,
    content = 'observations_live', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
-- BM25 weights: title, content, type, project, topic_key, tool_name, scope. A word in the title
-- says more than the same word deep in the content; filter-only columns weigh nothing.
INSERT INTO observations_fts(observations_fts, rank) VALUES ('rank', 'bm25(4.0, 1.0, 0.5, 0.0, 2.0, 0.5, 0.0)');

CREATE TRIGGER observations_fts_insert AFTER INSERT ON observations
WHEN new.deleted_at IS NULL BEGIN
    INSERT INTO observations_fts(rowid, title, content, type, project, topic_key, tool_name, scope)
    VALUES (new.id, new.title, new.content, new.type, new.project, new.topic_key, new.tool_name, new.scope);
END;

CREATE TRIGGER observations_fts_delete AFTER DELETE ON observations
WHEN old.deleted_at IS NULL BEGIN
    INSERT INTO observations_fts(observations_fts, rowid, title, content, type, project, topic_key, tool_name, scope)
    VALUES ('delete', old.id, old.title, old.content, old.type, old.project, old.topic_key, old.tool_name, old.scope);
END;

-- One trigger, two ordered statements: SQLite fires separate triggers in reverse creation
-- order, which would re-add the new text before removing the old.
CREATE TRIGGER observations_fts_update AFTER UPDATE OF title, content, type, project, topic_key, tool_name, scope, deleted_at ON observations
BEGIN
    INSERT INTO observations_fts(observations_fts, rowid, title, content, type, project, topic_key, tool_name, scope)
    SELECT 'delete', old.id, old.title, old.content, old.type, old.project, old.topic_key, old.tool_name, old.scope
    WHERE old.deleted_at IS NULL;
    INSERT INTO observations_fts(rowid, title, content, type, project, topic_key, tool_name, scope)
    SELECT new.id, new.title, new.content, new.type, new.project, new.topic_key, new.tool_name, new.scope
    WHERE new.deleted_at IS NULL;
END;

CREATE TABLE prompts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    sync_id     TEXT NOT NULL UNIQUE,
    session_id  TEXT NOT NULL REFERENCES sessions(id),
    content     TEXT NOT NULL,
    project     TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL
);
CREATE INDEX prompts_session ON prompts(session_id);
CREATE INDEX prompts_project_recent ON prompts(project, created_at DESC);
CREATE INDEX prompts_recent ON prompts(created_at DESC);

CREATE VIRTUAL TABLE prompts_fts USING fts5(
    content, project,
    content = 'prompts', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER prompts_fts_insert AFTER INSERT ON prompts BEGIN
    INSERT INTO prompts_fts(rowid, content, project) VALUES (new.id, new.content, new.project);
END;
CREATE TRIGGER prompts_fts_delete AFTER DELETE ON prompts BEGIN
    INSERT INTO prompts_fts(prompts_fts, rowid, content, project) VALUES ('delete', old.id, old.content, old.project);
END;
CREATE TRIGGER prompts_fts_update AFTER UPDATE OF content, project ON prompts BEGIN
    INSERT INTO prompts_fts(prompts_fts, rowid, content, project) VALUES ('delete', old.id, old.content, old.project);
    INSERT INTO prompts_fts(rowid, content, project) VALUES (new.id, new.content, new.project);
END;

-- Verdicts between two memories, keyed by observation sync_ids (so they survive export/import).
CREATE TABLE relations (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    sync_id          TEXT NOT NULL UNIQUE,
    source_id        TEXT NOT NULL,
    target_id        TEXT NOT NULL,
    relation         TEXT NOT NULL DEFAULT 'pending',
    reason           TEXT,
    evidence         TEXT,
    confidence       REAL,
    judgment_status  TEXT NOT NULL DEFAULT 'pending',
    marked_by_actor  TEXT,
    marked_by_kind   TEXT,
    marked_by_model  TEXT,
    session_id       TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX relations_source ON relations(source_id, judgment_status);
CREATE INDEX relations_target ON relations(target_id, judgment_status);
CREATE INDEX relations_status ON relations(judgment_status, created_at DESC);
