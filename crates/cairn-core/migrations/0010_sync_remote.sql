-- Sync with a hub (`cairn remote`): the pull cursor per hub, and the lease that lets one
-- process per data dir sync at a time.

-- Where pulling from a hub resumes: the last hub seq applied, moved in the transaction that
-- applies the page. `scope` is the set of projects the cursor was read for: when the remote's
-- projects change, the cursor starts again from 0 (applying a mutation twice is harmless).
CREATE TABLE sync_pulls (
    source        TEXT PRIMARY KEY,
    cursor        INTEGER NOT NULL DEFAULT 0,
    scope         TEXT NOT NULL DEFAULT '',
    last_pull_at  TEXT,
    last_error    TEXT
) WITHOUT ROWID;

-- One syncing process per data dir: whoever holds an unexpired lease syncs; the others stand by.
CREATE TABLE sync_lease (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_at  TEXT NOT NULL
) WITHOUT ROWID;
