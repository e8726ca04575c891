// Real OpenCode with cairn's own plugin (plugins/opencode/cairn.ts) installed as a global
// plugin, `cairn mcp --tools=agent` registered, and the scripted mock model. No daemon runs at
// the start: the plugin starts one, which outlives OpenCode.
//
// Some checks need daemon ops of issue 13 (protocol, user_prompt, save_compaction,
// plugin_config); against a cairn without them the plugin fails open and those checks fail,
// each with its own message. Skips while cairn has no `mcp`/`serve` command.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { callTool, startMockModel, textOf } from './lib/mock-model.mjs';
import { OPENCODE_MISSING, createOpenCodeSandbox, describeRun, findOpenCodeBin, parseJsonEvents } from './lib/opencode.mjs';
import { installWithSetup } from './lib/plugin.mjs';

const probe = probeCairnSubcommand('mcp');
const skip = probe.ok ? false : `cairn mcp unavailable: ${probe.reason}`;
test('cairn is available for the plugin tests', { skip }, () => {});

const TRIGGER_RE = /\[MEMORY TRIGGER DETECTED\]/;

/** Texts of the last user message's parts, without the ones the plugin added. */
function typed(q) {
  const last = [...q.messages].reverse().find((m) => m.role === 'user');
  const parts = Array.isArray(last?.content) ? last.content.map((p) => p?.text ?? '') : [textOf(last)];
  return parts.filter((t) => !t.startsWith('[MEMORY]') && !TRIGGER_RE.test(t)).join('\n');
}
/** A mock rule on what the user typed (the [MEMORY] block quotes earlier prompts). */
const said = (needle, reply) => ({ kind: 'chat', match: (q) => typed(q).includes(needle), reply });

