// Seed 002's own plugin (opencode-memory, `prosperitypirate/opencode-memory` at 14d388c, the last
// commit with its memory-server design) in the real OpenCode, with cairn's daemon as its memory
// server: what the plugin sends lands in cairn, and what cairn answers is what the plugin reads.
//
// The plugin's code is not in this repository (nor in the seed, which describes it): it is taken
// at test time from a git copy of its repository, `$OPENCODE_MEMORY_REPO` (a clone or a bare
// mirror), else `tests/e2e/.cache/opencode-memory`
// (`git clone --bare https://github.com/prosperitypirate/opencode-memory tests/e2e/.cache/opencode-memory`),
// extracted into a temp dir and loaded by OpenCode as a file plugin; it imports
// `@opencode-ai/plugin` (a devDependency here, OpenCode's own version). Skipped, with the reason,
// when there is no copy.
//
// cairn's `[llm]` is the scripted mock model (the same one OpenCode talks to): the requests of
// cairn's extraction ask for JSON (`response_format`), which OpenCode's never do, and get facts
// in the words of the conversation they were shown.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { makeCairnSandbox, probeCairnSubcommand, startCairnDaemon, stopDaemon } from './lib/cairn.mjs';
import { callTool, startMockModel } from './lib/mock-model.mjs';
import { createOpenCodeSandbox, describeRun, findOpenCodeBin, OPENCODE_MISSING } from './lib/opencode.mjs';
import { makeTempDir } from './lib/tmp.mjs';

const E2E_DIR = path.dirname(fileURLToPath(import.meta.url));
/** The plugin as it was when it talked to its memory server (docs/HTTP-API.md, seed 002). */
const PLUGIN_COMMIT = '14d388c';

function pluginRepo() {
  const candidates = [process.env.OPENCODE_MEMORY_REPO, path.join(E2E_DIR, '.cache', 'opencode-memory')];
  for (const repo of candidates.filter(Boolean)) {
    const r = spawnSync('git', ['-C', repo, 'cat-file', '-e', `${PLUGIN_COMMIT}^{commit}`], { encoding: 'utf8' });
    if (r.status === 0) return repo;
  }
  return null;
}

const probe = probeCairnSubcommand('serve');
const repo = pluginRepo();
const skip = !probe.ok
  ? `cairn serve unavailable: ${probe.reason}`
  : !repo
    ? 'no copy of prosperitypirate/opencode-memory: set OPENCODE_MEMORY_REPO, or clone it into tests/e2e/.cache/opencode-memory'
    : false;
test('seed 002 plugin source is available', { skip }, () => {});

/** `plugin/src` of the plugin at PLUGIN_COMMIT, in `dir`; returns the entry file. */
function extractPlugin(dir) {
  const archive = spawnSync('git', ['-C', repo, 'archive', PLUGIN_COMMIT, 'plugin/src'], { maxBuffer: 64 << 20 });
  assert.equal(archive.status, 0, `git archive: ${archive.stderr}`);
  const untar = spawnSync('tar', ['-x', '-C', dir], { input: archive.stdout });
  assert.equal(untar.status, 0, `tar: ${untar.stderr}`);
  // `@opencode-ai/plugin` (its `tool` helper) from this package's node_modules, as OpenCode
  // would have installed it next to a plugin of the config dir.
  symlinkSync(path.join(E2E_DIR, 'node_modules'), path.join(dir, 'plugin', 'node_modules'), 'dir');
  return path.join(dir, 'plugin', 'src', 'index.ts');
}

const sha16 = (text) => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** The first thing the user said in a transcript cairn sent for extraction. */
function firstUserLine(text) {
  const line = text.split('\n').find((l) => /\] user: /.test(l));
  return line ? line.replace(/^.*?\] user: /, '').trim() : null;
}

