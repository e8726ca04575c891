-- What an agent did in each session (tool calls, saves, reminders, the prompt waiting to be
-- attached to the next save, the last context injected), kept by the daemon so every process
-- of one session (hooks, MCP, HTTP) sees the same counts. One row per session id, written with
-- one upsert per event. No foreign key: ending or deleting a session clears its row in code.

CREATE TABLE agent_activity (
    session_id             TEXT PRIMARY KEY,
    started_at             TEXT NOT NULL,
    updated_at             TEXT NOT NULL,
    tool_calls             INTEGER NOT NULL DEFAULT 0,
    saves                  INTEGER NOT NULL DEFAULT 0,
    last_save_at           TEXT,
    reminders              INTEGER NOT NULL DEFAULT 0,
    last_reminder_at       TEXT,
    pending_prompt         TEXT,
    pending_prompt_project TEXT,
    pending_prompt_session TEXT,
    context_fingerprint    TEXT
) WITHOUT ROWID;
