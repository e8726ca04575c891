// The real Claude Code CLI (npm @anthropic-ai/claude-code, a native binary), driven offline by
// the scripted Messages API in lib/anthropic-mock.mjs, with the hooks of plugins/claude-code
// installed into a temp HOME's settings.json (`cairn setup` does not exist yet, so the test
// writes them, pointing at the cairn binary under test). The hooks start the daemon themselves.
//
// Run 1 registers a session with its prompt, saves the reply's `## Key Learnings` at Stop and
// ends the session at SessionEnd; run 2's first model request carries run 1's memory and the
// Memory Protocol exactly once; run 3 (with `cairn mcp` connected) calls mem_save, and the
// PreToolUse hook puts the memory in the real Claude Code session; run 4 installs the plugin
// from this repository's marketplace (`claude plugin marketplace add` + `install`) with `cairn`
// on PATH and checks its hooks, MCP tools and PreToolUse matcher work as shipped; run 5 runs
// `/compact`: the summary is stored and the next request has the context back, protocol once;
// run 3b (`--tools=router`) asks `memory {op: context_usage}` for its own session; run 6 has the model start a sub-agent whose answer ends in `## Key Learnings`: SubagentStop
// saves them into the parent session, and the parent's turn still finishes.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isCompactionRequest, startAnthropicMock, subagentToolName } from './lib/anthropic-mock.mjs';
import { REPO_ROOT, probeCairnSubcommand } from './lib/cairn.mjs';
import { findClaudeBin, makeClaudeSandbox, pluginHooks, runClaude as runClaudeCli } from './lib/claude.mjs';

const PROTOCOL_LEAD = 'cairn is your persistent memory across sessions.';

const probe = probeCairnSubcommand('hook');
const claude = findClaudeBin();
const skip = !probe.ok ? `cairn hook unavailable: ${probe.reason}` : !claude.bin ? claude.reason : false;

test('cairn hook and Claude Code are available', { skip }, () => {});

