// `cairn setup opencode` as the real OpenCode sees it: after setup into a sandbox HOME,
// OpenCode's resolved config lists the installed plugin file (from its global plugin dir) and
// the cairn MCP server, which connects; engram's plugin, once disabled, is no longer loaded;
// `--uninstall` takes both away again. What the plugin does is tested with the plugin itself.
// `cairn setup claude-code` as the real Claude Code CLI sees it: `claude mcp list` / `get` under
// a sandbox HOME and CLAUDE_CONFIG_DIR list cairn at user scope, connected, and no more after
// `--uninstall`.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { startAnthropicMock } from './lib/anthropic-mock.mjs';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { findClaudeBin, makeClaudeSandbox, runClaude } from './lib/claude.mjs';
import { OPENCODE_MISSING, createOpenCodeSandbox, findOpenCodeBin } from './lib/opencode.mjs';

const probe = probeCairnSubcommand('setup');
const skip = probe.ok ? false : `cairn setup unavailable: ${probe.reason}`;

test('cairn setup is available', { skip }, () => {});

describe('cairn setup opencode + real OpenCode', { skip, timeout: 300_000 }, () => {
  let cairn;
  let oc;
  let configDir;

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    cairn = await makeCairnSandbox({ git: false });
    oc = createOpenCodeSandbox({
      // no model is called: `debug config` and `mcp list` only
      mock: { baseURL: 'http://127.0.0.1:9/v1' },
      // what `cairn mcp` started by OpenCode inherits: the sandbox's data dir and port
      env: { CAIRN_DATA_DIR: cairn.dataDir, CAIRN_PORT: cairn.env.CAIRN_PORT },
    });
    configDir = path.dirname(oc.configPath);
  });
  after(() => {
    oc?.cleanup();
    cairn?.cleanup();
  });

  const setup = (...args) => {
    const r = spawnSync(probe.bin, ['setup', 'opencode', ...args], { env: oc.env, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `cairn setup opencode ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`);
    return r;
  };
  const opencode = (...args) => {
    const r = spawnSync(oc.bin, args, { cwd: oc.project, env: oc.env, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `opencode ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  };
  /** OpenCode's resolved config (`opencode debug config` prints it as JSON). */
  const resolvedConfig = () => {
    const out = opencode('debug', 'config');
    return JSON.parse(out.slice(out.indexOf('{')));
  };
  const pluginUrl = (...parts) => pathToFileURL(path.join(configDir, ...parts)).href;

  test('OpenCode loads the installed plugin and connects the cairn MCP server', async () => {
    mkdirSync(path.join(configDir, 'plugins'), { recursive: true });
    writeFileSync(path.join(configDir, 'plugins', 'engram.ts'), 'export const Engram = async () => ({});\n');
    assert.ok(resolvedConfig().plugin.includes(pluginUrl('plugins', 'engram.ts')), 'the engram stand-in is loaded before setup');

    const r = setup('--disable-engram');
    const plugin = readFileSync(path.join(configDir, 'plugins', 'cairn.ts'), 'utf8');
    assert.ok(plugin.includes(`const BAKED_CAIRN_BIN: string | null = ${JSON.stringify(probe.bin)};`), `binary not baked in:\n${r.stdout}`);

    const config = resolvedConfig();
    assert.ok(config.plugin.includes(pluginUrl('plugins', 'cairn.ts')), `plugin not loaded: ${JSON.stringify(config.plugin)}`);
    // its modules sit beside it, where OpenCode does not look for plugins
    assert.ok(existsSync(path.join(configDir, 'plugins', 'cairn', 'daemon.ts')), 'the plugin\'s modules are not installed');
    assert.ok(!config.plugin.some((p) => p.includes('/plugins/cairn/')), `a module loaded as a plugin: ${JSON.stringify(config.plugin)}`);
    assert.ok(!config.plugin.some((p) => p.includes('engram')), `engram still loaded: ${JSON.stringify(config.plugin)}`);
    assert.equal(config.mcp.cairn.type, 'local');
    assert.deepEqual(config.mcp.cairn.command, [probe.bin, 'mcp', '--tools=agent', '--host=opencode']);
    assert.equal(config.mcp.cairn.enabled, true);
    // the sandbox's own settings are still there
    assert.equal(config.model, oc.config.model);

    const list = opencode('mcp', 'list');
    assert.match(list, /cairn\s+\S*\s*connected/, `cairn not connected:\n${list}`);
  });

  test('a second setup changes nothing; --uninstall takes cairn out of OpenCode', () => {
    const again = setup('--json');
    assert.equal(JSON.parse(again.stdout).changed, false, again.stdout);

    setup('--uninstall');
    assert.ok(!existsSync(path.join(configDir, 'plugins', 'cairn.ts')));
    assert.ok(!existsSync(path.join(configDir, 'plugins', 'cairn', 'daemon.ts')), 'a module left behind');
    const config = resolvedConfig();
    assert.ok(!config.plugin?.some((p) => p.includes('cairn.ts')), `plugin still loaded: ${JSON.stringify(config.plugin)}`);
    assert.equal(config.mcp?.cairn, undefined);
    assert.equal(config.model, oc.config.model);
  });
});

const claude = findClaudeBin();
const skipClaude = skip || (!claude.bin && claude.reason);

describe('cairn setup claude-code + real Claude Code', { skip: skipClaude, timeout: 300_000 }, () => {
  const token = `setupdeploy${randomUUID().slice(0, 8)}`;
  const sessionId = randomUUID();
  let sandbox;
  let env;
  let mock;
  let project;

  before(async () => {
    mock = await startAnthropicMock({
      rules: [{ when: (r) => r.userText.includes('E2E-SETUP'), reply: { tool: 'mcp__cairn__mem_save', input: { title: `Setup note ${token}`, content: 'Saved through cairn setup claude-code.', type: 'discovery' } } }],
    });
    // CLAUDE_CONFIG_DIR is not ~/.claude, so setup must follow it.
    sandbox = await makeClaudeSandbox({ mock, projectName: 'cc-setup-project', configDirName: '.claude-config' });
    ({ env, project } = sandbox);
  });
  after(async () => {
    await mock?.close();
    sandbox?.cleanup();
  });

  const run = (bin, args) => {
    const r = spawnSync(bin, args, { cwd: project, env, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `${path.basename(bin)} ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`);
    return r.stdout;
  };
  const cairnJson = (args) => JSON.parse(run(probe.bin, [...args, '--json']));

  test('claude mcp sees cairn at user scope, connected', () => {
    run(probe.bin, ['setup', 'claude-code', '--permissions']);
    const list = run(claude.bin, ['mcp', 'list']);
    assert.match(list, /cairn: .*mcp --tools=agent --host=claude-code - . Connected/, list);
    const get = run(claude.bin, ['mcp', 'get', 'cairn']);
    assert.match(get, /Scope: User config/, get);
    assert.ok(get.includes(`Command: ${probe.bin}`), get);
    assert.equal(cairnJson(['setup', 'claude-code']).changed, false);
  });

  test("a session runs setup's hooks and, allowed by its permission rule, cairn's tool", async () => {
    const r = await runClaude(claude.bin, ['-p', `E2E-SETUP note the ${token}`, '--session-id', sessionId, '--model', 'claude-mock-1'], { cwd: project, env });
    const dump = `exit ${r.code}\n${r.stdout}\n${r.stderr}\n--- mock\n${mock.requests.map((q) => `${q.seq} ${q.path} ${q.userText.slice(0, 80)}`).join('\n')}`;
    assert.equal(r.code, 0, dump);
    // SessionStart registered the session, SessionEnd ended it
    const session = cairnJson(['sessions', '--all-projects']).find((s) => s.id === sessionId);
    assert.ok(session?.ended_at, `session not registered and ended by the hooks: ${JSON.stringify(session)}\n${dump}`);
    // the tool ran without a prompt (mcp__cairn__* allowed) and PreToolUse gave it the session
    const found = cairnJson(['search', `Setup note ${token}`, '--project', 'cc-setup-project']);
    const hit = found.hits.find((h) => h.title === `Setup note ${token}`);
    assert.ok(hit, `mem_save did not store the memory: ${JSON.stringify(found)}\n${dump}`);
    assert.equal(hit.session_id, sessionId, JSON.stringify(hit));
    assert.deepEqual(mock.connects, [], 'Claude Code tried to reach the internet');
  });

  test('--uninstall takes cairn out of Claude Code', () => {
    run(probe.bin, ['setup', 'claude-code', '--uninstall']);
    assert.doesNotMatch(run(claude.bin, ['mcp', 'list']), /cairn/);
  });
});
