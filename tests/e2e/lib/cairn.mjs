// Finding the cairn binary, probing what it supports, and giving each test its own data dir.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTempDir } from './tmp.mjs';

/** The repository root (tests/e2e/lib -> ../../..). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

function isExecutableFile(p) {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/**
 * The cairn binary: `$CAIRN_BIN`, else `<repo>/target/debug/cairn`, else
 * `<repo>/target/release/cairn`. Returns `{ bin, source }` or `{ bin: null, reason }`.
 */
export function findCairnBin(env = process.env) {
  if (env.CAIRN_BIN) {
    const bin = path.resolve(env.CAIRN_BIN);
    if (isExecutableFile(bin)) return { bin, source: 'CAIRN_BIN' };
    return { bin: null, reason: `CAIRN_BIN=${env.CAIRN_BIN} is not a file` };
  }
  for (const profile of ['debug', 'release']) {
    const bin = path.join(REPO_ROOT, 'target', profile, 'cairn');
    if (isExecutableFile(bin)) return { bin, source: `target/${profile}` };
  }
  return {
    bin: null,
    reason: 'no cairn binary: set CAIRN_BIN or run `cargo build -p cairn` (looked in target/debug and target/release)',
  };
}

/**
 * Whether `cairn <subcommand> --help` works. A binary without the subcommand exits non-zero;
 * a stub binary that ignores its arguments exits 0 but prints nothing, so a usable subcommand
 * must also print its usage. Returns `{ ok: true, bin }` or `{ ok: false, reason }`.
 */
