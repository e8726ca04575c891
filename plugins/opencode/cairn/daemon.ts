// Reaching cairn's daemon: found through `daemon.json` in the data dir (or a fixed URL), started
// when none answers (one start at a time across processes), and one HTTP request with a time
// limit. A request that was not sent or not answered in time rejects with CallError status 0.

import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

import { answerOf, CallError, HEALTH_TIMEOUT, sleep, type Dict, type Json, type Log } from "./util.ts";

const DAEMON_JSON_WAIT = 2000;
/** A daemon started this recently (by any process: `daemon.starting` in the data dir) may still be coming up. */
const DAEMON_STARTING_GRACE = 15_000;
/** A daemon not found is looked for again after this long. */
const DAEMON_RETRY = 10_000;

export type Daemon = ReturnType<typeof makeDaemon>;

/** `bakedBin`: the binary `cairn setup opencode` wrote into the plugin. */
export function makeDaemon(env: Dict, options: Dict | undefined, directory: string, log: Log, bakedBin: string | null) {
  const dataDir = (): string =>
    env.CAIRN_DATA_DIR || join(env.XDG_DATA_HOME || join(env.HOME || homedir(), ".local", "share"), "cairn");
  const fallbackUrl = () => `http://127.0.0.1:${env.CAIRN_PORT || env.ENGRAM_PORT || 7437}`;
  function daemonJsonUrl(): string | null {
    try {
      const info = JSON.parse(readFileSync(join(dataDir(), "daemon.json"), "utf8"));
      return typeof info?.addr === "string" && info.addr ? `http://${info.addr}` : null;
    } catch {
      return null;
    }
  }
  const configuredUrl = (): string | null => (options?.url || env.CAIRN_URL || null)?.replace(/\/+$/, "") ?? null;
  const autostart = () => options?.autostart !== false && env.CAIRN_AUTOSTART !== "never";
  const headers = (): Dict => {
    const h: Dict = { "content-type": "application/json" };
    if (env.CAIRN_HTTP_TOKEN) h.authorization = `Bearer ${env.CAIRN_HTTP_TOKEN}`;
    return h;
  };

  async function healthy(url: string): Promise<boolean> {
    try {
      const res = await fetch(`${url}/health`, { headers: headers(), signal: AbortSignal.timeout(HEALTH_TIMEOUT) });
      return res.ok;
    } catch {
      return false;
    }
  }

  function spawnDaemon(): boolean {
    const bin = options?.bin || bakedBin || env.CAIRN_BIN || env.ENGRAM_BIN || "cairn";
    // one start at a time across processes (hooks use the same file): a daemon on a loaded
    // machine can take seconds to come up, and every event of that time would start another
    const marker = join(dataDir(), "daemon.starting");
    try {
      if (Date.now() - statSync(marker).mtimeMs < DAEMON_STARTING_GRACE) return true;
    } catch {
      // no start under way
    }
    try {
      mkdirSync(dataDir(), { recursive: true, mode: 0o700 });
      writeFileSync(marker, String(process.pid));
      utimesSync(marker, new Date(), new Date());
    } catch {
      // the daemon itself says what is wrong with the data dir
    }
    try {
      // detached and unref'd: the daemon outlives OpenCode (and idles out after 30 min)
      const child = spawn(bin, ["serve", "--idle-exit", "1800", "--or-any-port"], {
        detached: true,
        stdio: "ignore",
        env: env as NodeJS.ProcessEnv,
        cwd: directory,
      });
      child.on("error", (e: Error) => log("warn", `cairn: could not start the daemon (${bin}): ${e.message}`));
      child.unref();
      return true;
    } catch (e: Json) {
      log("warn", `cairn: could not start the daemon (${bin}): ${e?.message ?? e}`);
      return false;
    }
  }

  let daemon: Promise<string | null> | null = null;
  let daemonCheckedAt = 0;
  async function findOrStart(): Promise<string | null> {
    const fixed = configuredUrl();
    if (fixed) return (await healthy(fixed)) ? fixed : null;
    const known = daemonJsonUrl() ?? fallbackUrl();
    if (await healthy(known)) return known;
    if (!autostart()) return null;
    if (!spawnDaemon()) return null;
    const deadline = Date.now() + DAEMON_JSON_WAIT;
    while (Date.now() < deadline) {
      await sleep(50);
      const url = daemonJsonUrl();
      if (url && (await healthy(url))) return url;
    }
    log("warn", `cairn: the daemon did not come up within ${DAEMON_JSON_WAIT} ms (data dir ${dataDir()})`);
    return null;
  }
  /** The daemon's URL, found (or started) once; a failure is retried after 10 s. */
  function url(): Promise<string | null> {
    if (daemon && !(daemonCheckedAt && Date.now() - daemonCheckedAt > DAEMON_RETRY)) return daemon;
    daemonCheckedAt = 0;
    daemon = findOrStart().then((found) => {
      if (!found) daemonCheckedAt = Date.now();
      return found;
    });
    return daemon;
  }
  /** Forget the daemon: the next request looks for it again. */
  function lost() {
    daemon = null;
  }
  /** A daemon seen answering (by the spool's catch-up): the next requests go there. */
  function found(at: string) {
    daemon = Promise.resolve(at);
    daemonCheckedAt = 0;
  }

  /** One request to the daemon at `base`; `eventID` makes a write idempotent. */
  async function send(base: string, method: "GET" | "POST", path: string, body: Json, timeout: number, eventID?: string): Promise<Json> {
    const h = headers();
    if (eventID) h["idempotency-key"] = eventID;
    let res: Response;
    try {
      res = await fetch(base + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeout) });
    } catch (e: Json) {
      lost();
      throw new CallError(`${method} ${path}: ${e?.name === "TimeoutError" ? `no answer within ${timeout} ms` : (e?.message ?? e)}`, 0, "unavailable");
    }
    return answerOf(res, `${method} ${path}`);
  }
  /** POST to a known daemon. */
  const post = (base: string, path: string, body: Json, timeout: number, eventID?: string) => send(base, "POST", path, body, timeout, eventID);

  return { dataDir, configuredUrl, daemonJsonUrl, autostart, healthy, spawnDaemon, url, lost, found, send, post };
}
