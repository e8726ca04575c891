// The real Claude Code CLI in a sandbox: finding the binary, a temp HOME and CLAUDE_CONFIG_DIR
// next to a cairn sandbox, an environment built from an allowlist that sends every model
// request to the scripted Messages API (lib/anthropic-mock.mjs), and one `claude` run.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, makeCairnSandbox } from './cairn.mjs';

/** cairn's Claude Code plugin hooks (`plugins/claude-code/hooks/hooks.json`) with `cairn`
 * replaced by the binary under test, for a sandbox's settings.json. */
export function pluginHooks(cairnBin) {
  const file = path.join(REPO_ROOT, 'plugins', 'claude-code', 'hooks', 'hooks.json');
  const { hooks } = JSON.parse(readFileSync(file, 'utf8'));
  for (const groups of Object.values(hooks)) {
    for (const group of groups) {
      for (const hook of group.hooks) hook.command = hook.command.replace(/^cairn /, `"${cairnBin}" `);
    }
  }
  return hooks;
}

/** Claude Code: `$CLAUDE_BIN`, else the npm package's binary (not the 500-byte stub). */
export function findClaudeBin(env = process.env) {
  const bin = env.CLAUDE_BIN ?? path.join(REPO_ROOT, 'tests', 'e2e', 'node_modules', '.bin', 'claude');
  if (!existsSync(bin)) return { bin: null, reason: `no Claude Code at ${bin}: run scripts/install-test-deps.sh node` };
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0 || !/Claude Code/.test(r.stdout)) {
    return { bin: null, reason: `${bin} --version failed (${r.status}): ${r.stdout}${r.stderr}`.trim() };
  }
  return { bin, version: r.stdout.trim() };
}

/**
 * A cairn sandbox (see `makeCairnSandbox`) plus Claude Code's config dir
 * (`<home>/<configDirName>`, onboarding done, `settings` written to its settings.json when
 * given) and `env`: an allowlist (nothing of the developer's shell: no API keys, CAIRN_*, or
 * real ~/.claude) pointing Claude Code at `mock`, with every outbound HTTPS attempt sent to
 * the mock's CONNECT trap. `project` is the real path (Claude Code keys projects by it).
 * `cleanup()` stops the sandbox's daemon and removes its dirs.
 */
export async function makeClaudeSandbox({ mock, projectName, configDirName = '.claude', settings } = {}) {
  const cairn = await makeCairnSandbox({ projectName });
  const config = path.join(cairn.home, configDirName);
  const tmp = path.join(cairn.root, 'tmp');
  mkdirSync(config, { recursive: true });
  mkdirSync(tmp, { recursive: true });
  if (settings) writeFileSync(path.join(config, 'settings.json'), JSON.stringify(settings, null, 1));
  writeFileSync(path.join(config, '.claude.json'), JSON.stringify({ hasCompletedOnboarding: true }));
  const env = claudeEnv({ config, tmp, mock, base: cairn.env });
  return { cairn, config, env, project: realpathSync(cairn.project), cleanup: () => cairn.cleanup() };
}

/**
 * The environment of a sandboxed `claude`: an allowlist (PATH, then `base`: the sandbox's HOME
 * and cairn variables) with Claude Code's config and temp dirs, every model request sent to
 * `mock`, and every outbound HTTPS attempt to the mock's CONNECT trap.
 */
export function claudeEnv({ config, tmp, mock, base = {} }) {
  return {
    PATH: process.env.PATH,
    ...base,
    CLAUDE_CONFIG_DIR: config,
    CLAUDE_CODE_TMPDIR: tmp,
    TMPDIR: tmp,
    ANTHROPIC_BASE_URL: mock.url,
    ANTHROPIC_API_KEY: 'sk-ant-mock-key',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_AUTO_COMPACT: '1',
    HTTPS_PROXY: mock.url,
    HTTP_PROXY: mock.url,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
  };
}

/**
 * One `claude <args>` in `cwd`, killed after `timeoutMs`; resolves `{ code, stdout, stderr }`
 * and never rejects because Claude Code failed.
 */
export function runClaude(bin, args, { cwd, env, timeoutMs = 120_000 }) {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
