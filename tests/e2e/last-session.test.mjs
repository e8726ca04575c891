// The next session knows what the last one did (issue 25), in the real hosts with both cores
// busy (lib/hog.mjs).
//
// OpenCode, the default compaction mode (chart, which stores no summary): session 1 asks for a
// file to be written, the model writes it and answers with a Key Learning, then reports a full
// context, and OpenCode compacts. Session 1's Last Session record exists, marked compacted, and
// session 2's first model request carries a `[MEMORY]` block whose Last Session names session
// 1's request, the file and the learning.
//
// Claude Code: session A reads a file and answers; it ends. Session B's first model request has
// a Last Session naming A's request and the file. A `/compact` of A marks its record compacted.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { findClaudeBin, makeClaudeSandbox, pluginHooks, runClaude as runClaudeCli } from './lib/claude.mjs';
import { startAnthropicMock } from './lib/anthropic-mock.mjs';
import { startCpuHog } from './lib/hog.mjs';
import { callTool, startMockModel, textOf } from './lib/mock-model.mjs';
import { OPENCODE_MISSING, createOpenCodeSandbox, describeRun, findOpenCodeBin, parseJsonEvents } from './lib/opencode.mjs';
import { installWithSetup } from './lib/plugin.mjs';

const probe = probeCairnSubcommand('mcp');
const skip = probe.ok ? false : `cairn mcp unavailable: ${probe.reason}`;
test('cairn is available for the Last Session tests', { skip }, () => {});

const LEARNING = 'Refunds round half-even to match the ledger';

/** POST /v1/op to the daemon recorded in `dataDir`. */
async function opIn(dataDir, name, args = {}) {
  const { addr } = JSON.parse(readFileSync(path.join(dataDir, 'daemon.json'), 'utf8'));
  const res = await fetch(`http://${addr}/v1/op`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ op: name, args }),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, body: await res.json() };
}

/** The project's Last Session records, newest first. */
async function records(dataDir, project) {
  const r = await opIn(dataDir, 'list', { project, kind: 'session_record', limit: 20 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body;
}

describe('OpenCode: Last Session after a chart compaction, under a CPU hog', { skip, timeout: 300_000 }, () => {
  let mock;
  let cairn;
  let oc;
  let hog;
  let sid;
  let project;
  const FILE = 'refund-notes.md';
  const dump = (result) =>
    `${describeRun(result)}\n--- mock requests ---\n${mock.requests
      .map((q) => `#${q.seq} ${q.kind} last=${JSON.stringify(q.lastText?.slice(0, 160))}`)
      .join('\n')}`;

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        { kind: 'chat', match: (q) => q.lastUserText.includes('LAST-ONE'), reply: () => callTool('write', { filePath: path.join(oc.project, FILE), content: 'Refunds: half-even.\n' }), times: 1 },
        // the turn's answer has a Key Learning, and says the context is full: OpenCode compacts
        {
          kind: 'tool-result',
          match: (q) => q.toolResult?.name === 'write',
          reply: { text: `Wrote the notes.\n\n## Key Learnings:\n1. ${LEARNING}\n`, usage: { prompt_tokens: 200_000 } },
          times: 1,
        },
      ],
    });
    cairn = await makeCairnSandbox({ git: false });
    const env = { CAIRN_DATA_DIR: cairn.dataDir, CAIRN_PORT: cairn.env.CAIRN_PORT, NO_COLOR: '1', RUST_BACKTRACE: '1' };
    oc = createOpenCodeSandbox({ mock, env, projectName: 'oc-last-session' });
    const setup = installWithSetup({ bin: probe.bin, env: oc.env });
    assert.deepEqual(setup.installed.sort(), ['mcp.cairn', 'plugin'], `setup did not install both:\n${setup.output}`);
    hog = startCpuHog({ maxMs: 300_000 });
  });
  after(async () => {
    hog?.stop();
    await mock?.close();
    oc?.cleanup();
    cairn?.cleanup();
  });

  test('session 1 works and is compacted in chart mode: its record is kept, marked compacted', async () => {
    const first = await oc.run('LAST-ONE write the refund rounding notes', { args: ['--format', 'json'] });
    assert.equal(first.code, 0, dump(first));
    sid = parseJsonEvents(first.stdout).find((e) => e.sessionID)?.sessionID;
    assert.match(sid ?? '', /^ses_/, dump(first));
    const compaction = mock.requests.find((q) => q.kind === 'compaction');
    assert.ok(compaction, `OpenCode did not compact\n${dump(first)}`);
    assert.match(compaction.lastText, /^Do not think\. Do not summarize\./, 'chart mode: the summariser is asked for next to nothing');
    const session = await opIn(cairn.dataDir, 'get_session', { id: sid });
    assert.equal(session.status, 200, JSON.stringify(session.body));
    project = session.body.project;
    // the plugin's calls after the run ended may still be on their way
    let mine;
    for (let i = 0; i < 40 && !mine?.tool_name?.endsWith('compacted'); i++) {
      mine = (await records(cairn.dataDir, project)).find((o) => o.session_id === sid);
      if (!mine?.tool_name?.endsWith('compacted')) await new Promise((r) => setTimeout(r, 250));
    }
    assert.ok(mine, `no Last Session record of ${sid}`);
    assert.equal(mine.tool_name, 'session-record:compacted', JSON.stringify(mine));
    assert.match(mine.content, /LAST-ONE write the refund rounding notes/);
    assert.match(mine.content, new RegExp(`Files changed: ${FILE}`));
    assert.match(mine.content, /compacted 1×/);
    assert.equal(mine.topic_key, `session/${sid}/record`.toLowerCase(), 'one record per session: its topic');
  });

  test("session 2's first model request carries session 1 as its Last Session", async () => {
    assert.ok(sid, 'session 1 did not run');
    const from = mock.requests.at(-1)?.seq ?? 0;
    const second = await oc.run('LAST-TWO what were we doing last time?', { args: ['--format', 'json'] });
    assert.equal(second.code, 0, dump(second));
    const first = mock.requests.find((q) => q.seq > from && q.kind === 'chat' && q.lastUserText.includes('LAST-TWO'));
    assert.ok(first, `no model request in session 2\n${dump(second)}`);
    const last = [...first.messages].reverse().find((m) => m.role === 'user');
    const seen = textOf(last);
    assert.match(seen, /\[MEMORY\]/, `no [MEMORY] block\n${seen}`);
    const block = seen.slice(seen.indexOf('[MEMORY]'));
    assert.match(block, /## Last Session/, block);
    assert.match(block, new RegExp(`Session ${sid} `), block);
    assert.match(block, /LAST-ONE write the refund rounding notes/, block);
    assert.match(block, new RegExp(FILE.replace('.', '\\.')), block);
    assert.ok(block.includes(LEARNING), block);
    assert.doesNotMatch(block, /Nothing is stored/, block);
  });
});

