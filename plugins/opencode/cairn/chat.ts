// The hooks around the conversation: a prompt (`chat.message`: stored, the [MEMORY] block and the
// trigger note added), an answer's text (`experimental.text.complete`: the compaction summary),
// and every request's system prompt (the protocol, the block, the meter line).

import { guard, type Parts } from "./parts.ts";
import { stripPrivate } from "./private.ts";
import { MAX_PROMPT_CHARS } from "./rules.ts";
import { HOOK_WAIT, partId, sleep, SUBAGENT_WAIT, unknownOp, within, type Dict, type Json } from "./util.ts";

/** What OpenCode's `opencode run` prompt is cut to before it leaves the process. */

export function chatMessageHook(p: Parts) {
  const { log, facts, sessions, memory } = p;
  /** Store the prompt; for a first prompt the block, for a trigger phrase the note. */
  async function capture(id: string, text: string, agent: string | undefined) {
    const s = sessions.session(id);
    if (await sessions.isSubAgent(id)) {
      sessions.register(s);
      return null;
    }
    // nothing typed (only files, say): nothing to store or to search with
    if (!text) return null;
    const firstHere = !s.seenPrompt;
    s.seenPrompt = true;
    const proj = await facts.projectOrUndefined();
    let answer: Dict | null = null;
    try {
      // one round trip: the daemon answers the block of a first prompt and the trigger note
      answer = await p.link.op("user_prompt", { session_id: id, project: proj, content: text, agent, directory: p.directory, host: "opencode" });
    } catch (e) {
      if (!unknownOp(e)) throw e;
      // an older daemon: register the session and store the prompt the engram way
      log("info", "cairn: the daemon has no user_prompt op (older cairn); storing prompts with add_prompt");
      await sessions.register(s);
      if (text.length > 10) await p.link.op("add_prompt", { session_id: id, project: proj, content: text });
      answer = { first_prompt: firstHere, memory_trigger: false, legacy: true };
    }
    // an older daemon answers no texts: the block is asked for separately
    const older = !Array.isArray(answer?.texts);
    const first = Boolean(answer?.first_prompt);
    const found = !first ? null : older ? await memory.memoryBlock(text, id).catch(() => null) : typeof answer?.context === "string" && answer.context.trim() ? (answer.context as string) : null;
    const inSystem = facts.settings.config.inject?.mode === "system";
    if (found && inSystem) {
      s.block = found;
      s.blockInSystem = true;
    }
    const block = inSystem ? null : found;
    const trigger = !answer?.memory_trigger ? null : typeof answer?.trigger === "string" ? (answer.trigger as string) : (facts.peek("trigger") ?? (await facts.warm("trigger")));
    // history guidance: when and how to pull the conversation history, once per session, kept in the
    // conversation (not in every request's system prompt)
    const history = answer?.first_prompt && !answer?.legacy ? (facts.peek("history") ?? (await facts.warm("history"))) : null;
    return { block, trigger, history };
  }

  return guard(log, "chat.message", async (input: Dict, output: Dict) => {
    const id: string | undefined = input?.sessionID;
    if (!id) return;
    const s = sessions.session(id);
    // 1.18.33: a main session's chat.message input is only {sessionID}; the agent and the
    // model are on the message (a sub-agent's input carries them too)
    const agent = input.agent ?? output?.message?.agent;
    const model = input.model ?? output?.message?.model;
    if (agent) s.agent = agent;
    if (model?.providerID && model?.modelID) {
      s.model = { providerID: model.providerID, modelID: model.modelID };
      s.providerID ??= s.model.providerID;
      s.modelID ??= s.model.modelID;
    }
    const parts: Json[] = Array.isArray(output?.parts) ? output.parts : [];
    let text = parts
      .filter((part) => part && part.type === "text" && !part.synthetic && typeof part.text === "string")
      .map((part) => part.text)
      .join("\n");
    if (!text.trim() && typeof output?.message?.summary?.body === "string") text = output.message.summary.body;
    text = stripPrivate(text.slice(0, MAX_PROMPT_CHARS)).trim();
    if (text) s.lastPrompt = text;

    const work = capture(id, text, agent);
    work.catch((e: Json) => log("warn", `cairn: prompt capture failed: ${e?.message ?? e}`));
    const r = await within(work, HOOK_WAIT);
    if (!r) return;
    const messageID = output?.message?.id ?? input.messageID;
    // after the user's own text: OpenCode's title request sends the message's parts too, and
    // the title should come from what the user typed
    const make = (t: string) => ({
      id: partId(),
      sessionID: id,
      messageID,
      type: "text",
      text: t,
      synthetic: true,
    });
    if (r.block) parts.push(make(r.block));
    if (r.history) parts.push(make(r.history));
    if (r.trigger) parts.push(make(r.trigger));
  });
}

