// The history shows what people and agents said, not what cairn injected (issue 25), in real
// OpenCode with cairn's plugin (installed by `cairn setup opencode`), with both cores taken by
// a CPU hog while OpenCode runs and the archive is read.
//
// A session's first message gets the plugin's [MEMORY] block, the Session History guidance and
// the trigger note (parts OpenCode stores as `synthetic` in the user's message). The archive
// must preview the user's request, chart it, and leave cairn's texts out of ranked search, yet
// pull them, marked `injected`. The second message is a pasted 60 KB build log whose error is
// on its last line: ranked search finds it (the index holds a long part's end too).
//
// Then the real Claude Code with cairn's hooks: Claude Code records each hook's
// `additionalContext` as an `attachment` record of its own; the archive keeps cairn's, marked,
// and the turn previews, the chart and search show only what the user typed.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startAnthropicMock } from './lib/anthropic-mock.mjs';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { findClaudeBin, makeClaudeSandbox, pluginHooks, runClaude } from './lib/claude.mjs';
import { startCpuHog } from './lib/hog.mjs';
import { startMockModel, textOf } from './lib/mock-model.mjs';
import { OPENCODE_MISSING, createOpenCodeSandbox, describeRun, findOpenCodeBin, parseJsonEvents } from './lib/opencode.mjs';
import { installWithSetup } from './lib/plugin.mjs';

const probe = probeCairnSubcommand('mcp');
const skip = probe.ok ? false : `cairn mcp unavailable: ${probe.reason}`;

const FIRST = 'INJ-FIRST rename the billing handlers, and remember that releases leave on Tuesdays';
const ERROR_WORD = 'zorblaxquux';

/** A pasted build log of about 60 KB whose only error is its last line. */
function buildLog() {
  const lines = ['INJ-LOG the release build fails, here is the log:'];
  for (let i = 0; lines.join('\n').length < 60 * 1024; i++) {
    lines.push(`   Compiling dependency-${i} v1.${i}.0 (registry+https://example.invalid/index)`);
  }
  lines.push(`error[E0425]: cannot find value \`${ERROR_WORD}\` in this scope`);
  return lines.join('\n');
}