export function probeCairnSubcommand(subcommand, env = process.env) {
  const found = findCairnBin(env);
  if (!found.bin) return { ok: false, reason: found.reason };
  const r = spawnSync(found.bin, [subcommand, '--help'], {
    encoding: 'utf8',
    timeout: 15_000,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  const where = `${found.bin} (${found.source})`;
  if (r.error) return { ok: false, reason: `\`cairn ${subcommand} --help\` failed to run: ${r.error.message} [${where}]` };
  if (r.status !== 0) {
    return { ok: false, reason: `\`cairn ${subcommand} --help\` exited ${r.status ?? r.signal}: cairn has no \`${subcommand}\` command yet [${where}]` };
  }
  const out = `${r.stdout}${r.stderr}`;
  if (!/usage/i.test(out) && !out.includes(subcommand)) {
    return { ok: false, reason: `\`cairn ${subcommand} --help\` exited 0 but printed no usage (stub binary?) [${where}]` };
  }
  return { ok: true, bin: found.bin, source: found.source };
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A fresh sandbox for one cairn process tree: data dir, HOME/XDG dirs and a project dir
 * (a git repository named `projectName`, so project detection is deterministic). Its `env`
 * also gives cairn a port of its own (`CAIRN_PORT`), so a `cairn mcp` that looks for a
 * daemon can never reach a developer's real `cairn serve` on the default port.
 */
export async function makeCairnSandbox({ projectName = 'cairn-e2e-project', git = true } = {}) {
  const tmp = makeTempDir('cairn-e2e-');
  const dataDir = path.join(tmp.path, 'cairn-data');
  const home = path.join(tmp.path, 'home');
  const project = path.join(tmp.path, projectName);
  for (const d of [dataDir, home, project]) mkdirSync(d, { recursive: true });
  if (git) initGitRepo(project);
  const env = {
    CAIRN_DATA_DIR: dataDir,
    CAIRN_PORT: String(await freePort()),
    HOME: home,
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
    NO_COLOR: '1',
  };
  const cleanup = () => {
    // `cairn mcp` starts a daemon for its data dir when none runs, detached so it outlives
    // the agent; a test's daemon must not outlive the test.
    stopDaemon(dataDir);
    tmp.cleanup();
  };
  return { root: tmp.path, dataDir, home, project, env, cleanup };
}

/**
 * Stop every cairn process serving `dataDir`: the one in `<dataDir>/daemon.json`, and any
 * still starting (spawned by `cairn mcp` a moment ago, so not yet recorded) found by its
 * `--data-dir` argument in /proc. SIGTERM, then SIGKILL after 3 s.
 */
export function stopDaemon(dataDir) {
  const pids = new Set(daemonPidsFor(dataDir));
  try {
    const pid = JSON.parse(readFileSync(path.join(dataDir, 'daemon.json'), 'utf8')).pid;
    if (Number.isInteger(pid) && pid > 1) pids.add(pid);
  } catch {
    // no daemon recorded
  }
  const alive = (pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  const signal = (pid, sig) => {
    try {
      process.kill(pid, sig);
    } catch {
      // gone
    }
  };
  for (const pid of pids) signal(pid, 'SIGTERM');
  const deadline = Date.now() + 3_000;
  while ([...pids].some(alive) && Date.now() < deadline) spawnSync('sleep', ['0.05']);
  for (const pid of pids) if (alive(pid)) signal(pid, 'SIGKILL');
}

/**
 * Pids of `cairn serve` processes for `dataDir` (Linux /proc; empty elsewhere): named by
 * `--data-dir`, or, as the OpenCode plugin starts them, by `CAIRN_DATA_DIR` in their environment.
 */
function daemonPidsFor(dataDir) {
  let entries;
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const pids = [];
  for (const name of entries) {
    if (!/^[0-9]+$/.test(name)) continue;
    let argv;
    try {
      argv = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!argv.includes('serve')) continue;
    const at = argv.indexOf('--data-dir');
    if ((at >= 0 && argv[at + 1] === dataDir) || envDataDir(name) === dataDir) pids.push(Number(name));
  }
  return pids;
}

/** `CAIRN_DATA_DIR` in the environment of process `pid`, if readable. */
function envDataDir(pid) {
  try {
    const vars = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    const found = vars.find((v) => v.startsWith('CAIRN_DATA_DIR='));
    return found ? found.slice('CAIRN_DATA_DIR='.length) : null;
  } catch {
    return null;
  }
}

/**
 * `cairn serve --port 0 --model-install never` for a sandbox's data dir. Resolves with
 * `{ child, base }` once `daemon.json` names an address whose `/health` answers; rejects with
 * the daemon's stderr when it exits or does not come up within `timeoutMs`.
 */
export async function startCairnDaemon(bin, sandbox, { env = {}, timeoutMs = 30_000 } = {}) {
  const child = spawn(bin, ['serve', '--port', '0', '--model-install', 'never'], {
    env: { ...process.env, ...sandbox.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const record = path.join(sandbox.dataDir, 'daemon.json');
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (existsSync(record)) {
      try {
        const { addr } = JSON.parse(readFileSync(record, 'utf8'));
        const base = `http://${addr}`;
        const health = await fetch(`${base}/health`).catch(() => null);
        if (health?.ok) return { child, base };
      } catch {
        // written as we read it
      }
    }
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`cairn serve did not start: ${stderr}`);
}

/** `git init` + one empty commit, quietly; does nothing if git is missing. */
export function initGitRepo(dir) {
  if (existsSync(path.join(dir, '.git'))) return true;
  const gitEnv = {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_AUTHOR_NAME: 'e2e',
    GIT_AUTHOR_EMAIL: 'e2e@example.invalid',
    GIT_COMMITTER_NAME: 'e2e',
    GIT_COMMITTER_EMAIL: 'e2e@example.invalid',
  };
  const run = (args) => spawnSync('git', args, { cwd: dir, env: gitEnv, stdio: 'ignore', timeout: 15_000 });
  const init = run(['init', '-q']);
  if (init.error || init.status !== 0) return false;
  run(['commit', '-q', '--allow-empty', '-m', 'init']);
  return true;
}

/**
 * Start `cairn mcp [...args]` as a child process and connect the official MCP SDK client to it
 * over stdio. Returns `{ client, transport, pid, stderr(), close() }`; `close()` ends the
 * session (stdin EOF, then SIGTERM/SIGKILL from the SDK) and makes sure the process is gone.
 * @param {object} o
 * @param {string} o.bin the cairn binary
 * @param {string[]} [o.args] arguments after `mcp`, e.g. ["--tools=agent"]
 * @param {{env: Record<string,string>, project: string}} o.sandbox from makeCairnSandbox()
 */
export async function connectCairnMcp({ bin, args = [], sandbox, clientName = 'cairn-e2e', connectTimeoutMs = 30_000 }) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  const transport = new StdioClientTransport({
    command: bin,
    args: ['mcp', ...args],
    // the SDK adds PATH, HOME, USER, SHELL, TERM, LOGNAME from our env; ours override them
    env: { RUST_BACKTRACE: '1', ...sandbox.env },
    cwd: sandbox.project,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.setEncoding('utf8');
  transport.stderr?.on('data', (d) => {
    stderr += d;
  });
  const client = new Client({ name: clientName, version: '0.0.0' });
  try {
    await client.connect(transport, { timeout: connectTimeoutMs });
  } catch (err) {
    const pid = transport.pid;
    await transport.close().catch(() => {});
    if (pid) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    throw new Error(`${['cairn', 'mcp', ...args].join(' ')}: MCP initialize failed: ${err?.message ?? err}\n--- cairn stderr ---\n${stderr.slice(-3_000)}`);
  }
  const pid = transport.pid;
  return {
    client,
    transport,
    pid,
    stderr: () => stderr,
    /** Whether the server process is still running. */
    alive() {
      if (!pid) return false;
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    },
    async close() {
      try {
        await client.close();
      } finally {
        if (pid) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone, as it should be
          }
        }
      }
    },
  };
}

/** The text of an MCP tool result (all text content joined). */
export function resultText(result) {
  return (result?.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/**
 * The memory id in a `mem_save` answer: the `id` of its JSON envelope (engram's shape), else
 * the first `#123` or `"id": 123` in its text. Returns a number, or null.
 */
export function savedId(text) {
  try {
    const obj = JSON.parse(text);
    const id = obj?.id ?? obj?.observation?.id ?? obj?.result?.id;
    if (id !== undefined && id !== null && /^\d+$/.test(String(id))) return Number(id);
  } catch {
    // not JSON: look in the text
  }
  const m = /#(\d+)\b/.exec(text) ?? /"id"\s*:\s*(\d+)/.exec(text) ?? /\bid\b\D{0,4}(\d+)/i.exec(text);
  return m ? Number(m[1]) : null;
}
