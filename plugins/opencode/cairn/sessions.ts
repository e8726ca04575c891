// Per-session state (one plugin instance per directory, many sessions), what OpenCode's events
// say about each session, and its registration in cairn.

import type { Facts } from "./facts.ts";
import type { Link } from "./link.ts";
import { background, HOOK_WAIT, sleep, SUBAGENT_WAIT, within, type Dict, type Json, type Log } from "./util.ts";

export type Session = {
  id: string;
  parentID?: string;
  sub: boolean;
  title?: string;
  sentTitle?: string;
  registered?: Promise<Json>;
  agent?: string;
  model?: { providerID: string; modelID: string };
  seenPrompt?: boolean;
  block?: string;
  blockInSystem?: boolean;
  blockPending?: Promise<void>;
  lastPrompt?: string;
  summarySaved?: boolean;
  used?: number;
  meter?: Promise<Dict | null>;
  meterKey?: string;
  providerID?: string;
  modelID?: string;
  compacting?: boolean;
  compactionTrigger?: "auto" | "manual";
  compactionOverflow?: boolean;
  /** Chart mode: the chart made when the compaction began; set while the summary is awaited. */
  chart?: string;
  savedSummaries: Set<string>;
  passiveDone: Set<string>;
};

export type Sessions = ReturnType<typeof makeSessions>;

export function makeSessions(client: Json, directory: string, link: Link, facts: Facts, log: Log) {
  const sessions = new Map<string, Session>();
  /** What `message.updated` said of each message (the latest 2,000). */
  const messages = new Map<string, { sessionID: string; role?: string; summary?: boolean; agent?: string; mode?: string }>();
  /** The text of each assistant message so far (the latest 200). */
  const textOf = new Map<string, string>();
  function session(id: string): Session {
    let s = sessions.get(id);
    if (!s) {
      s = { id, sub: false, savedSummaries: new Set(), passiveDone: new Set() };
      sessions.set(id, s);
    }
    return s;
  }
  const infoSeen = new Set<string>();
  function learnInfo(info: Dict) {
    if (!info?.id) return;
    const s = session(info.id);
    infoSeen.add(info.id);
    if (info.parentID) s.parentID = info.parentID;
    if (info.parentID || (typeof info.title === "string" && info.title.endsWith(" subagent)"))) s.sub = true;
    if (typeof info.title === "string") s.title = info.title;
  }
  /** Whether the session is a sub-agent: from its events, else asked of OpenCode. */
  async function isSubAgent(id: string): Promise<boolean> {
    if (!infoSeen.has(id)) {
      await sleep(SUBAGENT_WAIT);
      if (!infoSeen.has(id)) {
        const r = await within<Json>(Promise.resolve(client?.session?.get?.({ path: { id } })), HOOK_WAIT);
        if (r?.data) learnInfo(r.data);
        else infoSeen.add(id); // unknown: treat as a main session, do not ask again
      }
    }
    return session(id).sub;
  }

  /** Session registration: open (or update) the session in cairn; idempotent, memoised per session. */
  function register(s: Session): Promise<Json> {
    if (!s.registered || (s.title && s.title !== s.sentTitle)) {
      const title = s.title;
      s.sentTitle = title;
      s.registered = background(log, `registering session ${s.id}`, async () =>
        link.call("POST", "/sessions", {
          id: s.id,
          project: await facts.projectOrUndefined(),
          directory,
          agent: "opencode",
          parent_id: s.parentID,
          title,
        }),
      );
    }
    return s.registered;
  }

  /** Whether a sub-agent session is told where its parent's history is. */
  function wantsUpstream(s: Session): boolean {
    const u = facts.settings.config.history?.upstream_history ?? {};
    if (u.enable === false) return false;
    const off = Array.isArray(u.disable_for_agents) ? u.disable_for_agents : [];
    return !(s.agent && off.includes(s.agent));
  }
  function agentWantsProtocol(agent?: string): boolean {
    const p = facts.settings.config.inject?.protocol;
    if (Array.isArray(p)) return agent ? p.includes(agent) : true;
    return p !== false;
  }

  return { sessions, messages, textOf, session, learnInfo, isSubAgent, register, wantsUpstream, agentWantsProtocol };
}
