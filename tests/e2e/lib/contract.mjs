// The MCP tool contract cairn honours (engram-compatible; the shared reference engram-spec.md
// §12.1): tool names per `--tools` profile, plus cairn's history tools in `agent`.

export const AGENT_TOOLS = Object.freeze([
  'mem_save',
  'mem_search',
  'mem_context',
  'mem_session_summary',
  'mem_session_start',
  'mem_session_end',
  'mem_get_observation',
  'mem_suggest_topic_key',
  'mem_capture_passive',
  'mem_save_prompt',
  'mem_update',
  'mem_current_project',
  'mem_judge',
  'mem_compare',
  'mem_doctor',
  // cairn's conversation history (profile `history`, part of `agent`)
  'history_sessions',
  'history_browse_turns',
  'history_browse_messages',
  'history_pull_message',
  'history_pull_part',
  'history_search',
]);

export const ADMIN_TOOLS = Object.freeze(['mem_delete', 'mem_stats', 'mem_timeline', 'mem_merge_projects']);

export const ALL_TOOLS = Object.freeze([...AGENT_TOOLS, ...ADMIN_TOOLS]);

export const sorted = (names) => [...names].sort();
