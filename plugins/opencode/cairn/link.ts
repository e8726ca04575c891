// The plugin's two ways to ask the daemon: `call` (an HTTP route) and `op` (`POST /v1/op`).
// Writes go through the spool's delivery (live, else kept on disk); reads are one request.
// Every body is redacted before it leaves the process.

import type { Daemon } from "./daemon.ts";
import { redactDeep } from "./private.ts";
import { WRITE_OPS } from "./rules.ts";
import { CALL_TIMEOUT, CallError, type Dict, type Json } from "./util.ts";

/** The engram routes this plugin posts that are one of the daemon's writes (their op). */
const WRITE_ROUTES: Record<string, string> = { "/sessions": "start_session", "/observations/passive": "capture_passive" };

export type Link = ReturnType<typeof makeLink>;

export function makeLink(daemon: Daemon, deliver: (name: string, args: Dict, timeout?: number, route?: string) => Promise<Json>) {
  /** One HTTP call; rejects with CallError on an error status or a network failure. */
  async function call(method: "GET" | "POST", path: string, body?: Json, timeout = CALL_TIMEOUT): Promise<Json> {
    if (method === "POST" && WRITE_ROUTES[path]) return deliver(WRITE_ROUTES[path], body ?? {}, timeout, path);
    const url = await daemon.url();
    if (!url) throw new CallError("no cairn daemon", 0, "unavailable");
    return daemon.send(url, method, path, body === undefined ? undefined : redactDeep(body), timeout);
  }
  /** One of the daemon's operations (the catalogue's writes are delivered, never lost to a cold start). */
  const op = (name: string, args: Dict, timeout?: number): Promise<Json> =>
    WRITE_OPS.has(name) ? deliver(name, args, timeout) : call("POST", "/v1/op", { op: name, args }, timeout);
  return { call, op };
}
