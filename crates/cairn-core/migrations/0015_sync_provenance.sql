-- A memory a model wrote keeps where it came from through sync: its observation payload carries
-- a `provenance` object (origin, session id, message ids, provider, model, when) whenever a
-- `memory_provenance` row exists. A memory no model wrote has no such key, so its payload is
-- byte for byte what 0009 wrote, and an older peer (which ignores the key) keeps working.
-- Every statement can run again over its own result (a test that winds the schema version back
-- to an older one runs the later migrations again).

-- What travels of a provenance row: ids and model names only, never text of the conversation.
CREATE VIEW IF NOT EXISTS sync_provenance_payloads AS
SELECT observation_id,
    json_object('origin', origin, 'session_id', session_id,
        'message_ids', json(CASE WHEN json_valid(message_ids) THEN message_ids ELSE '[]' END),
        'provider', provider, 'model', model, 'created_at', created_at) AS provenance
FROM memory_provenance;

-- 0009's payload, unchanged, under another name: the view below adds the provenance to it.
CREATE VIEW IF NOT EXISTS sync_observation_plain_payloads AS
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

-- The triggers of 0009 and the first snapshot read this view by name: replacing it is enough
-- for every later write and every enrolment to carry the provenance.
DROP VIEW IF EXISTS sync_observation_payloads;
CREATE VIEW sync_observation_payloads AS
SELECT b.id, b.project, b.sync_id, b.hlc, b.updated_at, b.op,
    CASE WHEN pp.provenance IS NULL THEN b.payload
        ELSE json_set(b.payload, '$.provenance', json(pp.provenance)) END AS payload
FROM sync_observation_plain_payloads b
LEFT JOIN sync_provenance_payloads pp ON pp.observation_id = b.id;

-- The provenance row is written after its memory (it references the row), so the journal entry
-- of that write was made without it. The memory's newest entry gets it added when it is of the
-- memory's current version and no target can have read it yet (after every target's mark; in
-- practice the entry of this very transaction, found a few index steps from the journal's end).
-- When there is none (the row written after a target took the entry), a new entry of the same
-- version carries it, which a peer that already has the version applies for its provenance alone.
CREATE TRIGGER IF NOT EXISTS sync_provenance_insert AFTER INSERT ON memory_provenance
WHEN EXISTS (SELECT 1 FROM observations o JOIN sync_projects sp ON sp.project = o.project
             WHERE o.id = new.observation_id)
BEGIN
    UPDATE sync_journal SET payload = json_set(payload, '$.provenance',
            json((SELECT provenance FROM sync_provenance_payloads WHERE observation_id = new.observation_id)))
    WHERE seq = (SELECT j.seq FROM sync_journal j JOIN observations o ON o.id = new.observation_id
                 WHERE j.project = o.project AND j.entity = 'observation' AND j.entity_key = o.sync_id
                     AND j.seq > (SELECT coalesce(max(last_exported_seq), 0) FROM sync_targets)
                 ORDER BY j.seq DESC LIMIT 1)
        AND hlc IS (SELECT hlc FROM observations WHERE id = new.observation_id);
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
    SELECT p.project, 'observation', p.sync_id, p.op, p.payload, p.hlc,
        coalesce((SELECT applying FROM sync_clock), 'local'), p.updated_at
    FROM sync_observation_payloads p
    WHERE p.id = new.observation_id AND NOT EXISTS (
        SELECT 1 FROM (SELECT j.hlc FROM sync_journal j
                       WHERE j.project = p.project AND j.entity = 'observation' AND j.entity_key = p.sync_id
                           AND j.seq > (SELECT coalesce(max(last_exported_seq), 0) FROM sync_targets)
                       ORDER BY j.seq DESC LIMIT 1) newest
        WHERE newest.hlc IS p.hlc);
END;

-- The same when a revised summary or brief replaces the row's model and message ids.
CREATE TRIGGER IF NOT EXISTS sync_provenance_update AFTER UPDATE ON memory_provenance
WHEN EXISTS (SELECT 1 FROM observations o JOIN sync_projects sp ON sp.project = o.project
             WHERE o.id = new.observation_id)
BEGIN
    UPDATE sync_journal SET payload = json_set(payload, '$.provenance',
            json((SELECT provenance FROM sync_provenance_payloads WHERE observation_id = new.observation_id)))
    WHERE seq = (SELECT j.seq FROM sync_journal j JOIN observations o ON o.id = new.observation_id
                 WHERE j.project = o.project AND j.entity = 'observation' AND j.entity_key = o.sync_id
                     AND j.seq > (SELECT coalesce(max(last_exported_seq), 0) FROM sync_targets)
                 ORDER BY j.seq DESC LIMIT 1)
        AND hlc IS (SELECT hlc FROM observations WHERE id = new.observation_id);
    INSERT INTO sync_journal (project, entity, entity_key, op, payload, hlc, source, occurred_at)
    SELECT p.project, 'observation', p.sync_id, p.op, p.payload, p.hlc,
        coalesce((SELECT applying FROM sync_clock), 'local'), p.updated_at
    FROM sync_observation_payloads p
    WHERE p.id = new.observation_id AND NOT EXISTS (
        SELECT 1 FROM (SELECT j.hlc FROM sync_journal j
                       WHERE j.project = p.project AND j.entity = 'observation' AND j.entity_key = p.sync_id
                           AND j.seq > (SELECT coalesce(max(last_exported_seq), 0) FROM sync_targets)
                       ORDER BY j.seq DESC LIMIT 1) newest
        WHERE newest.hlc IS p.hlc);
END;
