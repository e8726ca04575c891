// The real Codex CLI (npm `@openai/codex`, pinned) with what `cairn setup codex --permissions`
// wrote into a sandbox HOME, driven by the scripted Responses API of lib/codex.mjs, and no
// cairn daemon running when the first session starts (the hooks and `cairn mcp` start one).
//
// `codex mcp list` shows cairn; run 1: the model calls cairn's `mem_save` through MCP and the
// memory is stored, the session and its prompt are recorded (SessionStart, UserPromptSubmit,
// SessionEnd hooks); run 2: the first model request carries run 1's memory without the model
// asking (the SessionStart hook's context); `cairn history search` finds run 1's prompt in the
// archive (the Stop hook archived the rollout), and the rollout is unchanged by the read.
//
// Codex runs a hook only once the user has trusted it (`/hooks` in its TUI); `codex exec`
// cannot ask. The suite runs twice: with `--dangerously-bypass-hook-trust`, which stands for
// that trust (every hook runs), and without it, as a new user's first sessions are (no hook
// runs): there the memory comes back in `cairn mcp`'s instructions and the rollout is
// archived when Codex closes the MCP server, which then records the session and its prompt in
// the memory store as the hooks would have.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { assertUnchangedBy, walk } from './lib/agent-cli.mjs';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { codexHome, findCodexBin, runCodex, startResponsesMock } from './lib/codex.mjs';

const probe = probeCairnSubcommand('setup');
const codex = findCodexBin();
const skip = !probe.ok ? `cairn setup unavailable: ${probe.reason}` : !codex.bin ? codex.reason : false;
const TOKEN = 'CODEXMEM4821';

test('cairn setup and Codex CLI are available', { skip }, () => {});

