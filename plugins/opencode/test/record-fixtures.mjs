// Records the hook payloads of the real OpenCode binary (tests/e2e's pinned opencode-ai) into
// fixtures/hooks.jsonl, which the unit tests replay. Run it again after an OpenCode upgrade:
//   node plugins/opencode/test/record-fixtures.mjs
// It installs record-probe.js as a global plugin (<XDG_CONFIG_HOME>/opencode/plugins/) in a
// temp sandbox, drives five `opencode run`s with the scripted mock model, and keeps every
// hook call (input and output after the call). Paths of the temp dirs are replaced by
// placeholders so the fixtures hold no machine paths.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startMockModel, whenUserSays, callTool } from '../../../tests/e2e/lib/mock-model.mjs';
import { createOpenCodeSandbox, describeRun } from '../../../tests/e2e/lib/opencode.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const OUT = path.join(HERE, 'fixtures');

const mock = await startMockModel({
  rules: [
    whenUserSays('PLEASE-DELEGATE', callTool('task', { description: 'Inspect files', prompt: 'SUBAGENT-PROMPT list the files', subagent_type: 'general' })),
    whenUserSays('PLEASE-COMPACT', callTool('probe_compact', {})),
    whenUserSays('PLEASE-OVERFLOW', { text: 'Overflowing answer', usage: { prompt_tokens: 200_000 } }),
    whenUserSays('PLEASE-LEARN', { text: 'Done.\n\n## Key Learnings:\n1. The build uses pnpm workspaces\n2. Tests run with node --test', usage: { prompt_tokens: 64_000, completion_tokens: 100 } }),
  ],
});
const sb = createOpenCodeSandbox({ mock, env: {} });
const log = path.join(sb.root, 'probe.jsonl');
sb.env.CAIRN_PROBE_LOG = log;
const pluginDir = path.join(sb.env.XDG_CONFIG_HOME, 'opencode', 'plugins');
mkdirSync(pluginDir, { recursive: true });
copyFileSync(path.join(HERE, 'record-probe.js'), path.join(pluginDir, 'record-probe.js'));
// does the singular `plugin/` dir load too?
const singular = path.join(sb.env.XDG_CONFIG_HOME, 'opencode', 'plugin');
mkdirSync(singular, { recursive: true });
writeFileSync(path.join(singular, 'singular-probe.js'),
  'export default { id: "singular-probe", server: async () => { (await import("node:fs")).appendFileSync(process.env.CAIRN_PROBE_LOG, JSON.stringify({hook:"singular-plugin-dir-loaded"})+"\\n"); return {} } }\n');

const runs = [
  ['plain', 'hello there, a plain prompt <private>sk-SECRET</private> with enough words'],
  ['task', 'PLEASE-DELEGATE to a sub-agent'],
  ['compact-tool', 'PLEASE-COMPACT now'],
  ['overflow', 'PLEASE-OVERFLOW the context'],
  ['learn', 'PLEASE-LEARN something'],
];
const lines = [];
for (const [name, message] of runs) {
  const before = (() => { try { return readFileSync(log, 'utf8').split('\n').filter(Boolean).length; } catch { return 0; } })();
  const r = await sb.run(message);
  if (r.code !== 0) console.error(`${name}: ${describeRun(r)}`);
  // summarize is scheduled after the tool returned; opencode run may exit before it ends
  const all = readFileSync(log, 'utf8').split('\n').filter(Boolean).slice(before);
  for (const l of all) lines.push({ run: name, ...JSON.parse(l) });
  console.error(`${name}: exit ${r.code}, ${all.length} hook calls, ${r.ms} ms`);
}
const task = mock.requests.find((q) => q.body?.tools)?.body.tools.find((t) => t.function?.name === 'task');
let text = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
for (const [p, ph] of [[sb.project, '<PROJECT>'], [sb.home, '<HOME>'], [sb.root, '<ROOT>']]) text = text.split(p).join(ph);
text = text.replace(/http:\/\/127\.0\.0\.1:\d+/g, 'http://127.0.0.1:<PORT>');
writeFileSync(path.join(OUT, 'hooks.jsonl'), text);
writeFileSync(path.join(OUT, 'task-tool.json'), JSON.stringify(task, null, 2) + '\n');
writeFileSync(path.join(OUT, 'mock-requests.json'), JSON.stringify(mock.requests.map((q) => ({ kind: q.kind, lastText: q.lastText?.slice(0, 300), system: q.system?.slice(-300), systemCount: q.messages?.filter((m) => m.role === 'system').length })), null, 2).split(sb.project).join('<PROJECT>').split(sb.root).join('<ROOT>') + '\n');
await mock.close();
sb.cleanup();
