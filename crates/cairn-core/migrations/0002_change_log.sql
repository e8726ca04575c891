-- A log of changed memories, so an in-memory search index (held by the daemon) catches up with
-- writes from any process, including ones that wrote to the file directly.

CREATE TABLE observation_changes (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    observation_id  INTEGER NOT NULL
);

CREATE TRIGGER observation_changes_insert AFTER INSERT ON observations BEGIN
    INSERT INTO observation_changes(observation_id) VALUES (new.id);
END;

CREATE TRIGGER observation_changes_update AFTER UPDATE OF title, content, type, project, scope, topic_key,
    tool_name, deleted_at, updated_at ON observations
BEGIN
    INSERT INTO observation_changes(observation_id) VALUES (new.id);
END;

CREATE TRIGGER observation_changes_delete AFTER DELETE ON observations BEGIN
    INSERT INTO observation_changes(observation_id) VALUES (old.id);
END;

-- Bounded: an index further behind than this rebuilds from the table instead.
CREATE TRIGGER observation_changes_trim AFTER INSERT ON observation_changes
WHEN new.seq % 1000 = 0 BEGIN
    DELETE FROM observation_changes WHERE seq <= new.seq - 200000;
END;
