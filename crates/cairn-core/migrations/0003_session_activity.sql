-- Sessions remember their latest activity, so "recent sessions" is an index walk instead of a
-- max() over every session's memories (a store has thousands of sessions).

ALTER TABLE sessions ADD COLUMN last_activity_at TEXT;

UPDATE sessions SET last_activity_at = max(started_at, COALESCE(
    (SELECT max(o.created_at) FROM observations o WHERE o.session_id = sessions.id AND o.deleted_at IS NULL), ''));

CREATE INDEX sessions_activity ON sessions(last_activity_at DESC);
CREATE INDEX sessions_project_activity ON sessions(project, last_activity_at DESC);

CREATE TRIGGER sessions_activity_start AFTER INSERT ON sessions
WHEN new.last_activity_at IS NULL BEGIN
    UPDATE sessions SET last_activity_at = new.started_at WHERE id = new.id;
END;

CREATE TRIGGER sessions_activity_memory AFTER INSERT ON observations BEGIN
    UPDATE sessions SET last_activity_at = new.created_at
    WHERE id = new.session_id AND (last_activity_at IS NULL OR last_activity_at < new.created_at);
END;
