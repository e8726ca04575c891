-- Most memories carry no topic key, yet every save wrote their NULL into the topic index: one
-- of the ~26 pages a save appends to the WAL. Topic lookups always name a key, and `topic_key
-- = ?` implies `topic_key IS NOT NULL`, so they keep using this index.

DROP INDEX observations_topic;
CREATE INDEX observations_topic ON observations(topic_key, project, scope, updated_at DESC)
    WHERE topic_key IS NOT NULL AND deleted_at IS NULL;