describe('OpenCode history: injected text stays out of previews, charts and search', { skip, timeout: 300_000 }, () => {
  let mock;
  let cairn;
  let oc;
  let hog;
  let sid;
  let firstRun;
  const daemonInfo = () => JSON.parse(readFileSync(path.join(cairn.dataDir, 'daemon.json'), 'utf8'));
  async function op(name, args = {}) {
    const res = await fetch(`http://${daemonInfo().addr}/v1/op`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ op: name, args }),
      signal: AbortSignal.timeout(30_000),
    });
    const body = await res.json();
    assert.equal(res.status, 200, `${name}: ${JSON.stringify(body)}`);
    return body;
  }
  const dump = (result) =>
    `${describeRun(result)}\n--- mock requests ---\n${mock.requests
      .map((q) => `#${q.seq} ${q.kind} last=${JSON.stringify(q.lastText?.slice(0, 160))}`)
      .join('\n')}`;

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({ rules: [] });
    cairn = await makeCairnSandbox({ git: false });
    const env = { CAIRN_DATA_DIR: cairn.dataDir, CAIRN_PORT: cairn.env.CAIRN_PORT, NO_COLOR: '1', RUST_BACKTRACE: '1' };
    oc = createOpenCodeSandbox({ mock, env });
    const setup = installWithSetup({ bin: probe.bin, env: oc.env });
    assert.deepEqual(setup.installed.sort(), ['mcp.cairn', 'plugin'], `setup did not install both:\n${setup.output}`);
    // a first session starts the daemon; then a memory the next session's [MEMORY] block shows
    const warm = await oc.run('hello, a first session to start cairn', { args: ['--format', 'json'] });
    assert.equal(warm.code, 0, dump(warm));
    await op('save', {
      project: path.basename(oc.project),
      title: 'Billing handlers are renamed before each release',
      content: 'The billing handlers get their release names before the release branch is cut.',
      type: 'decision',
    });
    hog = startCpuHog({ maxMs: 240_000 });
    firstRun = await oc.run(FIRST, { args: ['--format', 'json'] });
    assert.equal(firstRun.code, 0, dump(firstRun));
    sid = parseJsonEvents(firstRun.stdout).find((e) => e.sessionID)?.sessionID;
    assert.match(sid ?? '', /^ses_/, dump(firstRun));
    const log = await oc.run(buildLog(), { args: ['--format', 'json', '--session', sid] });
    assert.equal(log.code, 0, dump(log));
    await op('history_ingest', {});
  });
  after(async () => {
    hog?.stop();
    await mock?.close();
    oc?.cleanup();
    cairn?.cleanup();
  });

  test("the plugin put its texts into the first message (what the model saw)", () => {
    const first = mock.requests.find((q) => q.kind === 'chat' && q.lastUserText.includes('INJ-FIRST'));
    assert.ok(first, dump(firstRun));
    const user = first.messages.filter((m) => m.role === 'user').map(textOf).join('\n');
    assert.match(user, /\[MEMORY\]/, `no [MEMORY] block reached the model\n${user.slice(0, 2000)}`);
    assert.match(user, /## Session History/, 'no Session History guidance reached the model');
    assert.match(user, /\[MEMORY TRIGGER DETECTED\]/, 'no trigger note reached the model');
  });

  test("the first turn's preview and the chart show the user's request, not cairn's guidance", async () => {
    const turns = await op('history_browse_turns', { session_id: sid, turn_number: 1, num_after: 1 });
    const preview = turns.turns[0]?.user?.preview ?? '';
    // (`opencode run` stores its message argument in quotes)
    assert.match(preview, /^"?INJ-FIRST rename the billing handlers/, JSON.stringify(turns));
    assert.doesNotMatch(preview, /\[MEMORY\]|Session History|MEMORY TRIGGER/, preview);
    const { chart } = await op('history_chart', { session_id: sid });
    assert.match(chart, /INJ-FIRST rename the billing handlers/);
    assert.doesNotMatch(chart, /\[MEMORY\]|## Session History|MEMORY TRIGGER DETECTED|renamed before each release/, chart);
  });

  test('cairn\'s texts are still pulled with the message, marked injected', async () => {
    const turns = await op('history_browse_turns', { session_id: sid, turn_number: 1 });
    const message = await op('history_pull_message', { session_id: sid, message_id: turns.turns[0].user.message_id });
    const texts = message.sections.filter((s) => s.type === 'text');
    const injected = texts.filter((s) => s.injected === true).map((s) => s.content);
    assert.ok(injected.some((t) => t.startsWith('[MEMORY]')), JSON.stringify(message.sections).slice(0, 2000));
    assert.ok(injected.some((t) => t.startsWith('## Session History')));
    assert.ok(injected.some((t) => t.startsWith('[MEMORY TRIGGER DETECTED]')));
    const typed = texts.filter((s) => !s.injected);
    assert.deepEqual(typed.map((s) => s.content.replace(/^"|"$/g, '')), [FIRST]);
  });

  test('history_search for "history" hits no first message', async () => {
    const found = await op('history_search', { query: 'history', project: path.basename(oc.project) });
    for (const m of found.messages) {
      const pulled = await op('history_pull_message', { session_id: m.session_id, message_id: m.message_id });
      const hitText = pulled.sections.filter((s) => s.type === 'text' && !s.injected).map((s) => s.content).join('\n');
      assert.match(hitText, /history/i, `a hit on cairn's text: ${JSON.stringify(m)}`);
    }
    const guidance = await op('history_search', { query: 'history_pull_message browse_turns', session_id: sid });
    assert.deepEqual(guidance.messages, [], JSON.stringify(guidance));
  });

  test('ranked search finds the error on the last line of a 60 KB log', async () => {
    const found = await op('history_search', { query: ERROR_WORD, session_id: sid });
    assert.equal(found.messages.length, 1, JSON.stringify(found));
    assert.equal(found.messages[0].role, 'user');
    assert.match(found.messages[0].hits[0].snippets.join(' '), new RegExp(`cannot find value .${ERROR_WORD}.`));
    const part = await op('history_pull_part', { session_id: sid, message_id: found.messages[0].message_id, part_id: found.messages[0].hits[0].part_id, max_chars: 100 });
    assert.ok(part.total_chars > 60 * 1024, `the hit is the whole log: ${JSON.stringify(part)}`);
  });
});

