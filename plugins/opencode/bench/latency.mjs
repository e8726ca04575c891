// Added latency per message of cairn's OpenCode plugin: the two hooks OpenCode awaits on every
// message (`chat.message`, `experimental.chat.system.transform`), with a real daemon running
// (`cairn serve` on a temp data dir and a free port), against the same calls into hooks that do
// nothing (the baseline). Payloads are the ones recorded from opencode 1.18.33.
//
//   cd tests/e2e && CAIRN_BIN=<path to cairn> node --import tsx ../../plugins/opencode/bench/latency.mjs [messages] [per-session]
//
// Defaults: 400 messages, 10 per session (so 40 first messages, which also fetch the [MEMORY]
// block). Prints median and p95 in milliseconds.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import plugin from '../cairn.ts';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const MESSAGES = Number(process.argv[2] ?? 400);
const PER_SESSION = Number(process.argv[3] ?? 10);
const BIN = process.env.CAIRN_BIN;
if (!BIN || !existsSync(BIN)) {
  console.error('set CAIRN_BIN to the cairn binary');
  process.exit(2);
}

const recorded = readFileSync(path.join(HERE, '..', 'test', 'fixtures', 'hooks.jsonl'), 'utf8')
  .split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((c) => c.run === 'plain');
const chat = recorded.find((c) => c.hook === 'chat.message');
const system = recorded.filter((c) => c.hook === 'experimental.chat.system.transform')[1];
const created = recorded.find((c) => c.hook === 'event' && c.input.event.type === 'session.created');

// a daemon of our own
const tmp = mkdtempSync(path.join(os.tmpdir(), 'cairn-bench-'));
const env = { ...process.env, CAIRN_DATA_DIR: path.join(tmp, 'data'), HOME: tmp, XDG_DATA_HOME: path.join(tmp, 'share'), XDG_CONFIG_HOME: path.join(tmp, 'config') };
const daemon = spawn(BIN, ['serve', '--port', '0', '--or-any-port', '--idle-exit', '600'], { env, stdio: 'ignore' });
let addr = null;
for (let i = 0; i < 200 && !addr; i++) {
  await new Promise((r) => setTimeout(r, 50));
  try {
    addr = JSON.parse(readFileSync(path.join(env.CAIRN_DATA_DIR, 'daemon.json'), 'utf8')).addr;
  } catch {}
}
if (!addr) throw new Error('cairn serve did not write daemon.json');
const url = `http://${addr}`;
// a few memories, so the [MEMORY] block has something to say
for (let i = 0; i < 50; i++) {
  await fetch(`${url}/v1/op`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ op: 'save', args: { project: 'bench', title: `Decision ${i}`, content: `We chose option ${i} for the build because of reason ${i}.`, type: 'decision' } }) });
}

const client = { app: { log: async () => ({}) }, session: { get: async () => ({ data: null }), summarize: async () => ({}) }, config: { get: async () => ({ data: {} }) } };
const real = await plugin.server({ client, directory: tmp, worktree: tmp }, { url, project: 'bench', autostart: false });
const noop = { 'chat.message': async () => {}, 'experimental.chat.system.transform': async () => {}, event: async () => {} };
await new Promise((r) => setTimeout(r, 300)); // start-up fetches

const prompts = ['please refactor the build script so it uses option 3', 'why does the parser fail on empty input?', 'add a test for the release checklist', 'explain the layout of this repository'];
async function measure(hooks, label) {
  const t = { chat: [], system: [], total: [], first: [] };
  for (let i = 0; i < MESSAGES; i++) {
    const sid = `ses_bench_${label}_${Math.floor(i / PER_SESSION)}`;
    if (i % PER_SESSION === 0) {
      const ev = structuredClone(created.input);
      ev.event.properties.info.id = sid;
      ev.event.properties.sessionID = sid;
      await hooks.event(ev);
    }
    const [ci, co] = [structuredClone(chat.input), structuredClone(chat.output)];
    ci.sessionID = sid;
    co.message.sessionID = sid;
    co.message.id = `msg_bench_${label}_${i}`;
    co.parts[0].text = `${prompts[i % prompts.length]} (#${i})`;
    const [si, so] = [structuredClone(system.input), structuredClone(system.output)];
    si.sessionID = sid;
    const t0 = performance.now();
    await hooks['chat.message'](ci, co);
    const t1 = performance.now();
    await hooks['experimental.chat.system.transform'](si, so);
    const t2 = performance.now();
    t.chat.push(t1 - t0);
    t.system.push(t2 - t1);
    t.total.push(t2 - t0);
    if (i % PER_SESSION === 0) t.first.push(t2 - t0);
  }
  return t;
}
const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
await measure(real, 'warm'); // warm-up: connections, caches
const base = await measure(noop, 'base');
const plug = await measure(real, 'plug');
const row = (name, a, b) => `| ${name.padEnd(34)} | ${q(a, 0.5).toFixed(3).padStart(8)} | ${q(a, 0.95).toFixed(3).padStart(8)} | ${q(b, 0.5).toFixed(3).padStart(8)} | ${q(b, 0.95).toFixed(3).padStart(8)} |`;
console.log(`cairn OpenCode plugin, added latency per message (${MESSAGES} messages, ${PER_SESSION} per session, ms)\n`);
console.log('| hook                               | base p50 | base p95 | plug p50 | plug p95 |');
console.log('|------------------------------------|---------:|---------:|---------:|---------:|');
console.log(row('chat.message', base.chat, plug.chat));
console.log(row('experimental.chat.system.transform', base.system, plug.system));
console.log(row('both (per message)', base.total, plug.total));
console.log(row('both, first message of a session', base.first, plug.first));
daemon.kill('SIGTERM');
await new Promise((r) => daemon.once('exit', r));
rmSync(tmp, { recursive: true, force: true });