for (const trusted of [true, false]) {
  describe(`Codex CLI + cairn setup codex, hooks ${trusted ? 'trusted' : 'not trusted yet'}`, { skip, timeout: 600_000 }, () => {
    let mock;
    let sandbox;
    let env;

    before(async () => {
      mock = await startResponsesMock({
        rules: [
          {
            when: (r) => r.lastUser.includes('E2E-SAVE') && !r.outputs.length,
            reply: { tool: 'mcp__cairn__mem_save', args: { title: `Deploy target ${TOKEN}`, content: `We deploy the shop with fly.io (${TOKEN}).`, type: 'decision' } },
          },
        ],
      });
      sandbox = await makeCairnSandbox({ projectName: 'codex-e2e-project' });
      // (a fresh sandbox per suite: nothing of the other suite's store or rollouts)
      ({ env } = codexHome(sandbox, mock));
    });
    after(async () => {
      await mock?.close();
      sandbox?.cleanup();
    });

    const cairn = (args) => spawnSync(probe.bin, args, { env: { ...env, CAIRN_AUTOSTART: 'never' }, encoding: 'utf8' });
    function cairnJson(args) {
      const r = cairn([...args, '--json']);
      assert.equal(r.status, 0, `cairn ${args.join(' ')}: ${r.stderr}`);
      return JSON.parse(r.stdout);
    }
    const trust = trusted ? ['--dangerously-bypass-hook-trust'] : [];
    const exec = (prompt) =>
      runCodex(codex.bin, ['exec', ...trust, '--skip-git-repo-check', prompt], { cwd: sandbox.project, env });
    const dump = (r) =>
      `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr.slice(-4000)}\n--- mock\n${mock.requests.map((q) => q.lastUser.slice(0, 80)).join('\n')}`;

    test('setup wires the MCP server and the hooks, and `codex mcp list` shows cairn', () => {
      const r = spawnSync(probe.bin, ['setup', 'codex', '--permissions', '--json'], { env, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      const report = JSON.parse(r.stdout);
      const step = (item) => report.steps.find((s) => s.item === item)?.status;
      assert.deepEqual([step('mcp.cairn'), step('hooks'), step('permissions')], ['created', 'created', 'created'], r.stdout);
      const hooks = JSON.parse(readFileSync(path.join(sandbox.home, '.codex', 'hooks.json'), 'utf8')).hooks;
      assert.match(hooks.SessionStart[0].hooks[0].command, / hook --host=codex SessionStart$/);
      const list = spawnSync(codex.bin, ['mcp', 'list'], { env, encoding: 'utf8', cwd: sandbox.project });
      assert.equal(list.status, 0, list.stderr);
      assert.match(list.stdout, /^cairn\s/m, list.stdout);
      assert.ok(list.stdout.includes(probe.bin), list.stdout);
      const again = spawnSync(probe.bin, ['setup', 'codex', '--permissions', '--json'], { env, encoding: 'utf8' });
      assert.equal(JSON.parse(again.stdout).changed, false, again.stdout);
      // Codex clears an MCP server's environment: setup passed on the store the hooks use
      const config = readFileSync(path.join(sandbox.home, '.codex', 'config.toml'), 'utf8');
      assert.ok(config.includes(`CAIRN_DATA_DIR = "${sandbox.dataDir}"`), config);
    });

    test('run 1 (no daemon running): the model saves through MCP; the session and its prompt are recorded', async () => {
      assert.throws(() => readFileSync(path.join(sandbox.dataDir, 'daemon.json')), 'a daemon ran before the session');
      const r = await exec(`E2E-SAVE remember where we deploy ${TOKEN}-prompt`);
      assert.equal(r.code, 0, dump(r));
      const output = mock.requests.flatMap((q) => q.outputs).find((o) => /saved|#\d+|Deploy target/i.test(o.text));
      assert.ok(output, `the mem_save result never reached the model\n${dump(r)}`);
      const found = cairnJson(['search', TOKEN, '--project', 'codex-e2e-project']);
      assert.ok(found.hits.some((h) => h.title === `Deploy target ${TOKEN}`), JSON.stringify(found));
      if (trusted) assertRecorded([1]);
    });

    /** Run 1's session and its prompt (once) in the memory store, of `counts` Codex sessions. */
    function assertRecorded(counts) {
      const sessions = cairnJson(['sessions', '--all-projects']).filter((s) => s.agent === 'codex');
      assert.ok(counts.includes(sessions.length), JSON.stringify(sessions));
      for (const session of sessions) {
        assert.equal(session.project, 'codex-e2e-project');
        assert.ok(session.ended_at, `the session was not ended: ${JSON.stringify(session)}`);
      }
      const context = cairnJson(['context', '--project', 'codex-e2e-project']);
      assert.ok(context.context.includes(`${TOKEN}-prompt`), `the prompt was not stored:\n${context.context}`);
      const recentPrompts = context.context.split('### Recent prompts')[1]?.split('\n### ')[0] ?? '';
      assert.equal(recentPrompts.split(`${TOKEN}-prompt`).length - 1, 1, `the prompt is stored once:\n${context.context}`);
    }

    test("run 2: the first model request carries run 1's memory without asking", async () => {
      const before = mock.requests.length;
      const r = await exec('What do we deploy with?');
      assert.equal(r.code, 0, dump(r));
      const first = mock.requests[before];
      assert.ok(first, dump(r));
      const body = JSON.stringify(first.body);
      assert.ok(body.includes(`Deploy target ${TOKEN}`), `run 1's memory is not in run 2's first request\n${body.slice(-6000)}`);
      assert.equal(mock.requests.slice(before).some((q) => q.outputs.length), false, 'the model had to call a tool');
      // Without hooks: Codex ends its MCP server when `codex exec` exits, often before the
      // server has recorded the session, and run 2's server records run 1's when it starts
      // (run 2's own is recorded by then or by the next server)
      if (!trusted) assertRecorded([1, 2]);
    });

    test('the archive finds run 1 in the rollout, which the read left as it was', () => {
      const sessionsDir = path.join(sandbox.home, '.codex', 'sessions');
      const rollouts = walk(sessionsDir).filter((f) => /rollout-.*\.jsonl$/.test(f));
      assert.equal(rollouts.length, 2, rollouts.join('\n'));
      const found = assertUnchangedBy(rollouts, () => cairnJson(['history', 'search', `${TOKEN}-prompt`]));
      const hits = found.hits ?? found.results ?? found;
      assert.ok(JSON.stringify(hits).includes(`${TOKEN}-prompt`), JSON.stringify(found));
      assert.ok(JSON.stringify(hits).includes('codex'), JSON.stringify(found));
    });
  });
}
