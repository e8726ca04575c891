// Git sync between two data dirs through one real git repository: memories saved, edited and
// deleted in A travel with `cairn sync` + `git commit`, `git clone`/`git pull` and
// `cairn sync --import` in B, checked through B's HTTP API; then a session start in the real
// Claude Code (hooks of plugins/claude-code, scripted model) imports a newly pulled chunk by
// itself, in the background. Last, the real OpenCode with cairn's plugin (`cairn setup
// opencode`) in a fresh clone, with no daemon running: the plugin starts one, which imports
// the committed chunks at session start.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startAnthropicMock } from './lib/anthropic-mock.mjs';
import { makeCairnSandbox, probeCairnSubcommand, startCairnDaemon } from './lib/cairn.mjs';
import { findClaudeBin, makeClaudeSandbox, pluginHooks, runClaude } from './lib/claude.mjs';
import { startMockModel } from './lib/mock-model.mjs';
import { createOpenCodeSandbox, describeRun, findOpenCodeBin } from './lib/opencode.mjs';
import { installWithSetup } from './lib/plugin.mjs';

const probe = probeCairnSubcommand('sync');
const claude = findClaudeBin();
const skip = !probe.ok ? `cairn sync unavailable: ${probe.reason}` : !claude.bin ? claude.reason : false;
const skipOpenCode = !probe.ok ? `cairn sync unavailable: ${probe.reason}` : findOpenCodeBin() ? false : 'OpenCode missing';

const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'e2e',
  GIT_AUTHOR_EMAIL: 'e2e@example.invalid',
  GIT_COMMITTER_NAME: 'e2e',
  GIT_COMMITTER_EMAIL: 'e2e@example.invalid',
};

