// Issue 42's replaced decision in real OpenCode, through `cairn mcp --tools=agent`: the scripted
// model saves four decisions on the product cache key scheme, then a fifth that replaces them in
// other words (five `cairn_mem_save` calls, one after the other); in a second run it asks
// `cairn_mem_search` "what cache key scheme do we use now" and the result it is shown has the
// fifth first, before any judge ran (the recency prior for a question about the present, with
// the default embedding model). It then records its own verdicts, the fifth replaces each of the
// four (`cairn_mem_compare`: the agent's way to judge two memories it names by id; `mem_judge`
// wants a `judgment_id`, and mem_save offers one only for a word-alike candidate, which the
// fifth, in other words, has none of), and searches again: the fifth first, each replaced one
// kept as history with `superseded_by: #<fifth>` under it. (The tool answers engram's JSON
// envelope, `{count, ids, project, …, result}`, and OpenCode shows it to the model as it is.)
//
// The daemon (started by `cairn mcp`) has no LLM here: the arrival judge's rules leave the
// pairs pending, so the order before the verdicts is the recency prior's alone. It finds the
// default model (multilingual-e5-small) in its data dir, linked from the test deps
// (`scripts/install-test-deps.sh e5`); without them the test is skipped, with the reason.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, makeCairnSandbox, probeCairnSubcommand, savedId } from './lib/cairn.mjs';
import { callTool, startMockModel, whenUserSays } from './lib/mock-model.mjs';
import {
  OPENCODE_MISSING,
  cairnMcpConfig,
  createOpenCodeSandbox,
  describeRunWithMock,
  findOpenCodeBin,
  toolUseParts,
} from './lib/opencode.mjs';

const E5 = path.join(REPO_ROOT, 'target', 'test-deps', 'multilingual-e5-small');
const probe = probeCairnSubcommand('mcp');
const skip = !probe.ok
  ? `cairn mcp unavailable: ${probe.reason}`
  : !existsSync(path.join(E5, 'model.safetensors'))
    ? `no multilingual-e5-small in ${E5}: run scripts/install-test-deps.sh e5`
    : false;
test('cairn mcp and the default embedding model are available', { skip }, () => {});

const DECISIONS = [
  ['Product cache key scheme', 'Product cache keys are product:{id}.'],
  ['Product cache key scheme: add locale', 'Product cache keys are product:{id}:{locale}.'],
  ['Product cache key scheme: add currency', 'Product cache keys are product:{id}:{locale}:{currency}.'],
  ['Product cache key scheme: version prefix', 'Product cache keys are v2:product:{id}:{locale}:{currency}.'],
  [
    'Catalogue entries cached by content hash',
    'We no longer build product cache keys from the id, locale and currency: an entry is keyed by the sha256 of ' +
      'its rendered JSON, so any change invalidates it by itself.',
  ],
].map(([title, content]) => ({ title, content, type: 'decision' }));
const QUESTION = 'what cache key scheme do we use now';

/**
 * The hits of a mem_search answer as the model got it, in order: `{id, lines}` (the hit's own
 * lines, notes included). The tool answers engram's JSON envelope (`{count, ids, project, …,
 * result}`), which OpenCode passes to the model as it is; its `result` is the hits' text.
 */
function hitsOf(answer) {
  let text = answer;
  try {
    const envelope = JSON.parse(answer);
    if (typeof envelope?.result === 'string') text = envelope.result;
  } catch {
    // plain text
  }
  const hits = [];
  for (const line of text.split('\n')) {
    const m = /^(\d+)\. #(\d+) /.exec(line);
    if (m) hits.push({ id: Number(m[2]), lines: [] });
    else if (hits.length > 0) hits.at(-1).lines.push(line.trim());
  }
  return hits;
}