const hookProbe = probeCairnSubcommand('hook');
const claude = findClaudeBin();
const ccSkip = !hookProbe.ok ? `cairn hook unavailable: ${hookProbe.reason}` : !claude.bin ? claude.reason : false;

describe("Claude Code history: cairn's hook context is kept, marked, out of previews", { skip: ccSkip, timeout: 240_000 }, () => {
  const sid = randomUUID();
  const PROMPT = 'CC-INJ rename the billing handlers before the release';
  let mock;
  let sandbox;
  let run;
  function cairnJson(args) {
    const r = spawnSync(hookProbe.bin, [...args, '--json'], { env: { ...sandbox.env, CAIRN_AUTOSTART: 'never' }, encoding: 'utf8' });
    assert.equal(r.status, 0, `cairn ${args.join(' ')}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  }

  before(async () => {
    mock = await startAnthropicMock({ rules: [{ when: (r) => r.userText.includes('CC-INJ'), reply: { text: 'Renamed.' } }] });
    sandbox = await makeClaudeSandbox({ mock, projectName: 'cc-inj-project', settings: { hooks: pluginHooks(hookProbe.bin) } });
    // a memory of the project, so SessionStart's context and the first prompt's [MEMORY] block have something
    const saved = spawnSync(hookProbe.bin, ['save', 'Billing handlers are renamed before each release', 'The billing handlers get their release names first.', '--type', 'decision'], { cwd: sandbox.project, env: sandbox.env, encoding: 'utf8' });
    assert.equal(saved.status, 0, saved.stderr);
    const hog = startCpuHog({ maxMs: 120_000 });
    try {
      run = await runClaude(claude.bin, ['-p', PROMPT, '--session-id', sid, '--model', 'claude-mock-1'], { cwd: sandbox.project, env: sandbox.env });
    } finally {
      hog.stop();
    }
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    // SessionEnd pokes the transcript into the archive; a scan makes sure it is all there
    cairnJson(['history', 'ingest']);
  });
  after(async () => {
    await mock?.close();
    sandbox?.cleanup();
  });

  test("cairn's context reached the model, and the archive keeps it marked beside the user's prompt", () => {
    const first = mock.messages().find((q) => (q.body?.tools ?? []).length > 0);
    const body = JSON.stringify(first?.body ?? {});
    assert.ok(body.includes('cairn is your persistent memory across sessions.'), 'no protocol from SessionStart');
    assert.ok(body.includes('[MEMORY]'), 'no [MEMORY] block from UserPromptSubmit');
    const page = cairnJson(['history', 'messages', sid, '--before', '10']);
    const injected = page.messages.filter((m) => m.injected === true);
    assert.ok(injected.some((m) => m.preview.startsWith('cairn is your persistent memory')), JSON.stringify(page));
    assert.ok(injected.some((m) => m.preview.startsWith('[MEMORY]')), JSON.stringify(page));
    assert.ok(page.messages.some((m) => m.preview === PROMPT && !m.injected), JSON.stringify(page));
    const pulled = cairnJson(['history', 'message', sid, injected[0].message_id]);
    assert.ok(pulled.sections.every((s) => s.injected === true), JSON.stringify(pulled));
  });

  test("the turn preview, the chart and search show only what the user typed", () => {
    const turns = cairnJson(['history', 'turns', sid, '--turn', '1']);
    assert.equal(turns.turns[0].user.preview, PROMPT);
    const { chart } = cairnJson(['history', 'chart', sid]);
    assert.match(chart, /CC-INJ rename the billing handlers/);
    assert.doesNotMatch(chart, /persistent memory across sessions|\[MEMORY\]|Session History/, chart);
    // the protocol's guidance is full of "history"; the user never said it
    assert.deepEqual(cairnJson(['history', 'search', 'history', '--session', sid]).messages, []);
    assert.equal(cairnJson(['history', 'search', 'billing', '--session', sid]).messages[0].role, 'user');
  });
});