function git(cwd, args) {
  const r = spawnSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, `git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

/** Run the cairn CLI in `cwd` for a sandbox; stdout parsed as JSON with `--json`. */
function cairn(sandbox, cwd, args, extraEnv = {}) {
  const r = spawnSync(probe.bin, [...args, '--json'], { cwd, env: { ...process.env, ...sandbox.env, ...extraEnv }, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `cairn ${args.join(' ')}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

async function get(base, route) {
  const res = await fetch(`${base}${route}`);
  const json = await res.json();
  assert.ok(res.ok, `GET ${route}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** The live memories of the project, by title, as B's HTTP API lists them. */
async function titles(base, project) {
  const list = await get(base, `/observations?project=${encodeURIComponent(project)}&limit=100`);
  const rows = Array.isArray(list) ? list : (list.observations ?? list.results ?? []);
  return new Map(rows.map((o) => [o.title, o]));
}

test('cairn sync and Claude Code are available', { skip }, () => {});

describe('git sync between two data dirs', { skip, timeout: 300_000 }, () => {
  let a;
  let b;
  let mock;
  let daemon;
  const project = 'sync-e2e';

  before(async () => {
    mock = await startAnthropicMock({ rules: [{ when: () => true, reply: { text: 'Hello.' } }] });
    a = await makeCairnSandbox({ projectName: project });
    b = await makeClaudeSandbox({ mock, projectName: project, settings: { hooks: pluginHooks(probe.bin) } });
  });
  after(async () => {
    daemon?.child.kill('SIGTERM');
    await mock?.close();
    a?.cleanup();
    b?.cleanup();
  });

  test('save, edit and delete in A reach B through a commit; a session start imports by itself', async () => {
    const direct = { CAIRN_AUTOSTART: 'never' };
    const kept = cairn(a, a.project, ['save', 'Invoices are CSV', 'Finance imports CSV, not XLSX.', '--project', project], direct);
    const edited = cairn(a, a.project, ['save', 'Tax API rate', 'The tax API allows 5 requests per second.', '--project', project], direct);
    const gone = cairn(a, a.project, ['save', 'Old staging host', 'staging runs on host-7', '--project', project], direct);
    cairn(a, a.project, ['update', String(edited.id), '--content', 'The tax API allows 10 requests per second.'], direct);
    cairn(a, a.project, ['delete', String(gone.id)], direct);
    const exported = cairn(a, a.project, ['sync'], direct);
    assert.equal(exported.projects[0].project, project);
    assert.equal(exported.projects[0].chunks.length, 1);
    git(a.project, ['add', '.cairn']);
    git(a.project, ['commit', '-q', '-m', 'memory sync']);

    // B: a clone of A's repository, its own data dir and daemon.
    rmSync(b.project, { recursive: true, force: true });
    git(path.dirname(b.project), ['clone', '-q', a.project, b.project]);
    daemon = await startCairnDaemon(probe.bin, b.cairn);
    const imported = cairn(b.cairn, b.project, ['sync', '--import']);
    assert.equal(imported.chunks_applied, 1);
    assert.deepEqual(imported.refused, []);
    let live = await titles(daemon.base, project);
    assert.ok(live.has('Invoices are CSV'), [...live.keys()].join(', '));
    assert.equal(live.get('Tax API rate').content, 'The tax API allows 10 requests per second.');
    assert.ok(!live.has('Old staging host'), 'the delete travelled');
    const again = cairn(b.cairn, b.project, ['sync', '--import']);
    assert.equal(again.chunks_applied, 0);
    const status = await get(daemon.base, `/sync/status?directory=${encodeURIComponent(b.project)}`);
    assert.equal(status.folders[0].pending_import, 0);
    assert.equal(kept.project, project);

    // A new memory in A, committed; B pulls and starts a Claude Code session: the SessionStart
    // hook has the daemon import it in the background.
    cairn(a, a.project, ['save', 'Release day', 'Releases leave every Tuesday.', '--project', project], direct);
    cairn(a, a.project, ['sync'], direct);
    git(a.project, ['add', '.cairn']);
    git(a.project, ['commit', '-q', '-m', 'memory sync 2']);
    git(b.project, ['pull', '-q', '--no-rebase', 'origin', 'HEAD']);
    const run = await runClaude(claude.bin, ['-p', 'hello', '--model', 'claude-mock-1'], { cwd: b.project, env: b.env });
    assert.equal(run.code, 0, run.stderr);
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      live = await titles(daemon.base, project);
      if (live.has('Release day')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(live.has('Release day'), `not imported at session start: ${[...live.keys()].join(', ')}`);
  });
});

describe('git sync: an OpenCode session imports by itself', { skip: skipOpenCode, timeout: 300_000 }, () => {
  let a;
  let b;
  let oc;
  let mock;
  const project = 'sync-oc-e2e';

  before(async () => {
    mock = await startMockModel();
    a = await makeCairnSandbox({ projectName: project });
    b = await makeCairnSandbox({ git: false });
    oc = createOpenCodeSandbox({ mock, projectName: project, env: { CAIRN_DATA_DIR: b.dataDir, CAIRN_PORT: b.env.CAIRN_PORT, NO_COLOR: '1' } });
    installWithSetup({ bin: probe.bin, env: oc.env });
  });
  after(async () => {
    await mock?.close();
    oc?.cleanup();
    a?.cleanup();
    b?.cleanup(); // stops the daemon the plugin started
  });

  test('a fresh clone: the daemon the plugin starts imports the committed chunks at session start', async () => {
    const direct = { CAIRN_AUTOSTART: 'never' };
    cairn(a, a.project, ['save', 'Queue is SQS', 'Jobs go through SQS, not Redis.', '--project', project], direct);
    cairn(a, a.project, ['sync'], direct);
    git(a.project, ['add', '.cairn']);
    git(a.project, ['commit', '-q', '-m', 'memory sync']);
    rmSync(oc.project, { recursive: true, force: true });
    git(path.dirname(oc.project), ['clone', '-q', a.project, oc.project]);

    const run = await oc.run('hello');
    assert.equal(run.code, 0, describeRun(run));
    const record = path.join(b.dataDir, 'daemon.json');
    const deadline = Date.now() + 30_000;
    let live = new Map();
    while (Date.now() < deadline) {
      try {
        const { addr } = JSON.parse(readFileSync(record, 'utf8'));
        live = await titles(`http://${addr}`, project);
        if (live.has('Queue is SQS')) break;
      } catch {
        // the daemon is still starting
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(live.has('Queue is SQS'), `not imported at session start: ${[...live.keys()].join(', ')}`);
  });
});
