// Running the real OpenCode binary (npm `opencode-ai`) offline against the mock model.
//
// Each sandbox gets its own HOME and XDG dirs, a global `opencode.json` that points `model`
// and `small_model` at the mock provider and registers the MCP servers the test asks for, and
// a git-initialised project dir to run in. The environment is built from a short allowlist
// (nothing from the developer's shell leaks in: no API keys, no OPENCODE_* settings) plus the
// switches that keep OpenCode from touching the network.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { initGitRepo } from './cairn.mjs';
import { makeTempDir } from './tmp.mjs';

const E2E_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NODE_MODULES = path.join(E2E_DIR, 'node_modules');

/** Provider and model ids written into the config; the model is "mock/mock-model". */
export const MOCK_PROVIDER_ID = 'mock';

/** Environment switches that keep OpenCode offline and quiet (see README.md). */
export const OFFLINE_ENV = Object.freeze({
  // no GET https://models.dev|models.opencode.ai/api.json (the binary embeds a snapshot)
  OPENCODE_DISABLE_MODELS_FETCH: '1',
  // no update check
  OPENCODE_DISABLE_AUTOUPDATE: '1',
  // no LSP server downloads (LSPs are off by default in 1.18, this is belt and braces)
  OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
  // OpenCode runs `npm install @opencode-ai/plugin` into every config dir in the background;
  // offline, npm fails at once instead of retrying for ~70 s
  npm_config_offline: 'true',
  npm_config_update_notifier: 'false',
  NO_COLOR: '1',
  TERM: 'dumb',
  CI: 'true',
});

/** Variables taken over from the parent environment; everything else is dropped. */
const INHERITED = ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'TMPDIR', 'USER', 'LOGNAME', 'SHELL'];

/** Process groups of every OpenCode run still alive, killed if the test process exits. */
const liveGroups = new Set();
process.once('exit', () => {
  for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
});

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false; // already gone
  }
}

/**
 * Path of the OpenCode binary installed by scripts/install-test-deps.sh: `$OPENCODE_BIN`, else
 * the binary opencode-ai's postinstall linked, else the platform package's own binary.
 */
export function findOpenCodeBin(env = process.env) {
  if (env.OPENCODE_BIN) return path.resolve(env.OPENCODE_BIN);
  const linked = path.join(NODE_MODULES, 'opencode-ai', 'bin', 'opencode.exe');
  if (existsSync(linked)) return linked;
  // postinstall skipped (e.g. --ignore-scripts): use a platform package directly, preferring
  // the plain build over -baseline/-musl ones, the way the postinstall would on glibc + AVX2.
  if (existsSync(NODE_MODULES)) {
    const prefix = `opencode-${process.platform === 'win32' ? 'windows' : process.platform}-${process.arch}`;
    const candidates = readdirSync(NODE_MODULES)
      .filter((d) => d === prefix || d.startsWith(`${prefix}-`))
      .sort((a, b) => a.length - b.length);
    for (const dir of candidates) {
      const bin = path.join(NODE_MODULES, dir, 'bin', process.platform === 'win32' ? 'opencode.exe' : 'opencode');
      if (existsSync(bin)) return bin;
    }
  }
  return null;
}

/** A clear message for when the binary is missing. */
export const OPENCODE_MISSING =
  'OpenCode binary not found under tests/e2e/node_modules: run scripts/install-test-deps.sh (or set OPENCODE_BIN)';

/**
 * The `opencode.json` for a sandbox.
 * @param {object} o
 * @param {string} o.baseURL the mock model's base URL (…/v1)
 * @param {string} [o.modelId]
 * @param {Record<string, object>} [o.mcp] MCP servers, e.g. `{cairn: {type: "local", command: [...]}}`
 * @param {object} [o.extra] merged over the top level (e.g. `plugin`, `agent`)
 */
export function buildOpenCodeConfig({ baseURL, modelId = 'mock-model', mcp = {}, extra = {} }) {
  const model = `${MOCK_PROVIDER_ID}/${modelId}`;
  const servers = {};
  for (const [name, server] of Object.entries(mcp)) {
    // OpenCode waits `timeout` ms for an MCP server's tools/list; its default (5 s) is short
    // for a debug build on a busy CI machine.
    servers[name] = { enabled: true, timeout: 60_000, ...server };
  }
  return {
    $schema: 'https://opencode.ai/config.json',
    model,
    // without it, title generation looks for a small model of a provider we do not have
    small_model: model,
    autoupdate: false,
    share: 'disabled',
    provider: {
      [MOCK_PROVIDER_ID]: {
        // bundled in the binary: nothing is downloaded
        npm: '@ai-sdk/openai-compatible',
        name: 'Mock model',
        options: { baseURL, apiKey: 'mock-key' },
        models: {
          [modelId]: {
            name: 'Mock model',
            tool_call: true,
            limit: { context: 128_000, output: 4_096 },
          },
        },
      },
    },
    mcp: servers,
    ...extra,
  };
}

