// What every part of the plugin uses: loose JSON types, time limits, promises with a deadline,
// and the daemon's error.

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;
export type Dict = Record<string, Json>;

/** Time limits (ms). Awaited hooks wait at most `HOOK_WAIT`; the request goes on in the background. */
export const HEALTH_TIMEOUT = 500;
export const CALL_TIMEOUT = 2000;
export const HOOK_WAIT = 300;
export const COMPACTING_WAIT = 1000;
/** How long a just-finished message waits for the event that says which session it is in. */
export const SUBAGENT_WAIT = 50;

/** Resolve with `p`'s value, or `undefined` after `ms` (p goes on). Never rejects. */
export function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
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

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A sleep that does not keep the process alive (background waits). */
export const unrefSleep = (ms: number) =>
  new Promise<void>((r) => {
    const t: Json = setTimeout(r, ms);
    t?.unref?.();
  });

/** An error of the daemon: HTTP status and cairn's error code (status 0: not sent, or no answer in time). */
export class CallError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
  ) {
    super(message);
  }
}

/** The daemon's JSON answer; an error status rejects with its CallError (status and code). */
export async function answerOf(res: Response, what: string): Promise<Json> {
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

/** Whether the daemon does not know this op (an older cairn): 400 invalid_argument "unknown variant". */
export const unknownOp = (e: Json) => e instanceof CallError && e.status === 400 && /unknown variant|unknown op/i.test(e.message);

/** Memoise a successful answer; a failure is asked again next time. */
export function cached<T>(f: () => Promise<T>): () => Promise<T> {
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

/** An id for a part we add, in OpenCode's ascending `prt_` form: after the message's own parts. */
let partSeq = 0;
export function partId(): string {
  const hex = (Date.now() * 0x1000 + (partSeq++ % 0x1000)).toString(16).padStart(12, "0").slice(-12);
  let rand = "";
  for (let i = 0; i < 14; i++) rand += "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[Math.floor(Math.random() * 62)];
  return `prt_${hex}${rand}`;
}

/** One line per distinct problem through OpenCode's log (at most one a minute); never throws. */
export type Log = (level: "info" | "warn" | "error", message: string) => void;
export function makeLog(client: Json): Log {
  const logged = new Map<string, number>();
  return (level, message) => {
    const last = logged.get(message);
    if (last !== undefined && Date.now() - last < 60_000) return;
    logged.set(message, Date.now());
    try {
      const p = client?.app?.log?.({ body: { service: "cairn", level, message } });
      if (p && typeof p.catch === "function") p.catch(() => {});
    } catch {
      // nowhere left to say it
    }
  };
}

/** Run `f` without waiting; a failure becomes one log line. */
export function background(log: Log, what: string, f: () => Promise<Json>): Promise<Json> {
  return Promise.resolve()
    .then(f)
    .catch((e: Json) => {
      log("warn", `cairn: ${what} failed: ${e?.message ?? e}`);
      return undefined;
    });
}