describe('Claude Code + cairn hook', { skip, timeout: 300_000 }, () => {
  const token = `otterdeploy${randomUUID().slice(0, 8)}`;
  const firstSession = randomUUID();
  const secondSession = randomUUID();
  const thirdSession = randomUUID();
  const pluginSession = randomUUID();
  const subagentSession = randomUUID();
  let mock;
  let sandbox;
  let cairn;
  let env;
  let project;

  before(async () => {
    mock = await startAnthropicMock({
      rules: [
        { beforeToolResults: true, when: isCompactionRequest, reply: { text: `<analysis>short</analysis>\n<summary>MOCK-SUMMARY of the deploy work (${token}).</summary>` } },
        { when: (r) => r.userText.includes('E2E-FIRST'), reply: { text: `Noted.\n\n## Key Learnings:\n1. Deploys are tagged with the marker ${token} by CI\n` } },
        { when: (r) => r.userText.includes('E2E-PLUGIN'), reply: { tool: 'mcp__plugin_cairn_cairn__mem_save', input: { title: `Plugin note ${token}`, content: 'Saved through the installed plugin.', type: 'discovery' } } },
        // The sub-agent's own request: its first user message is the prompt the main agent gave.
        { when: (r) => r.userText.includes('E2E-SUBTASK'), reply: { text: `Looked into it.\n\n## Key Learnings:\n1. Staging deploys are gated by the flag ${token}-canary\n` } },
        {
          when: (r) => r.userText.includes('E2E-DELEGATE') && !r.subagent,
          // In the foreground, so the sub-agent's answer is this turn's tool result.
          reply: (r) => ({ tool: subagentToolName(r.body) ?? 'Agent', input: { description: 'Check staging deploys', prompt: 'E2E-SUBTASK find how staging deploys are gated', subagent_type: 'general-purpose', run_in_background: false } }),
        },
        // 150,000 tokens in the window, then the model asks how full it is
        { when: (r) => r.userText.includes('E2E-FILL'), reply: { text: 'Filled.', inputTokens: 150_000 } },
        { when: (r) => r.userText.includes('E2E-USAGE'), reply: { tool: 'mcp__cairn__memory', input: { op: 'context_usage' }, inputTokens: 150_000 } },
        { when: (r) => r.userText.includes('E2E-SAVE'), reply: { tool: 'mcp__cairn__mem_save', input: { title: `Release train ${token}`, content: 'Releases leave every Tuesday.', type: 'decision' } } },
      ],
    });
    sandbox = await makeClaudeSandbox({ mock, projectName: 'cc-e2e-project', settings: { hooks: pluginHooks(probe.bin) } });
    ({ cairn, env, project } = sandbox);
  });
  after(async () => {
    await mock?.close();
    sandbox?.cleanup();
  });

  /** One `claude -p` run in the project; resolves with its exit code and output. */
  const runClaude = (args, runEnv = env) => runClaudeCli(claude.bin, ['-p', ...args, '--model', 'claude-mock-1'], { cwd: project, env: runEnv });

  function cairnJson(args) {
    const r = spawnSync(probe.bin, [...args, '--json'], { env: { ...env, CAIRN_AUTOSTART: 'never' }, encoding: 'utf8' });
    assert.equal(r.status, 0, `cairn ${args.join(' ')}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  }

  const dump = (r) => `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}\n--- mock\n${mock.requests.map((q) => `${q.seq} ${q.method} ${q.path} ${q.userText.slice(0, 80)}`).join('\n')}`;

  test('run 1: the session is registered with its prompt and ended at SessionEnd', async () => {
    const r = await runClaude(['--session-id', firstSession, `E2E-FIRST the deploy marker is ${token}`]);
    assert.equal(r.code, 0, dump(r));
    assert.match(r.stdout, /Noted\./, dump(r));
    const sessions = cairnJson(['sessions', '--all-projects']);
    const session = sessions.find((s) => s.id === firstSession);
    assert.ok(session, `session ${firstSession} not registered: ${JSON.stringify(sessions)}`);
    assert.equal(session.project, 'cc-e2e-project');
    assert.ok(session.ended_at, `SessionEnd did not end the session: ${JSON.stringify(session)}`);
    const context = cairnJson(['context', '--project', 'cc-e2e-project']);
    assert.ok(context.context.includes(`the deploy marker is ${token}`), `the prompt was not stored:\n${context.context}`);
    // The Stop hook saved the reply's Key Learnings as a memory of this session.
    const found = cairnJson(['search', token, '--project', 'cc-e2e-project']);
    const learning = found.hits.find((h) => h.title.includes(`Deploys are tagged with the marker ${token}`));
    assert.ok(learning, `the Key Learnings were not captured: ${JSON.stringify(found)}`);
    assert.deepEqual(mock.connects, [], 'Claude Code tried to reach the internet');
  });

  test("run 2: the first model request carries run 1's memory and the protocol once", async () => {
    const before = mock.messages().length;
    const r = await runClaude(['--session-id', secondSession, 'What is the deploy marker?']);
    assert.equal(r.code, 0, dump(r));
    const first = mock.messages().slice(before).find((q) => (q.body?.tools ?? []).length > 0);
    assert.ok(first, `no model request in run 2\n${dump(r)}`);
    const body = JSON.stringify(first.body);
    assert.ok(body.includes(`Deploys are tagged with the marker ${token}`), `run 1's memory is not in run 2's first request\n${body.slice(0, 4000)}`);
    assert.ok(body.includes(`the deploy marker is ${token}`), `run 1's prompt is not in run 2's first request\n${body.slice(0, 4000)}`);
    const lead = JSON.stringify(PROTOCOL_LEAD).slice(1, -1);
    assert.equal(body.split(lead).length - 1, 1, `the protocol is not there exactly once\n${body.slice(0, 4000)}`);
    const sessions = cairnJson(['sessions', '--all-projects']);
    assert.ok(sessions.find((s) => s.id === secondSession)?.ended_at, JSON.stringify(sessions));
    assert.deepEqual(mock.connects, [], 'Claude Code tried to reach the internet');
  });

  test("run 3: cairn's MCP tools get the real session id from PreToolUse", async () => {
    const mcpConfig = path.join(cairn.root, 'mcp.json');
    writeFileSync(mcpConfig, JSON.stringify({ mcpServers: { cairn: { type: 'stdio', command: probe.bin, args: ['mcp', '--tools=agent', '--host=claude-code'] } } }));
    const before = mock.messages().length;
    const r = await runClaude(['E2E-SAVE the release train', '--session-id', thirdSession, '--mcp-config', mcpConfig, '--allowedTools', 'mcp__cairn']);
    assert.equal(r.code, 0, dump(r));
    const asked = mock.messages().slice(before);
    assert.ok(asked.some((q) => JSON.stringify(q.body).includes('"tool_result"')), `mem_save never ran\n${dump(r)}`);
    const found = cairnJson(['search', `Release train ${token}`, '--project', 'cc-e2e-project']);
    const hit = found.hits.find((h) => h.title === `Release train ${token}`);
    assert.ok(hit, `mem_save did not store the memory: ${JSON.stringify(found)}\n${dump(r)}`);
    const memory = cairnJson(['get', String(hit.id)]);
    assert.equal(memory.session_id, thirdSession, `the save went to ${memory.session_id}, not the Claude Code session`);
    // With the server connected the protocol is still there once: `--host=claude-code` makes the
    // server's MCP `instructions` one line, since SessionStart's context carries the protocol.
    const lead = JSON.stringify(PROTOCOL_LEAD).slice(1, -1);
    const first = asked.find((q) => (q.body?.tools ?? []).length > 0);
    const body = JSON.stringify(first?.body ?? {});
    assert.equal(body.split(lead).length - 1, 1, `the protocol is not there exactly once with cairn mcp connected\n${body.slice(0, 4000)}`);
  });

  test("run 3b: the router's context_usage measures the calling session from its transcript as it is written", async () => {
    const usageSession = randomUUID();
    const mcpConfig = path.join(cairn.root, 'mcp-router.json');
    writeFileSync(mcpConfig, JSON.stringify({ mcpServers: { cairn: { type: 'stdio', command: probe.bin, args: ['mcp', '--tools=router', '--host=claude-code'] } } }));
    const fill = await runClaude(['E2E-FILL read the whole repository', '--session-id', usageSession]);
    assert.equal(fill.code, 0, dump(fill));
    const before = mock.messages().length;
    const r = await runClaude(['E2E-USAGE how full is my context?', '--resume', usageSession, '--mcp-config', mcpConfig, '--allowedTools', 'mcp__cairn']);
    assert.equal(r.code, 0, dump(r));
    // the tool's answer, as the model got it back
    const results = mock.messages().slice(before).flatMap((q) => (q.body?.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content : [])));
    const result = results.find((b) => b?.type === 'tool_result');
    assert.ok(result, `memory {op: context_usage} never ran\n${dump(r)}`);
    const text = JSON.stringify(result.content);
    // No session named: PreToolUse gave the caller's, and the daemon read its transcript before
    // measuring. Claude Code 2.1.330 writes its transcript in batches, so the answer that made
    // the call may not be on disk yet when the tool runs; the one before it (the same 150,000
    // tokens here) is.
    assert.ok(text.includes(`your session ${usageSession}: 75% used (150,000 / 200,000 tokens, claude-mock-1), yellow`), `${text}\n${dump(r)}`);
  });

  test('run 4: the plugin installed from this repository\'s marketplace works as shipped', async () => {
    // A Claude Code home with no hooks of its own, and `cairn` on PATH as the plugin expects.
    const config = path.join(cairn.root, 'plugin-home', '.claude');
    mkdirSync(config, { recursive: true });
    writeFileSync(path.join(config, '.claude.json'), JSON.stringify({ hasCompletedOnboarding: true }));
    const pluginEnv = { ...env, CLAUDE_CONFIG_DIR: config, PATH: `${path.dirname(probe.bin)}${path.delimiter}${env.PATH}` };
    const cli = (args) => spawnSync(claude.bin, args, { cwd: project, env: pluginEnv, encoding: 'utf8', timeout: 60_000 });
    for (const args of [['plugin', 'marketplace', 'add', REPO_ROOT], ['plugin', 'install', 'cairn@cairn']]) {
      const r = cli(args);
      assert.equal(r.status, 0, `claude ${args.join(' ')}: ${r.stdout}${r.stderr}`);
    }
    const before = mock.messages().length;
    const r = await runClaude(['E2E-PLUGIN note it', '--session-id', pluginSession, '--allowedTools', 'mcp__plugin_cairn_cairn'], pluginEnv);
    assert.equal(r.code, 0, dump(r));
    const first = mock.messages().slice(before).find((q) => (q.body?.tools ?? []).length > 0);
    const body = JSON.stringify(first?.body ?? {});
    assert.ok(body.includes('mcp__plugin_cairn_cairn__mem_save'), `the plugin's MCP tools were not offered\n${dump(r)}`);
    assert.ok(body.includes(`Deploys are tagged with the marker ${token}`), `no cairn context from the plugin's SessionStart\n${dump(r)}`);
    const lead = JSON.stringify(PROTOCOL_LEAD).slice(1, -1);
    assert.equal(body.split(lead).length - 1, 1, `the plugin gives the protocol more than once\n${body.slice(0, 4000)}`);
    const found = cairnJson(['search', `Plugin note ${token}`, '--project', 'cc-e2e-project']);
    const hit = found.hits.find((h) => h.title === `Plugin note ${token}`);
    assert.ok(hit, `the plugin's mem_save did not store the memory: ${JSON.stringify(found)}\n${dump(r)}`);
    assert.equal(cairnJson(['get', String(hit.id)]).session_id, pluginSession);
    const session = cairnJson(['sessions', '--all-projects']).find((s) => s.id === pluginSession);
    assert.ok(session?.ended_at, `the plugin's SessionEnd did not end the session: ${JSON.stringify(session)}`);
  });

  test('run 5: /compact stores the summary and the next request has the context back', async () => {
    const compact = await runClaude(['/compact keep the deploy facts', '--resume', firstSession]);
    assert.equal(compact.code, 0, dump(compact));
    const found = cairnJson(['search', 'MOCK-SUMMARY', '--project', 'cc-e2e-project']);
    const hit = found.hits.find((h) => h.type === 'compaction_summary');
    assert.ok(hit, `PostCompact did not store the summary: ${JSON.stringify(found)}\n${dump(compact)}`);
    const memory = cairnJson(['get', String(hit.id)]);
    assert.equal(memory.session_id, firstSession);
    assert.ok(memory.content.includes(`MOCK-SUMMARY of the deploy work (${token})`), memory.content);
    const before = mock.messages().length;
    const next = await runClaude(['E2E-AFTER what now?', '--resume', firstSession]);
    assert.equal(next.code, 0, dump(next));
    const first = mock.messages().slice(before).find((q) => (q.body?.tools ?? []).length > 0);
    const body = JSON.stringify(first?.body ?? {});
    assert.ok(body.includes('The summary of this compaction is stored in cairn automatically'), `no context after compaction\n${body.slice(0, 3000)}`);
    assert.ok(body.includes(`Deploys are tagged with the marker ${token}`), `the memory is not back after compaction\n${body.slice(0, 3000)}`);
    // The resume that follows replays the compact injection and adds no second copy.
    const lead = JSON.stringify(PROTOCOL_LEAD).slice(1, -1);
    assert.equal(body.split(lead).length - 1, 1, `the protocol is not there exactly once after compaction\n${body.slice(0, 3000)}`);
  });
  test("run 6: a sub-agent's Key Learnings are saved into the parent session (SubagentStop)", async () => {
    const before = mock.messages().length;
    const r = await runClaude(['--session-id', subagentSession, 'E2E-DELEGATE check how staging deploys are gated']);
    assert.equal(r.code, 0, dump(r));
    // The main session finished its turn: the mock's answer to the sub-agent's result.
    assert.match(r.stdout, /MOCK-DONE/, dump(r));
    const asked = mock.messages().slice(before);
    const main = asked.find((q) => q.userText.includes('E2E-DELEGATE'));
    assert.ok(subagentToolName(main?.body), `no sub-agent tool offered: ${JSON.stringify((main?.body?.tools ?? []).map((t) => t.name))}`);
    const sub = asked.find((q) => q.userText.includes('E2E-SUBTASK'));
    assert.ok(sub, `the sub-agent never asked the model\n${dump(r)}`);
    assert.ok(sub.subagent, 'the sub-agent request is not marked as one (cc_is_subagent): the mock cannot tell it apart');
    // SubagentStart gave the sub-agent the protocol (its additionalContext reaches the sub-agent).
    const lead = JSON.stringify(PROTOCOL_LEAD).slice(1, -1);
    assert.ok(JSON.stringify(sub.body).includes(lead), `SubagentStart's protocol is not in the sub-agent's request\n${JSON.stringify(sub.body).slice(0, 3000)}`);
    // The learning came from the sub-agent only: the main agent's last answer has none, so
    // Stop saves nothing, and SubagentStop's `last_assistant_message` is the sub-agent's.
    const found = cairnJson(['search', `${token}-canary`, '--project', 'cc-e2e-project']);
    const hit = found.hits.find((h) => h.content.includes(`Staging deploys are gated by the flag ${token}-canary`));
    assert.ok(hit, `the sub-agent's Key Learnings were not saved: ${JSON.stringify(found)}\n${dump(r)}`);
    const memory = cairnJson(['get', String(hit.id)]);
    assert.equal(memory.session_id, subagentSession, `the learning went to ${memory.session_id}, not the parent session`);
    assert.equal(memory.project, 'cc-e2e-project');
    assert.equal(memory.tool_name, 'subagent-stop', JSON.stringify(memory));
    const session = cairnJson(['sessions', '--all-projects']).find((s) => s.id === subagentSession);
    assert.ok(session?.ended_at, `the parent session was not ended at SessionEnd: ${JSON.stringify(session)}`);
    assert.deepEqual(mock.connects, [], 'Claude Code tried to reach the internet');
  });
});
