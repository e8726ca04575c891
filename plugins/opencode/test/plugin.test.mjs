// Unit tests of plugins/opencode/cairn.ts: every hook, replayed on payloads recorded from the
// real OpenCode binary (fixtures/hooks.jsonl, see record-fixtures.mjs), against a fake daemon.
// Run from tests/e2e (it has tsx): `npm run test:plugin`.
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import plugin from '../cairn.ts';
import { CHART_PROMPT, CONTINUITY, HISTORY, NOTE, PROTOCOL, TRIGGER, calls, upstream, events, fakeClient, fakeDaemon, hookArgs, settle, sleep, waitFor } from './helpers.mjs';
import { TEXT_PARTS as PLUGIN_TEXT_PARTS } from '../cairn/facts.ts';

/** How many protocol texts the plugin fetches at start-up. */
const TEXT_PARTS = PLUGIN_TEXT_PARTS.length;

const open = [];
afterEach(async () => {
  while (open.length) await open.pop().close();
});

async function setup({ answers, delayMs, client = fakeClient(), url, options = {} } = {}) {
  const daemon = url ? null : await fakeDaemon({ answers, delayMs });
  if (daemon) open.push(daemon);
  // the spool lives in the data dir: a temp one per test
  const dataDir = mkdtempSync(path.join(tmpdir(), 'cairn-plugin-'));
  open.push({ close: async () => rmSync(dataDir, { recursive: true, force: true }) });
  const hooks = await plugin.server(
    { client, directory: '/nonexistent/demo-project', worktree: '/nonexistent/demo-project', project: { id: 'x' } },
    { url: url ?? daemon.url, autostart: false, ...options, env: { CAIRN_HTTP_TOKEN: '', CAIRN_DATA_DIR: dataDir, ...(options.env ?? {}) } },
  );
  // let the start-up fetches (config, project, protocol texts) land
  await sleep(80);
  if (daemon && !delayMs) {
    // On a loaded machine 80 ms may not be enough (seen with four busy processes on two cores):
    // wait for the config and every protocol text to be answered, then for the plugin to read them.
    const startedUp = () =>
      daemon.ops('plugin_config').length > 0 && daemon.ops('protocol').length >= TEXT_PARTS && daemon.requests.every((r) => r.answered);
    await waitFor(startedUp, 10000, 'the start-up fetches to be answered');
    await settle();
  }
  return { hooks, daemon, client, dataDir };
}

/** Feed every event of a recorded run (up to the first recorded call of `untilHook`). */
async function replayEvents(hooks, run) {
  for (const e of events(run)) await hooks.event(structuredClone(e));
}

const mainChat = (run) => calls(run, 'chat.message')[0];
const systemCalls = (run) => calls(run, 'experimental.chat.system.transform');

describe('module shape', () => {
  test('one default export {id, server}, tool args as plain JSON schema', async () => {
    const mod = await import('../cairn.ts');
    assert.deepEqual(Object.keys(mod), ['default']);
    assert.equal(mod.default.id, 'cairn');
    assert.equal(typeof mod.default.server, 'function');
    const { hooks } = await setup();
    assert.deepEqual(Object.keys(hooks.tool), ['memory_compact']);
    assert.deepEqual(hooks.tool.memory_compact.args.force, { type: 'boolean', description: hooks.tool.memory_compact.args.force.description });
    for (const h of ['event', 'chat.message', 'tool.execute.before', 'tool.execute.after', 'experimental.text.complete', 'experimental.chat.system.transform', 'experimental.session.compacting']) {
      assert.equal(typeof hooks[h], 'function', h);
    }
  });
});

