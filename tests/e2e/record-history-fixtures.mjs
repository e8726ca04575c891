// Records the conversation-history fixtures of cairn-history's readers from the REAL hosts:
// OpenCode 1.18.33 (its SQLite database after scripted runs with a tool call, a Task sub-agent
// and a forced auto-compaction) and Claude Code (its JSONL transcripts after a few scripted
// turns with a Bash call, a sub-agent and `/compact`). Both run offline against the mocks of
// lib/. The output is TEXT, committed under crates/cairn-history/tests/fixtures/history/:
//   opencode.sql          the schema and rows of OpenCode's session/message/part/project tables
//   claude/<slug>/…jsonl  the transcripts, sub-agent files included
// with every machine path (the sandbox dir) replaced by /nonexistent/sandbox, so the files name
// no real machine. Re-record: `node tests/e2e/record-history-fixtures.mjs` (needs
// scripts/install-test-deps.sh node and the sqlite3 CLI).

import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { isCompactionRequest, startAnthropicMock } from './lib/anthropic-mock.mjs';
import { REPO_ROOT, initGitRepo } from './lib/cairn.mjs';
import { claudeEnv, findClaudeBin, runClaude } from './lib/claude.mjs';
import { callTool, startMockModel, whenUserSays } from './lib/mock-model.mjs';
import { createOpenCodeSandbox, describeRun } from './lib/opencode.mjs';
import { makeTempDir } from './lib/tmp.mjs';

const OUT = path.join(REPO_ROOT, 'crates', 'cairn-history', 'tests', 'fixtures', 'history');
const PLACEHOLDER = '/nonexistent/sandbox';
const SECRET = '<private>hunter2-fixture-secret</private>';

/** Replace every spelling of the sandbox root (plain, real path, Claude's slug) by the placeholder. */
function scrub(text, roots) {
  let out = text;
  for (const root of roots) {
    out = out.split(root).join(PLACEHOLDER);
    out = out.split(root.replace(/[^A-Za-z0-9]/g, '-')).join(PLACEHOLDER.replace(/[^A-Za-z0-9]/g, '-'));
  }
  return out;
}

