-- The figures of `stats` kept as the rows change, so `stats` reads a few dozen rows instead of
-- counting every memory (489 ms at 100k memories). Triggers keep them, so every write path
-- (save, update, delete, import, sync apply, privacy rewrite, extraction, prune) counts alike
-- without knowing of them. `cairn doctor` recounts and compares; `--repair` rewrites them.
--
-- kind              key       n
-- memories          ''        live memories
-- deleted           ''        soft-deleted memories
-- pinned            ''        live pinned memories
-- type              type      live memories of the type
-- project_memories  project   live memories of the project
-- sessions          ''        sessions
-- project_sessions  project   sessions of the project
-- prompts           ''        prompts
-- project_prompts   project   prompts of the project
-- relations         ''        relations
-- vectors           model     stored vectors of the model
-- day               YYYY-MM-DD               live memories created that UTC day (charts)
-- project_day       project 0x1F YYYY-MM-DD  the same per project
--
-- A row whose count fell to 0 stays (readers skip it).

CREATE TABLE stats_counts (
    kind  TEXT NOT NULL,
    key   TEXT NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;

-- The last activity of a project is the newest live memory's `updated_at`: a max cannot be
-- kept through deletes, so it is one seek of this index per project.
CREATE INDEX observations_project_updated ON observations(project, updated_at DESC) WHERE deleted_at IS NULL;

-- Backfill from the rows as they are.
INSERT INTO stats_counts (kind, key, n)
    SELECT 'memories', '', count(*) FROM observations WHERE deleted_at IS NULL
    UNION ALL SELECT 'deleted', '', count(*) FROM observations WHERE deleted_at IS NOT NULL
    UNION ALL SELECT 'pinned', '', count(*) FROM observations WHERE deleted_at IS NULL AND pinned = 1
    UNION ALL SELECT 'type', type, count(*) FROM observations WHERE deleted_at IS NULL GROUP BY type
    UNION ALL SELECT 'project_memories', project, count(*) FROM observations WHERE deleted_at IS NULL GROUP BY project
    UNION ALL SELECT 'sessions', '', count(*) FROM sessions
    UNION ALL SELECT 'project_sessions', project, count(*) FROM sessions GROUP BY project
    UNION ALL SELECT 'prompts', '', count(*) FROM prompts
    UNION ALL SELECT 'project_prompts', project, count(*) FROM prompts GROUP BY project
    UNION ALL SELECT 'relations', '', count(*) FROM relations
    UNION ALL SELECT 'vectors', model, count(*) FROM embeddings GROUP BY model
    UNION ALL SELECT 'day', substr(created_at, 1, 10), count(*) FROM observations WHERE deleted_at IS NULL
        GROUP BY substr(created_at, 1, 10)
    UNION ALL SELECT 'project_day', project || char(31) || substr(created_at, 1, 10), count(*) FROM observations
        WHERE deleted_at IS NULL GROUP BY project, substr(created_at, 1, 10);

-- Memories: a row counts as live (memories, pinned, its type, its project) or as deleted. An
-- update takes the old row's share away and adds the new one's.

CREATE TRIGGER stats_memory_insert AFTER INSERT ON observations BEGIN
    INSERT INTO stats_counts (kind, key, n)
        SELECT column1, column2, column3 FROM (VALUES
            ('memories', '', new.deleted_at IS NULL),
            ('deleted', '', new.deleted_at IS NOT NULL),
            ('pinned', '', new.deleted_at IS NULL AND new.pinned = 1),
            ('type', new.type, new.deleted_at IS NULL),
            ('project_memories', new.project, new.deleted_at IS NULL),
            ('day', substr(new.created_at, 1, 10), new.deleted_at IS NULL),
            ('project_day', new.project || char(31) || substr(new.created_at, 1, 10), new.deleted_at IS NULL))
        WHERE column3 != 0
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_memory_delete AFTER DELETE ON observations BEGIN
    INSERT INTO stats_counts (kind, key, n)
        SELECT column1, column2, -column3 FROM (VALUES
            ('memories', '', old.deleted_at IS NULL),
            ('deleted', '', old.deleted_at IS NOT NULL),
            ('pinned', '', old.deleted_at IS NULL AND old.pinned = 1),
            ('type', old.type, old.deleted_at IS NULL),
            ('project_memories', old.project, old.deleted_at IS NULL),
            ('day', substr(old.created_at, 1, 10), old.deleted_at IS NULL),
            ('project_day', old.project || char(31) || substr(old.created_at, 1, 10), old.deleted_at IS NULL))
        WHERE column3 != 0
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_memory_update AFTER UPDATE OF type, project, pinned, deleted_at, created_at ON observations
WHEN old.type IS NOT new.type OR old.project IS NOT new.project OR old.pinned IS NOT new.pinned
    OR (old.deleted_at IS NULL) != (new.deleted_at IS NULL) OR old.created_at IS NOT new.created_at
BEGIN
    INSERT INTO stats_counts (kind, key, n)
        SELECT column1, column2, -column3 FROM (VALUES
            ('memories', '', old.deleted_at IS NULL),
            ('deleted', '', old.deleted_at IS NOT NULL),
            ('pinned', '', old.deleted_at IS NULL AND old.pinned = 1),
            ('type', old.type, old.deleted_at IS NULL),
            ('project_memories', old.project, old.deleted_at IS NULL),
            ('day', substr(old.created_at, 1, 10), old.deleted_at IS NULL),
            ('project_day', old.project || char(31) || substr(old.created_at, 1, 10), old.deleted_at IS NULL))
        WHERE column3 != 0
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
    INSERT INTO stats_counts (kind, key, n)
        SELECT column1, column2, column3 FROM (VALUES
            ('memories', '', new.deleted_at IS NULL),
            ('deleted', '', new.deleted_at IS NOT NULL),
            ('pinned', '', new.deleted_at IS NULL AND new.pinned = 1),
            ('type', new.type, new.deleted_at IS NULL),
            ('project_memories', new.project, new.deleted_at IS NULL),
            ('day', substr(new.created_at, 1, 10), new.deleted_at IS NULL),
            ('project_day', new.project || char(31) || substr(new.created_at, 1, 10), new.deleted_at IS NULL))
        WHERE column3 != 0
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

-- Sessions and prompts: one total and one per project.

CREATE TRIGGER stats_session_insert AFTER INSERT ON sessions BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('sessions', '', 1), ('project_sessions', new.project, 1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_session_delete AFTER DELETE ON sessions BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('sessions', '', -1), ('project_sessions', old.project, -1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_session_project AFTER UPDATE OF project ON sessions
WHEN old.project IS NOT new.project
BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('project_sessions', old.project, -1), ('project_sessions', new.project, 1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_prompt_insert AFTER INSERT ON prompts BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('prompts', '', 1), ('project_prompts', new.project, 1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_prompt_delete AFTER DELETE ON prompts BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('prompts', '', -1), ('project_prompts', old.project, -1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_prompt_project AFTER UPDATE OF project ON prompts
WHEN old.project IS NOT new.project
BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('project_prompts', old.project, -1), ('project_prompts', new.project, 1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_relation_insert AFTER INSERT ON relations BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('relations', '', 1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_relation_delete AFTER DELETE ON relations BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('relations', '', -1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

-- Vectors. `INSERT OR REPLACE` (how vectors are stored) deletes the row it replaces without
-- firing a delete trigger (recursive triggers are off), so the row about to be replaced is
-- taken away before the insert. A plain INSERT that conflicts fails and takes this back with it.
CREATE TRIGGER stats_vector_replace BEFORE INSERT ON embeddings BEGIN
    UPDATE stats_counts SET n = n - 1
    WHERE kind = 'vectors' AND key = (SELECT model FROM embeddings WHERE observation_id = new.observation_id);
END;

CREATE TRIGGER stats_vector_insert AFTER INSERT ON embeddings BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('vectors', new.model, 1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_vector_delete AFTER DELETE ON embeddings BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('vectors', old.model, -1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;

CREATE TRIGGER stats_vector_model AFTER UPDATE OF model ON embeddings
WHEN old.model IS NOT new.model
BEGIN
    INSERT INTO stats_counts (kind, key, n) VALUES ('vectors', old.model, -1), ('vectors', new.model, 1)
        ON CONFLICT (kind, key) DO UPDATE SET n = n + excluded.n;
END;
