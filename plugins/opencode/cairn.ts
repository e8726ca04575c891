// cairn's OpenCode plugin: sessions, prompts, memory at the first message, the memory protocol,
// compaction that loses nothing, and a context meter, all through cairn's daemon.
//
// Thin on purpose: every decision that needs the store is an HTTP call to the daemon
// (`POST /v1/op {op, args}` and a few engram routes). Every call has a timeout and fails open:
// OpenCode keeps working, with one `client.app.log` line. Install with `cairn setup opencode`
// (this file in `~/.config/opencode/plugins/`, its modules in `plugins/cairn/` beside it, where
// OpenCode does not look for plugins).
//
// The host is OpenCode's V1 plugin API (checked against opencode-ai 1.18.33). Only the default
// export below may exist at runtime: OpenCode's loader rejects modules with other exports.
//
// The modules: `cairn/daemon.ts` (finding or starting the daemon), `spool.ts` (writes kept on
// disk until it runs), `link.ts` (calls and ops), `facts.ts` (project, settings, texts),
// `sessions.ts`, `meter.ts`, `memory.ts`, and the hooks: `events.ts`, `chat.ts`,
// `compaction.ts`, `tools.ts`. `rules.ts` is generated from cairn's Rust source.

import { existsSync } from "node:fs";
import { join } from "node:path";

import { chatMessageHook, systemTransformHook, textCompleteHook } from "./cairn/chat.ts";
import { compactingHook } from "./cairn/compaction.ts";
import { makeDaemon } from "./cairn/daemon.ts";
import { eventHook } from "./cairn/events.ts";
import { makeFacts, TEXT_PARTS } from "./cairn/facts.ts";
import { makeLink } from "./cairn/link.ts";
import { makeMemory } from "./cairn/memory.ts";
import { makeMeter } from "./cairn/meter.ts";
import type { Parts } from "./cairn/parts.ts";
import { makeSessions } from "./cairn/sessions.ts";
import { makeSpool } from "./cairn/spool.ts";
import { memoryCompactTool, toolAfterHook, toolBeforeHook } from "./cairn/tools.ts";
import { background, CALL_TIMEOUT, makeLog, type Dict } from "./cairn/util.ts";

const BAKED_CAIRN_BIN: string | null = null; // cairn setup writes the binary's path here

const server = async (ctx: Dict, options?: Dict) => {
  const env: Dict = { ...process.env, ...(options?.env ?? {}) };
  const client = ctx?.client;
  const directory: string = ctx?.directory ?? ctx?.worktree ?? process.cwd();
  const log = makeLog(client);
  const daemon = makeDaemon(env, options, directory, log, BAKED_CAIRN_BIN);
  const link = makeLink(daemon, makeSpool(daemon, log).deliver);
  const facts = makeFacts(env, options, directory, link, log);
  const sessions = makeSessions(client, directory, link, facts, log);
  const meter = makeMeter(client, link, facts, log);
  const memory = makeMemory(client, link, facts, sessions, log);
  const parts: Parts = { client, directory, log, link, facts, sessions, meter, memory };

  // start-up: nothing awaited (client calls here would deadlock `opencode run`)
  daemon
    .url()
    .then((url) => {
      if (!url) return;
      facts.loadConfig().catch(() => {});
      facts.project().catch(() => {});
      for (const part of TEXT_PARTS) facts.warm(part).catch(() => {});
      // Git sync: the daemon imports the repository's committed chunks in the background.
      if (existsSync(join(directory, ".cairn", "manifest.json")) || existsSync(join(directory, ".engram", "manifest.json")))
        background(log, "starting the sync import", () => daemon.post(url, "/sync/import", { directory }, CALL_TIMEOUT));
    })
    .catch(() => {});

  return {
    event: eventHook(parts),
    "chat.message": chatMessageHook(parts),
    "tool.execute.before": toolBeforeHook(parts),
    "tool.execute.after": toolAfterHook(parts),
    "experimental.text.complete": textCompleteHook(parts),
    "experimental.chat.system.transform": systemTransformHook(parts),
    "experimental.session.compacting": compactingHook(parts),
    tool: { memory_compact: memoryCompactTool(parts) },
  };
};

export default { id: "cairn", server };
