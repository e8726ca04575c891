// cairn's OpenCode plugin: sessions, prompts, memory at the first message, the memory protocol,
// compaction that loses nothing, and a context meter, all through cairn's daemon.
//
// Thin on purpose: every decision that needs the store is an HTTP call to the daemon
// (`POST /v1/op {op, args}` and a few engram routes). Every call has a timeout and fails open:
// OpenCode keeps working, with one `client.app.log` line. Install with `cairn setup opencode`,
// or copy this one file into `~/.config/opencode/plugins/`.
//
// The host is OpenCode's V1 plugin API (checked against opencode-ai 1.18.33). Only the default
// export below may exist at runtime: OpenCode's loader rejects modules with other exports.

import { spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const BAKED_CAIRN_BIN: string | null = null; // cairn setup writes the binary's path here

type Json = any;
type Dict = Record<string, Json>;

/** Time limits (ms). Awaited hooks wait at most `hook`; the request goes on in the background. */
const HEALTH_TIMEOUT = 500;
const CALL_TIMEOUT = 2000;
const HOOK_WAIT = 300;
const COMPACTING_WAIT = 1000;
const DAEMON_JSON_WAIT = 2000;
/** How long writes kept in the spool wait in the background for a daemon that is slow to come up. */
const DAEMON_COLD_WAIT = 120_000;
/** A daemon started this recently (by any process: `daemon.starting` in the data dir) may still be coming up. */
const DAEMON_STARTING_GRACE = 15_000;
/**
 * The spool (cairn-core's `spool.rs` has its rules; this writes the same records): writes the
 * daemon could not take yet, one file per event, `<data dir>/spool/<uuid v7>.json`, drained in
 * order by the daemon, each applied once by its id. Bounded like the core's.
 */
const SPOOL_RECORD_VERSION = 1;
const SPOOL_MAX_EVENTS = 10_000;
const SPOOL_MAX_BYTES = 64 * 1024 * 1024;
const SPOOL_MAX_RECORD_BYTES = 1024 * 1024;
/** The daemon's operations this plugin sends that write: what must reach the store even when the daemon is not up yet. */
const WRITE_OPS = new Set(["start_session", "user_prompt", "record_activity", "capture_passive", "save_compaction", "end_session", "add_prompt", "session_summary", "save", "session_start", "tool_call", "record_session"]);
/** The engram routes this plugin posts that are one of those writes. */
const WRITE_ROUTES: Record<string, string> = { "/sessions": "start_session", "/observations/passive": "capture_passive" };
/** What OpenCode's `opencode run` prompt is cut to before it leaves the process. */
const MAX_PROMPT_CHARS = 2000;
/** Task output and turn text sent for "## Key Learnings" capture. */
const MAX_PASSIVE_CHARS = 20000;
const SUBAGENT_WAIT = 50;

/** plugin_config defaults: the contract's, used until (or when) the daemon answers. */
const DEFAULT_CONFIG = {
  inject: { protocol: true as boolean | string[], mode: "first_message", budget_bytes: 6000, profile: true } as Dict,
  triggers: { keyword_patterns: [] as string[] },
  compaction: { mode: "chart", auto_at: null as number | null, min_percent: 50 },
  context_meter: { enabled: true, yellow: 70, red: 85, critical: 92, default_limit: 200000 },
  history: { upstream_history: { enable: true, disable_for_agents: [] as string[] }, context_charting: { enable: true } } as Dict,
};
type TextPart = "memory" | "compaction_note" | "continuity" | "trigger" | "history" | "chart_prompt";

/** Tools of cairn itself: not counted as host tool calls (tool-call counting). */
function isCairnTool(tool: string): boolean {
  const t = tool.toLowerCase();
  return t.startsWith("cairn_") || t.startsWith("mem_") || t.startsWith("history_") || t === "memory" || t === "memory_compact";
}

/**
 * A `<private…>` or `</private…>` tag at `at` (a `<`): `<`, optional whitespace, an optional `/`,
 * optional whitespace, `private` in any case, then anything but a letter or digit, up to the next
 * `>` (or the end). Cairn's own scanner (`cairn-base` `text/private.rs`) reads tags the same way;
 * both are tested on `tests/fixtures/redaction-cases.json`.
 */
function privateTagAt(text: string, at: number): { closing: boolean; end: number } | null {
  let i = at + 1;
  while (i < text.length && /\s/.test(text[i])) i++;
  const closing = text[i] === "/";
  if (closing) {
    i++;
    while (i < text.length && /\s/.test(text[i])) i++;
  }
  if (text.slice(i, i + 7).toLowerCase() !== "private") return null;
  i += 7;
  if (i < text.length && /[A-Za-z0-9]/.test(text[i])) return null;
  const close = text.indexOf(">", i);
  return { closing, end: close < 0 ? text.length : close + 1 };
}

/**
 * `<private>…</private>` → `[REDACTED]`, failing closed: nested blocks to their outermost closer,
 * attributes and whitespace inside tags allowed, an opener with no closer (`<private/>` too) to
 * the end, a stray closer the whole text.
 */
function stripPrivate(text: string): string {
  let out = "";
  let keptFrom = 0;
  let depth = 0;
  let blockStart = 0;
  let found = false;
  let pos = 0;
  for (let at = text.indexOf("<", pos); at >= 0; at = text.indexOf("<", pos)) {
    const tag = privateTagAt(text, at);
    if (!tag) {
      pos = at + 1;
      continue;
    }
    found = true;
    if (tag.closing) {
      if (depth === 0) return "[REDACTED]";
      depth--;
      if (depth === 0) {
        out += text.slice(keptFrom, blockStart) + "[REDACTED]";
        keptFrom = tag.end;
      }
    } else {
      if (depth === 0) blockStart = at;
      depth++;
    }
    pos = tag.end;
  }
  if (!found) return text;
  out += depth > 0 ? text.slice(keptFrom, blockStart) + "[REDACTED]" : text.slice(keptFrom);
  return out.trim();
}

/** Every string inside a request body, stripped. */
function redactDeep(v: Json): Json {
  if (typeof v === "string") return stripPrivate(v);
  if (Array.isArray(v)) return v.map(redactDeep);
  if (v && typeof v === "object") {
    const out: Dict = {};
    for (const [k, x] of Object.entries(v)) out[k] = redactDeep(x);
    return out;
  }
  return v;
}

/** Resolve with `p`'s value, or `undefined` after `ms` (p goes on). Never rejects. */
function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
    );
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** An error of the daemon: HTTP status and cairn's error code. */
class CallError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
  ) {
    super(message);
  }
}

