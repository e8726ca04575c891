// A scripted Anthropic Messages API on 127.0.0.1 for driving the real Claude Code CLI offline.
//
// Claude Code posts to `<ANTHROPIC_BASE_URL>/v1/messages?beta=true`, streaming (SSE) or not as
// the body's `stream` says; it also sends a `HEAD /` at start-up and, with HTTPS_PROXY pointing
// here, every outbound HTTPS attempt arrives as a `CONNECT`, which is refused and counted (the
// test then proves nothing left the machine). Every request body is kept for assertions.
//
// Rules: `{ when(request) -> bool, reply: { text } | { tool, input } | (request) -> reply,
// beforeToolResults? }`, first match wins; a request answering a tool call gets `MOCK-DONE`,
// anything else `MOCK-OK`. `isCompactionRequest` recognises Claude Code's request for a
// compaction summary; `subagentToolName` names the tool that starts a sub-agent in the tools a
// request offers, and `request.subagent` says whether a sub-agent sent the request.

import http from 'node:http';
import { randomUUID } from 'node:crypto';

/** The text of a message's content (string or blocks), `<system-reminder>` blocks left out. */
export function textOfContent(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((b) => b?.type === 'text' && typeof b.text === 'string' && !b.text.trimStart().startsWith('<system-reminder>'))
    .map((b) => b.text)
    .join('\n');
}

/** What the user typed last: the last `user` message with text that is not a tool result. */
export function lastUserText(body) {
  const messages = Array.isArray(body?.messages) ? body.messages : [];
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const m = messages[i];
    if (m?.role !== 'user') continue;
    const text = textOfContent(m.content);
    if (text.trim()) return text;
  }
  return '';
}

/**
 * Whether this is Claude Code asking for a compaction summary: its prompt is in one of the last
 * user messages (hook context may follow it as messages of its own).
 */
export function isCompactionRequest(request) {
  const messages = Array.isArray(request.body?.messages) ? request.body.messages : [];
  return messages
    .slice(-3)
    .some((m) => m?.role === 'user' && /create a detailed summary of the conversation/i.test(JSON.stringify(m.content ?? '')));
}

/**
 * The tool that starts a sub-agent among those a request offers: `Agent` in Claude Code 2.1.x
 * (`Task` before), input `{ description, prompt, subagent_type, run_in_background }`.
 */
export function subagentToolName(body) {
  const names = (Array.isArray(body?.tools) ? body.tools : []).map((t) => t?.name);
  return ['Agent', 'Task'].find((n) => names.includes(n)) ?? null;
}

/**
 * Whether a sub-agent sent this request: Claude Code 2.1.330 marks its requests in the
 * system prompt's first block (`x-anthropic-billing-header: …; cc_is_subagent=true;`).
 */
export function isSubagentRequest(body) {
  return JSON.stringify(body?.system ?? '').includes('cc_is_subagent=true');
}

/** Whether the last user message carries a tool result (the model's call came back). */
function answersToolCall(body) {
  const last = Array.isArray(body?.messages) ? body.messages.at(-1) : null;
  return Array.isArray(last?.content) && last.content.some((b) => b?.type === 'tool_result');
}

function decide(request, rules) {
  // Claude Code's compaction prompt can share a user message with a tool result: rules marked
  // `beforeToolResults` (the summary) are checked first.
  const replyOf = (rule) => (typeof rule.reply === 'function' ? rule.reply(request) : rule.reply);
  const early = rules.find((r) => r.beforeToolResults && r.when(request));
  if (early) return replyOf(early);
  if (answersToolCall(request.body)) return { text: 'MOCK-DONE' };
  const rule = rules.find((r) => !r.beforeToolResults && r.when(request));
  return rule ? replyOf(rule) : { text: 'MOCK-OK' };
}

function messageOf(reply, model) {
  const block = reply.tool
    ? { type: 'tool_use', id: `toolu_mock_${randomUUID().slice(0, 12)}`, name: reply.tool, input: reply.input ?? {} }
    : { type: 'text', text: reply.text };
  return {
    id: `msg_mock_${randomUUID().slice(0, 12)}`,
    type: 'message',
    role: 'assistant',
    model,
    content: [block],
    stop_reason: reply.tool ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: reply.inputTokens ?? 100, output_tokens: 10, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

/** The message as the event stream the real API sends (one content block). */
function* sseEvents(message) {
  const [block] = message.content;
  yield ['message_start', { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } } }];
  if (block.type === 'tool_use') {
    yield ['content_block_start', { type: 'content_block_start', index: 0, content_block: { ...block, input: {} } }];
    yield ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } }];
  } else {
    yield ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }];
    for (let i = 0; i < block.text.length; i += 64) {
      yield ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: block.text.slice(i, i + 64) } }];
    }
  }
  yield ['content_block_stop', { type: 'content_block_stop', index: 0 }];
  yield ['message_delta', { type: 'message_delta', delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: message.usage }];
  yield ['message_stop', { type: 'message_stop' }];
}

/**
 * Start the mock. Returns `{ url, port, requests, connects, close(), messages() }`:
 * `requests` are `{ seq, method, path, body, userText, subagent }`; `messages()` the `/v1/messages` ones.
 */
export async function startAnthropicMock({ rules = [] } = {}) {
  const requests = [];
  const connects = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body = null;
      try {
        body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : null;
      } catch {
        body = null;
      }
      const route = (req.url ?? '').split('?')[0].replace(/\/$/, '');
      const request = { seq: requests.length, method: req.method, path: req.url, body, userText: lastUserText(body), subagent: isSubagentRequest(body) };
      requests.push(request);
      const json = (status, obj) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(obj));
      };
      if (req.method !== 'POST') return json(200, {});
      if (route.endsWith('/v1/messages/count_tokens')) return json(200, { input_tokens: Math.max(1, (chunks.join('').length / 4) | 0) });
      if (!route.endsWith('/v1/messages')) return json(200, {});
      const message = messageOf(decide(request, rules), body?.model ?? 'claude-mock-1');
      if (!body?.stream) return json(200, message);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'close' });
      for (const [event, data] of sseEvents(message)) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      res.end();
    });
  });
  // HTTPS_PROXY points here: an outbound HTTPS attempt is a CONNECT, refused and counted.
  server.on('connect', (req, socket) => {
    connects.push(req.url);
    socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    connects,
    messages: () => requests.filter((r) => r.method === 'POST' && /\/v1\/messages(\?|$)/.test(r.path)),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
