// Wiring cairn into a sandboxed OpenCode the way a user does: `cairn setup opencode`, which
// writes plugins/opencode/cairn.ts (with the binary's path baked in) into OpenCode's global
// plugin dir and registers `mcp.cairn` in its global config.

import { spawnSync } from 'node:child_process';

/**
 * Run `cairn setup opencode --json` with the sandbox's HOME/XDG dirs. Returns
 * `{ installed: [item...], result, output }`; throws with setup's output when it fails.
 */
export function installWithSetup({ bin, env }) {
  const r = spawnSync(bin, ['setup', 'opencode', '--json'], { env, encoding: 'utf8', timeout: 60_000 });
  const output = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  if (r.error || r.status !== 0) throw new Error(`cairn setup opencode failed (${r.error?.message ?? r.status}):\n${output}`);
  const result = JSON.parse(r.stdout);
  const installed = result.steps.filter((s) => s.status === 'created' || s.status === 'updated').map((s) => s.item);
  return { installed, result, output };
}
