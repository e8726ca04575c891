// The real Gemini CLI (npm `@google/gemini-cli`, pinned) with what `cairn setup gemini
// --permissions` wrote into a sandbox HOME (the MCP server, its lifecycle hooks and GEMINI.md),
// driven by the scripted Gemini API of lib/gemini.mjs, and no cairn daemon running when the
// first session starts (the hooks and `cairn mcp` start one).
//
// `gemini mcp list` shows cairn connected; run 1: the model calls cairn's `mem_save` through
// MCP and the memory is stored, the session and its prompt are recorded (SessionStart,
// BeforeAgent, SessionEnd hooks); run 2: the first model request carries run 1's memory without
// the model asking (the SessionStart hook's context); `cairn history search` finds run 1's
// prompt in the archive (AfterAgent archived the chat), and the chat is unchanged by the read.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { assertUnchangedBy, walk } from './lib/agent-cli.mjs';
import { makeCairnSandbox, probeCairnSubcommand, stopDaemon } from './lib/cairn.mjs';
import { findGeminiBin, geminiHome, runGemini, startGeminiMock } from './lib/gemini.mjs';

const probe = probeCairnSubcommand('setup');
const gemini = findGeminiBin();
const skip = !probe.ok ? `cairn setup unavailable: ${probe.reason}` : !gemini.bin ? gemini.reason : false;
const TOKEN = 'GEMINIMEM5172';

test('cairn setup and Gemini CLI are available', { skip }, () => {});

describe('Gemini CLI + cairn setup gemini', { skip, timeout: 600_000 }, () => {
  let mock;
  let sandbox;
  let env;

  before(async () => {
    mock = await startGeminiMock({
      rules: [
        {
          // the user's own words: the hooks' context (earlier prompts among it) is left out
          when: (r) => r.lastUser.replace(/<hook_context>[\s\S]*?<\/hook_context>/g, '').includes('E2E-SAVE'),
          reply: { tool: /mem_save$/, args: { title: `Deploy target ${TOKEN}`, content: `We deploy the shop with fly.io (${TOKEN}).`, type: 'decision' } },
        },
      ],
    });
    sandbox = await makeCairnSandbox({ projectName: 'gemini-e2e-project' });
    ({ env } = geminiHome(sandbox, mock));
  });
  after(async () => {
    await mock?.close();
    sandbox?.cleanup();
  });

  function cairnJson(args) {
    const r = spawnSync(probe.bin, [...args, '--json'], { env: { ...env, CAIRN_AUTOSTART: 'never' }, encoding: 'utf8' });
    assert.equal(r.status, 0, `cairn ${args.join(' ')}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  }
  const run = (prompt) => runGemini(gemini.bin, ['-p', prompt], { cwd: sandbox.project, env });
  const dump = (r) =>
    `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr.slice(-4000)}\n--- mock\n${mock.requests.map((q) => q.lastUser.slice(0, 80)).join('\n')}`;

  test('setup wires the MCP server, the hooks and GEMINI.md, and `gemini mcp list` shows cairn connected', () => {
    const r = spawnSync(probe.bin, ['setup', 'gemini', '--permissions', '--json'], { env, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const report = JSON.parse(r.stdout);
    const step = (item) => report.steps.find((s) => s.item === item)?.status;
    assert.deepEqual([step('mcp.cairn'), step('hooks'), step('permissions')], ['created', 'created', 'created'], r.stdout);
    const settings = JSON.parse(readFileSync(path.join(sandbox.home, '.gemini', 'settings.json'), 'utf8'));
    assert.equal(settings.security.auth.selectedType, 'gemini-api-key', 'the user settings are kept');
    assert.match(settings.hooks.BeforeAgent[0].hooks[0].command, / hook --host=gemini BeforeAgent$/);
    const list = spawnSync(gemini.bin, ['mcp', 'list'], { env, encoding: 'utf8', cwd: sandbox.project, timeout: 120_000 });
    const out = `${list.stdout}${list.stderr}`;
    assert.match(out, /cairn.*Connected/i, out);
    // `gemini mcp list` started `cairn mcp`, which started a daemon: run 1 starts cold
    stopDaemon(sandbox.dataDir);
    const again = spawnSync(probe.bin, ['setup', 'gemini', '--permissions', '--json'], { env, encoding: 'utf8' });
    assert.equal(JSON.parse(again.stdout).changed, false, again.stdout);
  });

  test('run 1 (no daemon running): the model saves through MCP; the session and its prompt are recorded', async () => {
    assert.ok(!readdirSync('/proc').some((pid) => /^\d+$/.test(pid) && isDaemonOf(pid, sandbox.dataDir)), 'a daemon ran before the session');
    const r = await run(`E2E-SAVE remember where we deploy ${TOKEN}-prompt`);
    assert.equal(r.code, 0, dump(r));
    const response = mock.requests.flatMap((q) => q.responses).find((o) => /mem_save/.test(o.name));
    assert.ok(response, `the mem_save result never reached the model\n${dump(r)}`);
    const found = cairnJson(['search', TOKEN, '--project', 'gemini-e2e-project']);
    assert.ok(found.hits.some((h) => h.title === `Deploy target ${TOKEN}`), JSON.stringify(found));
    const sessions = cairnJson(['sessions', '--all-projects']).filter((s) => s.agent === 'gemini');
    assert.equal(sessions.length, 1, JSON.stringify(sessions));
    assert.equal(sessions[0].project, 'gemini-e2e-project');
    assert.ok(sessions[0].ended_at, `SessionEnd did not end the session: ${JSON.stringify(sessions[0])}`);
    const context = cairnJson(['context', '--project', 'gemini-e2e-project']);
    assert.ok(context.context.includes(`${TOKEN}-prompt`), `the prompt was not stored:\n${context.context}`);
    assert.ok(!context.context.includes('<hook_context>'), `cairn's own context was stored as the prompt:\n${context.context}`);
  });

  test("run 2: the first model request carries run 1's memory without asking", async () => {
    const before = mock.requests.length;
    const r = await run('What do we deploy with?');
    assert.equal(r.code, 0, dump(r));
    const first = mock.requests[before];
    assert.ok(first, dump(r));
    const body = JSON.stringify(first.body);
    assert.ok(body.includes(`Deploy target ${TOKEN}`), `run 1's memory is not in run 2's first request\n${body.slice(-6000)}`);
    assert.equal(mock.requests.slice(before).some((q) => q.responses.length), false, 'the model had to call a tool');
  });

  test('the archive finds run 1 in the chat, which the read left as it was', () => {
    const chats = walk(path.join(sandbox.home, '.gemini', 'tmp')).filter((f) => /\/chats\/session-.*\.jsonl?$/.test(f));
    assert.equal(chats.length, 2, chats.join('\n'));
    const found = assertUnchangedBy(chats, () => cairnJson(['history', 'search', `${TOKEN}-prompt`]));
    assert.ok(JSON.stringify(found).includes(`${TOKEN}-prompt`), JSON.stringify(found));
  });
});

/** Whether process `pid` is a `cairn serve` of `dataDir`. */
function isDaemonOf(pid, dataDir) {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    return argv.includes('serve') && (argv.includes(dataDir) || environ.includes(`CAIRN_DATA_DIR=${dataDir}`));
  } catch {
    return false;
  }
}
