// Test helpers: a fake cairn daemon (records every request, answers per op), a fake OpenCode
// client, and the recorded hook payloads of the real binary (fixtures/hooks.jsonl).
import http from 'node:http';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));

/** Every recorded hook call: {run, hook, input, output}. */
export const recorded = readFileSync(path.join(HERE, 'fixtures', 'hooks.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l));

/** Fresh copies of the recorded calls of one run (and hook, and filter). */
export function calls(run, hook, filter = () => true) {
  return recorded.filter((c) => c.run === run && c.hook === hook && filter(c)).map((c) => structuredClone(c));
}
export function events(run, type) {
  return calls(run, 'event', (c) => !type || c.input.event.type === type).map((c) => c.input);
}
/** The (input, output) a hook got, as the host passes them: output as it was BEFORE the probe ran. */
export function hookArgs(call) {
  return [structuredClone(call.input), structuredClone(call.output)];
}

export const PROTOCOL = 'MEMORY-PROTOCOL: save decisions with cairn_mem_save.';
export const TRIGGER = '[MEMORY TRIGGER DETECTED] The user asked you to remember something. Save it now with mem_save — then answer the user in full.';
export const NOTE = 'The summary of this compaction is stored in cairn automatically; after compaction, call mem_context.';
export const CONTINUITY = 'You are compacting your own session. You are summarizing for yourself, not another agent.';
export const HISTORY = '## Session History\ncairn keeps the full conversation history. Search first: history_search.';
export const CHART_PROMPT = 'Do not think. Do not summarize. Return exactly the following text and nothing else:\n# Summary\nChart unavailable.';
export const MEMORY_BLOCK = '[MEMORY]\n## Project Brief\n- cairn is a memory engine';
export const upstream = (parent) => `**Upstream session ID: ${parent}**\nYou are a sub-agent.`;

/**
 * A fake daemon on 127.0.0.1:0. `answers[op]` is a JSON value, a function of args, or
 * {status, body}; `delayMs` slows every answer. Routes: /health, /project/current, /sessions,
 * /observations/passive, /v1/op.
 */
export async function fakeDaemon({ answers = {}, delayMs = 0, health = true, port = 0 } = {}) {
  const requests = [];
  const prompted = new Set();
  const defaults = {
    protocol: (a) => ({
      host: a.host,
      part: a.part,
      text: { memory: PROTOCOL, trigger: TRIGGER, compaction_note: NOTE, continuity: CONTINUITY, history: HISTORY, chart_prompt: CHART_PROMPT, upstream: upstream(a.session_id) }[a.part ?? 'memory'],
    }),
    plugin_config: {},
    // today's daemon: with `host`, the block of a first prompt and the texts come with the answer
    user_prompt: (a) => {
      const first = !prompted.has(a.session_id);
      prompted.add(a.session_id);
      const context = a.host && first ? MEMORY_BLOCK : undefined;
      return { prompt_id: 1, first_prompt: first, memory_trigger: false, context, texts: a.host ? (context ? [context] : []) : undefined };
    },
    // the daemon's one meter rule, reduced to what the plugin reads (a line from yellow on)
    context_meter: (a) => {
      const limit = a.limit || 200000;
      const percent = Math.floor((a.used * 100) / limit);
      const status = percent >= 92 ? 'critical' : percent >= 85 ? 'red' : percent >= 70 ? 'yellow' : 'green';
      const line = status === 'green' ? null : `METER ${percent}% ${a.used}/${limit} ${a.model}`;
      const compaction = state.answers.plugin_config?.compaction ?? {};
      const min = compaction.min_percent ?? 50;
      const autoCompact = compaction.auto_at > 0 && percent >= compaction.auto_at * 100 && percent >= min;
      return { used: a.used, limit, percent, status, line, auto_compact: autoCompact, compact_allowed: percent >= min };
    },
    tool_call: (a) => ({ counted: !/^(cairn_|mem_|history_|memory)/.test(a.tool), reminder: null, activity: null }),
    context: (a) => ({ context: a.layout === 'memory_block' ? '[MEMORY]\n## Project Brief\n- cairn is a memory engine' : '## recent', memory_ids: [1] }),
    record_activity: { activity: {} },
    save_compaction: { id: 7 },
    record_session: { id: 9, type: 'session_record' },
    history_ingest: { sources: 1 },
    add_prompt: { id: 1 },
  };
  const state = { answers: { ...defaults, ...answers }, delayMs, health };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const url = new URL(req.url, 'http://x');
      let body = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = raw;
      }
      const rec = { method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), body, raw, headers: req.headers };
      requests.push(rec);
      if (state.delayMs) await new Promise((r) => setTimeout(r, state.delayMs));
      const send = (status, obj) => {
        if (res.destroyed) return;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(obj), () => (rec.answered = true));
      };
      if (url.pathname === '/health') return state.health ? send(200, { status: 'ok' }) : send(503, {});
      // the daemon's drain of the spool: the test says what it does (`state.drain`)
      if (url.pathname === '/spool/drain') return send(200, { pending: (await state.drain?.()) ?? 0 });
      if (url.pathname === '/project/current') return send(200, { project: 'demo', project_source: 'git_root' });
      if (url.pathname === '/sessions') return send(201, { ...body, status: 'created' });
      if (url.pathname === '/observations/passive') return send(200, { saved: 1 });
      if (url.pathname === '/v1/op') {
        let a = state.answers[body?.op];
        if (a === undefined) return send(400, { error: { code: 'invalid_argument', message: `arguments of "${body?.op}": unknown variant \`${body?.op}\`` } });
        if (typeof a === 'function') a = a(body.args ?? {});
        if (a && a.status && a.body) return send(a.status, a.body);
        return send(200, a);
      }
      send(404, { error: { code: 'route_not_found', message: 'no route' } });
    });
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    requests,
    state,
    ops: (name) => requests.filter((r) => r.path === '/v1/op' && (!name || r.body?.op === name)),
    posts: (p) => requests.filter((r) => r.method === 'POST' && r.path === p),
    close: () => new Promise((r) => {
      server.closeAllConnections?.();
      server.close(() => r());
    }),
  };
}

/** A fake OpenCode SDK client: records app.log lines and summarize calls. */
export function fakeClient({ sessions = {}, provider = {} } = {}) {
  const logs = [];
  const summarized = [];
  return {
    logs,
    summarized,
    app: { log: async (o) => { logs.push(o.body); return { data: true }; } },
    session: {
      get: async ({ path: p }) => ({ data: sessions[p.id] ?? null }),
      summarize: async (o) => { summarized.push(o); return { data: true }; },
    },
    config: { get: async () => ({ data: { provider } }) },
  };
}

/** Let what the event loop holds run: a few full turns (timers, I/O, immediates), counted, not timed. */
export async function settle(turns = 5) {
  for (let i = 0; i < turns; i++) await new Promise((r) => setImmediate(r));
}

export async function waitFor(pred, ms = 2000, what = 'condition') {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
