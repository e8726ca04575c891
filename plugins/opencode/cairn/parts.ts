// The parts of one plugin instance the hooks work with, and the guard every hook runs in.

import type { Facts } from "./facts.ts";
import type { Link } from "./link.ts";
import type { Memory } from "./memory.ts";
import type { Meter } from "./meter.ts";
import type { Sessions } from "./sessions.ts";
import type { Json, Log } from "./util.ts";

export type Parts = {
  client: Json;
  directory: string;
  log: Log;
  link: Link;
  facts: Facts;
  sessions: Sessions;
  meter: Meter;
  memory: Memory;
};

/** A hook that never throws into OpenCode: a failure is one log line. */
export const guard =
  <A extends Json[]>(log: Log, name: string, f: (...a: A) => Promise<void> | void) =>
  async (...a: A): Promise<void> => {
    try {
      await f(...a);
    } catch (e: Json) {
      log("error", `cairn: ${name} hook failed: ${e?.message ?? e}`);
    }
  };