describe('seed 002 plugin (opencode-memory) in OpenCode against cairn', { skip, timeout: 480_000 }, () => {
  let mock;
  let cairn;
  let daemon;
  let oc;
  let tmp;
  let projectTag;
  const runs = {};

  async function run(name, message) {
    const from = mock.requests.at(-1)?.seq ?? 0;
    const result = await oc.run(message, { args: ['--format', 'json'] });
    runs[name] = { from, to: mock.requests.at(-1)?.seq ?? 0, result };
    assert.equal(result.code, 0, `run ${name} failed:\n${describeRun(result)}`);
    return result;
  }
  const during = (name) => mock.requests.filter((q) => q.seq > runs[name].from && q.seq <= runs[name].to);
  /** cairn's own requests to the model: extraction asks for JSON, OpenCode never does. */
  const extractions = () => mock.requests.filter((q) => q.body?.response_format);
  async function wire(method, route, body) {
    const res = await fetch(`${daemon.base}${route}`, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, body: await res.json() };
  }
  /** The project's memories as the plugin lists them (`GET /memories?user_id=`). */
  async function projectMemories() {
    const r = await wire('GET', `/memories?user_id=${projectTag}&limit=100`);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body.results;
  }
  async function eventually(what, check, ms = 30_000) {
    const deadline = Date.now() + ms;
    let last;
    while (Date.now() < deadline) {
      last = await check();
      if (last) return last;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.fail(`${what}; cairn has: ${JSON.stringify(await projectMemories(), null, 1)}`);
  }

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        {
          // cairn's extraction (facts, a summary, a project brief), in the words it was shown
          kind: 'any',
          match: (q) => Boolean(q.body?.response_format),
          reply: (q) => {
            const said = q.lastText;
            const first = firstUserLine(said) ?? 'nothing';
            const brief = said.includes('=== README.md ===');
            return {
              text: JSON.stringify({
                facts: [{ type: 'decision', title: first.slice(0, 60), content: first, message_ids: ['m1'] }],
                title: brief ? 'velodrome' : 'Session',
                summary: `The developer said: ${first}`,
                content: brief ? 'Velodrome is a benchmark runner for Go HTTP handlers.' : first,
              }),
            };
          },
        },
        {
          match: 'PLEASE-ADD',
          reply: callTool('memory', {
            mode: 'add',
            content: 'We release velodrome with goreleaser from CI, never by hand.',
            type: 'project-config',
          }),
          times: 1,
        },
        { match: 'PLEASE-SEARCH', reply: callTool('memory', { mode: 'search', query: 'release goreleaser', scope: 'project' }), times: 1 },
        { match: 'PLEASE-LIST', reply: callTool('memory', { mode: 'list', scope: 'project' }), times: 1 },
        { kind: 'tool-result', reply: (q) => ({ text: `TOOL-SAID: ${q.toolResult.text}` }) },
      ],
    });
    cairn = await makeCairnSandbox({ projectName: 'velodrome' });
    const use = spawnSync(probe.bin, ['llm', 'use', 'openai', '--base-url', mock.baseURL, '--model', 'mock-model'], {
      env: { ...process.env, ...cairn.env },
      encoding: 'utf8',
    });
    assert.equal(use.status, 0, `cairn llm use: ${use.stderr}`);
    daemon = await startCairnDaemon(probe.bin, cairn);

    tmp = makeTempDir('cairn-om-');
    const entry = extractPlugin(tmp.path);
    oc = createOpenCodeSandbox({ mock, projectName: 'velodrome', extraConfig: { plugin: [`file://${entry}`] } });
    writeFileSync(
      path.join(oc.project, 'README.md'),
      '# velodrome\n\nVelodrome is a benchmark runner for Go HTTP handlers, written in Go 1.23.\n',
    );
    writeFileSync(path.join(oc.project, 'go.mod'), 'module example.com/velodrome\n\ngo 1.23\n');
    const config = path.join(oc.home, '.config', 'opencode');
    mkdirSync(config, { recursive: true });
    writeFileSync(path.join(config, 'memory.jsonc'), `{\n  // cairn's daemon\n  "memoryBaseUrl": "${daemon.base}"\n}\n`);
    projectTag = `opencode_project_${sha16(oc.project)}`;
  });

  after(() => {
    daemon?.child.kill('SIGTERM');
    if (cairn) stopDaemon(cairn.dataDir);
    oc?.cleanup();
    tmp?.cleanup();
    cairn?.cleanup();
    mock?.close?.();
  });

  test('the first session sends the project files (init_mode) and cairn keeps a project brief', async () => {
    await run('first', 'My project is velodrome. What is in this folder?');
    const briefAsked = extractions().some((q) => q.lastText.includes('=== README.md ==='));
    assert.ok(briefAsked, `cairn's model was never shown the README (POST /memories init_mode)\n${describeRun(runs.first.result)}`);
    const brief = await eventually('no project-brief for the project tag', async () =>
      (await projectMemories()).find((m) => m.metadata?.type === 'project-brief'),
    );
    assert.match(brief.memory, /benchmark runner for Go HTTP handlers/);
    assert.equal(brief.user_id, projectTag);
  });

  test('the memory tool adds through POST /memories and finds it through POST /memories/search', async () => {
    await run('add', 'PLEASE-ADD how we release');
    const added = during('add').find((q) => q.kind === 'tool-result' && q.toolResult?.name === 'memory');
    assert.ok(added, `the memory tool never answered\n${describeRun(runs.add.result)}`);
    const said = JSON.parse(added.toolResult.text);
    assert.equal(said.success, true, added.toolResult.text);
    assert.ok(said.id && !said.id.startsWith('mem-'), `cairn's id, not the plugin's fallback: ${added.toolResult.text}`);
    const stored = await eventually('the added memory is not listed', async () =>
      (await projectMemories()).find((m) => /goreleaser/.test(m.memory)),
    );
    assert.equal(stored.id, said.id);

    await run('search', 'PLEASE-SEARCH how do we release?');
    const found = during('search').find((q) => q.kind === 'tool-result' && q.toolResult?.name === 'memory');
    assert.ok(found, `the search never answered\n${describeRun(runs.search.result)}`);
    const hits = JSON.parse(found.toolResult.text);
    assert.equal(hits.success, true, found.toolResult.text);
    assert.ok(hits.count >= 1 && JSON.stringify(hits.results).includes('goreleaser'), found.toolResult.text);
  });

  test("a new session's first message carries cairn's memories in its [MEMORY] block", async () => {
    // (no "remember" here: the keyword nudge the plugin appends is a part OpenCode 1.18 refuses
    // (its ids predate the host's), an incompatibility between the two, not with cairn)
    await run('list', 'PLEASE-LIST the project memories');
    const first = during('list').find((q) => q.kind === 'chat');
    const text = JSON.stringify(first?.messages ?? []);
    assert.ok(text.includes('[MEMORY]'), `no [MEMORY] block\n${describeRun(runs.list.result)}`);
    assert.ok(text.includes('goreleaser') || text.includes('benchmark runner'), `the block has none of cairn's memories: ${text.slice(0, 3000)}`);
    const listed = during('list').find((q) => q.kind === 'tool-result' && q.toolResult?.name === 'memory');
    assert.ok(listed && /goreleaser/.test(listed.toolResult.text), `GET /memories: ${listed?.toolResult.text}`);
  });

  test('finished turns are sent for extraction (auto-save) and land as memories of the project', async () => {
    // The host does not await event hooks: the auto-save of a run may land after it exits.
    const fact = await eventually('no auto-saved fact from a conversation', async () =>
      (await projectMemories()).find((m) => /My project is velodrome/.test(m.memory) || /PLEASE-/.test(m.memory)),
    );
    assert.equal(fact.user_id, projectTag);
    const conversation = extractions().find((q) => /\] assistant: /.test(q.lastText));
    assert.ok(conversation, 'cairn never sent a conversation (user and assistant) to its model');
  });
});
