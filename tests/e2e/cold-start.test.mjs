// Cold starts with both cores busy: no daemon runs, and the daemon the host starts cannot come
// up for several seconds. Every session and prompt of the run must still be stored, once.
//
// A daemon slow to come up is made the honest way: another process holds the store's file
// locked (as a backup tool, or a daemon still finishing, would) for LOCK_MS from the start of
// each run, so every `cairn serve` started meanwhile (by the plugin, a hook, `cairn mcp`) waits
// for it (the binary under test is the one every host starts; nothing in cairn is told to be
// slow). The hosts' hooks and plugin never open the store: they keep their writes in the
// spool, and the daemon applies them once it runs. A CPU hog takes every core throughout.
// Each prompt also states a rule ("From now on …"), which the daemon saves as a memory when it
// applies the prompt, with no model set up.
//
// Real OpenCode (the plugin installed by `cairn setup opencode`) and real Claude Code (the
// hooks of plugins/claude-code), COLD_STARTS times each, a fresh data dir each time. Needs
// python3 (its sqlite3 module holds the lock).

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startAnthropicMock } from './lib/anthropic-mock.mjs';
import { REPO_ROOT, makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { findClaudeBin, makeClaudeSandbox, runClaude } from './lib/claude.mjs';
import { startCpuHog } from './lib/hog.mjs';
import { startMockModel } from './lib/mock-model.mjs';
import { OPENCODE_MISSING, createOpenCodeSandbox, describeRun, findOpenCodeBin, parseJsonEvents } from './lib/opencode.mjs';
import { installWithSetup } from './lib/plugin.mjs';

const COLD_STARTS = 2;
/** How long the store stays locked from the start of a run (the daemon's wait is 10 s at most). */
const LOCK_MS = 8_000;
/** How long the daemon may take, once the lock is gone, to apply what was spooled. */
const DRAIN_WAIT_MS = 60_000;

const probe = probeCairnSubcommand('hook');
const python = spawnSync('python3', ['-c', 'import sqlite3'], { encoding: 'utf8' });
const skip = !probe.ok ? `cairn unavailable: ${probe.reason}` : python.status !== 0 ? 'python3 with sqlite3 is needed to hold the lock' : false;
test('cairn and python3 are available for the cold-start tests', { skip }, () => {});

const HOLD_LOCK = `
import os, sqlite3, sys, time
db, ms = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db, isolation_level=None, timeout=0)
c.execute("BEGIN EXCLUSIVE")
c.execute("CREATE TABLE held_by_the_test (x)")
print("locked", flush=True)
time.sleep(ms / 1000)
c.execute("ROLLBACK")
`;

/** Hold `<dataDir>/cairn.db` locked for `ms`; resolves once the lock is taken. */
function holdStoreLock(dataDir, ms) {
  const child = spawn('python3', ['-c', HOLD_LOCK, path.join(dataDir, 'cairn.db'), String(ms)], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.stdout.once('data', () => resolve(child));
    child.once('exit', (code) => reject(new Error(`the lock holder exited (${code}) before locking`)));
  });
}

/** The running daemon's address, once `daemon.json` names one that answers. */
async function daemonUrl(dataDir, until) {
  while (Date.now() < until) {
    try {
      const { addr } = JSON.parse(readFileSync(path.join(dataDir, 'daemon.json'), 'utf8'));
      const res = await fetch(`http://${addr}/health`, { signal: AbortSignal.timeout(2_000) });
      if (res.ok) return `http://${addr}`;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return null;
}

async function op(url, name, args) {
  const res = await fetch(`${url}/v1/op`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ op: name, args }), signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: await res.json() };
}

/**
 * What the data dir holds when a check fails: its files two levels down with their sizes, and
 * the end of the log of the daemons the hosts started (a cold start that loses something must
 * say where it stopped).
 */
function diagnostics(dataDir) {
  const files = [];
  const walk = (dir, depth) => {
    let names = [];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const full = path.join(dir, name);
      try {
        const st = statSync(full);
        files.push(`${path.relative(dataDir, full)}${st.isDirectory() ? '/' : ` ${st.size} B`}`);
        if (st.isDirectory() && depth > 0) walk(full, depth - 1);
      } catch {
        // gone meanwhile
      }
    }
  };
  walk(dataDir, 1);
  let log = '(no daemon.log)';
  try {
    log = readFileSync(path.join(dataDir, 'daemon.log'), 'utf8').slice(-4_000);
  } catch {
    // never written
  }
  return `\n--- data dir\n${files.join('\n')}\n--- daemon.log (end)\n${log}`;
}

/**
 * Wait until the daemon is up and has applied the spool, then check the session and its prompt
 * are stored, the prompt once, and nothing was lost on the way. A failure carries the data
 * dir's files and the daemon's log.
 */
async function assertStored(args) {
  try {
    await checkStored(args);
  } catch (err) {
    err.message += diagnostics(args.dataDir);
    throw err;
  }
}

