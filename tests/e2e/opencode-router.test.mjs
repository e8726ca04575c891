// The router's `plans` and `context_usage` ops from inside a real OpenCode session (issue 15): `plans` and
// `context_usage` through cairn's one `memory` tool (`cairn mcp --tools=router`), with cairn's
// plugin installed by `cairn setup opencode`.
//
// OpenCode itself writes the plan: in plan mode (`--agent plan`, with
// OPENCODE_EXPERIMENTAL_PLAN_MODE=1 as in opencode-ai 1.18.33) it tells the model where the
// session's plan file goes, and the scripted model writes it there with OpenCode's `write` tool.
// The model then lists the plans, reads that one, and asks how full its context is, all without
// naming its session (the plugin adds it) and before any scan of OpenCode's database.

import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeCairnSandbox, probeCairnSubcommand } from './lib/cairn.mjs';
import { callTool, startMockModel } from './lib/mock-model.mjs';
import { OPENCODE_MISSING, createOpenCodeSandbox, describeRun, findOpenCodeBin, parseJsonEvents } from './lib/opencode.mjs';
import { installWithSetup } from './lib/plugin.mjs';

const probe = probeCairnSubcommand('mcp');
const skip = probe.ok ? false : `cairn mcp unavailable: ${probe.reason}`;

/** What OpenCode's plan mode says in the user message (opencode-ai 1.18.33). */
const PLAN_AT = /create your plan at (\S+\.md) using the write tool/;
const PLAN_TEXT = '# Route the history ops\n\n1. list the plans\n2. read this one\n3. measure the context\n';
/** Prompt tokens the mock reports for each step of the run, growing as a real session does. */
const STEP_TOKENS = [90_000, 92_000, 94_000, 96_000];
const usage = (step) => ({ usage: { prompt_tokens: STEP_TOKENS[step], completion_tokens: 0 } });

