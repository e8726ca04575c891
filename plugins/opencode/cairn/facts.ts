// What the plugin learns from the daemon once and keeps: the project, the plugin settings
// (`plugin_config`), the texts shown to the agent (`protocol`), and the history reads.

import type { Link } from "./link.ts";
import { PLUGIN_DEFAULTS } from "./rules.ts";
import { cached, CALL_TIMEOUT, unknownOp, within, type Dict, type Json, type Log } from "./util.ts";

/** plugin_config defaults, used until (or when) the daemon answers: Rust's own, generated into rules.ts. */
const DEFAULT_CONFIG = PLUGIN_DEFAULTS;

export type TextPart = "memory" | "compaction_note" | "continuity" | "trigger" | "history" | "chart_prompt";
export const TEXT_PARTS: readonly TextPart[] = ["memory", "trigger", "compaction_note", "continuity", "history", "chart_prompt"];

export type Facts = ReturnType<typeof makeFacts>;

export function makeFacts(env: Dict, options: Dict | undefined, directory: string, link: Link, log: Log) {
  const { call, op } = link;
  const project = cached(async (): Promise<string | undefined> => {
    if (options?.project || env.CAIRN_PROJECT) return options?.project || env.CAIRN_PROJECT;
    const r = await call("GET", `/project/current?cwd=${encodeURIComponent(directory)}`);
    if (!r?.project) throw new Error("no project detected");
    return r.project as string;
  });
  const projectOrUndefined = async () => within(project(), CALL_TIMEOUT);

  /** The settings in force: the defaults until the daemon's `plugin_config` answered. */
  const settings = { config: DEFAULT_CONFIG as Dict };
  const loadConfig = cached(async () => {
    try {
      const c = await op("plugin_config", {});
      settings.config = {
        inject: { ...DEFAULT_CONFIG.inject, ...(c?.inject ?? {}) },
        triggers: { ...DEFAULT_CONFIG.triggers, ...(c?.triggers ?? {}) },
        compaction: { ...DEFAULT_CONFIG.compaction, ...(c?.compaction ?? {}) },
        context_meter: { ...DEFAULT_CONFIG.context_meter, ...(c?.context_meter ?? {}) },
        history: { ...DEFAULT_CONFIG.history, ...(c?.history ?? {}) },
      };
    } catch (e) {
      if (!unknownOp(e)) throw e;
      log("info", "cairn: the daemon has no plugin_config op (older cairn); using the defaults");
    }
    return settings.config;
  });

  const texts = new Map<string, () => Promise<string | null>>();
  /** The protocol text of one part, from the daemon (one source for every host), cached. */
  function protocolText(part: TextPart): Promise<string | null> {
    let f = texts.get(part);
    if (!f) {
      f = cached(async () => {
        try {
          const r = await op("protocol", { host: "opencode", tools: "agent", part });
          return typeof r?.text === "string" && r.text.trim() ? (r.text as string) : null;
        } catch (e) {
          if (unknownOp(e)) {
            log("info", "cairn: the daemon has no protocol op (older cairn); no protocol is injected");
            return null;
          }
          throw e;
        }
      });
      texts.set(part, f);
    }
    return f().catch(() => null);
  }
  const known: Dict = {};
  /** A protocol text already fetched, without waiting. */
  const peek = (part: string): string | null => known[part] ?? null;
  /** Fetch a protocol text (once) so later hooks can `peek` it. */
  async function warm(part: TextPart) {
    const t = await protocolText(part);
    if (t) known[part] = t;
    return t;
  }
  const upstreamTexts = new Map<string, Promise<string | null>>();
  /** Upstream history: the sub-agent's note naming its parent session, from the daemon, cached per parent. */
  function upstreamText(parentID: string): Promise<string | null> {
    let p = upstreamTexts.get(parentID);
    if (!p) {
      p = op("protocol", { host: "opencode", tools: "agent", part: "upstream", session_id: parentID })
        .then((r: Json) => (typeof r?.text === "string" && r.text.trim() ? (r.text as string) : null))
        .catch(() => {
          upstreamTexts.delete(parentID);
          return null;
        });
      upstreamTexts.set(parentID, p);
    }
    return p;
  }
  /** History ingest: have the daemon read what OpenCode stored of this session since the last read. */
  function pokeHistory(id: string): Promise<Json> {
    return op("history_ingest", { host: "opencode", session_id: id });
  }
  /** Chart mode: the chart of the session (its turns before the latest compaction), or null. */
  async function chartOf(id: string): Promise<string | null> {
    await pokeHistory(id).catch(() => null);
    const r = await op("history_chart", { session_id: id });
    return typeof r?.chart === "string" && r.chart.trim() ? (r.chart as string) : null;
  }

  return { project, projectOrUndefined, settings, loadConfig, peek, warm, upstreamText, pokeHistory, chartOf };
}
