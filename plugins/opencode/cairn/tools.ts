// The tool hooks: cairn's MCP tools get OpenCode's session (`tool.execute.before`), every host
// tool call is counted (`tool.execute.after`), and the plugin's own `memory_compact` tool.

import { guard, type Parts } from "./parts.ts";
import { CAIRN_TOOL_NAMES, CAIRN_TOOL_PREFIXES } from "./rules.ts";
import { background, CALL_TIMEOUT, unknownOp, within, type Dict, type Json } from "./util.ts";

/** Tools of cairn itself (agent/intent.rs `is_cairn_tool`): not counted as host tool calls. */
function isCairnTool(tool: string): boolean {
  const t = tool.toLowerCase();
  return CAIRN_TOOL_PREFIXES.some((prefix) => t.startsWith(prefix)) || CAIRN_TOOL_NAMES.includes(t);
}

// cairn's MCP tools that take a session get OpenCode's, so saves land in the real session
// instead of cairn's per-project default one
export function toolBeforeHook(p: Parts) {
  return guard(p.log, "tool.execute.before", async (input: Dict, output: Dict) => {
    const tool = String(input?.tool ?? "");
    const args = output?.args;
    if (!input?.sessionID || !args || typeof args !== "object" || Array.isArray(args)) return;
    // the router (`--tools=router`) counts the call in this session, and its context_usage /
    // plans ops read it, as the Claude Code hook does
    if (/^cairn_(mem_(save|session_summary|capture_passive|save_prompt)|memory)$/.test(tool) && !args.session_id) {
      args.session_id = input.sessionID;
    }
    // the router's context_usage counts against the window the meter in the prompt uses (the
    // provider's limit for the session's model), not the daemon's default
    if (tool === "cairn_memory" && /^context(_usage)?$/.test(String(args.op ?? args.tool ?? "").trim())) {
      const inner = args.args && typeof args.args === "object" && !Array.isArray(args.args) ? args.args : {};
      const { limit, known } = p.meter.limitOf(p.sessions.session(input.sessionID));
      if (known && inner.limit === undefined) args.args = { ...inner, limit };
    }
    // visibility: the history tools see the caller's own session only up to its latest compaction;
    // a call without a session reads the caller's
    if (/^cairn_history_/.test(tool)) {
      args.caller_session_id = input.sessionID;
      if (tool !== "cairn_history_sessions" && tool !== "cairn_history_search" && !args.session_id) args.session_id = input.sessionID;
    }
  });
}

export function toolAfterHook(p: Parts) {
  const { log, sessions, facts, link } = p;
  return guard(log, "tool.execute.after", async (input: Dict, output: Dict) => {
    const id: string | undefined = input?.sessionID;
    const tool: string = String(input?.tool ?? "");
    if (!id || !tool) return;
    const s = sessions.session(id);
    // fire-and-forget: nothing here delays the agent
    void (async () => {
      if (await sessions.isSubAgent(id)) return;
      // the daemon tells cairn's own tools from the host's (its MCP server counts its own)
      background(log, "counting a tool call", async () => {
        await sessions.register(s);
        const project = await facts.projectOrUndefined();
        try {
          return await link.op("tool_call", { session_id: id, project, tool, host: "opencode" });
        } catch (e) {
          if (!unknownOp(e)) throw e;
          // an older daemon: count it the way it knows
          return isCairnTool(tool) ? null : link.op("record_activity", { session_id: id, project, event: "tool_call" });
        }
      });
      const out = output?.output;
      if (tool.toLowerCase() === "task" && typeof out === "string" && out.trim().length > 50) await p.memory.passive(s, out, "task-complete");
    })();
  });
}

/** `memory_compact`: compact this session now, unless the context is below the minimum. */
export function memoryCompactTool(p: Parts) {
  const { log, facts, sessions, meter, memory } = p;
  return {
    description:
      "Compact this session now (summarise the conversation so far and continue from the summary), at a natural break: after a task is done, before starting an unrelated one. The summary is kept in cairn. Refused while the context is below the configured minimum unless force is true.",
    args: {
      force: { type: "boolean", description: "compact even though the context is below the minimum (default false)" },
    },
    async execute(args: Dict, context: Dict) {
      try {
        const id: string | undefined = context?.sessionID;
        if (!id) return "memory_compact: no session";
        const s = sessions.session(id);
        const u: Json = await within(meter.meterOf(s), CALL_TIMEOUT);
        const min = Number(facts.settings.config.compaction?.min_percent ?? 50);
        const at = u ? `${u.percent}% (${Number(u.used).toLocaleString("en-US")} / ${Number(u.limit).toLocaleString("en-US")} tokens)` : "an unknown level";
        if (!args?.force && (!u || !u.compact_allowed)) {
          return `Not compacting: the context is at ${at}, below the ${min}% minimum; there is little to gain. Pass force: true to compact anyway.`;
        }
        if (s.compacting) return "A compaction of this session is already under way.";
        if (!memory.scheduleCompaction(s, "manual")) return "memory_compact: the session's model is not known yet; try again after the next message.";
        return `Compaction scheduled at ${at}. It starts when this turn's tool calls end; the summary is stored in cairn.`;
      } catch (e: Json) {
        log("error", `cairn: memory_compact failed: ${e?.message ?? e}`);
        return "memory_compact failed; see OpenCode's log.";
      }
    },
  };
}
