-- Sync: a change journal for the projects that sync, the hybrid logical clock that orders
-- concurrent edits, per-target high-water marks, applied chunks, tombstones and relations
-- waiting for their memories.
--
-- The journal is written by triggers, so every write path (save, update, delete, pin, judge,
-- import, the spool) appends in the same transaction as the write itself, and only for
-- enrolled projects (engram journals every write forever). Payloads follow engram's mutation
-- shapes plus cairn's fields (pinned, review_after, hlc, prev_hlc).

CREATE TABLE sync_projects (
    project      TEXT PRIMARY KEY,
    enrolled_at  TEXT NOT NULL
) WITHOUT ROWID;

-- The store's hybrid logical clock: wall milliseconds, a counter, and a random node id that
-- breaks ties. `applying` names the source while remote mutations are applied (set and
-- cleared inside the applying transaction): triggers then journal the row with that source and
-- keep the remote stamp instead of making a new one.
CREATE TABLE sync_clock (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    node_id   TEXT NOT NULL,
    wall_ms   INTEGER NOT NULL,
    counter   INTEGER NOT NULL,
    applying  TEXT
);
INSERT INTO sync_clock (id, node_id, wall_ms, counter) VALUES (1, lower(hex(randomblob(8))), 0, 0);

-- A version stamp on every synced row: `<wall ms, 15 digits>-<counter, 6 digits>-<node>`, so
-- text order is version order.
ALTER TABLE observations ADD COLUMN hlc TEXT;
ALTER TABLE relations ADD COLUMN hlc TEXT;

CREATE TABLE sync_journal (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    project      TEXT NOT NULL,
    entity       TEXT NOT NULL,
    entity_key   TEXT NOT NULL,
    op           TEXT NOT NULL,
    payload      TEXT NOT NULL,
    hlc          TEXT,
    -- 'local', or the target a mutation was applied from (not sent back there).
    source       TEXT NOT NULL DEFAULT 'local',
    occurred_at  TEXT NOT NULL
);
CREATE INDEX sync_journal_project ON sync_journal(project, seq);

CREATE TABLE sync_targets (
    target_key         TEXT PRIMARY KEY,
    last_exported_seq  INTEGER NOT NULL DEFAULT 0,
    last_run_at        TEXT,
    last_error         TEXT
) WITHOUT ROWID;

CREATE TABLE sync_chunks (
    target_key  TEXT NOT NULL,
    chunk_id    TEXT NOT NULL,
    applied_at  TEXT NOT NULL,
    PRIMARY KEY (target_key, chunk_id)
) WITHOUT ROWID;

-- Hard-deleted synced memories: an older upsert arriving later must not bring them back.
CREATE TABLE sync_tombstones (
    entity_key  TEXT PRIMARY KEY,
    hlc         TEXT NOT NULL,
    deleted_at  TEXT NOT NULL
) WITHOUT ROWID;

-- Relations whose memories have not arrived yet; retried on every apply, `dead` after 5 tries.
CREATE TABLE sync_deferred (
    sync_id     TEXT PRIMARY KEY,
    entity      TEXT NOT NULL,
    payload     TEXT NOT NULL,
    source      TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL DEFAULT 'pending',
    last_error  TEXT,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
) WITHOUT ROWID;

-- The payload of each synced entity, defined once for the triggers and the first snapshot.
CREATE VIEW sync_observation_payloads AS
SELECT o.id, o.project, o.sync_id, o.hlc, o.updated_at,
    CASE WHEN o.deleted_at IS NULL THEN 'upsert' ELSE 'delete' END AS op,
    json_object('sync_id', o.sync_id, 'session_id', o.session_id, 'type', o.type, 'title', o.title,
        'content', o.content, 'tool_name', o.tool_name, 'project', o.project, 'scope', o.scope,
        'topic_key', o.topic_key, 'revision_count', o.revision_count, 'duplicate_count', o.duplicate_count,
        'last_seen_at', o.last_seen_at, 'created_at', o.created_at, 'updated_at', o.updated_at,
        'deleted', json(CASE WHEN o.deleted_at IS NULL THEN 'false' ELSE 'true' END),
        'deleted_at', o.deleted_at, 'pinned', json(CASE WHEN o.pinned THEN 'true' ELSE 'false' END),
        'review_after', o.review_after, 'hlc', o.hlc) AS payload
FROM observations o;