const claude = findClaudeBin();
const claudeSkip = skip || (!claude.bin ? claude.reason : false);

describe('Claude Code: the next session gets the Last Session, under a CPU hog', { skip: claudeSkip, timeout: 240_000 }, () => {
  const sessionA = randomUUID();
  const sessionB = randomUUID();
  let mock;
  let sandbox;
  let hog;
  const answersRead = (r) => JSON.stringify(r.body?.messages?.at(-1) ?? {}).includes('"tool_result"') && r.userText.includes('E2E-LAST-A');
  const dump = (r) => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n--- mock\n${mock.requests.map((q) => `${q.seq} ${q.method} ${q.path} ${q.userText.slice(0, 80)}`).join('\n')}`;
  const run = (args) => runClaudeCli(claude.bin, ['-p', ...args, '--model', 'claude-mock-1'], { cwd: sandbox.project, env: sandbox.env });

  before(async () => {
    mock = await startAnthropicMock({
      rules: [
        { beforeToolResults: true, when: (r) => /create a detailed summary of the conversation/i.test(JSON.stringify(r.body?.messages?.slice(-3) ?? [])), reply: { text: '<summary>MOCK-SUMMARY of the ledger work.</summary>' } },
        { beforeToolResults: true, when: answersRead, reply: { text: `Read it.\n\n## Key Learnings:\n1. ${LEARNING}\n` } },
        { when: (r) => r.userText.includes('E2E-LAST-A'), reply: () => ({ tool: 'Read', input: { file_path: path.join(sandbox.project, 'ledger.txt') } }) },
      ],
    });
    sandbox = await makeClaudeSandbox({ mock, projectName: 'cc-last-session', settings: { hooks: pluginHooks(probe.bin) } });
    writeFileSync(path.join(sandbox.project, 'ledger.txt'), 'refunds: half-even\n');
    hog = startCpuHog({ maxMs: 240_000 });
  });
  after(async () => {
    hog?.stop();
    await mock?.close();
    sandbox?.cleanup();
  });

  test("session A ends; session B's injected context has A as its Last Session", async () => {
    const a = await run(['--session-id', sessionA, 'E2E-LAST-A check the ledger rounding', '--allowedTools', 'Read']);
    assert.equal(a.code, 0, dump(a));
    assert.match(a.stdout, /Read it\./, dump(a));
    const before = mock.messages().length;
    const b = await run(['--session-id', sessionB, 'E2E-LAST-B what did we do last time?']);
    assert.equal(b.code, 0, dump(b));
    const first = mock.messages().slice(before).find((q) => (q.body?.tools ?? []).length > 0);
    assert.ok(first, `no model request in session B\n${dump(b)}`);
    const body = JSON.stringify(first.body);
    assert.ok(body.includes('## Last Session'), `no Last Session in B's first request\n${body.slice(0, 6000)}`);
    assert.ok(body.includes(`Session ${sessionA} (claude-code)`), `A is not B's Last Session\n${body.slice(0, 6000)}`);
    assert.ok(body.includes('E2E-LAST-A check the ledger rounding'), `A's request is not named\n${body.slice(0, 6000)}`);
    assert.ok(body.includes('ledger.txt'), `A's file is not named\n${body.slice(0, 6000)}`);
    assert.ok(body.includes(LEARNING), `A's Key Learning is not there\n${body.slice(0, 6000)}`);
    assert.deepEqual(mock.connects, [], 'Claude Code tried to reach the internet');
  });

  test("a compaction of A marks A's record compacted", async () => {
    const c = await run(['/compact keep the ledger facts', '--resume', sessionA]);
    assert.equal(c.code, 0, dump(c));
    const list = await records(sandbox.cairn.dataDir, 'cc-last-session');
    const mine = list.find((o) => o.session_id === sessionA);
    assert.ok(mine, `no record of ${sessionA}: ${JSON.stringify(list)}`);
    assert.equal(mine.tool_name, 'session-record:compacted', JSON.stringify(mine));
    assert.match(mine.content, /E2E-LAST-A check the ledger rounding/);
  });
});
