// A CPU hog: busy processes beside an end-to-end run, so the run sees a machine whose cores are
// all taken (where users lose data: a daemon slow to start, a hook past its budget).
//
// Each hog is a separate `node -e` process spinning on the CPU; it exits by itself after
// `maxMs` (so a crashed test never leaves one behind) and is killed by `stop()`.

import { spawn } from 'node:child_process';
import os from 'node:os';

const SPIN = 'const end = Date.now() + Number(process.argv[1]); let x = 0; while (Date.now() < end) { for (let i = 0; i < 1e6; i++) x += i; }';

/**
 * Start `count` busy processes (default: one per core) for at most `maxMs`.
 * Returns `{ stop() }`; call it in a `finally` / `after`.
 */
export function startCpuHog({ count = os.availableParallelism?.() ?? os.cpus().length, maxMs = 10 * 60_000 } = {}) {
  const children = [];
  for (let i = 0; i < count; i++) {
    const child = spawn(process.execPath, ['-e', SPIN, String(maxMs)], { stdio: 'ignore' });
    child.on('error', () => {});
    children.push(child);
  }
  return {
    count,
    stop() {
      for (const child of children) {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
    },
  };
}

/** Run `f` with a CPU hog beside it; the hog stops whatever `f` does. */
export async function withCpuHog(f, options) {
  const hog = startCpuHog(options);
  try {
    return await f(hog);
  } finally {
    hog.stop();
  }
}
