-- A session's title (OpenCode names its sessions; a later start with a title renames it), and
-- how many user prompts a session's activity has seen, so a plugin that restarts mid-session
-- still knows the first prompt (and its one-time injection) is behind it.

ALTER TABLE sessions ADD COLUMN title TEXT;

ALTER TABLE agent_activity ADD COLUMN user_prompts INTEGER NOT NULL DEFAULT 0;