/** The daemon's JSON answer; an error status rejects with its CallError (status and code). */
async function answerOf(res: Response, what: string): Promise<Json> {
  const text = await res.text();
  let json: Json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const err = json?.error ?? {};
    throw new CallError(`${what}: ${res.status} ${err.code ?? ""} ${err.message ?? text.slice(0, 200)}`, res.status, err.code ?? "");
  }
  return json;
}

const server = async (ctx: Dict, options?: Dict) => {
  const env: Dict = { ...process.env, ...(options?.env ?? {}) };
  const client = ctx?.client;
  const directory: string = ctx?.directory ?? ctx?.worktree ?? process.cwd();

  // ---- logging: one line per distinct problem, never throws ---------------------------------
  const logged = new Map<string, number>();
  function log(level: "info" | "warn" | "error", message: string) {
    const last = logged.get(message);
    if (last !== undefined && Date.now() - last < 60_000) return;
    logged.set(message, Date.now());
    try {
      const p = client?.app?.log?.({ body: { service: "cairn", level, message } });
      if (p && typeof p.catch === "function") p.catch(() => {});
    } catch {
      // nowhere left to say it
    }
  }

  // ---- the daemon (autostart) -----------------------------------------------------------------
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
    const bin = options?.bin || BAKED_CAIRN_BIN || env.CAIRN_BIN || env.ENGRAM_BIN || "cairn";
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
    } catch (e: any) {
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
    if (options?.autostart === false || env.CAIRN_AUTOSTART === "never") return null;
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
  function daemonUrl(): Promise<string | null> {
    if (daemon && !(daemonCheckedAt && Date.now() - daemonCheckedAt > 10_000)) return daemon;
    daemonCheckedAt = 0;
    daemon = findOrStart().then((url) => {
      if (!url) daemonCheckedAt = Date.now();
      return url;
    });
    return daemon;
  }
  function daemonLost() {
    daemon = null;
  }

  /** One HTTP call; rejects with CallError on an error status or a network failure. */
  async function call(method: "GET" | "POST", path: string, body?: Json, timeout = CALL_TIMEOUT): Promise<Json> {
    if (method === "POST" && WRITE_ROUTES[path]) return deliver(WRITE_ROUTES[path], body ?? {}, timeout, path);
    const url = await daemonUrl();
    if (!url) throw new CallError("no cairn daemon", 0, "unavailable");
    let res: Response;
    try {
      res = await fetch(url + path, {
        method,
        headers: headers(),
        body: body === undefined ? undefined : JSON.stringify(redactDeep(body)),
        signal: AbortSignal.timeout(timeout),
      });
    } catch (e: any) {
      daemonLost();
      throw new CallError(`${method} ${path}: ${e?.name === "TimeoutError" ? `no answer within ${timeout} ms` : (e?.message ?? e)}`, 0, "unavailable");
    }
    return answerOf(res, `${method} ${path}`);
  }
  const op = (name: string, args: Dict, timeout?: number): Promise<Json> =>
    WRITE_OPS.has(name) ? deliver(name, args, timeout) : call("POST", "/v1/op", { op: name, args }, timeout);

  // ---- delivery of writes: to the daemon, else kept in the spool in order ---------------------
  // `opencode run` can exit before a cold daemon is up (seconds on a busy machine): a write the
  // daemon cannot take now goes to the spool on disk at once, and once anything is spooled,
  // this process's later writes follow it there until the daemon drained it, so none overtakes.
  let spooling = false;
  let lastSpooled: string | null = null;
  let idMs = 0;
  let idSeq = 0;
  /** A UUID v7 (time-ordered; this process's ids strictly increase): the event's id and file name. */
  function eventId(): string {
    let ms = Date.now();
    if (ms <= idMs) {
      idSeq += 1;
      if (idSeq > 0xfff) {
        idMs += 1;
        idSeq = 0;
      }
      ms = idMs;
    } else {
      idMs = ms;
      idSeq = 0;
    }
    const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");
    const rand = (bits: number) => Math.floor(Math.random() * 2 ** bits);
    const time = hex(ms, 12);
    const variant = hex(0x8000 | rand(14), 4);
    return `${time.slice(0, 8)}-${time.slice(8)}-7${hex(idSeq, 3)}-${variant}-${hex(rand(24), 6)}${hex(rand(24), 6)}`;
  }
  const spoolDir = () => join(dataDir(), "spool");
  /** Count one refused event the way the core does (a byte in `spool/dropped`); never throws. */
  function spoolDropped(why: string): false {
    try {
      mkdirSync(spoolDir(), { recursive: true, mode: 0o700 });
      appendFileSync(join(spoolDir(), "dropped"), "x");
    } catch {
      // a full disk: nothing can be counted either
    }
    log("warn", `cairn: a write was lost: ${why}`);
    return false;
  }
  /** Keep one event (tmp file + rename: atomic, and safe beside other hosts spooling). */
  function spoolWrite(id: string, request: Json): boolean {
    const dir = spoolDir();
    const tmp = join(dir, `.${id}.${process.pid}.tmp`);
    try {
      const data = JSON.stringify({ v: SPOOL_RECORD_VERSION, id, at: new Date().toISOString(), source: "opencode", request });
      const size = Buffer.byteLength(data);
      if (size > SPOOL_MAX_RECORD_BYTES) return spoolDropped(`${request.op} is ${size} bytes, over the spool's record limit`);
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      let events = 0;
      let bytes = 0;
      for (const name of readdirSync(dir)) {
        if (!name.endsWith(".json") && !name.endsWith(".tmp")) continue;
        if (name.endsWith(".json")) events += 1;
        try {
          bytes += statSync(join(dir, name)).size;
        } catch {
          // drained meanwhile
        }
      }
      if (events >= SPOOL_MAX_EVENTS || bytes + size > SPOOL_MAX_BYTES) return spoolDropped(`the spool is full (${events} events, ${bytes} bytes)`);
      writeFileSync(tmp, data, { mode: 0o600 });
      renameSync(tmp, join(dir, `${id}.json`));
      return true;
    } catch (e: any) {
      try {
        unlinkSync(tmp);
      } catch {
        // never written
      }
      return spoolDropped(`cannot write the spool: ${e?.message ?? e}`);
    }
  }
  /** A daemon answering now, without starting one or waiting past a health check. */
  async function daemonNow(): Promise<string | null> {
    const url = await within(daemonUrl(), HEALTH_TIMEOUT + 100);
    return url ?? null;
  }
  /**
   * One write: live with its event id (a retry of it is applied once), else spooled under that
   * id. `route`: an engram route that is this op (its answer's shape kept when live).
   */
  async function deliver(name: string, args: Dict, timeout = CALL_TIMEOUT, route?: string): Promise<Json> {
    const request = redactDeep({ op: name, args });
    const id = eventId();
    if (!spooling) {
      const url = await daemonNow();
      if (url) {
        try {
          return route ? await post(url, route, request.args, timeout, id) : await post(url, "/v1/op", request, timeout, id);
        } catch (e) {
          // not sent, or no answer in time: the spool keeps it under the same id
          if (!(e instanceof CallError) || e.status !== 0) throw e;
        }
      }
    }
    if (!spoolWrite(id, request)) throw new CallError(`${name}: no cairn daemon, and the spool could not keep it`, 0, "unavailable");
    if (!spooling) log("info", `cairn: no daemon answers yet; writes wait in ${spoolDir()} until it runs`);
    spooling = true;
    lastSpooled = id;
    catchUp();
    return { spooled: id };
  }
  const unrefSleep = (ms: number) =>
    new Promise<void>((r) => {
      const t: any = setTimeout(r, ms);
      t?.unref?.();
    });
  let catchingUp = false;
  /** In the background: wait for (or start) the daemon past the 2 s, have it drain the spool, then write live again. */
  function catchUp() {
    if (catchingUp) return;
    catchingUp = true;
    (async () => {
      const until = Date.now() + DAEMON_COLD_WAIT;
      while (spooling && Date.now() < until) {
        const url = configuredUrl() ?? daemonJsonUrl();
        if (url && (await healthy(url))) {
          daemon = Promise.resolve(url);
          daemonCheckedAt = 0;
          if (await drained(url)) spooling = false;
        } else if (!configuredUrl() && options?.autostart !== false && env.CAIRN_AUTOSTART !== "never") {
          spawnDaemon();
        }
        if (spooling) await unrefSleep(250);
      }
    })()
      .catch((e: any) => log("warn", `cairn: waiting for the daemon failed: ${e?.message ?? e}`))
      .finally(() => {
        catchingUp = false;
      });
  }
  /** Poke the daemon's drain; true once this process's last spooled event is gone (applied, in order). */
  async function drained(url: string): Promise<boolean> {
    try {
      await post(url, "/spool/drain", undefined, CALL_TIMEOUT * 5);
    } catch (e) {
      // an older daemon that does not drain: the spool waits for a newer one; write live again
      if (e instanceof CallError && e.status === 404) return true;
      return false;
    }
    return !lastSpooled || !existsSync(join(spoolDir(), `${lastSpooled}.json`));
  }
  /** POST to a known daemon; CallError status 0 when it was not sent or not answered in time. */
  async function post(url: string, path: string, body: Json, timeout: number, eventID?: string): Promise<Json> {
    const h = headers();
    if (eventID) h["idempotency-key"] = eventID;
    let res: Response;
    try {
      res = await fetch(url + path, { method: "POST", headers: h, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeout) });
    } catch (e: any) {
      daemonLost();
      throw new CallError(`POST ${path}: ${e?.name === "TimeoutError" ? `no answer within ${timeout} ms` : (e?.message ?? e)}`, 0, "unavailable");
    }
    return answerOf(res, `POST ${path}`);
  }
  /** Whether the daemon does not know this op (an older cairn): 400 invalid_argument "unknown variant". */
  const unknownOp = (e: any) => e instanceof CallError && e.status === 400 && /unknown variant|unknown op/i.test(e.message);

  /** Run `f` without waiting; a failure becomes one log line. */
  function background(what: string, f: () => Promise<Json>): Promise<Json> {
    const p = Promise.resolve()
      .then(f)
      .catch((e: any) => {
        log("warn", `cairn: ${what} failed: ${e?.message ?? e}`);
        return undefined;
      });
    return p;
  }

  // ---- cached daemon facts ------------------------------------------------------------------
  /** Memoise a successful answer; a failure is asked again next time. */
  function cached<T>(f: () => Promise<T>): () => Promise<T> {
    let p: Promise<T> | null = null;
    return () => {
      if (!p) {
        p = f();
        p.catch(() => {
          p = null;
        });
      }
      return p;
    };
  }
  const project = cached(async (): Promise<string | undefined> => {
    if (options?.project || env.CAIRN_PROJECT) return options?.project || env.CAIRN_PROJECT;
    const r = await call("GET", `/project/current?cwd=${encodeURIComponent(directory)}`);
    if (!r?.project) throw new Error("no project detected");
    return r.project as string;
  });
  const projectOrUndefined = async () => within(project(), CALL_TIMEOUT);
  let config: Dict = DEFAULT_CONFIG;
  const loadConfig = cached(async () => {
    try {
      const c = await op("plugin_config", {});
      config = {
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
    return config;
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
  function wantsUpstream(s: Session): boolean {
    const u = config.history?.upstream_history ?? {};
    if (u.enable === false) return false;
    const off = Array.isArray(u.disable_for_agents) ? u.disable_for_agents : [];
    return !(s.agent && off.includes(s.agent));
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
  const known: Dict = {};
  const peek = (part: string): string | null => known[part] ?? null;
  async function warm(part: TextPart) {
    const t = await protocolText(part);
    if (t) known[part] = t;
    return t;
  }

  // ---- per-session state (one plugin instance per directory, many sessions) ---------------
  type Session = {
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
  const sessions = new Map<string, Session>();
  const messages = new Map<string, { sessionID: string; role?: string; summary?: boolean; agent?: string; mode?: string }>();
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
      s.registered = background(`registering session ${s.id}`, async () =>
        call("POST", "/sessions", {
          id: s.id,
          project: await projectOrUndefined(),
          directory,
          agent: "opencode",
          parent_id: s.parentID,
          title,
        }),
      );
    }
    return s.registered;
  }

  function agentWantsProtocol(agent?: string): boolean {
    const p = config.inject?.protocol;
    if (Array.isArray(p)) return agent ? p.includes(agent) : true;
    return p !== false;
  }

  // ---- memory block ---------------------------------------------------------------------------
  /**
   * The [MEMORY] block for `query` (a prompt), asked by session `sessionID`. cairn's block always
   * has something: the Last Session and the Recent list, or one line saying nothing is stored.
   */
  async function memoryBlock(query: string | undefined, sessionID: string): Promise<string | null> {
    const args: Dict = { project: await projectOrUndefined(), layout: "memory_block", budget_bytes: config.inject?.budget_bytes ?? 6000, session_id: sessionID };
    // a prompt, not search syntax: `opencode run` quotes the message, and a quoted query is a
    // phrase search that finds nothing
    const q = (query ?? "").replace(/["*]/g, " ").replace(/\s+/g, " ").trim().slice(0, 500);
    if (q) args.query = q;
    for (const k of ["similarity_threshold", "max_relevant"]) if (config.inject?.[k] !== undefined) args[k] = config.inject[k];
    if (config.inject?.profile === false) args.max_profile = 0;
    const r = await op("context", args);
    const text = typeof r?.context === "string" ? r.context.trim() : "";
    if (text.startsWith("[MEMORY]")) return text.replace(/^\[MEMORY\]\s*/, "").trim() ? text : null;
    // an older daemon ignores `layout`: its recent-context text, only when it holds memories
    return text && Array.isArray(r?.memory_ids) && r.memory_ids.length > 0 ? `[MEMORY]\n${text}` : null;
  }
  /** The session's Last Session record, revised from what OpenCode stored of it (read first). */
  function recordSession(s: Session, compacted = false): Promise<Json> {
    return background(`recording session ${s.id}`, async () => {
      await pokeHistory(s.id).catch(() => null);
      return op("record_session", { session_id: s.id, project: await projectOrUndefined(), compacted });
    });
  }

  // ---- context meter --------------------------------------------------------------------------
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
    return { limit: Number(config.context_meter?.default_limit) || 200000, known: false };
  }
  /**
   * The context meter of the session's last step, from the daemon (one rule for every host:
   * the line, the status, whether to compact); memoised per (used, limit). Null when nothing
   * was measured yet, or the daemon is older or away.
   */
  function meterOf(s: Session): Promise<Dict | null> {
    if (!s.used) return Promise.resolve(null);
    const { limit, known } = limitOf(s);
    const key = `${s.used}/${limit}/${s.providerID}/${s.modelID}`;
    if (s.meterKey === key && s.meter) return s.meter;
    const model = s.providerID && s.modelID ? `${s.providerID}/${s.modelID}` : undefined;
    s.meterKey = key;
    s.meter = op("context_meter", { used: s.used, limit: known ? limit : undefined, model, host: "opencode" }).catch((e: any) => {
      if (s.meterKey === key) s.meterKey = undefined;
      if (unknownOp(e)) log("info", "cairn: the daemon has no context_meter op (older cairn); no context meter");
      else log("warn", `cairn: context meter failed: ${e?.message ?? e}`);
      return null;
    });
    return s.meter;
  }

  // ---- compaction -------------------------------------------------------------------------------
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
        .catch((e: any) => {
          s.compacting = false;
          log("warn", `cairn: compaction of ${s.id} failed: ${e?.message ?? e}`);
        });
    }, 0);
    return true;
  }

  async function saveSummary(s: Session, messageID: string, text: string) {
    if (s.savedSummaries.has(messageID) || !text.trim()) return;
    s.savedSummaries.add(messageID);
    s.summarySaved = true;
    await background(`saving the compaction summary of ${s.id}`, async () =>
      op("save_compaction", {
        session_id: s.id,
        project: await projectOrUndefined(),
        summary: text,
        trigger: s.compactionTrigger ?? "auto",
        overflow: Boolean(s.compactionOverflow),
      }),
    );
  }

  async function passive(s: Session, content: string, source: string) {
    await background(`passive capture (${source})`, async () => {
      await register(s);
      return call("POST", "/observations/passive", {
        session_id: s.id,
        project: await projectOrUndefined(),
        content: content.slice(0, MAX_PASSIVE_CHARS),
        source,
      });
    });
  }

  // ---- start-up: nothing awaited (client calls here would deadlock `opencode run`) -----------
  daemonUrl()
    .then((url) => {
      if (!url) return;
      loadConfig().catch(() => {});
      project().catch(() => {});
      for (const p of ["memory", "trigger", "compaction_note", "continuity", "history", "chart_prompt"] as const) warm(p).catch(() => {});
      // Git sync: the daemon imports the repository's committed chunks in the background.
      if (existsSync(join(directory, ".cairn", "manifest.json")) || existsSync(join(directory, ".engram", "manifest.json")))
        background("starting the sync import", () => post(url, "/sync/import", { directory }, CALL_TIMEOUT));
    })
    .catch(() => {});

  // ---- hooks ----------------------------------------------------------------------------------
  const guard =
    <A extends any[]>(name: string, f: (...a: A) => Promise<void> | void) =>
    async (...a: A): Promise<void> => {
      try {
        await f(...a);
      } catch (e: any) {
        log("error", `cairn: ${name} hook failed: ${e?.message ?? e}`);
      }
    };

  const hooks: Dict = {
    event: guard("event", async ({ event }: Dict) => {
      const type: string = event?.type ?? "";
      const p: Dict = event?.properties ?? {};
      if (type === "session.created" || type === "session.updated") {
        learnInfo(p.info);
        if (p.info?.id) register(session(p.info.id));
      } else if (type === "session.deleted") {
        if (p.info?.id) sessions.delete(p.info.id);
      } else if (type === "session.idle") {
        // The agent stopped: the session is ended as of now (engram's plugin never ended one).
        // OpenCode sessions go on when the user writes again, so the activity is kept: the next
        // prompt is not a session's first.
        const id = p.sessionID;
        if (!id) return;
        const s = session(id);
        void background(`ending session ${id}`, async () => {
          await register(s);
          return op("end_session", { id, keep_activity: true });
        });
        // the archive read, then the next session's Last Session record revised from it
        if (!s.sub) void recordSession(s);
        else void background(`reading the history of ${id}`, () => pokeHistory(id));
      } else if (type === "message.updated") {
        const info = p.info ?? {};
        if (!info.id || !info.sessionID) return;
        if (messages.size > 2000) messages.delete(messages.keys().next().value as string);
        messages.set(info.id, { sessionID: info.sessionID, role: info.role, summary: info.summary === true, agent: info.agent, mode: info.mode });
        if (info.role !== "assistant") return;
        const s = session(info.sessionID);
        s.providerID = info.providerID ?? s.providerID;
        s.modelID = info.modelID ?? s.modelID;
        const t = info.tokens;
        if (t && info.summary !== true) {
          const used = Number(t.total) || (Number(t.input) || 0) + (Number(t.output) || 0) + (Number(t.cache?.read) || 0) + (Number(t.cache?.write) || 0);
          if (used > 0 && used !== s.used) {
            s.used = used;
            void meterOf(s); // asked now, so the next request's system transform finds it ready
          }
        }
        const done = info.finish && info.finish !== "tool-calls" && info.time?.completed;
        if (done && info.summary !== true && !s.sub) {
          // compaction at a threshold, off unless configured (the daemon decides)
          const m = await within(meterOf(s), CALL_TIMEOUT);
          if (m?.auto_compact) scheduleCompaction(s, "auto");
          // passive capture: the finished turn's "## Key Learnings"
          const text = textOf.get(info.id);
          if (text && /^#{1,6}\s*key learnings/im.test(text) && !s.passiveDone.has(info.id)) {
            s.passiveDone.add(info.id);
            await passive(s, text, "turn-complete");
          }
        }
      } else if (type === "message.part.updated") {
        const part = p.part ?? {};
        if (part.type === "compaction" && part.sessionID) {
          const s = session(part.sessionID);
          s.compactionTrigger = s.compacting ? (s.compactionTrigger ?? "manual") : part.auto === false ? "manual" : "auto";
          s.compactionOverflow = Boolean(part.overflow);
        }
      } else if (type === "session.compacted") {
        const id = p.sessionID;
        if (!id) return;
        const s = session(id);
        s.compacting = false;
        s.chart = undefined;
        // compaction summary backstop: no summary text came through experimental.text.complete (another
        // plugin replaced it, or the hook order changed): read it from OpenCode
        if (s.summarySaved === false && !s.sub) {
          s.summarySaved = undefined;
          void background(`reading the compaction summary of ${id}`, async () => {
            const r = await within<Json>(Promise.resolve(client?.session?.messages?.({ path: { id } })), CALL_TIMEOUT);
            const list: Json[] = Array.isArray(r?.data) ? r.data : [];
            const last = [...list].reverse().find((m) => m?.info?.role === "assistant" && m?.info?.summary === true);
            const text = (last?.parts ?? []).filter((p: Json) => p?.type === "text" && typeof p.text === "string").map((p: Json) => p.text).join("\n");
            if (last?.info?.id && text.trim()) await saveSummary(s, last.info.id, text);
          });
        }
        s.compactionTrigger = undefined;
        s.used = undefined; // the next step reports the new size
        if (s.sub) return;
        // what the session did before: kept as its Last Session record (the chart mode stores
        // no summary)
        void recordSession(s, true);
        // the context comes back: the block (with the summary as "Last Session") goes into the
        // system prompt of the session's next requests
        // (events are not awaited: the next request's system transform waits for it, capped)
        const pending = memoryBlock(s.lastPrompt, id)
          .then((block) => {
            if (block) {
              s.block = block;
              s.blockInSystem = true;
            }
          })
          .catch((e: any) => log("warn", `cairn: context after compaction failed: ${e?.message ?? e}`))
          .finally(() => {
            if (s.blockPending === pending) s.blockPending = undefined;
          });
        s.blockPending = pending;
        await pending;
      }
    }),

    "chat.message": guard("chat.message", async (input: Dict, output: Dict) => {
      const id: string | undefined = input?.sessionID;
      if (!id) return;
      const s = session(id);
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
        .filter((p) => p && p.type === "text" && !p.synthetic && typeof p.text === "string")
        .map((p) => p.text)
        .join("\n");
      if (!text.trim() && typeof output?.message?.summary?.body === "string") text = output.message.summary.body;
      text = stripPrivate(text.slice(0, MAX_PROMPT_CHARS)).trim();
      if (text) s.lastPrompt = text;

      const work = (async () => {
        if (await isSubAgent(id)) {
          register(s);
          return null;
        }
        // nothing typed (only files, say): nothing to store or to search with
        if (!text) return null;
        const firstHere = !s.seenPrompt;
        s.seenPrompt = true;
        const proj = await projectOrUndefined();
        let answer: Dict | null = null;
        try {
          // one round trip: the daemon answers the block of a first prompt and the trigger note
          answer = await op("user_prompt", { session_id: id, project: proj, content: text, agent, directory, host: "opencode" });
        } catch (e) {
          if (!unknownOp(e)) throw e;
          // an older daemon: register the session and store the prompt the engram way
          log("info", "cairn: the daemon has no user_prompt op (older cairn); storing prompts with add_prompt");
          await register(s);
          if (text.length > 10) await op("add_prompt", { session_id: id, project: proj, content: text });
          answer = { first_prompt: firstHere, memory_trigger: false, legacy: true };
        }
        // an older daemon answers no texts: the block is asked for separately
        const older = !Array.isArray(answer?.texts);
        const first = Boolean(answer?.first_prompt);
        const found = !first ? null : older ? await memoryBlock(text, id).catch(() => null) : typeof answer?.context === "string" && answer.context.trim() ? (answer.context as string) : null;
        const inSystem = config.inject?.mode === "system";
        if (found && inSystem) {
          s.block = found;
          s.blockInSystem = true;
        }
        const block = inSystem ? null : found;
        const trigger = !answer?.memory_trigger ? null : typeof answer?.trigger === "string" ? (answer.trigger as string) : (peek("trigger") ?? (await warm("trigger")));
        // history guidance: when and how to pull the conversation history, once per session, kept in the
        // conversation (not in every request's system prompt)
        const history = answer?.first_prompt && !answer?.legacy ? (peek("history") ?? (await warm("history"))) : null;
        return { block, trigger, history };
      })();
      work.catch((e: any) => log("warn", `cairn: prompt capture failed: ${e?.message ?? e}`));
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
    }),

    // cairn's MCP tools that take a session get OpenCode's, so saves land in the real
    // session instead of cairn's per-project default one
    "tool.execute.before": guard("tool.execute.before", async (input: Dict, output: Dict) => {
      const tool = String(input?.tool ?? "");
      const args = output?.args;
      if (!input?.sessionID || !args || typeof args !== "object" || Array.isArray(args)) return;
      // the router (`--tools=router`) counts the call in this session, and its context_usage /
      // plans ops read it, as the Claude Code hook does
      if (/^cairn_(mem_(save|session_summary|capture_passive|save_prompt)|memory)$/.test(tool) && !args.session_id) {
        args.session_id = input.sessionID;
      }
      // the router's context_usage counts against the window the meter in the prompt uses (the
      // provider's limit for the session's model), not the daemon's default
      if (tool === "cairn_memory" && /^context(_usage)?$/.test(String(args.op ?? args.tool ?? "").trim())) {
        const inner = args.args && typeof args.args === "object" && !Array.isArray(args.args) ? args.args : {};
        const { limit, known } = limitOf(session(input.sessionID));
        if (known && inner.limit === undefined) args.args = { ...inner, limit };
      }
      // visibility: the history tools see the caller's own session only up to its latest compaction;
      // a call without a session reads the caller's
      if (/^cairn_history_/.test(tool)) {
        args.caller_session_id = input.sessionID;
        if (tool !== "cairn_history_sessions" && tool !== "cairn_history_search" && !args.session_id) args.session_id = input.sessionID;
      }
    }),

    "tool.execute.after": guard("tool.execute.after", async (input: Dict, output: Dict) => {
      const id: string | undefined = input?.sessionID;
      const tool: string = String(input?.tool ?? "");
      if (!id || !tool) return;
      const s = session(id);
      // fire-and-forget: nothing here delays the agent
      void (async () => {
        if (await isSubAgent(id)) return;
        // the daemon tells cairn's own tools from the host's (its MCP server counts its own)
        background("counting a tool call", async () => {
          await register(s);
          const project = await projectOrUndefined();
          try {
            return await op("tool_call", { session_id: id, project, tool, host: "opencode" });
          } catch (e) {
            if (!unknownOp(e)) throw e;
            // an older daemon: count it the way it knows
            return isCairnTool(tool) ? null : op("record_activity", { session_id: id, project, event: "tool_call" });
          }
        });
        const out = output?.output;
        if (tool.toLowerCase() === "task" && typeof out === "string" && out.trim().length > 50) await passive(s, out, "task-complete");
      })();
    }),

    "experimental.text.complete": guard("experimental.text.complete", async (input: Dict, output: Dict) => {
      const text = output?.text;
      if (typeof text !== "string" || !input?.messageID) return;
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
      const s = session(id);
      if (isSummary && s.chart) {
        // chart mode, step 2: the stored summary is the chart made at step 1 (the turns before this
        // compaction do not change). It is not saved as a memory: the history holds everything
        // it points to.
        output.text = s.chart;
        s.summarySaved = undefined;
        return;
      }
      // the compaction summary, stored by cairn (not awaited: the host stores the text)
      if (isSummary && !s.sub) void saveSummary(s, input.messageID, textOf.get(input.messageID) ?? text);
    }),

    "experimental.chat.system.transform": guard("experimental.chat.system.transform", async (input: Dict, output: Dict) => {
      const id: string | undefined = input?.sessionID;
      const system: Json[] = output?.system;
      if (!id || !Array.isArray(system)) return;
      const joined = system.join("\n");
      // the title generator and the summariser need neither the protocol nor the meter
      if (/You are a title generator|context summarization agent/i.test(joined.slice(0, 400))) return;
      if (input.model?.providerID && input.model?.id) learnLimit(input.model.providerID, input.model.id, input.model.limit);
      const s = session(id);
      const sub = await within(isSubAgent(id), HOOK_WAIT);
      if (sub) {
        // upstream history: a sub-agent is told where its parent's history is
        if (s.parentID && wantsUpstream(s)) {
          const note = await within(upstreamText(s.parentID), HOOK_WAIT);
          if (note && !joined.includes(note)) system[system.length - 1] = `${system[system.length - 1] ?? ""}\n\n${note}`;
        }
        return;
      }
      const add: string[] = [];
      if (agentWantsProtocol(s.agent)) {
        const protocol = peek("memory") ?? (await within(warm("memory"), HOOK_WAIT)) ?? null;
        if (protocol && !joined.includes(protocol)) add.push(protocol);
      }
      if (s.blockPending) await within(s.blockPending, HOOK_WAIT);
      if (s.blockInSystem && s.block && !joined.includes(s.block)) add.push(s.block);
      const meter = await within(meterOf(s), HOOK_WAIT);
      if (meter?.line) add.push(meter.line as string);
      if (add.length === 0) return;
      const extra = add.join("\n\n");
      // appended to the LAST entry, never a new one (some chat templates take one system block)
      if (system.length === 0) system.push(extra);
      else system[system.length - 1] = `${system[system.length - 1]}\n\n${extra}`;
    }),

    "experimental.session.compacting": guard("experimental.session.compacting", async (input: Dict, output: Dict) => {
      const id: string | undefined = input?.sessionID;
      if (!id || !output) return;
      const s = session(id);
      s.compacting = true;
      s.summarySaved = false;
      const work = (async () => {
        if (await isSubAgent(id)) return null;
        register(s);
        let mode = config.compaction?.mode ?? "chart";
        if (mode === "chart") {
          // chart mode, step 1: chart now (the turns before this compaction are all stored); only then
          // is the summariser asked for next to nothing. No chart: the context mode's summary.
          const chart = config.history?.context_charting?.enable === false ? null : await chartOf(id).catch(() => null);
          const prompt = chart ? (peek("chart_prompt") ?? (await warm("chart_prompt"))) : null;
          if (chart && prompt) return { chart, prompt, mode, proj: undefined, block: null, note: null, continuity: null };
          mode = "context";
        }
        const [block, note, continuity] = await Promise.all([
          memoryBlock(s.lastPrompt, id).catch(() => null),
          mode === "context" ? (peek("compaction_note") ?? warm("compaction_note")) : null,
          mode === "continuity" ? (peek("continuity") ?? warm("continuity")) : null,
        ]);
        return { block, note, continuity, mode, proj: await projectOrUndefined() };
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
    }),

    tool: {
      memory_compact: {
        description:
          "Compact this session now (summarise the conversation so far and continue from the summary), at a natural break: after a task is done, before starting an unrelated one. The summary is kept in cairn. Refused while the context is below the configured minimum unless force is true.",
        args: {
          force: { type: "boolean", description: "compact even though the context is below the minimum (default false)" },
        },
        async execute(args: Dict, context: Dict) {
          try {
            const id: string | undefined = context?.sessionID;
            if (!id) return "memory_compact: no session";
            const s = session(id);
            const u = await within(meterOf(s), CALL_TIMEOUT);
            const min = Number(config.compaction?.min_percent ?? 50);
            const at = u ? `${u.percent}% (${Number(u.used).toLocaleString("en-US")} / ${Number(u.limit).toLocaleString("en-US")} tokens)` : "an unknown level";
            if (!args?.force && (!u || !u.compact_allowed)) {
              return `Not compacting: the context is at ${at}, below the ${min}% minimum; there is little to gain. Pass force: true to compact anyway.`;
            }
            if (s.compacting) return "A compaction of this session is already under way.";
            if (!scheduleCompaction(s, "manual")) return "memory_compact: the session's model is not known yet; try again after the next message.";
            return `Compaction scheduled at ${at}. It starts when this turn's tool calls end; the summary is stored in cairn.`;
          } catch (e: any) {
            log("error", `cairn: memory_compact failed: ${e?.message ?? e}`);
            return "memory_compact failed; see OpenCode's log.";
          }
        },
      },
    },
  };
  return hooks;
};

/** An id for a part we add, in OpenCode's ascending `prt_` form: after the message's own parts. */
let partSeq = 0;
function partId(): string {
  const hex = (Date.now() * 0x1000 + (partSeq++ % 0x1000)).toString(16).padStart(12, "0").slice(-12);
  let rand = "";
  for (let i = 0; i < 14; i++) rand += "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[Math.floor(Math.random() * 62)];
  return `prt_${hex}${rand}`;
}

export default { id: "cairn", server };