/**
 * Create an isolated OpenCode sandbox.
 * @param {object} o
 * @param {{baseURL: string, modelId?: string}} o.mock the running mock model
 * @param {Record<string, object> | ((dirs: {root: string, home: string, project: string}) => Record<string, object>)} [o.mcp]
 *   MCP servers to register, or a function of the sandbox dirs returning them
 * @param {object} [o.extraConfig] merged into opencode.json
 * @param {Record<string, string>} [o.env] extra environment for OpenCode (and so its MCP children)
 * @param {string} [o.projectName] basename of the project dir OpenCode runs in
 */
export function createOpenCodeSandbox({ mock, mcp = {}, extraConfig = {}, env = {}, projectName = 'oc-e2e-project' }) {
  const bin = findOpenCodeBin();
  if (!bin) throw new Error(OPENCODE_MISSING);
  const tmp = makeTempDir('cairn-oc-');
  const root = tmp.path;
  const home = path.join(root, 'home');
  const xdg = {
    XDG_CONFIG_HOME: path.join(home, '.config'),
    XDG_DATA_HOME: path.join(home, '.local', 'share'),
    XDG_CACHE_HOME: path.join(home, '.cache'),
    XDG_STATE_HOME: path.join(home, '.local', 'state'),
  };
  for (const d of Object.values(xdg)) mkdirSync(d, { recursive: true });
  const configDir = path.join(xdg.XDG_CONFIG_HOME, 'opencode');
  mkdirSync(configDir, { recursive: true });
  const project = path.join(root, projectName);
  mkdirSync(project, { recursive: true });
  // a git repo: OpenCode stops its upward config search at the worktree root and derives a
  // stable project id from the first commit
  initGitRepo(project);

  const servers = typeof mcp === 'function' ? mcp({ root, home, project }) : mcp;
  const config = buildOpenCodeConfig({ baseURL: mock.baseURL, modelId: mock.modelId, mcp: servers, extra: extraConfig });
  const configPath = path.join(configDir, 'opencode.json');
  writeFileSync(configPath, `${JSON.stringify(config, null, 2)}\n`);

  const logDir = path.join(xdg.XDG_DATA_HOME, 'opencode', 'log');
  const baseEnv = {};
  for (const k of INHERITED) if (process.env[k] !== undefined) baseEnv[k] = process.env[k];
  const fullEnv = { ...baseEnv, HOME: home, ...xdg, ...OFFLINE_ENV, ...env };

  return {
    bin,
    root,
    home,
    project,
    configPath,
    config,
    env: fullEnv,
    /** Where OpenCode keeps its SQLite database in this sandbox. */
    dbPath: path.join(xdg.XDG_DATA_HOME, 'opencode', 'opencode.db'),
    /**
     * `opencode run <message>`; resolves with `{ code, signal, stdout, stderr, timedOut, ms }`
     * (it never rejects because OpenCode failed: the test asserts on the result).
     * @param {string|string[]} message
     * @param {{args?: string[], timeoutMs?: number, cwd?: string}} [opts] extra CLI args
     *   (e.g. ["--format", "json"], ["-c"]) go before the message.
     */
    async run(message, opts = {}) {
      const messages = Array.isArray(message) ? message : [message];
      const result = await runOpenCode(bin, ['run', ...(opts.args ?? []), ...messages], {
        cwd: opts.cwd ?? project,
        env: fullEnv,
        timeoutMs: opts.timeoutMs ?? defaultRunTimeout(),
      });
      // OpenCode logs to a file, not stderr; its warnings (e.g. `message="server unavailable"
      // key=<mcp server> status=failed`) are what explains a missing MCP tool
      result.warnings = logLines(logDir, /level=(WARN|ERROR)/);
      return result;
    },
    /** Lines of OpenCode's log files in this sandbox that match `re` (default: all). */
    logLines: (re) => logLines(logDir, re),
    cleanup: tmp.cleanup,
  };
}