describe('OpenCode + the router: plans and context_usage from inside a session', { skip, timeout: 300_000 }, () => {
  let mock;
  let cairn;
  let oc;
  let result;
  let planPath = null;
  const allText = (q) => q.messages.map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content ?? ''))).join('\n');
  const resultOf = (n) => mock.toolResults.filter((t) => t.name === 'cairn_memory')[n]?.text ?? '';
  const dump = () =>
    `${describeRun(result)}\n--- mock requests ---\n${mock.requests
      .map((q) => `#${q.seq} ${q.kind} tool=${q.toolResult?.name ?? ''} last=${JSON.stringify(q.lastText?.slice(0, 200))}`)
      .join('\n')}`;

  before(async () => {
    assert.ok(findOpenCodeBin(), OPENCODE_MISSING);
    mock = await startMockModel({
      rules: [
        {
          kind: 'chat',
          match: (q) => PLAN_AT.test(allText(q)),
          reply: (q) => {
            planPath = PLAN_AT.exec(allText(q))[1];
            return { ...callTool('write', { filePath: planPath, content: PLAN_TEXT }), ...usage(0) };
          },
          times: 1,
        },
        { kind: 'tool-result', match: (q) => q.toolResult?.name === 'write', reply: { ...callTool('cairn_memory', { op: 'plans' }), ...usage(1) }, times: 1 },
        {
          kind: 'tool-result',
          match: (q) => q.toolResult?.name === 'cairn_memory' && /\| name \| where \|/.test(q.toolResult.text),
          reply: () => ({ ...callTool('cairn_memory', { op: 'plans', args: { read: path.basename(planPath ?? 'none.md') } }), ...usage(2) }),
          times: 1,
        },
        {
          kind: 'tool-result',
          match: (q) => q.toolResult?.name === 'cairn_memory' && /^# Plan /.test(q.toolResult.text),
          reply: { ...callTool('cairn_memory', { op: 'context_usage' }), ...usage(3) },
          times: 1,
        },
        { kind: 'tool-result', match: (q) => q.toolResult?.name === 'cairn_memory', reply: { text: 'ROUTER-DONE' }, times: 1 },
      ],
    });
    cairn = await makeCairnSandbox({ git: false });
    const env = {
      CAIRN_DATA_DIR: cairn.dataDir,
      CAIRN_PORT: cairn.env.CAIRN_PORT,
      OPENCODE_EXPERIMENTAL_PLAN_MODE: '1',
      NO_COLOR: '1',
      RUST_BACKTRACE: '1',
    };
    oc = createOpenCodeSandbox({ mock, env });
    const setup = installWithSetup({ bin: probe.bin, env: oc.env });
    assert.deepEqual(setup.installed.sort(), ['mcp.cairn', 'plugin'], `setup did not install both:\n${setup.output}`);
    // the router profile instead of the agent tools: what a user who wants one schema sets
    const config = JSON.parse(readFileSync(oc.configPath, 'utf8'));
    const command = config.mcp?.cairn?.command;
    assert.ok(Array.isArray(command) && command.includes('--tools=agent'), `unexpected mcp.cairn: ${JSON.stringify(config.mcp)}`);
    config.mcp.cairn.command = command.map((a) => (a === '--tools=agent' ? '--tools=router' : a));
    writeFileSync(oc.configPath, `${JSON.stringify(config, null, 2)}\n`);
    result = await oc.run('ROUTER-PLAN draft a plan for the history ops', { args: ['--format', 'json', '--agent', 'plan'] });
    assert.equal(result.code, 0, dump());
  });
  after(async () => {
    await mock?.close();
    oc?.cleanup();
    cairn?.cleanup();
  });

  test("OpenCode wrote the session's plan in the project's .opencode/plans", () => {
    assert.ok(planPath, `plan mode did not name a plan file\n${dump()}`);
    assert.equal(path.dirname(planPath), path.join(oc.project, '.opencode', 'plans'), 'a git project keeps its plans in its worktree');
    assert.match(path.basename(planPath), /^\d{13}-[a-z]+-[a-z]+\.md$/);
    assert.ok(existsSync(planPath), `the write tool did not write ${planPath}\n${dump()}`);
    assert.equal(readFileSync(planPath, 'utf8'), PLAN_TEXT);
  });

  test('memory {op: plans} lists it as the project\'s, newest first, with its heading', () => {
    const listing = resultOf(0);
    assert.match(listing, /^\| name \| where \| size \| modified \| first heading \|/, `${listing}\n${dump()}`);
    const row = listing.split('\n').find((l) => l.includes(path.basename(planPath)));
    assert.ok(row, `the plan is not listed:\n${listing}`);
    assert.match(row, /\| project \| \d+ \| .* \| Route the history ops \|$/);
  });

  test('memory {op: plans, args: {read}} returns the plan as written', () => {
    const read = resultOf(1);
    assert.match(read, new RegExp(`^# Plan ${path.basename(planPath)} \\(project, ${PLAN_TEXT.length} bytes, modified `), `${read}\n${dump()}`);
    assert.ok(read.includes(PLAN_TEXT.trim()), read);
  });

  test('memory {op: context_usage} measures the calling session, counted from its last answer', () => {
    const sid = parseJsonEvents(result.stdout).find((e) => e.sessionID)?.sessionID;
    assert.match(sid ?? '', /^ses_/, dump());
    const usage = resultOf(2);
    assert.ok(usage.includes(sid), `not the caller's session (${sid}):\n${usage}`);
    // OpenCode writes a step's usage when the step finishes, after its tools ran: the call
    // counts the answer before it (94,000), read from OpenCode's database as the call came,
    // against the window the plugin's meter uses (the mock provider's 128,000, which the plugin
    // passes), not the daemon's default 200,000.
    assert.match(usage, /^your session ses_\S+: 73% used \(94,000 \/ 128,000 tokens, mock-model\), yellow; \+2,000 tokens since the last answer\./, usage);
    assert.match(usage, /"source":"caller"/);
    assert.doesNotMatch(usage, /not in the history archive yet/, usage);
  });
});
