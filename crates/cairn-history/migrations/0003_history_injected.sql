-- Parts cairn put into a conversation (the [MEMORY] block, the Session History guidance, the
-- trigger note; see src/agent/injected.rs) are marked, so previews, the chart and search leave
-- them out while a pull still shows them. The readers mark them from now on (the host's word
-- and cairn's leading line); a re-read of a source re-evaluates its rows.

ALTER TABLE history_parts ADD COLUMN injected INTEGER NOT NULL DEFAULT 0;

-- The rows already stored. Before this column the archive kept no host flag, but where the
-- OpenCode plugin's parts are is known: text parts of a user message, after the user's own text
-- (the plugin adds them behind what was typed), starting with exactly the leading line of one
-- of the three texts it adds. A user's own first text part is never marked, whatever it starts
-- with. Claude Code's hook context was not archived before (its records were skipped), so
-- nothing of Claude Code's is marked here.
UPDATE history_parts SET injected = 1, version = version + 1
WHERE kind = 'text'
  AND session_id IN (SELECT id FROM history_sessions WHERE host = 'opencode')
  AND (substr(text, 1, 9) = '[MEMORY]' || char(10)
       OR substr(text, 1, 19) = '## Session History' || char(10)
       OR substr(text, 1, 67) = '[MEMORY TRIGGER DETECTED] The user asked you to remember something.')
  AND EXISTS (SELECT 1 FROM history_messages m
              WHERE m.session_id = history_parts.session_id AND m.id = history_parts.message_id AND m.role = 'user')
  AND EXISTS (SELECT 1 FROM history_parts q
              WHERE q.session_id = history_parts.session_id AND q.message_id = history_parts.message_id
                AND q.kind = 'text' AND (q.idx, q.id) < (history_parts.idx, history_parts.id));

-- Their index entries go (the index also rebuilds itself at its next open: its layout changed).
INSERT INTO history_fts_queue (lo, hi, op)
SELECT rowid, rowid, 'changed' FROM history_parts WHERE injected = 1;