CREATE VIEW sync_relation_payloads AS
SELECT r.id, coalesce((SELECT o.project FROM observations o WHERE o.sync_id = r.source_id), '') AS project,
    r.sync_id, r.hlc, r.updated_at,
    json_object('sync_id', r.sync_id, 'source_id', r.source_id, 'target_id', r.target_id, 'relation', r.relation,
        'reason', r.reason, 'evidence', r.evidence, 'confidence', r.confidence,
        'judgment_status', r.judgment_status, 'marked_by_actor', r.marked_by_actor,
        'marked_by_kind', r.marked_by_kind, 'marked_by_model', r.marked_by_model, 'session_id', r.session_id,
        'project', coalesce((SELECT o.project FROM observations o WHERE o.sync_id = r.source_id), ''),
        'created_at', r.created_at, 'updated_at', r.updated_at, 'hlc', r.hlc) AS payload
FROM relations r;

CREATE VIEW sync_session_payloads AS
SELECT s.id, s.project, s.started_at,
    json_object('id', s.id, 'project', s.project, 'directory', s.directory, 'agent', s.agent,
        'parent_id', s.parent_id, 'started_at', s.started_at, 'ended_at', s.ended_at, 'summary', s.summary,
        'title', s.title) AS payload
FROM sessions s;

CREATE VIEW sync_prompt_payloads AS
SELECT p.id, p.project, p.sync_id, p.created_at,
    json_object('sync_id', p.sync_id, 'session_id', p.session_id, 'content', p.content, 'project', p.project,
        'created_at', p.created_at) AS payload
FROM prompts p;

-- Memories. A local write advances the clock past the row's updated_at (physical time) and
-- stamps the row; an applied one keeps the stamp it came with.
CREATE TRIGGER sync_observation_insert AFTER INSERT ON observations
WHEN EXISTS (SELECT 1 FROM sync_projects WHERE project = new.project)
BEGIN
    UPDATE sync_clock SET
        counter = CASE WHEN wall_ms >= coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0)
            THEN counter + 1 ELSE 0 END,
        wall_ms = max(wall_ms, coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0))
    WHERE applying IS NULL;
    UPDATE observations SET hlc = (SELECT printf('%015d-%06d-%s', wall_ms, counter, node_id) FROM sync_clock)
    WHERE id = new.id AND (SELECT applying FROM sync_clock) IS NULL;
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
    SELECT p.project, 'observation', p.sync_id, p.op, p.payload, p.hlc,
        coalesce((SELECT applying FROM sync_clock), 'local'), p.updated_at
    FROM sync_observation_payloads p WHERE p.id = new.id;
END;

-- The stamp written by a trigger is no write of its own: a local write never sets `hlc`, an
-- applied one does while `applying` is set.
-- A stamped row is stamped again on every local write, even once its project stopped
-- syncing or when it came from another store into one that does not sync it (yet): an old stamp
-- on new text would lose to older edits.
CREATE TRIGGER sync_observation_update AFTER UPDATE ON observations
WHEN (old.hlc IS NOT NULL OR EXISTS (SELECT 1 FROM sync_projects WHERE project IN (new.project, old.project)))
    AND (old.hlc IS new.hlc OR (SELECT applying FROM sync_clock) IS NOT NULL)
BEGIN
    UPDATE sync_clock SET
        counter = CASE WHEN wall_ms >= coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0)
            THEN counter + 1 ELSE 0 END,
        wall_ms = max(wall_ms, coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0))
    WHERE applying IS NULL;
    UPDATE observations SET hlc = (SELECT printf('%015d-%06d-%s', wall_ms, counter, node_id) FROM sync_clock)
    WHERE id = new.id AND (SELECT applying FROM sync_clock) IS NULL;
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
    SELECT CASE WHEN EXISTS (SELECT 1 FROM sync_projects WHERE project = new.project) THEN new.project ELSE old.project END,
        'observation', p.sync_id, p.op, json_set(p.payload, '$.prev_hlc', old.hlc), p.hlc,
        coalesce((SELECT applying FROM sync_clock), 'local'), p.updated_at
    FROM sync_observation_payloads p
    WHERE p.id = new.id AND EXISTS (SELECT 1 FROM sync_projects WHERE project IN (new.project, old.project));
END;

