// The `experimental.session.compacting` hook: what the summariser is given. Chart mode (the
// default) charts the session's stored history and asks for next to nothing; the context mode
// adds the [MEMORY] block and cairn's note; continuity replaces the prompt.

import { guard, type Parts } from "./parts.ts";
import { COMPACTING_WAIT, within, type Dict } from "./util.ts";

export function compactingHook(p: Parts) {
  const { log, facts, sessions, memory } = p;
  return guard(log, "experimental.session.compacting", async (input: Dict, output: Dict) => {
    const id: string | undefined = input?.sessionID;
    if (!id || !output) return;
    const s = sessions.session(id);
    s.compacting = true;
    s.summarySaved = false;
    const work = (async () => {
      if (await sessions.isSubAgent(id)) return null;
      sessions.register(s);
      const config = facts.settings.config;
      let mode = config.compaction?.mode ?? "chart";
      if (mode === "chart") {
        // chart mode, step 1: chart now (the turns before this compaction are all stored); only then
        // is the summariser asked for next to nothing. No chart: the context mode's summary.
        const chart = config.history?.context_charting?.enable === false ? null : await facts.chartOf(id).catch(() => null);
        const prompt = chart ? (facts.peek("chart_prompt") ?? (await facts.warm("chart_prompt"))) : null;
        if (chart && prompt) return { chart, prompt, mode, proj: undefined, block: null, note: null, continuity: null };
        mode = "context";
      }
      const [block, note, continuity] = await Promise.all([
        memory.memoryBlock(s.lastPrompt, id).catch(() => null),
        mode === "context" ? (facts.peek("compaction_note") ?? facts.warm("compaction_note")) : null,
        mode === "continuity" ? (facts.peek("continuity") ?? facts.warm("continuity")) : null,
      ]);
      return { block, note, continuity, mode, proj: await facts.projectOrUndefined() };
    })();
    const r: Dict | null = (await within(work, COMPACTING_WAIT)) ?? null;
    if (!r) return;
    if (r.chart) {
      s.chart = r.chart;
      output.prompt = r.prompt;
      return;
    }
    if (!Array.isArray(output.context)) output.context = [];
    if (r.block) output.context.push(r.block);
    if (r.mode === "engram") {
      output.context.push(
        `CRITICAL INSTRUCTION FOR COMPACTED SUMMARY: the summary must tell the next agent that its FIRST ACTION REQUIRED is to call mem_session_summary with the content of this compacted summary. Use project: '${r.proj ?? ""}'.`,
      );
    } else if (r.note) output.context.push(r.note);
    if (r.continuity) output.prompt = r.continuity;
  });
}