export function defaultRunTimeout() {
  const v = Number(process.env.CAIRN_E2E_OPENCODE_TIMEOUT_MS);
  return Number.isFinite(v) && v > 0 ? v : 180_000;
}

/** Spawn OpenCode in its own process group; kill the whole group on timeout and at exit. */
export function runOpenCode(bin, args, { cwd, env, timeoutMs }) {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = spawn(bin, args, {
      cwd,
      env,
      detached: true, // own process group: MCP servers it starts die with it
      stdio: ['ignore', 'pipe', 'pipe'], // `opencode run` appends piped stdin to the message
    });
    liveGroups.add(child.pid);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    let timedOut = false;
    let hardKill;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid, 'SIGTERM');
      hardKill = setTimeout(() => killGroup(child.pid, 'SIGKILL'), 5_000);
    }, timeoutMs);
    let done = false;
    let exitInfo = null;
    let closeFallback;
    const finish = (code, signal, error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      clearTimeout(hardKill);
      clearTimeout(closeFallback);
      killGroup(child.pid, 'SIGKILL');
      liveGroups.delete(child.pid);
      resolve({
        code,
        signal,
        stdout,
        stderr,
        timedOut,
        error: error ? String(error.message ?? error) : undefined,
        ms: Date.now() - started,
      });
    };
    child.once('error', (err) => finish(null, null, err));
    child.once('exit', (code, signal) => {
      exitInfo = { code, signal };
      // anything OpenCode left behind in its group (say, an MCP server that ignored stdin EOF)
      // would keep our pipes open; kill it, then give the pipes a moment to drain
      killGroup(child.pid, 'SIGKILL');
      closeFallback = setTimeout(() => finish(code, signal), 5_000);
    });
    child.once('close', (code, signal) => finish(exitInfo?.code ?? code, exitInfo?.signal ?? signal));
  });
}

function logLines(dir, re) {
  if (!existsSync(dir)) return [];
  const lines = [];
  for (const f of readdirSync(dir).sort()) {
    for (const line of readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      if (line && (!re || re.test(line))) lines.push(line);
    }
  }
  return lines;
}

/** Parse `opencode run --format json` output (one JSON event per line; other lines skipped). */
export function parseJsonEvents(stdout) {
  const events = [];
  for (const line of stdout.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try {
      events.push(JSON.parse(t));
    } catch {
      // not an event line
    }
  }
  return events;
}

/** A short, readable dump of a run for assertion messages. */
export function describeRun(r) {
  const tail = (s, n = 2_000) => (s.length > n ? `…${s.slice(-n)}` : s);
  return [
    `exit=${r.code} signal=${r.signal} timedOut=${r.timedOut} ms=${r.ms}${r.error ? ` error=${r.error}` : ''}`,
    `--- stdout ---\n${tail(r.stdout)}`,
    `--- stderr ---\n${tail(r.stderr)}`,
    ...(r.warnings?.length ? [`--- OpenCode log warnings ---\n${tail(r.warnings.join('\n'))}`] : []),
  ].join('\n');
}

/** OpenCode's `mcp` config for cairn's agent tools (`cairn mcp --tools=agent`) on a sandbox's data dir. */
export function cairnMcpConfig(bin, cairn) {
  return {
    cairn: {
      type: 'local',
      command: [bin, 'mcp', '--tools=agent'],
      environment: {
        CAIRN_DATA_DIR: cairn.dataDir,
        CAIRN_PORT: cairn.env.CAIRN_PORT,
        NO_COLOR: '1',
        RUST_BACKTRACE: '1',
      },
    },
  };
}

/** A run's dump with every request the scripted model received and the tool results in them
 * (the first `chars` characters of each). */
export function describeRunWithMock(r, mock, chars) {
  const requests = mock.requests
    .map((q) => `${q.seq} ${q.method} ${q.path} ${q.kind}${q.toolResult ? ` ${q.toolResult.name}: ${q.toolResult.text.slice(0, chars)}` : ''}`)
    .join('\n');
  return `${describeRun(r)}\n--- mock requests ---\n${requests}`;
}

/** The `tool_use` parts of a run's JSON events for `tool` (OpenCode's name, e.g. `cairn_mem_save`), in order. */
export function toolUseParts(stdout, tool) {
  return parseJsonEvents(stdout)
    .filter((e) => e.type === 'tool_use' && e.part?.tool === tool)
    .map((e) => e.part);
}