CREATE TRIGGER sync_observation_hard_delete AFTER DELETE ON observations
WHEN EXISTS (SELECT 1 FROM sync_projects WHERE project = old.project)
BEGIN
    UPDATE sync_clock SET
        counter = CASE WHEN wall_ms >= CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER)
            THEN counter + 1 ELSE 0 END,
        wall_ms = max(wall_ms, CAST(round((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER))
    WHERE applying IS NULL;
    INSERT INTO sync_tombstones (entity_key, hlc, deleted_at)
    SELECT old.sync_id, printf('%015d-%06d-%s', wall_ms, counter, node_id), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
    FROM sync_clock WHERE applying IS NULL
    ON CONFLICT (entity_key) DO UPDATE SET hlc = excluded.hlc, deleted_at = excluded.deleted_at;
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
    SELECT old.project, 'observation', old.sync_id, 'delete',
        json_object('sync_id', old.sync_id, 'session_id', old.session_id, 'project', old.project,
            'deleted', json('true'), 'hard_delete', json('true'), 'deleted_at', t.deleted_at, 'hlc', t.hlc),
        t.hlc, coalesce((SELECT applying FROM sync_clock), 'local'), t.deleted_at
    FROM sync_tombstones t WHERE t.entity_key = old.sync_id;
END;

-- Relations (candidates, judgments, comparisons) belong to their source memory's project.
CREATE TRIGGER sync_relation_insert AFTER INSERT ON relations
WHEN EXISTS (SELECT 1 FROM sync_projects sp JOIN observations o ON o.project = sp.project WHERE o.sync_id = new.source_id)
BEGIN
    UPDATE sync_clock SET
        counter = CASE WHEN wall_ms >= coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0)
            THEN counter + 1 ELSE 0 END,
        wall_ms = max(wall_ms, coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0))
    WHERE applying IS NULL;
    UPDATE relations SET hlc = (SELECT printf('%015d-%06d-%s', wall_ms, counter, node_id) FROM sync_clock)
    WHERE id = new.id AND (SELECT applying FROM sync_clock) IS NULL;
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
    SELECT p.project, 'relation', p.sync_id, 'upsert', p.payload, p.hlc,
        coalesce((SELECT applying FROM sync_clock), 'local'), p.updated_at
    FROM sync_relation_payloads p WHERE p.id = new.id;
END;

CREATE TRIGGER sync_relation_update AFTER UPDATE ON relations
WHEN (old.hlc IS NOT NULL
        OR EXISTS (SELECT 1 FROM sync_projects sp JOIN observations o ON o.project = sp.project WHERE o.sync_id = new.source_id))
    AND (old.hlc IS new.hlc OR (SELECT applying FROM sync_clock) IS NOT NULL)
BEGIN
    UPDATE sync_clock SET
        counter = CASE WHEN wall_ms >= coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0)
            THEN counter + 1 ELSE 0 END,
        wall_ms = max(wall_ms, coalesce(CAST(round((julianday(new.updated_at) - 2440587.5) * 86400000.0) AS INTEGER), 0))
    WHERE applying IS NULL;
    UPDATE relations SET hlc = (SELECT printf('%015d-%06d-%s', wall_ms, counter, node_id) FROM sync_clock)
    WHERE id = new.id AND (SELECT applying FROM sync_clock) IS NULL;
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
    SELECT p.project, 'relation', p.sync_id, 'upsert', json_set(p.payload, '$.prev_hlc', old.hlc), p.hlc,
        coalesce((SELECT applying FROM sync_clock), 'local'), p.updated_at
    FROM sync_relation_payloads p
    WHERE p.id = new.id AND EXISTS (SELECT 1 FROM sync_projects WHERE project = p.project);
END;

-- Sessions and prompts travel as engram's chunks carry them: upserts that fill what is missing.
CREATE TRIGGER sync_session_insert AFTER INSERT ON sessions
WHEN EXISTS (SELECT 1 FROM sync_projects WHERE project = new.project)
BEGIN
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, source, occurred_at)
    SELECT p.project, 'session', p.id, 'upsert', p.payload, coalesce((SELECT applying FROM sync_clock), 'local'),
        p.started_at
    FROM sync_session_payloads p WHERE p.id = new.id;
END;

CREATE TRIGGER sync_session_update AFTER UPDATE OF project, directory, ended_at, summary, title ON sessions
WHEN EXISTS (SELECT 1 FROM sync_projects WHERE project = new.project)
BEGIN
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, source, occurred_at)
    SELECT p.project, 'session', p.id, 'upsert', p.payload, coalesce((SELECT applying FROM sync_clock), 'local'),
        coalesce(new.ended_at, new.started_at)
    FROM sync_session_payloads p WHERE p.id = new.id;
END;

CREATE TRIGGER sync_prompt_insert AFTER INSERT ON prompts
WHEN EXISTS (SELECT 1 FROM sync_projects WHERE project = new.project)
BEGIN
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, source, occurred_at)
    SELECT p.project, 'prompt', p.sync_id, 'upsert', p.payload, coalesce((SELECT applying FROM sync_clock), 'local'),
        p.created_at
    FROM sync_prompt_payloads p WHERE p.id = new.id;
END;