describe('OpenCode + cairn mcp: the replaced decision', { skip, timeout: 540_000 }, () => {
  let mock;
  let cairn;
  let oc;
  /** The memory ids in the order the model saved them, from the mem_save results it saw. */
  const saved = [];
  const searches = () => mock.toolResults.filter((t) => t.name === 'cairn_mem_search');

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        whenUserSays('E2E-DECIDE', callTool('cairn_mem_save', DECISIONS[0])),
        // Each save's result: the next decision, until the five are saved.
        {
          kind: 'tool-result',
          match: (q) => q.toolResult.name === 'cairn_mem_save',
          reply: (q) => {
            saved.push(savedId(q.toolResult.text));
            return saved.length < DECISIONS.length
              ? callTool('cairn_mem_save', DECISIONS[saved.length])
              : { text: 'Saved the five cache key decisions.' };
          },
        },
        whenUserSays('E2E-NOW', callTool('cairn_mem_search', { query: QUESTION })),
        // The first search's result: the agent's verdicts, the fifth replaces each older one.
        {
          kind: 'tool-result',
          times: 1,
          match: (q) => q.toolResult.name === 'cairn_mem_search',
          reply: () => ({
            toolCalls: saved.slice(0, 4).map((older) => ({
              name: 'cairn_mem_compare',
              args: {
                memory_id_a: saved[4],
                memory_id_b: older,
                relation: 'supersedes',
                confidence: 0.9,
                reasoning: 'entries are keyed by content hash now, not by id, locale and currency',
              },
            })),
          }),
        },
        // The verdicts' results: ask again.
        {
          kind: 'tool-result',
          times: 1,
          match: (q) => q.toolResult.name === 'cairn_mem_compare',
          reply: callTool('cairn_mem_search', { query: QUESTION }),
        },
      ],
    });
    cairn = await makeCairnSandbox({ git: false });
    // The default model, where a daemon of this data dir looks for it.
    const models = path.join(cairn.dataDir, 'models', 'multilingual-e5-small');
    mkdirSync(models, { recursive: true });
    for (const file of readdirSync(E5)) symlinkSync(path.join(E5, file), path.join(models, file));
    oc = createOpenCodeSandbox({ mock, mcp: cairnMcpConfig(probe.bin, cairn) });
  });
  after(async () => {
    await mock?.close();
    oc?.cleanup();
    cairn?.cleanup();
  });

  const dump = (r) => describeRunWithMock(r, mock, 400);

  const toolParts = (r, tool) => toolUseParts(r.stdout, tool);

  /** The daemon `cairn mcp` started: its address. */
  const daemon = () => `http://${JSON.parse(readFileSync(path.join(cairn.dataDir, 'daemon.json'), 'utf8')).addr}`;

  test('run 1: the model saves the four decisions, then the fifth', { timeout: 240_000 }, async () => {
    const r = await oc.run('E2E-DECIDE the product cache key scheme', { args: ['--format', 'json'] });
    assert.equal(r.timedOut, false, `opencode run timed out\n${dump(r)}`);
    assert.equal(r.code, 0, `opencode run failed\n${dump(r)}`);
    const saves = toolParts(r, 'cairn_mem_save');
    assert.equal(saves.length, 5, `five mem_save calls\n${dump(r)}`);
    assert.ok(saves.every((p) => p.state?.status === 'completed'), `${JSON.stringify(saves)}\n${dump(r)}`);
    assert.equal(new Set(saved).size, 5, `five memories, each its own id: ${saved}\n${dump(r)}`);
    assert.ok(saved.every(Number.isInteger), `ids from the results the model saw: ${saved}`);

    // The search below needs the vectors (the recency prior groups by them): wait until the
    // daemon embedded the five. A guard against a hang, not a limit on anything measured.
    const deadline = Date.now() + 120_000;
    let stats;
    for (;;) {
      stats = await (await fetch(`${daemon()}/stats`)).json();
      if (stats.embeddings_stored === 5) break;
      assert.ok(Date.now() < deadline, `the daemon never embedded the five: ${JSON.stringify(stats)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  test('run 2: "what … now" answers the fifth first, before and after the agent\'s verdicts', { timeout: 240_000 }, async () => {
    assert.equal(saved.length, 5, 'run 1 saved the five');
    const fifth = saved[4];
    const r = await oc.run('E2E-NOW which cache key scheme is current?', { args: ['--format', 'json'] });
    assert.equal(r.timedOut, false, `opencode run timed out\n${dump(r)}`);
    assert.equal(r.code, 0, `opencode run failed\n${dump(r)}`);

    const [beforeVerdicts, afterVerdicts] = searches();
    assert.ok(beforeVerdicts && afterVerdicts, `two mem_search results reached the model\n${dump(r)}`);
    const first = hitsOf(beforeVerdicts.text);
    assert.equal(first[0]?.id, fifth, `before any verdict, the fifth first:\n${beforeVerdicts.text}`);
    assert.ok(!beforeVerdicts.text.includes('superseded_by'), `no verdict yet:\n${beforeVerdicts.text}`);

    const compares = toolParts(r, 'cairn_mem_compare');
    assert.equal(compares.length, 4, `four mem_compare calls\n${dump(r)}`);
    assert.ok(compares.every((p) => p.state?.status === 'completed'), `${JSON.stringify(compares)}\n${dump(r)}`);

    const second = hitsOf(afterVerdicts.text);
    assert.equal(second[0]?.id, fifth, `after the verdicts, the fifth first:\n${afterVerdicts.text}`);
    assert.ok(!second[0].lines.some((l) => l.includes('superseded_by')), `the current one unmarked:\n${afterVerdicts.text}`);
    for (const older of saved.slice(0, 4)) {
      const hit = second.find((h) => h.id === older);
      assert.ok(hit, `#${older} is kept, as history:\n${afterVerdicts.text}`);
      assert.ok(
        hit.lines.some((l) => l.startsWith(`superseded_by: #${fifth}`)),
        `#${older} is marked as replaced by #${fifth}:\n${afterVerdicts.text}`,
      );
    }

    // The verdicts as the daemon recorded them: the pending pairs the arrival judge had left,
    // judged with the agent's reasoning. mem_compare's provenance is engram's (§7.4: kind
    // `system`, not `agent` as mem_judge's).
    const judged = await (await fetch(`${daemon()}/conflicts?status=judged&limit=100`)).json();
    const supersedes = judged.relations.filter((x) => x.relation === 'supersedes');
    assert.equal(supersedes.length, 4, JSON.stringify(judged));
    for (const x of supersedes) {
      assert.equal(x.source_title, DECISIONS[4].title, JSON.stringify(x));
      assert.equal(x.reason, 'entries are keyed by content hash now, not by id, locale and currency', JSON.stringify(x));
      assert.equal(x.marked_by_kind, 'system', JSON.stringify(x));
    }
  });
});