export function textCompleteHook(p: Parts) {
  const { log, sessions, memory } = p;
  return guard(log, "experimental.text.complete", async (input: Dict, output: Dict) => {
    const text = output?.text;
    if (typeof text !== "string" || !input?.messageID) return;
    const { textOf, messages } = sessions;
    const prev = textOf.get(input.messageID);
    textOf.set(input.messageID, prev ? `${prev}\n${text}` : text);
    if (textOf.size > 200) textOf.delete(textOf.keys().next().value as string);
    let m = messages.get(input.messageID);
    if (!m) {
      await sleep(SUBAGENT_WAIT);
      m = messages.get(input.messageID);
    }
    const id = input.sessionID ?? m?.sessionID;
    if (!id) return;
    const isSummary = m?.summary === true || m?.mode === "compaction" || m?.agent === "compaction";
    const s = sessions.session(id);
    if (isSummary && s.chart) {
      // chart mode, step 2: the stored summary is the chart made at step 1 (the turns before this
      // compaction do not change). It is not saved as a memory: the history holds everything
      // it points to.
      output.text = s.chart;
      s.summarySaved = undefined;
      return;
    }
    // the compaction summary, stored by cairn (not awaited: the host stores the text)
    if (isSummary && !s.sub) void memory.saveSummary(s, input.messageID, textOf.get(input.messageID) ?? text);
  });
}

export function systemTransformHook(p: Parts) {
  const { log, facts, sessions, meter } = p;
  return guard(log, "experimental.chat.system.transform", async (input: Dict, output: Dict) => {
    const id: string | undefined = input?.sessionID;
    const system: Json[] = output?.system;
    if (!id || !Array.isArray(system)) return;
    const joined = system.join("\n");
    // the title generator and the summariser need neither the protocol nor the meter
    if (/You are a title generator|context summarization agent/i.test(joined.slice(0, 400))) return;
    if (input.model?.providerID && input.model?.id) meter.learnLimit(input.model.providerID, input.model.id, input.model.limit);
    const s = sessions.session(id);
    const sub = await within(sessions.isSubAgent(id), HOOK_WAIT);
    if (sub) {
      // upstream history: a sub-agent is told where its parent's history is
      if (s.parentID && sessions.wantsUpstream(s)) {
        const note = await within(facts.upstreamText(s.parentID), HOOK_WAIT);
        if (note && !joined.includes(note)) system[system.length - 1] = `${system[system.length - 1] ?? ""}\n\n${note}`;
      }
      return;
    }
    const add: string[] = [];
    if (sessions.agentWantsProtocol(s.agent)) {
      const protocol = facts.peek("memory") ?? (await within(facts.warm("memory"), HOOK_WAIT)) ?? null;
      if (protocol && !joined.includes(protocol)) add.push(protocol);
    }
    if (s.blockPending) await within(s.blockPending, HOOK_WAIT);
    if (s.blockInSystem && s.block && !joined.includes(s.block)) add.push(s.block);
    const m = await within(meter.meterOf(s), HOOK_WAIT);
    if (m?.line) add.push(m.line as string);
    if (add.length === 0) return;
    const extra = add.join("\n\n");
    // appended to the LAST entry, never a new one (some chat templates take one system block)
    if (system.length === 0) system.push(extra);
    else system[system.length - 1] = `${system[system.length - 1]}\n\n${extra}`;
  });
}
