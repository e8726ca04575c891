// The `event` hook: OpenCode's bus events, which say what sessions and messages exist, when an
// agent stops, how many tokens a step used, and when a compaction ended.

import { guard, type Parts } from "./parts.ts";
import { background, CALL_TIMEOUT, within, type Dict, type Json } from "./util.ts";

export function eventHook(p: Parts) {
  const { log, sessions, memory, meter, facts } = p;
  const { session } = sessions;

  function sessionIdle(id: string) {
    // The agent stopped: the session is ended as of now (engram's plugin never ended one).
    // OpenCode sessions go on when the user writes again, so the activity is kept: the next
    // prompt is not a session's first.
    const s = session(id);
    void background(log, `ending session ${id}`, async () => {
      await sessions.register(s);
      return p.link.op("end_session", { id, keep_activity: true });
    });
    // the archive read, then the next session's Last Session record revised from it
    if (!s.sub) void memory.recordSession(s);
    else void background(log, `reading the history of ${id}`, () => facts.pokeHistory(id));
  }

  async function messageUpdated(info: Dict) {
    if (!info.id || !info.sessionID) return;
    if (sessions.messages.size > 2000) sessions.messages.delete(sessions.messages.keys().next().value as string);
    sessions.messages.set(info.id, { sessionID: info.sessionID, role: info.role, summary: info.summary === true, agent: info.agent, mode: info.mode });
    if (info.role !== "assistant") return;
    const s = session(info.sessionID);
    s.providerID = info.providerID ?? s.providerID;
    s.modelID = info.modelID ?? s.modelID;
    const t = info.tokens;
    if (t && info.summary !== true) {
      const used = Number(t.total) || (Number(t.input) || 0) + (Number(t.output) || 0) + (Number(t.cache?.read) || 0) + (Number(t.cache?.write) || 0);
      if (used > 0 && used !== s.used) {
        s.used = used;
        void meter.meterOf(s); // asked now, so the next request's system transform finds it ready
      }
    }
    const done = info.finish && info.finish !== "tool-calls" && info.time?.completed;
    if (done && info.summary !== true && !s.sub) {
      // compaction at a threshold, off unless configured (the daemon decides)
      const m = await within(meter.meterOf(s), CALL_TIMEOUT);
      if (m?.auto_compact) memory.scheduleCompaction(s, "auto");
      // passive capture: the finished turn's "## Key Learnings"
      const text = sessions.textOf.get(info.id);
      if (text && /^#{1,6}\s*key learnings/im.test(text) && !s.passiveDone.has(info.id)) {
        s.passiveDone.add(info.id);
        await memory.passive(s, text, "turn-complete");
      }
    }
  }

  async function sessionCompacted(id: string) {
    const s = session(id);
    s.compacting = false;
    s.chart = undefined;
    // compaction summary backstop: no summary text came through experimental.text.complete (another
    // plugin replaced it, or the hook order changed): read it from OpenCode
    if (s.summarySaved === false && !s.sub) {
      s.summarySaved = undefined;
      void background(log, `reading the compaction summary of ${id}`, async () => {
        const r = await within<Json>(Promise.resolve(p.client?.session?.messages?.({ path: { id } })), CALL_TIMEOUT);
        const list: Json[] = Array.isArray(r?.data) ? r.data : [];
        const last = [...list].reverse().find((m) => m?.info?.role === "assistant" && m?.info?.summary === true);
        const text = (last?.parts ?? []).filter((part: Json) => part?.type === "text" && typeof part.text === "string").map((part: Json) => part.text).join("\n");
        if (last?.info?.id && text.trim()) await memory.saveSummary(s, last.info.id, text);
      });
    }
    s.compactionTrigger = undefined;
    s.used = undefined; // the next step reports the new size
    if (s.sub) return;
    // what the session did before: kept as its Last Session record (the chart mode stores
    // no summary)
    void memory.recordSession(s, true);
    // the context comes back: the block (with the summary as "Last Session") goes into the
    // system prompt of the session's next requests
    // (events are not awaited: the next request's system transform waits for it, capped)
    const pending = memory
      .memoryBlock(s.lastPrompt, id)
      .then((block) => {
        if (block) {
          s.block = block;
          s.blockInSystem = true;
        }
      })
      .catch((e: Json) => log("warn", `cairn: context after compaction failed: ${e?.message ?? e}`))
      .finally(() => {
        if (s.blockPending === pending) s.blockPending = undefined;
      });
    s.blockPending = pending;
    await pending;
  }

  return guard(log, "event", async ({ event }: Dict) => {
    const type: string = event?.type ?? "";
    const props: Dict = event?.properties ?? {};
    if (type === "session.created" || type === "session.updated") {
      sessions.learnInfo(props.info);
      if (props.info?.id) sessions.register(session(props.info.id));
    } else if (type === "session.deleted") {
      if (props.info?.id) sessions.sessions.delete(props.info.id);
    } else if (type === "session.idle") {
      if (props.sessionID) sessionIdle(props.sessionID);
    } else if (type === "message.updated") {
      await messageUpdated(props.info ?? {});
    } else if (type === "message.part.updated") {
      const part = props.part ?? {};
      if (part.type === "compaction" && part.sessionID) {
        const s = session(part.sessionID);
        s.compactionTrigger = s.compacting ? (s.compactionTrigger ?? "manual") : part.auto === false ? "manual" : "auto";
        s.compactionOverflow = Boolean(part.overflow);
      }
    } else if (type === "session.compacted") {
      if (props.sessionID) await sessionCompacted(props.sessionID);
    }
  });
}
