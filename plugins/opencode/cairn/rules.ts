// GENERATED from cairn's Rust source by cairn-core's `plugin_rules_tests.rs`: do not edit.
// Regenerate: CAIRN_WRITE_PLUGIN_RULES=1 cargo nextest run -p cairn-core plugin_rules

/** The spool (cairn-core `spool.rs`): the record version, where records go, and the bounds. */
export const SPOOL_RECORD_VERSION = 1;
export const SPOOL_DIR = "spool";
export const SPOOL_DROPPED_FILE = "dropped";
export const SPOOL_MAX_EVENTS = 10000;
export const SPOOL_MAX_BYTES = 67108864;
export const SPOOL_MAX_RECORD_BYTES = 1048576;

/** The catalogue's operations that write the memory store (`ops/catalogue.rs`): delivered through the spool when no daemon answers. */
export const WRITE_OPS: ReadonlySet<string> = new Set(["save", "update", "delete", "restore", "pin", "start_session", "session_summary", "end_session", "delete_session", "add_prompt", "delete_prompt", "import", "capture_passive", "judge", "compare", "scan_relations", "migrate_project", "merge_projects", "privacy_rewrite", "gc", "import_engram", "repair_indexes", "reindex", "record_activity", "user_prompt", "save_compaction", "record_session", "session_start", "tool_call", "sync_export", "sync_import"]);

/** cairn's own tools as OpenCode names them, in any case (`agent/intent.rs`, `is_cairn_tool`). */
export const CAIRN_TOOL_PREFIXES: readonly string[] = ["cairn_", "mem_", "history_"];
export const CAIRN_TOOL_NAMES: readonly string[] = ["memory", "memory_compact"];

/** The longest prompt kept (`agent/activity.rs`): the plugin cuts before it redacts and sends. */
export const MAX_PROMPT_CHARS = 2000;

/** `<private>` redaction (cairn-base `text`): the tag's name and what a block becomes. */
export const PRIVATE_TAG = "private";
export const REDACTED = "[REDACTED]";

/** The plugin's settings until the daemon's `plugin_config` answers (cairn-base `settings/plugin.rs` defaults). */
export const PLUGIN_DEFAULTS: Record<string, Record<string, any>> = {
  "compaction": {
    "auto_at": null,
    "min_percent": 50,
    "mode": "chart"
  },
  "context_meter": {
    "critical": 92,
    "default_limit": 200000,
    "enabled": true,
    "red": 85,
    "yellow": 70
  },
  "history": {
    "context_charting": {
      "enable": true,
      "recent_messages": 5,
      "recent_turns": 10
    },
    "upstream_history": {
      "disable_for_agents": [],
      "enable": true
    }
  },
  "inject": {
    "budget_bytes": 8000,
    "mode": "first_message",
    "profile": true,
    "protocol": true
  },
  "triggers": {
    "keyword_patterns": [],
    "save_rules": true
  }
};
