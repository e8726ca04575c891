// A scripted, OpenAI-compatible chat-completions server for driving real clients (OpenCode)
// offline. It binds 127.0.0.1 on a free port, answers `POST /v1/chat/completions` (streaming
// SSE and plain JSON) and `GET /v1/models`, records every request, and decides each answer
// from rules the test gives it.
//
// Every request is classified into a `kind`, because OpenCode sends more than the main turn:
//   "title"       title generation for a new session (a system prompt about titles, no tools)
//   "compaction"  a summary request (the "anchored summary" instruction, no tools)
//   "tool-result" the last message has role "tool": the model is seeing a tool's output
//   "chat"        everything else (a user turn)
//
// Rules are checked in order; the first that matches (and has uses left) answers:
//   { kind?: "chat" (default) | "tool-result" | "title" | "compaction" | "any",
//     match?: string | RegExp | (req) => boolean,  // string/RegExp: tested on req.lastText
//     reply: action | (req) => action,
//     times?: number }                             // default: unlimited
// An action is one of
//   { text: "..." }                                         plain assistant text
//   { tool: "server_tool", args: {...} }                    one tool call
//   { toolCalls: [{ name, args }, ...] }                    several tool calls in one turn
// and may add { usage: { prompt_tokens, completion_tokens } } (e.g. a huge prompt_tokens to
// force OpenCode's auto-compaction).
//
// Built-in fallbacks when no rule matches:
//   title       -> "Mock title"
//   compaction  -> a canned summary in OpenCode's section template
//   tool-result -> "DONE: <tool result text>"
//   chat        -> a `CALL <tool> {json}` directive in the user text calls that tool,
//                  otherwise "MOCK-REPLY: <first 80 chars of the user text>"
// A tool call naming a tool that the request does not offer is never sent: the mock answers
// "MOCK-ERROR: tool <name> not offered; offered: ..." so a test fails with a readable reason
// instead of waiting for a tool that cannot run.

import http from 'node:http';
import { randomUUID } from 'node:crypto';

/** Text of one chat message (string content or an array of content parts). */
export function textOf(message) {
  if (!message) return '';
  const c = message.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) {
    return c
      .map((p) => (typeof p === 'string' ? p : (p?.text ?? p?.content ?? '')))
      .filter(Boolean)
      .join('\n');
  }
  return '';
}

const COMPACTION_SUMMARY = [
  '## Objective',
  '- MOCK-SUMMARY of earlier work',
  '',
  '## Important Details',
  '- (none)',
  '',
  '## Work State',
  '### Completed',
  '- (none)',
  '',
  '### Active',
  '- (none)',
  '',
  '### Blocked',
  '- (none)',
  '',
  '## Next Move',
  '1. (none)',
  '',
  '## Relevant Files',
  '- (none)',
].join('\n');

/** Build the view of a request that rules and tests look at. */
function describe(body, meta) {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  const tools = Array.isArray(body?.tools) ? body.tools : [];
  const toolNames = tools.map((t) => t?.function?.name ?? t?.name).filter(Boolean);
  const last = messages.at(-1);
  const lastRole = last?.role ?? null;
  const lastText = textOf(last);
  const system = messages.filter((m) => m.role === 'system').map(textOf).join('\n\n');
  const lastUser = [...messages].reverse().find((m) => m.role === 'user');
  const lastUserText = textOf(lastUser);

  let kind = 'chat';
  if (lastRole === 'tool') kind = 'tool-result';
  // OpenCode's own summary prompt, or a plugin's replacement (cairn's chart mode asks for a
  // fixed text, cairn's continuity mode for a self-summary)
  else if (toolNames.length === 0 && /anchored summary|Do not summarize|compacting your own session/i.test(lastText)) kind = 'compaction';
  else if (toolNames.length === 0 && /title/i.test(system)) kind = 'title';

  // For a tool result: which call it answers, and the name of the tool that was called.
  let toolResult = null;
  if (kind === 'tool-result') {
    const callId = last.tool_call_id ?? null;
    let name = last.name ?? null;
    for (const m of messages) {
      for (const call of m.tool_calls ?? []) {
        if (call.id === callId) name = call.function?.name ?? name;
      }
    }
    toolResult = { callId, name, text: lastText };
  }

  return {
    seq: meta.seq,
    method: meta.method,
    path: meta.path,
    kind,
    stream: Boolean(body?.stream),
    model: body?.model ?? null,
    body,
    messages,
    toolNames,
    system,
    lastRole,
    lastText,
    lastUserText,
    toolResult,
  };
}