describe('chat.message: prompt capture, memory block, memory trigger, privacy', () => {
  test('captures the prompt with user_prompt, private parts redacted, and prepends the [MEMORY] block', async () => {
    const { hooks, daemon } = await setup();
    await replayEvents(hooks, 'plain');
    const [input, output] = hookArgs(mainChat('plain'));
    const before = output.parts.length;
    await hooks['chat.message'](input, output);
    const up = daemon.ops('user_prompt');
    assert.equal(up.length, 1);
    assert.equal(up[0].body.args.session_id, input.sessionID);
    assert.equal(up[0].body.args.project, 'demo');
    assert.equal(up[0].body.args.agent, 'build', 'the agent comes from output.message (input has only sessionID in 1.18.33)');
    assert.match(up[0].body.args.content, /a plain prompt \[REDACTED\] with enough words/);
    for (const r of daemon.requests) assert.ok(!r.raw.includes('sk-SECRET'), `private text left the process: ${r.path}`);
    assert.equal(up[0].body.args.host, 'opencode', 'the block comes with the answer: one round trip');
    assert.equal(daemon.ops('context').length, 0);
    assert.equal(output.parts.length, before + 2, 'the [MEMORY] block and the history guidance (once)');
    assert.equal(output.parts[2].text, HISTORY);
    assert.equal(output.parts[2].synthetic, true);
    assert.ok(output.parts[2].id > output.parts[1].id);
    const block = output.parts[1];
    assert.equal(block.type, 'text');
    assert.equal(block.synthetic, true);
    assert.match(block.text, /^\[MEMORY\]/);
    assert.equal(block.sessionID, input.sessionID);
    assert.equal(block.messageID, output.message.id);
    assert.match(block.id, /^prt_/);
    assert.ok(block.id > output.parts[0].id, 'the block sorts after the user text (OpenCode orders parts by id)');
    assert.equal(block.id.length, output.parts[0].id.length);
  });

  test('no block when the daemon says it is not the first prompt; the trigger note when it says so', async () => {
    const { hooks, daemon } = await setup({ answers: { user_prompt: { prompt_id: 2, first_prompt: false, memory_trigger: true } } });
    const [input, output] = hookArgs(mainChat('plain'));
    await hooks['chat.message'](input, output);
    assert.equal(daemon.ops('user_prompt').length, 1);
    assert.equal(output.parts.length, 2);
    assert.equal(output.parts[1].text, TRIGGER);
    assert.ok(output.parts[1].id > output.parts[0].id);
    assert.equal(output.parts[1].synthetic, true);
    assert.ok(!output.parts.some((p) => /^\[MEMORY\]/.test(p.text)));
  });

  test('a second message of the session asks for no block', async () => {
    const { hooks, daemon } = await setup();
    for (let i = 0; i < 2; i++) {
      const [input, output] = hookArgs(mainChat('plain'));
      await hooks['chat.message'](input, output);
    }
    assert.equal(daemon.ops('user_prompt').length, 2);
    assert.equal(daemon.ops('user_prompt').filter((r) => r.body.args.host === 'opencode').length, 2);
  });

  test('an older daemon answers no texts: the [MEMORY] block is asked for with op context', async () => {
    const { hooks, daemon } = await setup({ answers: { user_prompt: { prompt_id: 1, first_prompt: true, memory_trigger: false } } });
    const [input, output] = hookArgs(mainChat('plain'));
    await hooks['chat.message'](input, output);
    const ctx = daemon.ops('context');
    assert.equal(ctx.length, 1);
    assert.equal(ctx[0].body.args.layout, 'memory_block');
    assert.match(ctx[0].body.args.query, /plain prompt/);
    assert.ok(!ctx[0].body.args.query.includes('"'), 'opencode run quotes the message; the query is plain words');
    assert.ok(output.parts.some((p) => /^\[MEMORY\]/.test(p.text)));
  });

  test('private tags: case-insensitive, multi-line, unclosed to the end', async () => {
    const { hooks, daemon } = await setup();
    const [input, output] = hookArgs(mainChat('plain'));
    output.parts[0].text = 'keep <PRIVATE>a\nb</Private> this and <private>never\nsent at all';
    await hooks['chat.message'](input, output);
    assert.equal(daemon.ops('user_prompt')[0].body.args.content, 'keep [REDACTED] this and [REDACTED]');
  });

  test('private tags: every shape of the shared fixture, as cairn itself redacts them', async () => {
    const fixture = JSON.parse(readFileSync(new URL('../../../tests/fixtures/redaction-cases.json', import.meta.url), 'utf8'));
    for (const c of fixture.cases) {
      const { hooks, daemon } = await setup();
      const [input, output] = hookArgs(mainChat('plain'));
      output.parts[0].text = c.input;
      await hooks['chat.message'](input, output);
      const sent = daemon.ops('user_prompt')[0].body.args.content;
      assert.equal(sent, c.expected, c.name);
      assert.ok(!sent.includes('SECRET'), `${c.name}: leaked`);
    }
  });

  test('huge and malformed prompts: cut to 2,000 chars; odd parts ignored', async () => {
    const { hooks, daemon } = await setup();
    const [input, output] = hookArgs(mainChat('plain'));
    output.parts = [{ type: 'text', text: 'x'.repeat(5_000_000) }, null, { type: 'file' }, { type: 'text', text: 42 }, { type: 'text', synthetic: true, text: 'injected' }];
    await hooks['chat.message'](input, output);
    assert.equal(daemon.ops('user_prompt')[0].body.args.content.length, 2000);
    const files = hookArgs(mainChat('plain'));
    files[1].parts = [{ type: 'file', mime: 'image/png', url: 'data:,' }];
    await hooks['chat.message'](...files);
    assert.equal(daemon.ops('user_prompt').length, 1, 'no prompt op for a message without text');
    await hooks['chat.message'](input, { message: null, parts: 'not an array' });
    await hooks['chat.message']({}, {});
  });

  test('a sub-agent (parentID on session.created) is registered under its parent, nothing else', async () => {
    const { hooks, daemon } = await setup();
    await replayEvents(hooks, 'task');
    const child = calls('task', 'chat.message').find((c) => c.input.agent === 'general');
    const [input, output] = hookArgs(child);
    await hooks['chat.message'](input, output);
    await sleep(50);
    assert.equal(daemon.ops('user_prompt').length, 0);
    assert.equal(daemon.ops('context').length, 0);
    assert.equal(output.parts.length, 1);
    const reg = daemon.posts('/sessions').find((r) => r.body.id === input.sessionID);
    assert.ok(reg, 'the child session is registered');
    assert.match(reg.body.parent_id, /^ses_/);
    assert.equal(reg.body.title, 'Inspect files (@general subagent)');
  });

  test('an unseen session is looked up with client.session.get (the hook came before the event)', async () => {
    const child = calls('task', 'chat.message').find((c) => c.input.agent === 'general');
    const client = fakeClient({ sessions: { [child.input.sessionID]: { id: child.input.sessionID, parentID: 'ses_parent' } } });
    const { hooks, daemon } = await setup({ client });
    const [input, output] = hookArgs(child);
    await hooks['chat.message'](input, output);
    assert.equal(daemon.ops('user_prompt').length, 0);
  });

  test('an older daemon (no user_prompt op): POST /sessions and add_prompt instead', async () => {
    const { hooks, daemon } = await setup({ answers: { user_prompt: undefined, context: { context: '## Memory\n- #1 deploy with pnpm', memory_ids: [1] } } });
    delete daemon.state.answers.user_prompt;
    const [input, output] = hookArgs(mainChat('plain'));
    await hooks['chat.message'](input, output);
    await waitFor(() => daemon.ops('add_prompt').length === 1, 2000, 'add_prompt');
    assert.ok(daemon.posts('/sessions').some((r) => r.body.id === input.sessionID));
    assert.match(output.parts[1].text, /^\[MEMORY\]\n## Memory/);
  });
});

describe('fail open', () => {
  test('daemon down: the hook returns at once, parts untouched, one log line', async () => {
    const dead = await fakeDaemon();
    const url = dead.url;
    await dead.close();
    const { hooks, client } = await setup({ url });
    const [input, output] = hookArgs(mainChat('plain'));
    const before = JSON.stringify(output);
    const t0 = Date.now();
    await hooks['chat.message'](input, output);
    const [i2, o2] = hookArgs(systemCalls('plain')[1]);
    await hooks['experimental.chat.system.transform'](i2, o2);
    assert.ok(Date.now() - t0 < 1500, `took ${Date.now() - t0} ms`);
    assert.equal(JSON.stringify(output), before);
    assert.equal(o2.system.length, 1);
    await sleep(50);
    assert.ok(client.logs.length >= 1 && client.logs.every((l) => l.service === 'cairn'), JSON.stringify(client.logs));
  });

  test('a slow daemon: awaited hooks wait at most ~300 ms, the request finishes in the background', async () => {
    const { hooks, daemon } = await setup();
    await hooks['experimental.chat.system.transform'](...hookArgs(systemCalls('plain')[1]));
    daemon.state.delayMs = 1500;
    const [input, output] = hookArgs(mainChat('plain'));
    const t0 = Date.now();
    await hooks['chat.message'](input, output);
    const took = Date.now() - t0;
    assert.ok(took < 700, `chat.message took ${took} ms`);
    assert.equal(output.parts.length, 1, 'nothing injected after the cap');
    await waitFor(() => daemon.ops('user_prompt').length === 1, 3000, 'the background request');
  });

  test('a 500 from the daemon: no throw, a log line', async () => {
    const { hooks, client } = await setup({ answers: { user_prompt: { status: 500, body: { error: { code: 'internal', message: 'boom' } } } } });
    const [input, output] = hookArgs(mainChat('plain'));
    await hooks['chat.message'](input, output);
    await waitFor(() => client.logs.some((l) => /boom/.test(l.message)), 2000, 'the log line');
    assert.equal(output.parts.length, 1);
  });

  test('every call carries the bearer token when CAIRN_HTTP_TOKEN is set', async () => {
    const { hooks, daemon } = await setup({ options: { env: { CAIRN_HTTP_TOKEN: 't0k' } } });
    await hooks['chat.message'](...hookArgs(mainChat('plain')));
    assert.ok(daemon.requests.length > 3);
    for (const r of daemon.requests) assert.equal(r.headers.authorization, 'Bearer t0k', r.path);
  });
});

describe('the spool: no write lost while the daemon starts', () => {
  const spooled = (dataDir) => {
    let names = [];
    try {
      names = readdirSync(path.join(dataDir, 'spool')).filter((n) => n.endsWith('.json')).sort();
    } catch {
      // no spool yet
    }
    return names.map((n) => ({ name: n, record: JSON.parse(readFileSync(path.join(dataDir, 'spool', n), 'utf8')) }));
  };

  /** A daemon's address with nobody listening (yet). */
  const nobodyAt = async () => {
    const gone = await fakeDaemon();
    await gone.close();
    return gone.url;
  };

  test('no daemon: the writes go to the spool in order, as records the daemon reads, private parts stripped', async () => {
    const { hooks, dataDir } = await setup({ url: await nobodyAt() });
    const [input, output] = hookArgs(mainChat('plain'));
    output.parts[0].text = 'deploy with <private>sk-secret</private> pnpm';
    const t0 = Date.now();
    await hooks['chat.message'](input, output);
    assert.ok(Date.now() - t0 < 1500, `chat.message took ${Date.now() - t0} ms`);
    await hooks['tool.execute.after']({ sessionID: input.sessionID, tool: 'bash', callID: 'c1' }, { output: 'ok' });
    await waitFor(() => spooled(dataDir).some((r) => r.record.request.op === 'tool_call'), 3000, 'the tool call spooled');
    const records = spooled(dataDir);
    const ops = records.map((r) => r.record.request.op);
    assert.ok(ops.indexOf('user_prompt') < ops.indexOf('tool_call'), ops.join());
    for (const { name, record } of records) {
      assert.equal(record.v, 1);
      assert.equal(record.source, 'opencode');
      assert.equal(name, `${record.id}.json`);
      assert.match(record.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    const prompt = records.find((r) => r.record.request.op === 'user_prompt').record.request.args;
    assert.equal(prompt.content, 'deploy with [REDACTED] pnpm');
  });

  test('the daemon comes up late: the plugin pokes its drain, and only then writes live again (nothing overtakes)', async () => {
    const url = await nobodyAt();
    const { hooks, dataDir } = await setup({ url });
    const [input, output] = hookArgs(mainChat('plain'));
    await hooks['chat.message'](input, output);
    await waitFor(() => spooled(dataDir).length >= 1, 3000, 'the prompt spooled');
    // the daemon comes up where the plugin looks for it, its /health failing for now
    const daemon = await fakeDaemon({ port: Number(new URL(url).port), health: false });
    open.push(daemon);
    // a drain that applies what is spooled, in file-name order
    const drained = [];
    daemon.state.drain = () => {
      for (const { name, record } of spooled(dataDir)) {
        drained.push(record.request.op);
        rmSync(path.join(dataDir, 'spool', name));
      }
      return 0;
    };
    // still down: a second write follows the first into the spool
    await hooks['tool.execute.after']({ sessionID: input.sessionID, tool: 'bash', callID: 'c1' }, { output: 'ok' });
    await waitFor(() => spooled(dataDir).some((r) => r.record.request.op === 'tool_call'), 3000, 'the tool call spooled');
    daemon.state.health = true;
    await waitFor(() => daemon.posts('/spool/drain').length >= 1 && spooled(dataDir).length === 0, 5000, 'the drain');
    assert.deepEqual(drained.filter((op) => op === 'user_prompt' || op === 'tool_call'), ['user_prompt', 'tool_call']);
    await hooks['tool.execute.after']({ sessionID: input.sessionID, tool: 'bash', callID: 'c2' }, { output: 'ok' });
    await waitFor(() => daemon.ops('tool_call').length === 1, 3000, 'the live tool call');
    const live = daemon.ops('tool_call')[0];
    assert.match(live.headers['idempotency-key'], /^[0-9a-f-]{36}$/, 'a live write carries its event id');
    assert.equal(spooled(dataDir).length, 0);
  });

  test('a full disk (the spool cannot be written): the host is not hurt, one log line', async () => {
    const { hooks, dataDir, client } = await setup({ url: await nobodyAt() });
    // the spool's place is taken by a file: nothing can be written there
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path.join(dataDir, 'spool'), '');
    const [input, output] = hookArgs(mainChat('plain'));
    await hooks['chat.message'](input, output);
    await waitFor(() => client.logs.some((l) => /lost/.test(l.message)), 3000, 'the log line');
    assert.equal(output.parts.length, 1);
  });
});

describe('experimental.chat.system.transform: protocol, context meter', () => {
  test('the protocol is appended to the last entry, never a new one, and only once', async () => {
    const { hooks } = await setup();
    const [input, output] = hookArgs(systemCalls('plain')[1]);
    const first = output.system[0];
    await hooks['experimental.chat.system.transform'](input, output);
    assert.equal(output.system.length, 1);
    assert.ok(output.system[0].startsWith(first));
    assert.ok(output.system[0].endsWith(PROTOCOL));
    await hooks['experimental.chat.system.transform'](input, output);
    assert.equal(output.system[0].split(PROTOCOL).length - 1, 1, 'not twice');
    const two = { system: ['a', 'b'] };
    await hooks['experimental.chat.system.transform'](input, two);
    assert.deepEqual(two.system.slice(0, 1), ['a']);
    assert.equal(two.system.length, 2);
    assert.ok(two.system[1].startsWith('b\n\n'));
  });

  test('title and summariser requests get nothing; a sub-agent only its upstream session', async () => {
    const { hooks } = await setup();
    await replayEvents(hooks, 'task');
    const title = hookArgs(systemCalls('plain')[0]);
    const compaction = hookArgs(calls('compact-tool', 'experimental.chat.system.transform', (c) => /summarization/.test(c.output.system[0]))[0]);
    for (const [input, output] of [title, compaction]) {
      const before = JSON.stringify(output.system);
      await hooks['experimental.chat.system.transform'](input, output);
      assert.equal(JSON.stringify(output.system), before);
    }
    const parent = mainChat('task').input.sessionID;
    const [input, output] = hookArgs(calls('task', 'experimental.chat.system.transform').find((c) => c.input.sessionID !== parent));
    const before = [...output.system];
    await hooks['experimental.chat.system.transform'](input, output);
    assert.equal(output.system.length, before.length, 'appended to the last entry, never a new one');
    assert.ok(output.system.at(-1).endsWith(`\n\n${upstream(parent)}`), output.system.at(-1).slice(-200));
    assert.ok(!output.system.join('\n').includes(PROTOCOL), 'no memory protocol for a sub-agent');
    await hooks['experimental.chat.system.transform'](input, output);
    assert.equal(output.system.join('\n').split('Upstream session ID').length, 2, 'only once');
  });

  test('upstream history can be turned off, for all or per agent', async () => {
    for (const history of [{ upstream_history: { enable: false } }, { upstream_history: { enable: true, disable_for_agents: ['general'] } }]) {
      const { hooks } = await setup({ answers: { plugin_config: { history } } });
      await replayEvents(hooks, 'task');
      const child = calls('task', 'chat.message').find((c) => c.input.agent === 'general');
      await hooks['chat.message'](...hookArgs(child));
      const [input, output] = hookArgs(calls('task', 'experimental.chat.system.transform').find((c) => c.input.sessionID === child.input.sessionID));
      const before = JSON.stringify(output.system);
      await hooks['experimental.chat.system.transform'](input, output);
      assert.equal(JSON.stringify(output.system), before, JSON.stringify(history));
    }
  });

  test('per-agent opt-out from plugin_config', async () => {
    const { hooks } = await setup({ answers: { plugin_config: { inject: { protocol: ['plan'] } } } });
    await hooks['chat.message'](...hookArgs(mainChat('plain')));
    const [input, output] = hookArgs(systemCalls('plain')[1]);
    await hooks['experimental.chat.system.transform'](input, output);
    assert.ok(!output.system[0].includes(PROTOCOL), 'agent build is not in ["plan"]');
  });

  test("the context meter: the daemon's line for tokens.total of the last step over the model limit", async () => {
    const line = '🟡 Context: 50% used (64,100 / 128,000 tokens, mock/mock-model). At the next natural break, call memory_compact.';
    const { hooks, daemon } = await setup({ answers: { context_meter: (a) => ({ used: a.used, limit: a.limit, percent: 50, status: 'yellow', line, auto_compact: false, compact_allowed: true }) } });
    await replayEvents(hooks, 'learn'); // the step reported 64,000 + 100 tokens
    const [input, output] = hookArgs(calls('learn', 'experimental.chat.system.transform')[1]);
    await hooks['experimental.chat.system.transform'](input, output);
    assert.ok(output.system[0].endsWith(`\n\n${line}`), output.system[0]);
    const asked = daemon.ops('context_meter').at(-1).body.args;
    assert.deepEqual(asked, { used: 64100, limit: 128000, model: 'mock/mock-model', host: 'opencode' });
    await hooks['experimental.chat.system.transform'](...hookArgs(calls('learn', 'experimental.chat.system.transform')[1]));
    assert.equal(daemon.ops('context_meter').filter((r) => r.body.args.limit === 128000).length, 1, 'asked once per measurement');
  });

  test("unknown model limit: the daemon's default window; green shows no line", async () => {
    const { hooks, daemon } = await setup();
    await replayEvents(hooks, 'learn');
    const [input, output] = hookArgs(calls('learn', 'experimental.chat.system.transform')[1]);
    delete input.model.limit;
    const before = output.system[0];
    await hooks['experimental.chat.system.transform'](input, output);
    const asked = daemon.ops('context_meter').at(-1).body.args;
    assert.equal(asked.limit, undefined, 'the daemon applies [context_meter] default_limit');
    assert.ok(!/Context:|METER/.test(output.system[0].slice(before.length)), output.system[0]);
  });

  test('an older daemon without context_meter: no meter, nothing else lost', async () => {
    const { hooks, daemon } = await setup();
    delete daemon.state.answers.context_meter;
    await replayEvents(hooks, 'learn');
    const [input, output] = hookArgs(calls('learn', 'experimental.chat.system.transform')[1]);
    await hooks['experimental.chat.system.transform'](input, output);
    assert.ok(output.system[0].includes(PROTOCOL));
  });
});

describe('tools: tool-call counting, passive capture', () => {
  test("cairn's MCP saves get the OpenCode session id (tool.execute.before)", async () => {
    const { hooks } = await setup();
    const before = calls('task', 'tool.execute.before')[0];
    const save = hookArgs(before);
    save[0].tool = 'cairn_mem_save';
    save[1].args = { title: 't', content: 'c' };
    await hooks['tool.execute.before'](...save);
    assert.equal(save[1].args.session_id, before.input.sessionID);
    const own = hookArgs(before);
    own[0].tool = 'cairn_mem_save';
    own[1].args = { title: 't', content: 'c', session_id: 'mine' };
    await hooks['tool.execute.before'](...own);
    assert.equal(own[1].args.session_id, 'mine', 'an explicit session is kept');
    const other = hookArgs(before);
    await hooks['tool.execute.before'](...other);
    assert.equal(other[1].args.session_id, undefined, 'other tools are left alone');
    const search = hookArgs(before);
    search[0].tool = 'cairn_mem_search';
    search[1].args = { query: 'x' };
    await hooks['tool.execute.before'](...search);
    assert.equal(search[1].args.session_id, undefined, 'mem_search takes no session');
    const router = hookArgs(before);
    router[0].tool = 'cairn_memory';
    router[1].args = { op: 'context_usage', args: {} };
    await hooks['tool.execute.before'](...router);
    assert.equal(router[1].args.session_id, before.input.sessionID, 'the router tool learns its caller');
    assert.deepEqual(router[1].args.args, {}, "the op's own arguments are left alone");
  });

  test('history tools learn the caller (visibility); a browse without a session reads the caller\'s', async () => {
    const { hooks } = await setup();
    const before = calls('task', 'tool.execute.before')[0];
    const me = before.input.sessionID;
    const browse = hookArgs(before);
    browse[0].tool = 'cairn_history_browse_turns';
    browse[1].args = { num_before: 3 };
    await hooks['tool.execute.before'](...browse);
    assert.deepEqual(browse[1].args, { num_before: 3, caller_session_id: me, session_id: me });
    const other = hookArgs(before);
    other[0].tool = 'cairn_history_pull_message';
    other[1].args = { session_id: 'ses_other', message_id: 'msg_1' };
    await hooks['tool.execute.before'](...other);
    assert.deepEqual(other[1].args, { session_id: 'ses_other', message_id: 'msg_1', caller_session_id: me });
    const search = hookArgs(before);
    search[0].tool = 'cairn_history_search';
    search[1].args = { query: 'retry' };
    await hooks['tool.execute.before'](...search);
    assert.deepEqual(search[1].args, { query: 'retry', caller_session_id: me }, 'a search without a session spans the project');
  });

  test('a host tool call is counted; cairn tools are not; Task output goes to passive capture', async () => {
    const { hooks, daemon } = await setup();
    await replayEvents(hooks, 'task');
    const after = calls('task', 'tool.execute.after')[0];
    await hooks['tool.execute.after'](...hookArgs(after));
    await hooks['tool.execute.after']({ ...after.input, tool: 'cairn_mem_save' }, { output: 'saved' });
    await hooks['tool.execute.after']({ ...after.input, tool: 'memory_compact' }, { output: 'x' });
    await waitFor(() => daemon.posts('/observations/passive').length === 1, 2000, 'passive');
    await sleep(80);
    const calls3 = daemon.ops('tool_call').map((r) => r.body.args);
    assert.deepEqual(calls3.map((a) => a.tool).sort(), [after.input.tool, 'cairn_mem_save', 'memory_compact'].sort(), 'the daemon tells which count');
    assert.deepEqual(calls3.find((a) => a.tool === after.input.tool), { session_id: after.input.sessionID, project: 'demo', tool: after.input.tool, host: 'opencode' });
    assert.equal(daemon.ops('record_activity').length, 0);
    const p = daemon.posts('/observations/passive')[0].body;
    assert.equal(p.source, 'task-complete');
    assert.match(p.content, /<task_result>/);
  });

  test('an older daemon without tool_call: record_activity for host tools only', async () => {
    const { hooks, daemon } = await setup();
    delete daemon.state.answers.tool_call;
    await replayEvents(hooks, 'task');
    const after = calls('task', 'tool.execute.after')[0];
    await hooks['tool.execute.after']({ ...after.input, tool: 'bash' }, { output: 'x' });
    await hooks['tool.execute.after']({ ...after.input, tool: 'cairn_mem_save' }, { output: 'saved' });
    await waitFor(() => daemon.ops('record_activity').length === 1, 2000, 'the fallback count');
    await sleep(80);
    assert.equal(daemon.ops('record_activity').length, 1);
    assert.deepEqual(daemon.ops('record_activity')[0].body.args, { session_id: after.input.sessionID, project: 'demo', event: 'tool_call' });
  });

  test('session.idle ends the session in cairn, keeping its activity (the next prompt is not a first)', async () => {
    const { hooks, daemon } = await setup();
    await replayEvents(hooks, 'plain');
    const idle = events('plain').find((e) => e.event.type === 'session.idle');
    assert.ok(idle, 'the recorded run has a session.idle');
    await waitFor(() => daemon.ops('end_session').length >= 1, 2000, 'end_session');
    const ends = daemon.ops('end_session');
    assert.deepEqual(ends.at(-1).body.args, { id: idle.event.properties.sessionID, keep_activity: true });
    // the session is read from OpenCode, then its Last Session record revised from that
    await waitFor(() => daemon.ops('record_session').length >= 1, 2000, 'record_session');
    const record = daemon.ops('record_session').at(-1);
    assert.deepEqual(record.body.args, { session_id: idle.event.properties.sessionID, project: 'demo', compacted: false });
    const poke = daemon.ops('history_ingest').findLast((r) => r.body.args.session_id === idle.event.properties.sessionID);
    assert.ok(poke && daemon.requests.indexOf(poke) < daemon.requests.indexOf(record), 'read before it is recorded');
    // registered before it is ended, so the end never meets an unknown session
    assert.ok(daemon.posts('/sessions').length >= 1);
  });

  test("a finished turn's Key Learnings go to passive capture once", async () => {
    const { hooks, daemon } = await setup();
    const text = calls('learn', 'experimental.text.complete')[0];
    for (const e of events('learn')) {
      if (e.event.type === 'message.updated' && e.event.properties.info.finish === 'stop') await hooks['experimental.text.complete'](...hookArgs(text));
      await hooks.event(structuredClone(e));
    }
    await waitFor(() => daemon.posts('/observations/passive').length >= 1, 2000, 'passive');
    await sleep(50);
    const ps = daemon.posts('/observations/passive');
    assert.equal(ps.length, 1);
    assert.equal(ps[0].body.source, 'turn-complete');
    assert.match(ps[0].body.content, /## Key Learnings:\n1\. The build uses pnpm workspaces/);
  });
});

describe('compaction: context, stored summary, self-continuity prompt, memory_compact', () => {
  async function compactRun(run, answers) {
    const ctx = await setup({ answers });
    for (const c of [...calls(run, 'event'), ...calls(run, 'experimental.session.compacting'), ...calls(run, 'experimental.text.complete')].sort((a, b) => (a.t ?? 0) - (b.t ?? 0) || 0)) {
      if (c.hook === 'event') await ctx.hooks.event(structuredClone(c.input));
      else if (c.hook === 'experimental.session.compacting') {
        const [i, o] = hookArgs(c);
        await ctx.hooks[c.hook](i, o);
        ctx.compacting = o;
      } else {
        const args = hookArgs(c);
        await ctx.hooks[c.hook](...args);
        (ctx.completed ??= []).push(args[1]);
      }
    }
    return ctx;
  }

  test('auto compaction: context and the note pushed; the summary stored with save_compaction', async () => {
    const { daemon, compacting } = await compactRun('overflow');
    assert.match(compacting.context[0], /^\[MEMORY\]/);
    assert.equal(compacting.context[1], NOTE);
    assert.equal(compacting.prompt, undefined);
    await waitFor(() => daemon.ops('save_compaction').length === 1, 2000, 'save_compaction');
    const a = daemon.ops('save_compaction')[0].body.args;
    assert.equal(a.trigger, 'auto');
    assert.equal(a.overflow, false);
    assert.match(a.summary, /MOCK-SUMMARY of earlier work/);
    assert.match(a.session_id, /^ses_/);
  });

  test('no text.complete for the summary: it is read from OpenCode after session.compacted', async () => {
    const text = calls('overflow', 'experimental.text.complete').find((c) => /MOCK-SUMMARY/.test(c.output.text));
    const client = fakeClient();
    client.session.messages = async ({ path: p }) => ({
      data: [
        { info: { id: 'msg_user', role: 'user', sessionID: p.id }, parts: [{ type: 'text', text: 'hi' }] },
        { info: { id: text.input.messageID, role: 'assistant', summary: true, sessionID: p.id }, parts: [{ type: 'text', text: text.output.text }] },
      ],
    });
    const { hooks, daemon } = await setup({ client });
    for (const c of [...calls('overflow', 'event'), ...calls('overflow', 'experimental.session.compacting')].sort((a, b) => a.t - b.t)) {
      if (c.hook === 'event') await hooks.event(structuredClone(c.input));
      else await hooks[c.hook](...hookArgs(c));
    }
    await waitFor(() => daemon.ops('save_compaction').length === 1, 2000, 'save_compaction');
    assert.match(daemon.ops('save_compaction')[0].body.args.summary, /MOCK-SUMMARY of earlier work/);
  });

  test("the block is cairn's as it comes, even its one line for a project with nothing stored", async () => {
    const nothing = '[MEMORY] Nothing is stored for project "demo" yet: no memories, no earlier sessions.';
    const { daemon, compacting } = await compactRun('overflow', { context: (a) => (a.layout === 'memory_block' ? { context: nothing, memory_ids: [] } : { context: '## recent', memory_ids: [1] }) });
    assert.equal(compacting.context[0], nothing);
    assert.ok(daemon.ops('context').every((r) => r.body.args.layout === 'memory_block'), 'no recent-context fallback');
  });

  test('manual compaction is recorded as manual; continuity mode sets the prompt', async () => {
    const { daemon, compacting } = await compactRun('compact-tool', { plugin_config: { compaction: { mode: 'continuity' } } });
    assert.equal(compacting.prompt, CONTINUITY);
    assert.ok(!compacting.context.includes(NOTE));
    await waitFor(() => daemon.ops('save_compaction').length === 1, 2000, 'save_compaction');
    assert.equal(daemon.ops('save_compaction')[0].body.args.trigger, 'manual');
  });

  test('chart mode: the summariser is asked for next to nothing; the stored summary is the chart', async () => {
    const chart = '# Summary\nI lost context from my prior conversation. CHART-OF-SESSION';
    const ctx = await compactRun('overflow', {
      plugin_config: { compaction: { mode: 'chart' } },
      history_ingest: { sources: 1 },
      history_chart: (a) => ({ session_id: a.session_id, chart }),
    });
    const { daemon, compacting } = ctx;
    assert.equal(compacting.prompt, CHART_PROMPT);
    assert.ok(!(compacting.context ?? []).includes(NOTE));
    const sid = daemon.ops('history_chart')[0].body.args.session_id;
    assert.match(sid, /^ses_/);
    const poke = daemon.ops('history_ingest')[0].body.args;
    assert.deepEqual(poke, { host: 'opencode', session_id: sid }, 'the session is read before it is charted');
    // step 2: the summary's text is replaced by the chart, which is not saved as a memory
    assert.ok(ctx.completed.some((o) => o.text === chart), 'the summary is the chart');
    assert.ok(!ctx.completed.some((o) => /MOCK-SUMMARY/.test(o.text)), 'no summary text is left');
    await sleep(50);
    assert.equal(daemon.ops('save_compaction').length, 0, 'a chart is not saved as a memory');
    // what the session did is kept as its Last Session record, marked compacted
    await waitFor(() => daemon.ops('record_session').some((r) => r.body.args.compacted === true), 2000, 'record_session');
    assert.equal(daemon.ops('record_session').find((r) => r.body.args.compacted).body.args.session_id, sid);
  });

  test('chart mode without a chart (no history yet): the context mode\'s summary', async () => {
    const { daemon, compacting } = await compactRun('overflow', {
      plugin_config: { compaction: { mode: 'chart' } },
      history_ingest: { sources: 0 },
      history_chart: { status: 404, body: { error: { code: 'history_session_not_found', message: 'no such session' } } },
    });
    assert.equal(compacting.prompt, undefined);
    assert.equal(compacting.context[1], NOTE);
    await waitFor(() => daemon.ops('save_compaction').length === 1, 2000, 'save_compaction');
  });

  test('after session.compacted the memory block comes back in the system prompt', async () => {
    const { hooks } = await compactRun('overflow');
    const last = calls('overflow', 'experimental.chat.system.transform').at(-1);
    const [input, output] = hookArgs(last);
    await hooks['experimental.chat.system.transform'](input, output);
    assert.match(output.system[0], /\[MEMORY\]\n## Project Brief/);
  });

  test('memory_compact refuses below min_percent, schedules summarize (not awaited) with force or above', async () => {
    const { hooks, client } = await setup();
    await replayEvents(hooks, 'learn'); // 50% of 128k after the system transform teaches the limit
    const sys = hookArgs(calls('learn', 'experimental.chat.system.transform')[1]);
    await hooks['experimental.chat.system.transform'](...sys);
    const sessionID = mainChat('learn').input.sessionID;
    await hooks['chat.message'](...hookArgs(mainChat('learn')));
    const { execute } = hooks.tool.memory_compact;
    const low = await setup({ answers: { plugin_config: { compaction: { min_percent: 60 } } } });
    await replayEvents(low.hooks, 'learn');
    await low.hooks['experimental.chat.system.transform'](...hookArgs(calls('learn', 'experimental.chat.system.transform')[1]));
    await low.hooks['chat.message'](...hookArgs(mainChat('learn')));
    const refused = await low.hooks.tool.memory_compact.execute({}, { sessionID });
    assert.match(refused, /Not compacting: the context is at 50% .* below the 60% minimum/);
    assert.equal(low.client.summarized.length, 0);
    const forced = await low.hooks.tool.memory_compact.execute({ force: true }, { sessionID });
    assert.match(forced, /Compaction scheduled at 50%/);
    assert.equal(low.client.summarized.length, 0, 'not called before the tool returned');
    await sleep(20);
    assert.deepEqual(low.client.summarized, [{ path: { id: sessionID }, body: { providerID: 'mock', modelID: 'mock-model' } }]);
    const ok = await execute({}, { sessionID });
    assert.match(ok, /Compaction scheduled at 50%/, '50% ≥ the default 50% minimum');
    await sleep(20);
    assert.equal(client.summarized.length, 1);
    assert.match(await execute({ force: true }, { sessionID }), /already under way/);
  });

  test('threshold auto-compaction when configured, off by default', async () => {
    const off = await setup();
    await replayEvents(off.hooks, 'learn');
    await sleep(20);
    assert.equal(off.client.summarized.length, 0);
    const on = await setup({ answers: { plugin_config: { compaction: { auto_at: 0.4 } } } });
    await on.hooks['chat.message'](...hookArgs(mainChat('learn')));
    await on.hooks['experimental.chat.system.transform'](...hookArgs(calls('learn', 'experimental.chat.system.transform')[1]));
    await replayEvents(on.hooks, 'learn');
    await sleep(20);
    assert.equal(on.client.summarized.length, 1);
  });
});
