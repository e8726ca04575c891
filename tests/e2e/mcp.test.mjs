// `cairn mcp` driven by the official MCP TypeScript SDK client over stdio, checked against the
// engram-compatible contract (tool names per profile, save/search/get, errors as isError).
// Skips, with the reason, while there is no cairn binary or it has no `mcp` command yet.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { connectCairnMcp, makeCairnSandbox, probeCairnSubcommand, resultText, savedId } from './lib/cairn.mjs';
import { ADMIN_TOOLS, AGENT_TOOLS, ALL_TOOLS, sorted } from './lib/contract.mjs';

const probe = probeCairnSubcommand('mcp');
const skip = probe.ok ? false : `cairn mcp unavailable: ${probe.reason}`;

// One test that is skipped (and counted as such in the summary) when cairn cannot run these.
test('cairn mcp is available', { skip }, () => {});

const names = (tools) => sorted(tools.map((t) => t.name));

describe('cairn mcp: tool profiles', { skip, timeout: 120_000 }, () => {
  const cases = [
    ['--tools=agent', ['--tools=agent'], AGENT_TOOLS],
    ['--tools=admin', ['--tools=admin'], ADMIN_TOOLS],
    ['--tools=all', ['--tools=all'], ALL_TOOLS],
    ['no --tools flag (all)', [], ALL_TOOLS],
    ['--tools agent (two arguments)', ['--tools', 'agent'], AGENT_TOOLS],
  ];
  for (const [label, args, expected] of cases) {
    test(`${label} lists exactly ${expected.length} tools`, { timeout: 60_000 }, async () => {
      const sandbox = await makeCairnSandbox();
      let mcp;
      try {
        mcp = await connectCairnMcp({ bin: probe.bin, args, sandbox });
        assert.ok(mcp.client.getServerCapabilities()?.tools, 'the server declares the tools capability');
        const { tools } = await mcp.client.listTools();
        assert.deepEqual(names(tools), sorted(expected), `stderr:\n${mcp.stderr()}`);
        for (const t of tools) {
          assert.equal(t.inputSchema?.type, 'object', `${t.name} has an object input schema`);
          assert.ok(t.description && t.description.length > 0, `${t.name} has a description`);
        }
      } finally {
        await mcp?.close();
        sandbox.cleanup();
      }
    });
  }
});

describe('cairn mcp: save, search, get, errors', { skip, timeout: 120_000 }, () => {
  let sandbox;
  let mcp;
  const token = `zebracorn${randomUUID().slice(0, 8)}`;
  const title = `Deploy with blue-green (${token})`;
  const content = `We chose blue-green deploys because rollbacks must take seconds. Marker: ${token}.`;
  let id = null;

  before(async () => {
    sandbox = await makeCairnSandbox();
    mcp = await connectCairnMcp({ bin: probe.bin, args: ['--tools=all'], sandbox });
  });
  after(async () => {
    await mcp?.close();
    sandbox?.cleanup();
  });
  const diag = () => `\n--- cairn stderr ---\n${mcp.stderr().slice(-3_000)}`;

  test('initialize reports the server', () => {
    const info = mcp.client.getServerVersion();
    assert.ok(info?.name, 'serverInfo.name is set');
    assert.ok(info?.version, 'serverInfo.version is set');
  });

  test('mem_save stores a memory', { timeout: 30_000 }, async () => {
    const r = await mcp.client.callTool({ name: 'mem_save', arguments: { title, content, type: 'decision' } });
    const text = resultText(r);
    assert.notEqual(r.isError, true, `mem_save failed: ${text}${diag()}`);
    id = savedId(text);
    assert.ok(Number.isInteger(id) && id > 0, `no memory id in the mem_save answer: ${text}`);
  });

  test('mem_search finds it', { timeout: 30_000 }, async () => {
    const r = await mcp.client.callTool({ name: 'mem_search', arguments: { query: token } });
    const text = resultText(r);
    assert.notEqual(r.isError, true, `mem_search failed: ${text}${diag()}`);
    assert.ok(text.includes(token), `search for ${token} did not return the memory: ${text}`);
  });

  test('mem_get_observation returns the full memory', { timeout: 30_000 }, async () => {
    assert.ok(id, 'needs the id from mem_save');
    const r = await mcp.client.callTool({ name: 'mem_get_observation', arguments: { id } });
    const text = resultText(r);
    assert.notEqual(r.isError, true, `mem_get_observation failed: ${text}${diag()}`);
    assert.ok(text.includes(content), `the full content is not in: ${text}`);
  });

  test('bad arguments give isError results, and the server keeps working', { timeout: 30_000 }, async () => {
    const bad = [
      ['mem_save', {}], // title and content are required
      ['mem_get_observation', { id: 'not-a-number' }],
    ];
    for (const [name, args] of bad) {
      const r = await mcp.client.callTool({ name, arguments: args });
      assert.equal(r.isError, true, `${name}(${JSON.stringify(args)}) should be an isError result: ${JSON.stringify(r)}`);
      assert.ok(resultText(r).length > 0, `${name}: the error says what is wrong`);
    }
    // an unknown tool: a protocol error or an isError result, never a crash
    try {
      const r = await mcp.client.callTool({ name: 'mem_no_such_tool', arguments: {} });
      assert.equal(r.isError, true, `unknown tool: ${JSON.stringify(r)}`);
    } catch (err) {
      assert.match(String(err?.message), /-32602|-32601|unknown|not found/i);
    }
    assert.ok(mcp.alive(), `cairn mcp exited after bad input${diag()}`);
    const r = await mcp.client.callTool({ name: 'mem_search', arguments: { query: token } });
    assert.notEqual(r.isError, true, `mem_search after errors failed: ${resultText(r)}${diag()}`);
    assert.ok(resultText(r).includes(token));
  });

  test('a new process on the same data dir sees the memory', { timeout: 60_000 }, async () => {
    const second = await connectCairnMcp({ bin: probe.bin, args: ['--tools=agent'], sandbox });
    try {
      const r = await second.client.callTool({ name: 'mem_search', arguments: { query: token } });
      const text = resultText(r);
      assert.notEqual(r.isError, true, `mem_search failed: ${text}\n${second.stderr()}`);
      assert.ok(text.includes(token), `second process did not find the memory: ${text}`);
    } finally {
      await second.close();
    }
  });
});
