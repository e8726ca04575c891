// Self-tests of the harness. They need no cairn binary: they prove the mock model speaks the
// OpenAI chat-completions dialect, and that real OpenCode, driven by it, calls a tool of a
// stdio MCP server (tests/e2e/fixtures/echo-mcp-server.mjs) and hands the result back.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { callTool, startMockModel, whenUserSays } from './lib/mock-model.mjs';
import {
  OPENCODE_MISSING,
  createOpenCodeSandbox,
  describeRun,
  findOpenCodeBin,
  parseJsonEvents,
} from './lib/opencode.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FIXTURE_SERVER = path.join(HERE, 'fixtures', 'echo-mcp-server.mjs');

async function chat(mock, body) {
  const res = await fetch(`${mock.baseURL}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: 'Bearer mock-key' },
    body: JSON.stringify({ model: 'mock-model', ...body }),
  });
  return res;
}

/** Read an SSE body into its `data:` payloads (the final "[DONE]" kept as a string). */
async function readSse(res) {
  const text = await res.text();
  return text
    .split('\n\n')
    .map((block) => block.trim())
    .filter((block) => block.startsWith('data: '))
    .map((block) => block.slice('data: '.length))
    .map((data) => (data === '[DONE]' ? data : JSON.parse(data)));
}

const TOOLS = [
  {
    type: 'function',
    function: { name: 'fixture_echo', description: 'echo', parameters: { type: 'object', properties: {} } },
  },
];

describe('mock model', { timeout: 30_000 }, () => {
  let mock;
  before(async () => {
    mock = await startMockModel({
      rules: [whenUserSays('PLEASE-ECHO', callTool('fixture_echo', { text: 'hi' }))],
    });
  });
  after(() => mock?.close());

  test('binds loopback on a free port and lists its model', async () => {
    assert.match(mock.baseURL, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    assert.notEqual(mock.port, 0);
    const res = await fetch(`${mock.baseURL}/models`);
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.deepEqual(body.data.map((m) => m.id), ['mock-model']);
  });

  test('answers a non-streaming request and records its body', async () => {
    const res = await chat(mock, {
      messages: [
        { role: 'system', content: 'SYSTEM-MARKER' },
        { role: 'user', content: 'hello there' },
      ],
    });
    assert.equal(res.status, 200);
    const body = await res.json();
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.choices[0].finish_reason, 'stop');
    assert.equal(body.choices[0].message.content, 'MOCK-REPLY: hello there');
    assert.ok(body.usage.total_tokens > 0);
    const seen = mock.requests.at(-1);
    assert.equal(seen.kind, 'chat');
    assert.equal(seen.stream, false);
    assert.equal(seen.system, 'SYSTEM-MARKER');
    assert.equal(seen.body.messages[1].content, 'hello there');
  });

  test('streams text as SSE chunks ending in usage and [DONE]', async () => {
    const res = await chat(mock, {
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: [{ type: 'text', text: 'stream me' }] }],
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /text\/event-stream/);
    const events = await readSse(res);
    assert.equal(events.at(-1), '[DONE]');
    const chunks = events.slice(0, -1);
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
    assert.equal(text, 'MOCK-REPLY: stream me');
    assert.equal(chunks.find((c) => c.choices?.[0]?.finish_reason)?.choices[0].finish_reason, 'stop');
    assert.ok(chunks.at(-1).usage, 'the last chunk carries usage');
    assert.equal(mock.requests.at(-1).stream, true);
  });

  test('a rule makes it call a tool (streaming and not)', async () => {
    const messages = [{ role: 'user', content: '"PLEASE-ECHO now"' }];
    const plain = await (await chat(mock, { messages, tools: TOOLS })).json();
    assert.equal(plain.choices[0].finish_reason, 'tool_calls');
    const call = plain.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'fixture_echo');
    assert.deepEqual(JSON.parse(call.function.arguments), { text: 'hi' });

    const events = await readSse(await chat(mock, { messages, tools: TOOLS, stream: true }));
    const deltas = events.slice(0, -1).flatMap((c) => c.choices?.[0]?.delta?.tool_calls ?? []);
    assert.equal(deltas.length, 1);
    assert.equal(deltas[0].function.name, 'fixture_echo');
    assert.equal(typeof deltas[0].id, 'string');
    assert.equal(deltas[0].index, 0);
  });

  test('a tool result is answered with DONE and recorded', async () => {
    const messages = [
      { role: 'user', content: 'PLEASE-ECHO' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'fixture_echo', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: 'ECHO-RESULT: hi' },
    ];
    const body = await (await chat(mock, { messages, tools: TOOLS })).json();
    assert.equal(body.choices[0].message.content, 'DONE: ECHO-RESULT: hi');
    assert.deepEqual(mock.toolResults.at(-1), { callId: 'call_1', name: 'fixture_echo', text: 'ECHO-RESULT: hi' });
  });

  test('title and compaction requests get canned answers', async () => {
    const title = await (
      await chat(mock, {
        messages: [
          { role: 'system', content: 'You are a title generator. Output a thread title.' },
          { role: 'user', content: 'PLEASE-ECHO now' },
        ],
      })
    ).json();
    assert.equal(title.choices[0].message.content, 'Mock title');
    assert.equal(mock.requests.at(-1).kind, 'title');

    const summary = await (
      await chat(mock, {
        messages: [{ role: 'user', content: 'Create a new anchored summary from the conversation history.' }],
      })
    ).json();
    assert.match(summary.choices[0].message.content, /MOCK-SUMMARY/);
    assert.equal(mock.requests.at(-1).kind, 'compaction');
  });

  test('never calls a tool the request does not offer', async () => {
    const body = await (await chat(mock, { messages: [{ role: 'user', content: 'PLEASE-ECHO' }] })).json();
    assert.match(body.choices[0].message.content, /^MOCK-ERROR: tool fixture_echo not offered/);
  });

  test('CALL directives, queued answers and custom usage', async () => {
    const directive = await (
      await chat(mock, {
        messages: [{ role: 'user', content: '"CALL fixture_echo {\\"text\\":\\"a b\\"}"' }],
        tools: TOOLS,
      })
    ).json();
    assert.deepEqual(JSON.parse(directive.choices[0].message.tool_calls[0].function.arguments), { text: 'a b' });

    mock.enqueue({ text: 'QUEUED', usage: { prompt_tokens: 200_000 } });
    const queued = await (await chat(mock, { messages: [{ role: 'user', content: 'x' }] })).json();
    assert.equal(queued.choices[0].message.content, 'QUEUED');
    assert.equal(queued.usage.prompt_tokens, 200_000);
    const next = await (await chat(mock, { messages: [{ role: 'user', content: 'x' }] })).json();
    assert.equal(next.choices[0].message.content, 'MOCK-REPLY: x', 'a queued answer is used once');
  });

  test('unknown routes get 404 and are recorded', async () => {
    const res = await fetch(`${mock.origin}/v1/embeddings`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 404);
    assert.equal(mock.requests.at(-1).kind, 'unknown');
  });
});

describe('fixture MCP server with the SDK client', { timeout: 30_000 }, () => {
  test('lists and calls its tools; errors are isError results', async () => {
    const client = new Client({ name: 'cairn-e2e-harness', version: '0.0.0' });
    const transport = new StdioClientTransport({ command: process.execPath, args: [FIXTURE_SERVER], stderr: 'pipe' });
    await client.connect(transport);
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), ['echo', 'fail', 'lookup']);
      const ok = await client.callTool({ name: 'echo', arguments: { text: 'x' } });
      assert.equal(ok.isError ?? false, false);
      assert.equal(ok.content[0].text, 'ECHO-RESULT: x');
      const bad = await client.callTool({ name: 'echo', arguments: {} });
      assert.equal(bad.isError, true);
      const again = await client.callTool({ name: 'lookup', arguments: { query: 'q' } });
      assert.match(again.content[0].text, /^LOOKUP-HIT for q/);
    } finally {
      await client.close();
    }
  });
});

describe('OpenCode drives a stdio MCP server through the mock model', { timeout: 450_000 }, () => {
  const bin = findOpenCodeBin();
  let mock;
  let sandbox;
  let logFile;
  before(async () => {
    assert.ok(bin, OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        // user turn -> lookup; its result -> fail; that result -> the default "DONE: …"
        whenUserSays('PLEASE-LOOKUP', callTool('fixture_lookup', { query: 'auth bug' })),
        { kind: 'tool-result', match: (r) => r.toolResult.name === 'fixture_lookup', reply: callTool('fixture_fail', {}) },
      ],
    });
    sandbox = createOpenCodeSandbox({
      mock,
      mcp: ({ root }) => {
        logFile = path.join(root, 'fixture-mcp.jsonl');
        return {
          fixture: {
            type: 'local',
            command: [process.execPath, FIXTURE_SERVER],
            environment: { ECHO_MCP_LOG: logFile },
          },
        };
      },
    });
  });
  after(async () => {
    await mock?.close();
    sandbox?.cleanup();
  });

  test('opencode run: the model calls fixture_lookup, then fixture_fail, and sees both results', async () => {
    const r = await sandbox.run('PLEASE-LOOKUP the auth bug', { args: ['--format', 'json'] });
    const dump = () => `${describeRun(r)}\n--- mock requests ---\n${mock.requests.map((q) => `${q.seq} ${q.method} ${q.path} ${q.kind}`).join('\n')}`;
    assert.equal(r.timedOut, false, `opencode run timed out\n${dump()}`);
    assert.equal(r.code, 0, `opencode run failed\n${dump()}`);

    // the main request offered the MCP tools as <server>_<tool>, next to OpenCode's built-ins
    const first = mock.requestsOf('chat').find((q) => q.lastUserText.includes('PLEASE-LOOKUP'));
    assert.ok(first, `no chat request reached the mock\n${dump()}`);
    for (const name of ['fixture_echo', 'fixture_lookup', 'fixture_fail', 'bash', 'read']) {
      assert.ok(first.toolNames.includes(name), `tool ${name} not offered: ${first.toolNames.join(', ')}`);
    }
    assert.deepEqual(r.warnings.filter((l) => l.includes('server unavailable')), [], 'the MCP server started');
    assert.equal(first.stream, true);
    assert.ok(first.system.length > 0, 'OpenCode sends a system prompt');

    // the MCP server really ran the calls, with the arguments the model chose
    const calls = readFileSync(logFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(calls.map((c) => [c.name, c.arguments]), [
      ['lookup', { query: 'auth bug' }],
      ['fail', {}],
    ]);
    assert.equal(calls[0].cwd, sandbox.project, 'OpenCode starts local MCP servers in the project dir');

    // the model saw both results: the hit, and the error text of the isError result
    const results = mock.toolResults;
    assert.equal(results.length, 2, `tool results: ${JSON.stringify(results)}`);
    assert.equal(results[0].name, 'fixture_lookup');
    assert.match(results[0].text, /^LOOKUP-HIT for auth bug/);
    assert.equal(results[1].name, 'fixture_fail');
    assert.match(results[1].text, /FIXTURE-FAILURE/);

    // and OpenCode reported the finished tool and the final answer
    const events = parseJsonEvents(r.stdout);
    const toolUses = events.filter((e) => e.type === 'tool_use').map((e) => e.part);
    const lookup = toolUses.find((p) => p.tool === 'fixture_lookup');
    assert.equal(lookup?.state?.status, 'completed', `tool_use events: ${JSON.stringify(toolUses)}`);
    assert.match(lookup.state.output, /LOOKUP-HIT for auth bug/);
    // an MCP result with isError: true becomes a tool part with status "error"
    const failed = toolUses.find((p) => p.tool === 'fixture_fail');
    assert.equal(failed?.state?.status, 'error', `tool_use events: ${JSON.stringify(toolUses)}`);
    assert.match(failed.state.error, /FIXTURE-FAILURE/);
    const texts = events.filter((e) => e.type === 'text').map((e) => e.part.text);
    assert.ok(texts.some((t) => t.startsWith('DONE: ') && t.includes('FIXTURE-FAILURE')), `texts: ${JSON.stringify(texts)}`);

    // a title request came too, and nothing asked for an endpoint the mock does not know
    assert.ok(mock.requestsOf('title').length >= 1, 'OpenCode asks the small model for a title');
    assert.deepEqual(mock.requests.filter((q) => ['unknown', 'invalid', 'error'].includes(q.kind)), []);
  });

  test('a huge usage figure makes OpenCode compact the session through the mock', async () => {
    // usage >= context - output (128k - 4k) after a step triggers OpenCode's auto-compaction
    mock.addRule(whenUserSays('PLEASE-OVERFLOW', { ...callTool('fixture_echo', { text: 'overflow' }), usage: { prompt_tokens: 200_000 } }));
    const seen = mock.requests.length;
    const r = await sandbox.run('PLEASE-OVERFLOW the context');
    const fresh = mock.requests.slice(seen);
    const dump = () => `${describeRun(r)}\n--- mock requests ---\n${fresh.map((q) => `${q.seq} ${q.kind} ${JSON.stringify(q.lastText).slice(0, 120)}`).join('\n')}`;
    assert.equal(r.code, 0, `opencode run failed\n${dump()}`);
    const compaction = fresh.find((q) => q.kind === 'compaction');
    assert.ok(compaction, `no compaction request\n${dump()}`);
    assert.deepEqual(compaction.toolNames, [], 'the compaction request offers no tools');
    // the conversation being summarised includes the tool call and its result
    assert.match(compaction.lastText, /fixture_echo/);
    assert.match(compaction.lastText, /ECHO-RESULT: overflow/);
    assert.match(r.stdout, /MOCK-SUMMARY/);
  });
});
