// Conversation history in real OpenCode (issue 15): cairn's plugin in chart mode, the daemon
// reading OpenCode's own database (read-only), and the history tools over MCP.
//
// The default compaction mode (chart). One session: two turns, then a forced compaction (the mock reports a 200k-token prompt).
// The stored summary must be cairn's chart of the turns before it, and the model's next
// request calls cairn_history_browse_turns and gets those turns back, word for word.

import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { callTool, startMockModel, textOf } from './lib/mock-model.mjs';
import { OPENCODE_MISSING, createOpenCodeSandbox, describeRun, findOpenCodeBin, parseJsonEvents } from './lib/opencode.mjs';
import { installWithSetup } from './lib/plugin.mjs';

const probe = probeCairnSubcommand('mcp');
const skip = probe.ok ? false : `cairn mcp unavailable: ${probe.reason}`;

const FIRST = 'CHART-ONE the staging port is 8443 and the deploy key rotates on Tuesdays';
const SECOND = 'CHART-TWO now PLEASE-OVERFLOW the context';
const CONTINUE = /Continue if you have next steps/;

describe('OpenCode history: charting and pull-based retrieval', { skip, timeout: 480_000 }, () => {
  let mock;
  let cairn;
  let oc;
  const daemonInfo = () => JSON.parse(readFileSync(path.join(cairn.dataDir, 'daemon.json'), 'utf8'));
  async function op(name, args = {}) {
    const res = await fetch(`http://${daemonInfo().addr}/v1/op`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ op: name, args }),
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: await res.json() };
  }
  const dump = (result) =>
    `${describeRun(result)}\n--- mock requests ---\n${mock.requests
      .map((q) => `#${q.seq} ${q.kind} last=${JSON.stringify(q.lastText?.slice(0, 160))}`)
      .join('\n')}`;
  let sid;
  let second;

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        { kind: 'chat', match: (q) => q.lastUserText.includes('CHART-ONE'), reply: { text: 'Noted: staging on 8443, key rotation on Tuesdays.' }, times: 1 },
        { kind: 'chat', match: (q) => q.lastUserText.includes('PLEASE-OVERFLOW'), reply: { text: 'A very long answer', usage: { prompt_tokens: 200_000 } }, times: 1 },
        // after the compaction, the agent pulls what the chart points to
        { kind: 'chat', match: (q) => CONTINUE.test(q.lastUserText), reply: callTool('cairn_history_browse_turns', { num_before: 5 }), times: 1 },
        { kind: 'tool-result', match: (q) => q.toolResult?.name === 'cairn_history_browse_turns', reply: { text: 'HISTORY-READ' }, times: 1 },
      ],
    });
    cairn = await makeCairnSandbox({ git: false });
    const env = { CAIRN_DATA_DIR: cairn.dataDir, CAIRN_PORT: cairn.env.CAIRN_PORT, NO_COLOR: '1', RUST_BACKTRACE: '1' };
    oc = createOpenCodeSandbox({ mock, env });
    const setup = installWithSetup({ bin: probe.bin, env: oc.env });
    assert.deepEqual(setup.installed.sort(), ['mcp.cairn', 'plugin'], `setup did not install both:\n${setup.output}`);
    const first = await oc.run(FIRST, { args: ['--format', 'json'] });
    assert.equal(first.code, 0, dump(first));
    sid = parseJsonEvents(first.stdout).find((e) => e.sessionID)?.sessionID;
    assert.match(sid ?? '', /^ses_/, dump(first));
    second = await oc.run(SECOND, { args: ['--format', 'json', '--session', sid] });
    assert.equal(second.code, 0, dump(second));
  });
  after(async () => {
    await mock?.close();
    oc?.cleanup();
    cairn?.cleanup();
  });

  test('the compaction summary is the chart of the turns before it', async () => {
    const compaction = mock.requests.find((q) => q.kind === 'compaction');
    assert.ok(compaction, `no compaction request\n${dump(second)}`);
    assert.match(compaction.lastText, /^Do not think\. Do not summarize\./, 'the summariser is asked for next to nothing');
    const next = mock.requests.find((q) => q.seq > compaction.seq && q.kind === 'chat');
    assert.ok(next, `no request after the compaction\n${dump(second)}`);
    const seen = next.messages.map(textOf).join('\n');
    assert.match(seen, /I lost context from my prior conversation/, 'the chart is what the model sees as the summary');
    assert.match(seen, /CHART-ONE the staging port is 8443/, 'the chart previews the first turn');
    assert.match(seen, /history_browse_turns/);
    assert.doesNotMatch(seen, /Chart unavailable/, 'the fallback text was replaced');
    // the chart the daemon makes now is the one stored (nothing changed before the compaction)
    const chart = await op('history_chart', { session_id: sid });
    assert.equal(chart.status, 200, JSON.stringify(chart.body));
    assert.ok(seen.includes(chart.body.chart.trim().split('\n').slice(0, 3).join('\n')), 'the stored summary starts like the chart');
  });

  test("the model's next call of history_browse_turns gets the pre-compaction turns", () => {
    const result = mock.toolResults.find((t) => t.name === 'cairn_history_browse_turns');
    assert.ok(result, `the tool was not called\n${dump(second)}`);
    assert.match(result.text, /CHART-ONE the staging port is 8443/);
    assert.match(result.text, /CHART-TWO/);
    assert.match(result.text, /"turn_number": 1/);
    assert.doesNotMatch(result.text, /Do not think/, "the caller's own compaction is hidden");
  });

  test('the session is in the archive, searchable, and OpenCode\'s database was only read', async () => {
    const before = { bytes: createHash('sha256').update(readFileSync(oc.dbPath)).digest('hex'), mtime: statSync(oc.dbPath).mtimeMs };
    const ingest = await op('history_ingest', {});
    assert.equal(ingest.status, 200, JSON.stringify(ingest.body));
    const sessions = await op('history_sessions', { limit: 10 });
    assert.equal(sessions.status, 200, JSON.stringify(sessions.body));
    const list = Array.isArray(sessions.body) ? sessions.body : (sessions.body.sessions ?? []);
    const mine = list.find((s) => s.session_id === sid);
    assert.ok(mine, `session ${sid} not listed: ${JSON.stringify(sessions.body)}`);
    assert.equal(mine.host, 'opencode');
    const found = await op('history_search', { query: 'deploy key rotates', session_id: sid });
    assert.equal(found.status, 200, JSON.stringify(found.body));
    assert.match(JSON.stringify(found.body), /rotates/);
    const afterRead = { bytes: createHash('sha256').update(readFileSync(oc.dbPath)).digest('hex'), mtime: statSync(oc.dbPath).mtimeMs };
    assert.deepEqual(afterRead, before, "cairn's reads left OpenCode's database as it was");
  });
});
