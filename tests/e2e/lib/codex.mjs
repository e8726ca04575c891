// The real Codex CLI (npm `@openai/codex`, a native binary) in a sandbox, driven offline by a
// scripted OpenAI Responses API on 127.0.0.1.
//
// Codex 0.171 speaks only the Responses API (`wire_api = "responses"`): one streamed
// `POST /v1/responses` per model step. MCP tools reach the model as a `namespace` tool named
// `mcp__<server>` (its description is the server's `instructions`) holding one function per
// tool; the model calls one with a `function_call` output item `{namespace, name, arguments,
// call_id}`, and Codex sends the result back in the next request as a `function_call_output`
// input item with the same `call_id`. Every request body is kept for assertions.

import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runInProcessGroup } from './agent-cli.mjs';
import { REPO_ROOT } from './cairn.mjs';

/** Codex: `$CODEX_BIN`, else the npm package's launcher. */
export function findCodexBin(env = process.env) {
  const bin = env.CODEX_BIN ?? path.join(REPO_ROOT, 'tests', 'e2e', 'node_modules', '.bin', 'codex');
  if (!existsSync(bin)) return { bin: null, reason: `no Codex at ${bin}: run scripts/install-test-deps.sh node` };
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0 || !/codex-cli/.test(r.stdout)) {
    return { bin: null, reason: `${bin} --version failed (${r.status}): ${r.stdout}${r.stderr}`.trim() };
  }
  return { bin, version: r.stdout.trim() };
}

/** The texts of the request's `message` input items of `role`, in order. */
export function messageTexts(body, role) {
  return (Array.isArray(body?.input) ? body.input : [])
    .filter((i) => i?.type === 'message' && i.role === role)
    .map((i) => (Array.isArray(i.content) ? i.content : []).map((c) => c?.text ?? '').join('\n'));
}

/** What the user typed last (Codex's own environment block left out). */
export function lastUserText(body) {
  const texts = messageTexts(body, 'user').filter((t) => !t.trimStart().startsWith('<environment_context>'));
  return texts.at(-1) ?? '';
}

/** The `function_call_output` items of a request, each with its `text` (Codex sends an MCP
 * tool's result as `input_text` items, the first of them its wall time). */
export function toolOutputs(body) {
  return (Array.isArray(body?.input) ? body.input : [])
    .filter((i) => i?.type === 'function_call_output')
    .map((i) => ({
      ...i,
      text: Array.isArray(i.output) ? i.output.map((o) => o?.text ?? '').join('\n') : String(i.output ?? ''),
    }));
}

/** The MCP tools a request offers, as `mcp__<server>__<tool>`. */
export function offeredMcpTools(body) {
  return (Array.isArray(body?.tools) ? body.tools : [])
    .filter((t) => t?.type === 'namespace' && String(t.name).startsWith('mcp__'))
    .flatMap((ns) => (ns.tools ?? []).map((t) => `${ns.name}__${t.name}`));
}

/**
 * The scripted Responses API. `rules`: `{ when(request) -> bool, reply: { text } | { tool:
 * 'mcp__cairn__mem_save', args } | (request) -> reply }`, first match wins; a request carrying
 * a tool's output is answered `MOCK-DONE: <output>`, anything else `MOCK-OK`. A rule naming a
 * tool the request does not offer answers `MOCK-ERROR: …` instead of calling it.
 */
export async function startResponsesMock({ rules = [] } = {}) {
  const requests = [];
  let n = 0;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      if (req.method === 'GET') {
        const body = JSON.stringify({ object: 'list', data: [{ id: 'mock-model', object: 'model' }] });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        return res.end(body);
      }
      let body = {};
      try {
        body = JSON.parse(raw || '{}');
      } catch {
        // kept as {}
      }
      const request = { path: req.url, body, lastUser: lastUserText(body), outputs: toolOutputs(body) };
      requests.push(request);
      n += 1;
      stream(res, `resp_${n}`, decide(request));
    });
  });
  const decide = (request) => {
    for (const rule of rules) {
      if (!rule.when(request)) continue;
      const reply = typeof rule.reply === 'function' ? rule.reply(request) : rule.reply;
      if (reply) return reply;
    }
    if (request.outputs.length) return { text: `MOCK-DONE: ${request.outputs.at(-1).text}` };
    return { text: 'MOCK-OK' };
  };
  const stream = (res, id, reply) => {
    let item;
    if (reply.tool) {
      const offered = offeredMcpTools(reply.requestBody ?? requests.at(-1).body);
      if (!offered.includes(reply.tool)) {
        reply = { text: `MOCK-ERROR: tool ${reply.tool} not offered; offered: ${offered.join(', ')}` };
      }
    }
    if (reply.tool) {
      const at = reply.tool.lastIndexOf('__');
      item = {
        type: 'function_call',
        id: `fc_${id}`,
        status: 'completed',
        namespace: reply.tool.slice(0, at),
        name: reply.tool.slice(at + 2),
        arguments: JSON.stringify(reply.args ?? {}),
        call_id: `call_${id}`,
      };
    } else {
      item = {
        type: 'message',
        id: `msg_${id}`,
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: reply.text, annotations: [] }],
      };
    }
    const usage = {
      input_tokens: 100,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 105,
    };
    const events = [
      ['response.created', { type: 'response.created', response: { id, object: 'response', status: 'in_progress', output: [] } }],
      ['response.output_item.added', { type: 'response.output_item.added', output_index: 0, item: { ...item, status: 'in_progress' } }],
      ...(item.type === 'message'
        ? [['response.output_text.delta', { type: 'response.output_text.delta', item_id: item.id, output_index: 0, content_index: 0, delta: reply.text }]]
        : []),
      ['response.output_item.done', { type: 'response.output_item.done', output_index: 0, item }],
      ['response.completed', { type: 'response.completed', response: { id, object: 'response', status: 'completed', output: [item], usage } }],
    ];
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'close' });
    for (const [event, data] of events) res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    res.end();
  };
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * Codex's home in a cairn sandbox: `<home>/.codex/config.toml` pointing Codex at `mock` (the
 * provider setup leaves alone), and the environment of a sandboxed `codex`: an allowlist (no
 * API keys or CODEX_* of the developer's shell) plus the sandbox's HOME and cairn variables.
 */
export function codexHome(sandbox, mock) {
  const dir = path.join(sandbox.home, '.codex');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'config.toml'),
    [
      'model = "mock-model"',
      'model_provider = "mock"',
      'check_for_update_on_startup = false',
      '',
      '[model_providers.mock]',
      'name = "mock"',
      `base_url = "${mock.baseURL}"`,
      'wire_api = "responses"',
      'env_key = "MOCK_KEY"',
      '',
    ].join('\n'),
  );
  const env = { PATH: process.env.PATH, ...sandbox.env, MOCK_KEY: 'mock-key', NO_PROXY: '127.0.0.1,localhost' };
  return { dir, env };
}

/** One `codex <args>` in `cwd`, in its own process group; never rejects. */
export function runCodex(bin, args, { cwd, env, timeoutMs = 120_000 }) {
  return runInProcessGroup(bin, args, { cwd, env, timeoutMs });
}