function ruleMatches(rule, req) {
  const kind = rule.kind ?? 'chat';
  if (kind !== 'any' && kind !== req.kind) return false;
  const { match } = rule;
  if (match === undefined || match === null) return true;
  if (typeof match === 'string') return req.lastText.includes(match);
  if (match instanceof RegExp) return match.test(req.lastText);
  if (typeof match === 'function') return Boolean(match(req));
  throw new TypeError(`mock-model: unsupported rule.match ${typeof match}`);
}

/** `opencode run` quotes a multi-word message as a JSON-ish string ("CALL x {\"a\":1}"). */
function parseCallDirective(text) {
  const m = /CALL\s+([A-Za-z0-9_.-]+)(?:\s+(\{[\s\S]*\}))?/.exec(text);
  if (!m) return null;
  const raw = m[2] ?? '{}';
  for (const candidate of [raw, raw.replace(/\\"/g, '"')]) {
    try {
      return { tool: m[1], args: JSON.parse(candidate) };
    } catch {
      // try the un-escaped form next
    }
  }
  return { tool: m[1], args: {} };
}

function fallback(req) {
  switch (req.kind) {
    case 'title':
      return { text: 'Mock title' };
    case 'compaction':
      return { text: COMPACTION_SUMMARY };
    case 'tool-result':
      return { text: `DONE: ${req.toolResult.text}` };
    default: {
      const call = parseCallDirective(req.lastText);
      if (call) return call;
      return { text: `MOCK-REPLY: ${req.lastUserText.slice(0, 80)}` };
    }
  }
}

/** Turn an action into the assistant message the mock sends (text or tool calls). */
function normalise(action, req) {
  if (!action || typeof action !== 'object') {
    throw new TypeError(`mock-model: a rule returned ${JSON.stringify(action)}, expected an action`);
  }
  let calls = null;
  if (action.tool) calls = [{ name: action.tool, args: action.args ?? {} }];
  if (action.toolCalls) calls = action.toolCalls;
  if (calls) {
    const missing = calls.map((c) => c.name).filter((n) => !req.toolNames.includes(n));
    if (missing.length > 0) {
      return {
        text: `MOCK-ERROR: tool ${missing.join(', ')} not offered; offered: ${req.toolNames.join(', ') || '(none)'}`,
        usage: action.usage,
      };
    }
    return {
      toolCalls: calls.map((c, index) => ({
        index,
        id: `call_${randomUUID().replace(/-/g, '').slice(0, 12)}`,
        type: 'function',
        function: {
          name: c.name,
          arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args ?? {}),
        },
      })),
      usage: action.usage,
    };
  }
  if (typeof action.text === 'string') return { text: action.text, usage: action.usage };
  throw new TypeError(`mock-model: action needs text, tool or toolCalls: ${JSON.stringify(action)}`);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res, status, obj) {
  const data = Buffer.from(JSON.stringify(obj));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': data.length });
  res.end(data);
}

/**
 * Start the mock model.
 * @param {object} [options]
 * @param {Array<object>} [options.rules] initial rules (see the top of this file)
 * @param {string} [options.modelId] the model id it advertises (default "mock-model")
 * @returns {Promise<MockModel>}
 */
export async function startMockModel({ rules = [], modelId = 'mock-model' } = {}) {
  const state = { rules: [...rules], requests: [], seq: 0 };
  const waiters = new Set();

  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const path = url.pathname.replace(/\/+$/, '');
    try {
      if (req.method === 'GET' && (path === '/v1/models' || path === '/models')) {
        state.requests.push({ seq: ++state.seq, method: 'GET', path, kind: 'models' });
        sendJson(res, 200, { object: 'list', data: [{ id: modelId, object: 'model', owned_by: 'mock' }] });
        return;
      }
      if (req.method === 'POST' && (path === '/v1/chat/completions' || path === '/chat/completions')) {
        const raw = await readBody(req);
        let body;
        try {
          body = raw ? JSON.parse(raw) : {};
        } catch {
          state.requests.push({ seq: ++state.seq, method: 'POST', path, kind: 'invalid', raw });
          sendJson(res, 400, { error: { message: 'mock-model: body is not JSON', type: 'invalid_request_error' } });
          return;
        }
        const view = describe(body, { seq: ++state.seq, method: 'POST', path });
        const rule = state.rules.find((r) => (r.times ?? Infinity) > 0 && ruleMatches(r, view));
        let action;
        if (rule) {
          if (rule.times !== undefined) rule.times -= 1;
          action = typeof rule.reply === 'function' ? rule.reply(view) : rule.reply;
        } else {
          action = fallback(view);
        }
        const answer = normalise(action, view);
        view.answer = answer;
        state.requests.push(view);
        for (const w of waiters) w();
        respond(res, body, answer, modelId);
        return;
      }
      state.requests.push({ seq: ++state.seq, method: req.method, path, kind: 'unknown' });
      sendJson(res, 404, { error: { message: `mock-model: no route ${req.method} ${path}`, type: 'not_found' } });
    } catch (err) {
      state.requests.push({ seq: ++state.seq, method: req.method, path, kind: 'error', error: String(err?.stack ?? err) });
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(err?.message ?? err), type: 'mock_error' } });
      else res.end();
    }
  });

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();
  const origin = `http://127.0.0.1:${port}`;

  return {
    port,
    origin,
    /** The base URL an OpenAI-compatible client needs (ends in /v1). */
    baseURL: `${origin}/v1`,
    modelId,
    /** Every request so far, in order (chat requests carry kind/messages/toolNames/answer/...). */
    get requests() {
      return state.requests;
    },
    /** Requests of one kind ("chat", "tool-result", "title", "compaction", "models", ...). */
    requestsOf(kind) {
      return state.requests.filter((r) => r.kind === kind);
    },
    /** Tool results the model was shown: [{ callId, name, text }]. */
    get toolResults() {
      return state.requests.filter((r) => r.kind === 'tool-result').map((r) => r.toolResult);
    },
    /** Append a rule (checked after the earlier ones). */
    addRule(rule) {
      state.rules.push(rule);
      return this;
    },
    /** Put a rule in front of the others. */
    prependRule(rule) {
      state.rules.unshift(rule);
      return this;
    },
    /** Answer the next chat request with this action, once. */
    enqueue(action, kind = 'chat') {
      state.rules.unshift({ kind, reply: action, times: 1 });
      return this;
    },
    /** Drop every rule and recorded request. */
    reset() {
      state.rules.length = 0;
      state.requests.length = 0;
      return this;
    },
    /** Resolve once `predicate(requests)` holds, or reject after `timeoutMs`. */
    waitFor(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (predicate(state.requests)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(state.requests);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`mock-model: condition not met within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    /** Stop listening and drop open connections. */
    close() {
      return new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      });
    },
  };
}

/** Rule helper: when the last user message contains `needle`, call `tool` with `args`. */
export function whenUserSays(needle, action, extra = {}) {
  return { kind: 'chat', match: needle, reply: action, ...extra };
}

/** Action helper: call one tool. */
export function callTool(name, args = {}) {
  return { tool: name, args };
}

function respond(res, body, answer, modelId) {
  const id = `chatcmpl-${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const created = Math.floor(Date.now() / 1000);
  const model = body.model ?? modelId;
  const usage = {
    prompt_tokens: answer.usage?.prompt_tokens ?? 10,
    completion_tokens: answer.usage?.completion_tokens ?? 5,
  };
  usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
  const finish = answer.toolCalls ? 'tool_calls' : 'stop';
  const message = answer.toolCalls
    ? { role: 'assistant', content: null, tool_calls: answer.toolCalls.map(({ index, ...c }) => c) }
    : { role: 'assistant', content: answer.text };

  if (!body.stream) {
    sendJson(res, 200, {
      id,
      object: 'chat.completion',
      created,
      model,
      choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
      usage,
    });
    return;
  }

  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
  const base = { id, object: 'chat.completion.chunk', created, model };
  const send = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
  const chunk = (delta, finishReason = null) =>
    send({ ...base, choices: [{ index: 0, delta, finish_reason: finishReason }] });

  if (answer.toolCalls) {
    chunk({ role: 'assistant', content: null, tool_calls: answer.toolCalls });
  } else {
    chunk({ role: 'assistant', content: '' });
    // Two content deltas, so clients that assemble text from deltas are exercised.
    const cut = Math.ceil(answer.text.length / 2);
    for (const piece of [answer.text.slice(0, cut), answer.text.slice(cut)]) {
      if (piece) chunk({ content: piece });
    }
  }
  chunk({}, finish);
  if (body.stream_options?.include_usage !== false) send({ ...base, choices: [], usage });
  res.write('data: [DONE]\n\n');
  res.end();
}
