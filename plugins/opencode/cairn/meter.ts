// The context meter: how full the session's window is, from the daemon (one rule for every
// host: the line, the status, whether to compact), against the model's limit as OpenCode knows it.

import type { Link } from "./link.ts";
import type { Facts } from "./facts.ts";
import type { Session } from "./sessions.ts";
import { cached, CALL_TIMEOUT, unknownOp, within, type Dict, type Json, type Log } from "./util.ts";

export type Meter = ReturnType<typeof makeMeter>;

export function makeMeter(client: Json, link: Link, facts: Facts, log: Log) {
  const limits = new Map<string, { context: number; output: number; input?: number }>();
  const providerConfig = cached(async () => {
    const r = await within<Json>(Promise.resolve(client?.config?.get?.()), CALL_TIMEOUT);
    return (r?.data?.provider ?? {}) as Dict;
  });
  function learnLimit(providerID?: string, modelID?: string, limit?: Dict) {
    if (!providerID || !modelID || !limit) return;
    const context = Number(limit.context);
    if (Number.isFinite(context) && context > 0) {
      limits.set(`${providerID}/${modelID}`, { context, output: Number(limit.output) || 0, input: Number(limit.input) || undefined });
    }
  }
  function limitOf(s: Session): { limit: number; known: boolean } {
    const l = s.providerID && s.modelID ? limits.get(`${s.providerID}/${s.modelID}`) : undefined;
    if (l) return { limit: l.context, known: true };
    if (s.providerID && s.modelID) {
      // from OpenCode's provider config, asked once in the background
      providerConfig()
        .then((p) => learnLimit(s.providerID, s.modelID, p?.[s.providerID!]?.models?.[s.modelID!]?.limit))
        .catch(() => {});
    }
    return { limit: Number(facts.settings.config.context_meter?.default_limit) || 200000, known: false };
  }
  /**
   * The context meter of the session's last step, from the daemon; memoised per (used, limit).
   * Null when nothing was measured yet, or the daemon is older or away.
   */
  function meterOf(s: Session): Promise<Dict | null> {
    if (!s.used) return Promise.resolve(null);
    const { limit, known } = limitOf(s);
    const key = `${s.used}/${limit}/${s.providerID}/${s.modelID}`;
    if (s.meterKey === key && s.meter) return s.meter;
    const model = s.providerID && s.modelID ? `${s.providerID}/${s.modelID}` : undefined;
    s.meterKey = key;
    s.meter = link.op("context_meter", { used: s.used, limit: known ? limit : undefined, model, host: "opencode" }).catch((e: Json) => {
      if (s.meterKey === key) s.meterKey = undefined;
      if (unknownOp(e)) log("info", "cairn: the daemon has no context_meter op (older cairn); no context meter");
      else log("warn", `cairn: context meter failed: ${e?.message ?? e}`);
      return null;
    });
    return s.meter;
  }
  return { learnLimit, limitOf, meterOf };
}
