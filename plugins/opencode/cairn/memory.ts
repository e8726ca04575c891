// What the plugin stores and brings back: the [MEMORY] block, the session's Last Session record,
// passive capture, the compaction summary, and compaction itself.

import type { Facts } from "./facts.ts";
import type { Link } from "./link.ts";
import type { Session, Sessions } from "./sessions.ts";
import { PLUGIN_DEFAULTS } from "./rules.ts";
import { background, type Dict, type Json, type Log } from "./util.ts";

/** Task output and turn text sent for "## Key Learnings" capture. */
const MAX_PASSIVE_CHARS = 20000;

export type Memory = ReturnType<typeof makeMemory>;

export function makeMemory(client: Json, link: Link, facts: Facts, sessions: Sessions, log: Log) {
  const { op } = link;
  /**
   * The [MEMORY] block for `query` (a prompt), asked by session `sessionID`. cairn's block always
   * has something: the Last Session and the Recent list, or one line saying nothing is stored.
   */
  async function memoryBlock(query: string | undefined, sessionID: string): Promise<string | null> {
    const inject = facts.settings.config.inject;
    const args: Dict = { project: await facts.projectOrUndefined(), layout: "memory_block", budget_bytes: inject?.budget_bytes ?? PLUGIN_DEFAULTS.inject.budget_bytes, session_id: sessionID };
    // a prompt, not search syntax: `opencode run` quotes the message, and a quoted query is a
    // phrase search that finds nothing
    const q = (query ?? "").replace(/["*]/g, " ").replace(/\s+/g, " ").trim().slice(0, 500);
    if (q) args.query = q;
    for (const k of ["similarity_threshold", "max_relevant"]) if (inject?.[k] !== undefined) args[k] = inject[k];
    if (inject?.profile === false) args.max_profile = 0;
    const r = await op("context", args);
    const text = typeof r?.context === "string" ? r.context.trim() : "";
    if (text.startsWith("[MEMORY]")) return text.replace(/^\[MEMORY\]\s*/, "").trim() ? text : null;
    // an older daemon ignores `layout`: its recent-context text, only when it holds memories
    return text && Array.isArray(r?.memory_ids) && r.memory_ids.length > 0 ? `[MEMORY]\n${text}` : null;
  }
  /** The session's Last Session record, revised from what OpenCode stored of it (read first). */
  function recordSession(s: Session, compacted = false): Promise<Json> {
    return background(log, `recording session ${s.id}`, async () => {
      await facts.pokeHistory(s.id).catch(() => null);
      return op("record_session", { session_id: s.id, project: await facts.projectOrUndefined(), compacted });
    });
  }
  async function passive(s: Session, content: string, source: string) {
    await background(log, `passive capture (${source})`, async () => {
      await sessions.register(s);
      return link.call("POST", "/observations/passive", {
        session_id: s.id,
        project: await facts.projectOrUndefined(),
        content: content.slice(0, MAX_PASSIVE_CHARS),
        source,
      });
    });
  }
  async function saveSummary(s: Session, messageID: string, text: string) {
    if (s.savedSummaries.has(messageID) || !text.trim()) return;
    s.savedSummaries.add(messageID);
    s.summarySaved = true;
    await background(log, `saving the compaction summary of ${s.id}`, async () =>
      op("save_compaction", {
        session_id: s.id,
        project: await facts.projectOrUndefined(),
        summary: text,
        trigger: s.compactionTrigger ?? "auto",
        overflow: Boolean(s.compactionOverflow),
      }),
    );
  }
  /** Ask OpenCode to compact the session; false when one is under way or its model is unknown. */
  function scheduleCompaction(s: Session, trigger: "auto" | "manual"): boolean {
    if (s.compacting) return false;
    const model = s.model ?? (s.providerID && s.modelID ? { providerID: s.providerID, modelID: s.modelID } : undefined);
    if (!model) return false;
    s.compacting = true;
    s.compactionTrigger = trigger;
    // not awaited: compaction cannot start while the tool or hook that asks for it runs
    setTimeout(() => {
      Promise.resolve()
        .then(() => client.session.summarize({ path: { id: s.id }, body: { providerID: model.providerID, modelID: model.modelID } }))
        .then((r: Json) => {
          if (r?.error) throw new Error(JSON.stringify(r.error).slice(0, 200));
        })
        .catch((e: Json) => {
          s.compacting = false;
          log("warn", `cairn: compaction of ${s.id} failed: ${e?.message ?? e}`);
        });
    }, 0);
    return true;
  }
  return { memoryBlock, recordSession, passive, saveSummary, scheduleCompaction };
}
