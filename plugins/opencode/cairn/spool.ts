// Delivery of writes: to the daemon, else kept in the spool on disk, in order.
//
// `opencode run` can exit before a cold daemon is up (seconds on a busy machine): a write the
// daemon cannot take now goes to the spool at once, and once anything is spooled, this
// process's later writes follow it there until the daemon drained it, so none overtakes. The
// records and their bounds are cairn-core's (`spool.rs`; the values in rules.ts): one file per
// event, `<data dir>/spool/<uuid v7>.json`, drained in order by the daemon, each applied once
// by its id.

import { appendFileSync, existsSync, mkdirSync, readdirSync, renameSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import type { Daemon } from "./daemon.ts";
import { redactDeep } from "./private.ts";
import { SPOOL_DIR, SPOOL_DROPPED_FILE, SPOOL_MAX_BYTES, SPOOL_MAX_EVENTS, SPOOL_MAX_RECORD_BYTES, SPOOL_RECORD_VERSION } from "./rules.ts";
import { CALL_TIMEOUT, CallError, HEALTH_TIMEOUT, unrefSleep, within, type Dict, type Json, type Log } from "./util.ts";

/** How long writes kept in the spool wait in the background for a daemon that is slow to come up. */
const DAEMON_COLD_WAIT = 120_000;

export function makeSpool(daemon: Daemon, log: Log) {
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
  const spoolDir = () => join(daemon.dataDir(), SPOOL_DIR);
  /** Count one refused event the way the core does (a byte in `spool/dropped`); never throws. */
  function spoolDropped(why: string): false {
    try {
      mkdirSync(spoolDir(), { recursive: true, mode: 0o700 });
      appendFileSync(join(spoolDir(), SPOOL_DROPPED_FILE), "x");
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
    } catch (e: Json) {
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
    const url = await within(daemon.url(), HEALTH_TIMEOUT + 100);
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
          return route ? await daemon.post(url, route, request.args, timeout, id) : await daemon.post(url, "/v1/op", request, timeout, id);
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
  let catchingUp = false;
  /** In the background: wait for (or start) the daemon past the 2 s, have it drain the spool, then write live again. */
  function catchUp() {
    if (catchingUp) return;
    catchingUp = true;
    (async () => {
      const until = Date.now() + DAEMON_COLD_WAIT;
      while (spooling && Date.now() < until) {
        const url = daemon.configuredUrl() ?? daemon.daemonJsonUrl();
        if (url && (await daemon.healthy(url))) {
          daemon.found(url);
          if (await drained(url)) spooling = false;
        } else if (!daemon.configuredUrl() && daemon.autostart()) {
          daemon.spawnDaemon();
        }
        if (spooling) await unrefSleep(250);
      }
    })()
      .catch((e: Json) => log("warn", `cairn: waiting for the daemon failed: ${e?.message ?? e}`))
      .finally(() => {
        catchingUp = false;
      });
  }
  /** Poke the daemon's drain; true once this process's last spooled event is gone (applied, in order). */
  async function drained(url: string): Promise<boolean> {
    try {
      await daemon.post(url, "/spool/drain", undefined, CALL_TIMEOUT * 5);
    } catch (e) {
      // an older daemon that does not drain: the spool waits for a newer one; write live again
      if (e instanceof CallError && e.status === 404) return true;
      return false;
    }
    return !lastSpooled || !existsSync(join(spoolDir(), `${lastSpooled}.json`));
  }

  return { deliver };
}
