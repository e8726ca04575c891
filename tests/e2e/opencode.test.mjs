// Real OpenCode, driven by the scripted mock model, with `cairn mcp` registered as an MCP
// server: one `opencode run` saves a memory through `cairn_mem_save`, a second `opencode run`
// (a new OpenCode process and a new cairn process, same data dir) finds it with
// `cairn_mem_search`. Skips, with the reason, while cairn has no `mcp` command yet.

import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { ADMIN_TOOLS, AGENT_TOOLS } from './lib/contract.mjs';
import { callTool, startMockModel, whenUserSays } from './lib/mock-model.mjs';
import {
  OPENCODE_MISSING,
  cairnMcpConfig,
  createOpenCodeSandbox,
  describeRunWithMock,
  findOpenCodeBin,
  toolUseParts,
} from './lib/opencode.mjs';

const probe = probeCairnSubcommand('mcp');
const skip = probe.ok ? false : `cairn mcp unavailable: ${probe.reason}`;

// One test that is skipped (and counted as such in the summary) when cairn cannot run these.
test('cairn mcp is available', { skip }, () => {});

describe('OpenCode + cairn mcp', { skip, timeout: 420_000 }, () => {
  const token = `quokkadeploy${randomUUID().slice(0, 8)}`;
  const title = `Release checklist lives in docs/release.md (${token})`;
  const content = `Every release follows docs/release.md; the tag is cut by CI only. Marker: ${token}.`;
  let mock;
  let cairn;
  let oc;

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        whenUserSays('E2E-SAVE', callTool('cairn_mem_save', { title, content, type: 'decision' })),
        whenUserSays('E2E-SEARCH', callTool('cairn_mem_search', { query: token })),
      ],
    });
    cairn = await makeCairnSandbox({ git: false });
    oc = createOpenCodeSandbox({ mock, mcp: cairnMcpConfig(probe.bin, cairn) });
  });
  after(async () => {
    await mock?.close();
    oc?.cleanup();
    cairn?.cleanup();
  });

  const dump = (r) => describeRunWithMock(r, mock, 300);

  const toolPart = (r, tool) => toolUseParts(r.stdout, tool).at(-1);

  test('run 1: the model saves a memory with cairn_mem_save', { timeout: 200_000 }, async () => {
    const r = await oc.run('E2E-SAVE the release decision', { args: ['--format', 'json'] });
    assert.equal(r.timedOut, false, `opencode run timed out\n${dump(r)}`);
    assert.equal(r.code, 0, `opencode run failed\n${dump(r)}`);

    // OpenCode offered cairn's agent profile as cairn_<tool>, and no admin tool
    const chat = mock.requestsOf('chat').find((q) => q.lastUserText.includes('E2E-SAVE'));
    assert.ok(chat, `no chat request reached the mock\n${dump(r)}`);
    const offered = chat.toolNames.filter((n) => n.startsWith('cairn_')).sort();
    assert.deepEqual(offered, AGENT_TOOLS.map((t) => `cairn_${t}`).sort(), `cairn tools offered to the model\n${dump(r)}`);
    for (const t of ADMIN_TOOLS) assert.ok(!chat.toolNames.includes(`cairn_${t}`), `admin tool ${t} offered`);

    const save = toolPart(r, 'cairn_mem_save');
    assert.equal(save?.state?.status, 'completed', `cairn_mem_save did not complete: ${JSON.stringify(save)}\n${dump(r)}`);
    const result = mock.toolResults.find((t) => t.name === 'cairn_mem_save');
    assert.ok(result, `the model never saw the mem_save result\n${dump(r)}`);
    assert.ok(result.text.length > 0);
  });

  test('the daemon `cairn mcp` started outlives `opencode run`', { timeout: 30_000 }, async () => {
    // OpenCode stops its MCP servers when a run ends; the daemon the first `cairn mcp`
    // started must not go with them (run 2 would otherwise pay a cold start, and any
    // capture still in flight would be lost).
    const info = JSON.parse(readFileSync(path.join(cairn.dataDir, 'daemon.json'), 'utf8'));
    assert.ok(Number.isInteger(info.pid), `daemon.json has no pid: ${JSON.stringify(info)}`);
    let alive = true;
    try {
      process.kill(info.pid, 0);
    } catch {
      alive = false;
    }
    assert.ok(alive, `the daemon (pid ${info.pid}) died with opencode run`);
    const res = await fetch(`http://${info.addr}/health`, { signal: AbortSignal.timeout(5_000) });
    assert.equal(res.status, 200, `the daemon at ${info.addr} does not answer /health`);
  });

  test('run 2: a new process finds it with cairn_mem_search', { timeout: 200_000 }, async () => {
    const seen = mock.toolResults.length;
    const r = await oc.run('E2E-SEARCH what did we decide about releases?', { args: ['--format', 'json'] });
    assert.equal(r.timedOut, false, `opencode run timed out\n${dump(r)}`);
    assert.equal(r.code, 0, `opencode run failed\n${dump(r)}`);

    const search = toolPart(r, 'cairn_mem_search');
    assert.equal(search?.state?.status, 'completed', `cairn_mem_search did not complete: ${JSON.stringify(search)}\n${dump(r)}`);
    const result = mock.toolResults.slice(seen).find((t) => t.name === 'cairn_mem_search');
    assert.ok(result, `the model never saw the mem_search result\n${dump(r)}`);
    assert.ok(result.text.includes(token), `the search result the model saw lacks the saved memory:\n${result.text}`);
    assert.ok(result.text.includes('Release checklist'), `the title is not in the search result:\n${result.text}`);
  });
});