async function recordOpenCode() {
  const mock = await startMockModel({
    rules: [
      whenUserSays('REC-TOOL', callTool('bash', { command: 'echo fixture-bash-output', description: 'Print a marker' })),
      whenUserSays('REC-DELEGATE', callTool('task', { description: 'Inspect files', prompt: 'SUBAGENT-PROMPT list the files', subagent_type: 'general' })),
      whenUserSays('SUBAGENT-PROMPT', { text: 'SUBAGENT-ANSWER: README.md only' }),
      // a reported usage over the window (128k - 4k) makes OpenCode auto-compact after the step
      whenUserSays('REC-OVERFLOW', { text: 'A very long answer', usage: { prompt_tokens: 200_000 } }),
    ],
  });
  const oc = createOpenCodeSandbox({ mock, projectName: 'oc-history-project' });
  try {
    const runs = [
      [`REC-TOOL print the marker ${SECRET}`, []],
      ['REC-DELEGATE look around', ['-c']],
      ['REC-OVERFLOW the context', ['-c']],
      ['REC-AFTER compaction, what now?', ['-c']],
    ];
    for (const [message, args] of runs) {
      const r = await oc.run(message, { args });
      if (r.code !== 0) throw new Error(`opencode run ${message} failed\n${describeRun(r)}`);
    }
    if (!mock.requests.some((q) => q.kind === 'compaction')) throw new Error('OpenCode did not compact');
    const dump = spawnSync('sqlite3', [oc.dbPath, '.dump project session message part'], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (dump.status !== 0) throw new Error(`sqlite3 .dump failed: ${dump.stderr}`);
    const roots = [oc.root, realpathSync(oc.root)];
    writeFileSync(path.join(OUT, 'opencode.sql'), scrub(dump.stdout, roots));
  } finally {
    await mock.close();
    oc.cleanup();
  }
}

/** A rule that calls whichever sub-agent tool this Claude Code offers (`Task` or `Agent`). */
function delegateRule() {
  const rule = {
    reply: null,
    when(request) {
      if (!request.userText.includes('REC-DELEGATE')) return false;
      const offered = (request.body?.tools ?? []).map((t) => t.name);
      const tool = ['Agent', 'Task'].find((n) => offered.includes(n));
      rule.reply = tool
        ? { tool, input: { description: 'Inspect files', prompt: 'SUBAGENT-PROMPT list the files', subagent_type: 'general-purpose' } }
        : { text: `no sub-agent tool offered: ${offered.join(', ')}` };
      return true;
    },
  };
  return rule;
}

async function recordClaude() {
  const { bin, reason } = findClaudeBin();
  if (!bin) throw new Error(reason);
  const mock = await startAnthropicMock({
    rules: [
      { beforeToolResults: true, when: isCompactionRequest, reply: { text: '<analysis>short</analysis>\n<summary>MOCK-SUMMARY of the fixture work.</summary>' } },
      { when: (r) => r.userText.includes('SUBAGENT-PROMPT'), reply: { text: 'SUBAGENT-ANSWER: README.md only' } },
      { when: (r) => r.userText.includes('REC-BASH'), reply: { tool: 'Bash', input: { command: 'echo fixture-bash-output', description: 'Print a marker' } } },
      delegateRule(),
    ],
  });
  const tmp = makeTempDir('cairn-cc-');
  try {
    const root = tmp.path;
    const home = path.join(root, 'home');
    const config = path.join(home, '.claude');
    const project = path.join(root, 'cc-history-project');
    const tmpDir = path.join(root, 'tmp');
    for (const d of [config, project, tmpDir]) mkdirSync(d, { recursive: true });
    initGitRepo(project);
    writeFileSync(path.join(config, '.claude.json'), JSON.stringify({ hasCompletedOnboarding: true }));
    const env = claudeEnv({ config, tmp: tmpDir, mock, base: { HOME: home } });
    const cwd = realpathSync(project);
    const session = '3f0c2a4e-9b1d-4c55-8a77-0d2e6f1b9c01';
    const run = (args) =>
      runClaude(bin, ['-p', ...args, '--model', 'claude-mock-1', '--allowedTools', 'Bash', 'Task', 'Agent'], { cwd, env });
    const steps = [
      ['--session-id', session, `REC-BASH print the marker ${SECRET}`],
      ['--resume', session, 'REC-DELEGATE look around'],
      ['--resume', session, '/compact keep the fixture facts'],
      ['--resume', session, 'REC-AFTER compaction, what now?'],
    ];
    for (const args of steps) {
      const r = await run(args);
      if (r.code !== 0) throw new Error(`claude ${args.join(' ')} failed (${r.code}):\n${r.stdout}${r.stderr}`);
    }
    if (mock.connects.length) throw new Error(`Claude Code tried to reach the internet: ${mock.connects.join(', ')}`);
    const projects = path.join(config, 'projects');
    const out = path.join(OUT, 'claude');
    rmSync(out, { recursive: true, force: true });
    copyScrubbed(projects, out, [root, realpathSync(root)]);
  } finally {
    await mock.close();
    tmp.cleanup();
  }
}

/** Copy the `.jsonl` files under `from` to `to`, paths and names scrubbed. */
function copyScrubbed(from, to, roots) {
  for (const name of readdirSync(from)) {
    const src = path.join(from, name);
    const dst = path.join(to, scrub(name, roots));
    if (statSync(src).isDirectory()) {
      copyScrubbed(src, dst, roots);
    } else if (name.endsWith('.jsonl')) {
      mkdirSync(path.dirname(dst), { recursive: true });
      writeFileSync(dst, scrub(readFileSync(src, 'utf8'), roots));
    }
  }
}

mkdirSync(OUT, { recursive: true });
const which = process.argv[2] ?? 'all';
if (which === 'all' || which === 'opencode') await recordOpenCode();
if (which === 'all' || which === 'claude') await recordClaude();
process.stdout.write(`fixtures written to ${path.relative(process.cwd(), OUT)}\n`);
