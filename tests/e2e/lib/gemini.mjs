// The real Gemini CLI (npm `@google/gemini-cli`, a Node bundle) in a sandbox, driven offline by
// a scripted Gemini API on 127.0.0.1 (`GOOGLE_GEMINI_BASE_URL`).
//
// Gemini CLI 0.61 posts `…/models/<model>:streamGenerateContent?alt=sse` for each step of a
// turn (tools as `functionDeclarations`, the conversation as `contents` with `parts`), plus
// side requests: `:generateContent` with a JSON response schema (its "who speaks next" and
// model-routing checks) and `:countTokens`. The model calls a tool with a `functionCall` part;
// Gemini CLI sends the result back as a `functionResponse` part. Every request is kept.

import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runInProcessGroup } from './agent-cli.mjs';
import { REPO_ROOT } from './cairn.mjs';

/** Gemini CLI: `$GEMINI_BIN`, else the npm package's launcher. */
export function findGeminiBin(env = process.env) {
  const bin = env.GEMINI_BIN ?? path.join(REPO_ROOT, 'tests', 'e2e', 'node_modules', '.bin', 'gemini');
  if (!existsSync(bin)) return { bin: null, reason: `no Gemini CLI at ${bin}: run scripts/install-test-deps.sh node` };
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0 || !/^\d+\.\d+/.test(r.stdout.trim())) {
    return { bin: null, reason: `${bin} --version failed (${r.status}): ${r.stdout}${r.stderr}`.trim() };
  }
  return { bin, version: r.stdout.trim() };
}

/** The texts of a request's `user` turns (function responses left out), in order. */
export function userTexts(body) {
  return (Array.isArray(body?.contents) ? body.contents : [])
    .filter((c) => c?.role === 'user')
    .map((c) => (c.parts ?? []).map((p) => p?.text ?? '').join('\n'))
    .filter((t) => t.trim());
}

/** The `functionResponse` parts of a request. */
export function functionResponses(body) {
  return (Array.isArray(body?.contents) ? body.contents : [])
    .flatMap((c) => c?.parts ?? [])
    .filter((p) => p?.functionResponse)
    .map((p) => ({ name: p.functionResponse.name, text: JSON.stringify(p.functionResponse.response ?? {}) }));
}

/** The function names a request offers. */
export function offeredFunctions(body) {
  return (Array.isArray(body?.tools) ? body.tools : []).flatMap((t) => (t?.functionDeclarations ?? []).map((f) => f.name));
}

/**
 * The scripted Gemini API. `rules`: `{ when(request) -> bool, reply: { text } | { tool:
 * matcher (a RegExp or name of an offered function), args } }`, first match wins, for chat
 * requests only; a request carrying a function's result is answered `MOCK-DONE: <result>`,
 * anything else `MOCK-OK`.
 */
export async function startGeminiMock({ rules = [] } = {}) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const json = (obj) => {
        const b = JSON.stringify(obj);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(b) });
        res.end(b);
      };
      if (req.method === 'GET') return json({ models: [{ name: 'models/gemini-2.5-flash', supportedGenerationMethods: ['generateContent'] }] });
      let body = {};
      try {
        body = JSON.parse(raw || '{}');
      } catch {
        // kept as {}
      }
      if (req.url.includes(':countTokens')) return json({ totalTokens: 100 });
      const users = userTexts(body);
      const request = { path: req.url, body, lastUser: users.at(-1) ?? '', responses: functionResponses(body) };
      const schema = JSON.stringify(body.generationConfig ?? {});
      const side = /responseJsonSchema|responseMimeType/.test(schema);
      if (!side) requests.push(request);
      const parts = side ? [{ text: JSON.stringify({ reasoning: 'mock', next_speaker: 'user', model_choice: 'flash' }) }] : decide(request);
      const chunk = {
        candidates: [{ content: { role: 'model', parts }, finishReason: 'STOP', index: 0 }],
        usageMetadata: { promptTokenCount: 100, candidatesTokenCount: 5, totalTokenCount: 105 },
        modelVersion: 'gemini-2.5-flash',
      };
      if (!req.url.includes('stream')) return json(chunk);
      res.writeHead(200, { 'content-type': 'text/event-stream', connection: 'close' });
      res.end(`data: ${JSON.stringify(chunk)}\r\n\r\n`);
    });
  });
  const decide = (request) => {
    if (!request.responses.length) {
      for (const rule of rules) {
        if (!rule.when(request)) continue;
        const reply = typeof rule.reply === 'function' ? rule.reply(request) : rule.reply;
        if (reply?.tool) {
          const offered = offeredFunctions(request.body);
          const name = offered.find((n) => (reply.tool instanceof RegExp ? reply.tool.test(n) : n === reply.tool));
          if (!name) return [{ text: `MOCK-ERROR: no function like ${reply.tool} offered; offered: ${offered.join(', ')}` }];
          return [{ functionCall: { name, args: reply.args ?? {} } }];
        }
        if (reply) return [{ text: reply.text }];
      }
      return [{ text: 'MOCK-OK' }];
    }
    return [{ text: `MOCK-DONE: ${request.responses.at(-1).text}` }];
  };
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return { url: `http://127.0.0.1:${port}`, requests, close: () => new Promise((resolve) => server.close(resolve)) };
}

/**
 * Gemini CLI's home in a cairn sandbox: `<home>/.gemini/settings.json` choosing API-key auth
 * (setup adds its entries to it), and the environment of a sandboxed `gemini`: an allowlist
 * plus the sandbox's HOME and cairn variables, every model request sent to `mock`.
 */
export function geminiHome(sandbox, mock) {
  const dir = path.join(sandbox.home, '.gemini');
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    path.join(dir, 'settings.json'),
    JSON.stringify({ security: { auth: { selectedType: 'gemini-api-key' } }, general: { disableAutoUpdate: true }, privacy: { usageStatisticsEnabled: false } }, null, 2),
  );
  const env = {
    PATH: process.env.PATH,
    ...sandbox.env,
    GOOGLE_GEMINI_BASE_URL: mock.url,
    GEMINI_API_KEY: 'mock-key',
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    NO_PROXY: '127.0.0.1,localhost',
  };
  return { dir, env };
}

/** One `gemini <args>` in `cwd`, killed with what it started after `timeoutMs`; never rejects. */
export function runGemini(bin, args, { cwd, env, timeoutMs = 180_000 }) {
  return runInProcessGroup(bin, args, { cwd, env, timeoutMs });
}
