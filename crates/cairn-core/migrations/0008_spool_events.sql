-- The spool (events a hook or the OpenCode plugin kept on disk while no daemon answered):
-- the ids of events applied, recorded in the transaction that applied them, so an event met
-- again (a drain cut between its commit and the file's delete, a plugin's second try) is
-- skipped; pruned by age. And the spool's counters, kept across restarts.

CREATE TABLE spool_events (
    id TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE INDEX spool_events_applied_at ON spool_events (applied_at);

CREATE TABLE spool_counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