async function checkStored({ dataDir, sessionID, token, what }) {
  const until = Date.now() + DRAIN_WAIT_MS;
  const url = await daemonUrl(dataDir, until);
  assert.ok(url, `${what}: no daemon came up within ${DRAIN_WAIT_MS} ms of the lock's release`);
  let health;
  while (Date.now() < until) {
    health = await (await fetch(`${url}/health`)).json();
    if (health.spool && health.spool.pending === 0) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(health.spool?.pending, 0, `${what}: the spool was not drained: ${JSON.stringify(health.spool)}`);
  assert.equal(health.spool.dropped + health.spool.corrupt, 0, `${what}: events lost: ${JSON.stringify(health.spool)}`);
  const session = await op(url, 'get_session', { id: sessionID });
  assert.equal(session.status, 200, `${what}: session ${sessionID} is not stored: ${JSON.stringify(session.body)}`);
  const prompts = await op(url, 'recent_prompts', { limit: 100 });
  const stored = JSON.stringify(prompts.body);
  assert.equal(stored.split(token).length - 1, 1, `${what}: the prompt with ${token} is not stored exactly once: ${stored.slice(0, 2000)}`);
  const found = await (await fetch(`${url}/search?q=${token}`)).json();
  assert.ok(Array.isArray(found), `${what}: /search did not answer a list: ${JSON.stringify(found).slice(0, 500)}`);
  const rules = found.filter((hit) => hit.content === ruleOf(token));
  assert.equal(rules.length, 1, `${what}: the rule the prompt stated is not one memory: ${JSON.stringify(found).slice(0, 2000)}`);
}

/** The rule each run's prompt states, as it is saved. */
const ruleOf = (token) => `From now on every ${token} build runs from the release branch.`;
/** The prompt of a run: a question, then a rule. */
const promptOf = (token) => `Please explain the layout of this project. ${ruleOf(token)}`;

describe('cold starts under load: nothing lost while the daemon comes up', { skip, timeout: 600_000 }, () => {
  let hog;
  before(() => {
    hog = startCpuHog();
  });
  after(() => hog?.stop());

  describe('OpenCode with the plugin', { skip: findOpenCodeBin() ? false : OPENCODE_MISSING }, () => {
    let mock;
    before(async () => {
      mock = await startMockModel({ rules: [] });
    });
    after(async () => mock?.close());

    for (let round = 1; round <= COLD_STARTS; round++) {
      test(`cold start ${round}: the session and its prompt are stored once the daemon is up`, async () => {
        const cairn = await makeCairnSandbox({ git: false });
        const oc = createOpenCodeSandbox({ mock, env: { CAIRN_DATA_DIR: cairn.dataDir, CAIRN_PORT: cairn.env.CAIRN_PORT, NO_COLOR: '1' } });
        try {
          installWithSetup({ bin: probe.bin, env: oc.env });
          const token = `coldprompt${randomUUID().slice(0, 8)}`;
          const lock = await holdStoreLock(cairn.dataDir, LOCK_MS);
          const started = Date.now();
          const result = await oc.run(promptOf(token), { args: ['--format', 'json'] });
          assert.equal(result.code, 0, describeRun(result));
          const sessionID = parseJsonEvents(result.stdout).find((e) => e.sessionID)?.sessionID;
          assert.ok(sessionID, `no session id in the run's output\n${describeRun(result)}`);
          await new Promise((r) => lock.once('exit', r).exitCode !== null && r());
          await assertStored({ dataDir: cairn.dataDir, sessionID, token, what: `OpenCode cold start ${round} (run took ${Date.now() - started} ms)` });
        } finally {
          oc.cleanup();
          cairn.cleanup();
        }
      });
    }
  });

  describe('Claude Code with the hooks', { skip: findClaudeBin().bin ? false : findClaudeBin().reason }, () => {
    let mock;
    before(async () => {
      mock = await startAnthropicMock({ rules: [] });
    });
    after(async () => mock?.close());

    /** plugins/claude-code's hooks.json with `cairn` replaced by the binary under test. */
    function hooks() {
      const { hooks } = JSON.parse(readFileSync(path.join(REPO_ROOT, 'plugins', 'claude-code', 'hooks', 'hooks.json'), 'utf8'));
      for (const groups of Object.values(hooks)) for (const group of groups) for (const hook of group.hooks) hook.command = hook.command.replace(/^cairn /, `"${probe.bin}" `);
      return hooks;
    }

    for (let round = 1; round <= COLD_STARTS; round++) {
      test(`cold start ${round}: the session and its prompt are stored once the daemon is up`, async () => {
        const sandbox = await makeClaudeSandbox({ mock, projectName: 'cc-cold-project', settings: { hooks: hooks() } });
        try {
          const sessionID = randomUUID();
          const token = `coldprompt${randomUUID().slice(0, 8)}`;
          const lock = await holdStoreLock(sandbox.cairn.dataDir, LOCK_MS);
          const started = Date.now();
          const r = await runClaude(findClaudeBin().bin, ['-p', '--session-id', sessionID, promptOf(token), '--model', 'claude-mock-1'], { cwd: sandbox.project, env: sandbox.env });
          assert.equal(r.code, 0, `exit ${r.code}\n${r.stdout}\n${r.stderr}`);
          await new Promise((r2) => lock.once('exit', r2).exitCode !== null && r2());
          await assertStored({ dataDir: sandbox.cairn.dataDir, sessionID, token, what: `Claude Code cold start ${round} (run took ${Date.now() - started} ms)` });
        } finally {
          sandbox.cleanup();
        }
      });
    }
  });
});