describe('OpenCode + cairn plugin', { skip, timeout: 480_000 }, () => {
  let mock;
  let cairn;
  let oc;
  const runs = {};
  /** The daemon's address, from daemon.json. */
  const daemonInfo = () => JSON.parse(readFileSync(path.join(cairn.dataDir, 'daemon.json'), 'utf8'));
  async function op(name, args = {}) {
    const res = await fetch(`http://${daemonInfo().addr}/v1/op`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ op: name, args }),
      signal: AbortSignal.timeout(10_000),
    });
    const body = await res.json();
    return { status: res.status, body };
  }
  const sessionOf = (r) => parseJsonEvents(r.stdout).find((e) => e.sessionID)?.sessionID;
  /** Requests the mock got during one run (by seq range). */
  const during = (name) => mock.requests.filter((q) => q.seq > runs[name].from && q.seq <= runs[name].to);
  const chats = (name) => during(name).filter((q) => q.kind === 'chat' || q.kind === 'tool-result');
  const dump = (name) =>
    `${describeRun(runs[name].result)}\n--- mock requests ---\n${during(name)
      .map((q) => `#${q.seq} ${q.kind} last=${JSON.stringify(q.lastText?.slice(0, 120))} system…=${JSON.stringify(q.system?.slice(-300))}`)
      .join('\n')}`;
  async function run(name, message, args = ['--format', 'json']) {
    const from = mock.requests.at(-1)?.seq ?? 0;
    const result = await oc.run(message, { args });
    runs[name] = { from, to: mock.requests.at(-1)?.seq ?? 0, result };
    assert.equal(result.code, 0, `run ${name} failed:\n${dump(name)}`);
    return result;
  }
  let protocol = null;
  async function protocolText() {
    if (protocol !== null) return protocol;
    const r = await op('protocol', { host: 'opencode', tools: 'agent', part: 'memory' });
    protocol = r.status === 200 ? r.body.text : '';
    return protocol;
  }
  const PROTOCOL_FIRST_LINE = 'cairn is your persistent memory across sessions.';
  const count = (hay, needle) => (needle ? hay.split(needle).length - 1 : 0);

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        // the model saves only when the plugin told it to
        {
          kind: 'chat',
          match: (q) => /deploy with pnpm/.test(typed(q)) && q.messages.some((m) => TRIGGER_RE.test(textOf(m))),
          reply: callTool('cairn_mem_save', { title: 'We deploy with pnpm', content: 'Deployments use pnpm (pnpm deploy), not npm.', type: 'decision' }),
          times: 1,
        },
        said('PLEASE-OVERFLOW', { text: 'A very long answer', usage: { prompt_tokens: 200_000 } }),
        said('PLEASE-DELEGATE', callTool('task', { description: 'Inspect files', prompt: 'SUBAGENT-PROMPT list the files', subagent_type: 'general' })),
        // a step reports 96,000 of the mock's 128,000-token window = 75%; the next request shows
        // the meter, and the agent compacts
        said('PLEASE-METER', { ...callTool('glob', { pattern: '*.md' }), usage: { prompt_tokens: 96_000, completion_tokens: 0 } }),
        {
          kind: 'tool-result',
          match: (q) => q.toolResult?.name === 'glob',
          reply: { ...callTool('memory_compact', { force: false }), usage: { prompt_tokens: 96_000, completion_tokens: 0 } },
          times: 1,
        },
      ],
    });
    cairn = await makeCairnSandbox({ git: false });
    // the summary-as-memory compaction; the chart mode (the default) is history.test.mjs
    const env = { CAIRN_DATA_DIR: cairn.dataDir, CAIRN_PORT: cairn.env.CAIRN_PORT, CAIRN_COMPACTION_MODE: 'context', NO_COLOR: '1', RUST_BACKTRACE: '1' };
    // OpenCode's own config (the mock provider) only; cairn is wired in by `cairn setup opencode`
    // exactly as a user does it: the plugin with this binary baked in, and `mcp.cairn`. The MCP
    // server inherits CAIRN_DATA_DIR/CAIRN_PORT from OpenCode's environment.
    oc = createOpenCodeSandbox({ mock, env });
    const setup = installWithSetup({ bin: probe.bin, env: oc.env });
    assert.deepEqual(setup.installed.sort(), ['mcp.cairn', 'plugin'], `setup did not install both:\n${setup.output}`);
  });
  after(async () => {
    await mock?.close();
    oc?.cleanup();
    cairn?.cleanup(); // stops the daemon the plugin started
  });

  test('no daemon at the start: the plugin starts one, and it outlives OpenCode', async () => {
    assert.ok(!existsSync(path.join(cairn.dataDir, 'daemon.json')), 'a daemon was already recorded');
    await run('plain', 'hello there, please explain the layout of this repository');
    assert.ok(existsSync(path.join(cairn.dataDir, 'daemon.json')), `no daemon.json after the run\n${dump('plain')}`);
    const info = daemonInfo();
    const health = await fetch(`http://${info.addr}/health`, { signal: AbortSignal.timeout(5_000) });
    assert.equal(health.status, 200);
    // OpenCode has exited (and its process group was killed): the daemon is still there
    process.kill(info.pid, 0);
    const again = await fetch(`http://${info.addr}/health`, { signal: AbortSignal.timeout(5_000) });
    assert.equal(again.status, 200);
  });

  test('a plain run registers its session and its prompt', async () => {
    const sid = sessionOf(runs.plain.result);
    assert.ok(sid, `no session id in the run's events\n${dump('plain')}`);
    const s = await op('get_session', { id: sid });
    assert.equal(s.status, 200, `session ${sid} not in cairn: ${JSON.stringify(s.body)}`);
    assert.equal(s.body.agent ?? s.body.session?.agent, 'opencode');
    // the run ended with session.idle: the session is ended in cairn (engram's plugin never did)
    assert.ok(s.body.ended_at ?? s.body.session?.ended_at, `session ${sid} not ended: ${JSON.stringify(s.body)}`);
    const prompts = await op('recent_prompts', { project: s.body.project ?? s.body.session?.project, limit: 20 });
    assert.equal(prompts.status, 200);
    assert.match(JSON.stringify(prompts.body), /please explain the layout of this repository/);
  });

  test('the system prompt carries the protocol exactly once (one system message)', async () => {
    const text = await protocolText();
    assert.ok(text, 'the daemon has no protocol op (needs issue 13 core ops)');
    const cs = chats('plain');
    assert.ok(cs.length >= 1);
    for (const q of cs) {
      assert.equal(q.messages.filter((m) => m.role === 'system').length, 1, 'one system message');
      assert.equal(count(q.system, text), 1, `protocol count in request #${q.seq}`);
      // nor a second copy through `cairn mcp`'s instructions (OpenCode shows MCP instructions
      // in the system prompt): every protocol text starts with this line
      assert.equal(count(q.system, PROTOCOL_FIRST_LINE), 1, `protocol copies in request #${q.seq}:\n${q.system}`);
    }
    const title = during('plain').find((q) => q.kind === 'title');
    assert.equal(count(title?.system ?? '', text), 0, 'the title request gets no protocol');
  });

  test('"remember that we deploy with pnpm": the trigger note reaches the model and its save lands', async () => {
    await run('remember', 'remember that we deploy with pnpm');
    const first = chats('remember')[0];
    assert.ok(first.messages.some((m) => TRIGGER_RE.test(textOf(m))), `no trigger note in the request\n${dump('remember')}`);
    const saved = mock.toolResults.find((t) => t.name === 'cairn_mem_save');
    assert.ok(saved, `the model did not save\n${dump('remember')}`);
    const found = await op('search', { query: 'pnpm deploy', limit: 5 });
    const hit = (found.body?.hits ?? []).find((h) => h.title === 'We deploy with pnpm');
    assert.ok(hit, JSON.stringify(found.body).slice(0, 500));
    // the plugin gave the MCP save OpenCode's session (tool.execute.before)
    assert.equal(hit.session_id, sessionOf(runs.remember.result));
  });

  test("a new session's first request carries a [MEMORY] block with an earlier memory", async () => {
    // the memory is put there directly, so this check does not depend on the trigger one
    const project = path.basename(oc.project);
    const saved = await op('save', { project, title: 'Release tags are cut by CI', content: 'Only CI cuts release tags (quokka-release).', type: 'decision' });
    assert.equal(saved.status, 200, JSON.stringify(saved.body));
    await run('memory', 'how are release tags made here?');
    const first = chats('memory')[0];
    const user = first.messages.filter((m) => m.role === 'user').map(textOf).join('\n');
    assert.match(user, /\[MEMORY\]/, `no [MEMORY] block in the first request\n${dump('memory')}`);
    assert.match(user, /quokka-release|Release tags are cut by CI/);
    // the block follows what the user typed, so the title request starts with the user's words
    const title = during('memory').find((q) => q.kind === 'title');
    assert.ok(title, 'no title request');
    assert.match(title.lastUserText, /^"?how are release tags made here\?/);
  });

  test('a forced compaction: context in the summariser request, the summary stored, context back after', async () => {
    const r = await run('compaction', 'PLEASE-OVERFLOW the context');
    const compaction = during('compaction').find((q) => q.kind === 'compaction');
    assert.ok(compaction, `no compaction request\n${dump('compaction')}`);
    assert.match(compaction.lastText, /\[MEMORY\]/, 'the cairn context is pushed into the compaction prompt');
    const after = chats('compaction').filter((q) => q.seq > compaction.seq);
    assert.ok(after.length >= 1, `no request after the compaction\n${dump('compaction')}`);
    assert.match(after[0].system, /\[MEMORY\]/, 'the context is back in the next request');
    const sid = sessionOf(r);
    let stored = null;
    for (let i = 0; i < 40 && !stored; i++) {
      const found = await op('search', { query: 'MOCK-SUMMARY', limit: 10 });
      stored = (found.body?.hits ?? []).find((m) => m.type === 'compaction_summary') ?? null;
      if (!stored) await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(stored, `no compaction_summary memory for ${sid} (needs the save_compaction op)`);
    // cairn normalises topic keys to lower case
    assert.equal(stored.topic_key, `session/${sid}/compaction`.toLowerCase());
  });

  test('a sub-agent run is recorded under its parent, gets no protocol of its own, and its parent\'s session id', async () => {
    const r = await run('subagent', 'PLEASE-DELEGATE to a sub-agent');
    const parent = sessionOf(r);
    const result = mock.toolResults.find((t) => t.name === 'task' && /<task id="/.test(t.text));
    assert.ok(result, `the task tool did not run\n${dump('subagent')}`);
    const child = /<task id="(ses_[^"]+)"/.exec(result.text)[1];
    let s;
    for (let i = 0; i < 20; i++) {
      s = await op('get_session', { id: child });
      if (s.status === 200) break;
      await new Promise((res) => setTimeout(res, 100));
    }
    assert.equal(s.status, 200, `the child session is not in cairn: ${JSON.stringify(s.body)}`);
    assert.equal(s.body.parent_id ?? s.body.session?.parent_id, parent);
    const text = await protocolText();
    assert.ok(text, 'the daemon has no protocol op (needs issue 13 core ops)');
    const childReq = during('subagent').find((q) => q.kind === 'chat' && /SUBAGENT-PROMPT/.test(q.lastUserText));
    assert.ok(childReq, `no sub-agent request\n${dump('subagent')}`);
    assert.equal(count(childReq.system, text), 0, 'the sub-agent request carries no protocol');
    // upstream history: but where its parent's history is
    assert.equal(count(childReq.system, `**Upstream session ID: ${parent}**`), 1, `no upstream note\n${childReq.system.slice(-600)}`);
    const parentReqs = chats('subagent').filter((q) => q !== childReq);
    for (const q of parentReqs) assert.equal(count(q.system, text), 1, `parent request #${q.seq}`);
  });

  test('the context meter shows 75% for the mock usage; memory_compact compacts', async () => {
    await run('meter', 'PLEASE-METER and then compact');
    const afterGlob = chats('meter').find((q) => q.kind === 'tool-result' && q.toolResult?.name === 'glob');
    assert.ok(afterGlob, `glob was not called\n${dump('meter')}`);
    assert.match(afterGlob.system, /🟡 Context: 75% used \(96,000 \/ 128,000 tokens, mock\/mock-model\)/);
    assert.equal(chats('meter')[0].system.includes('Context: '), false, 'no meter before any usage is known');
    // the tool's answer (OpenCode 1.18.33 runs the scheduled compaction before it sends the
    // tool result back to the model, so read it from the run's events)
    const call = parseJsonEvents(runs.meter.result.stdout).find((e) => e.type === 'tool_use' && e.part?.tool === 'memory_compact');
    assert.ok(call, `memory_compact was not called\n${dump('meter')}`);
    assert.match(call.part.state?.output ?? '', /Compaction scheduled at 75%/);
    // the compaction runs after the turn; `opencode run` may exit first, so wait a moment for it
    let compaction = during('meter').find((q) => q.kind === 'compaction');
    for (let i = 0; i < 30 && !compaction; i++) {
      await new Promise((res) => setTimeout(res, 100));
      compaction = mock.requests.find((q) => q.seq > runs.meter.from && q.kind === 'compaction');
    }
    assert.ok(compaction, `no compaction after memory_compact\n${dump('meter')}`);
  });
});
