// What the e2e of agent CLIs (Codex CLI, Gemini CLI) share: running one in its own process
// group, and checking that reading the host's session files left them as they were.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * One `<bin> <args>` in `cwd`, in its own process group (killed with what it started when it
 * ends or after `timeoutMs`); resolves `{ code, stdout, stderr }` and never rejects.
 */
export function runInProcessGroup(bin, args, { cwd, env, timeoutMs }) {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const killGroup = () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(killGroup, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      killGroup();
      resolve({ code, stdout, stderr });
    });
  });
}

/** Every file under `dir` (none when it does not exist). */
export function walk(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)],
  );
}

/** Run `read`, then assert each of `files` has the bytes and time it had before. */
export function assertUnchangedBy(files, read) {
  const before = files.map((f) => [readFileSync(f), statSync(f).mtimeMs]);
  const result = read();
  files.forEach((f, i) => {
    assert.ok(readFileSync(f).equals(before[i][0]) && statSync(f).mtimeMs === before[i][1], `${f} changed`);
  });
  return result;
}
