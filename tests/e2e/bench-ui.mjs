// The web page's cost at scale: time to serve /ui and its views, page weight, and first
// contentful paint in headless Chromium, with N memories loaded through /import.
// Measures, never asserts. Usage (from tests/e2e):
//   CAIRN_BIN=../../target/release/cairn node bench-ui.mjs [--memories 100000] [--runs 20]

import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { findCairnBin, makeCairnSandbox, startCairnDaemon, stopDaemon } from './lib/cairn.mjs';
import { makeTempDir } from './lib/tmp.mjs';

const { values } = parseArgs({
  options: { memories: { type: 'string', default: '100000' }, runs: { type: 'string', default: '20' } },
});
const MEMORIES = Number(values.memories);
const RUNS = Number(values.runs);
const BATCH = 5_000;
const WORDS = 'ledger refund rounding cache index daemon schema migration token session prompt search vector wal checkpoint plugin hook archive compaction budget'.split(' ');
const TYPES = ['decision', 'bugfix', 'pattern', 'config', 'discovery', 'learning'];

const found = findCairnBin();
if (!found.bin) throw new Error(found.reason);
const sandbox = await makeCairnSandbox();
const { child, base } = await startCairnDaemon(found.bin, sandbox, { env: { CAIRN_EMBEDDER: 'none' } });
try {
  const loadStarted = performance.now();
  for (let start = 0; start < MEMORIES; start += BATCH) await load(base, start, Math.min(MEMORIES, start + BATCH));
  const loadSeconds = (performance.now() - loadStarted) / 1000;

  const views = {
    '/ui': '/ui',
    '/ui/search?q=ledger refund': '/ui/search?q=ledger%20refund',
    '/ui/memory/<id>': `/ui/memory/${Math.floor(MEMORIES / 2)}`,
    '/ui/sessions': '/ui/sessions',
  };
  const rows = [];
  for (const [name, route] of Object.entries(views)) {
    await fetch(base + route).then((r) => r.text()); // warm
    const times = [];
    let bytes = 0;
    for (let i = 0; i < RUNS; i++) {
      const t = performance.now();
      const body = await fetch(base + route).then((r) => r.text());
      times.push(performance.now() - t);
      bytes = Buffer.byteLength(body);
    }
    rows.push({ view: name, p50_ms: pct(times, 50), p95_ms: pct(times, 95), html_bytes: bytes });
  }
  const css = Buffer.byteLength(await fetch(`${base}/ui/assets/ui.css`).then((r) => r.text()));
  const js = Buffer.byteLength(await fetch(`${base}/ui/assets/ui.js`).then((r) => r.text()));
  const paint = await firstPaint(`${base}/ui`);
  const liveCpu = await cpuWithLiveStream(base, child.pid);

  console.log(`cairn ${found.bin}, ${MEMORIES} memories loaded in ${loadSeconds.toFixed(1)} s, ${RUNS} runs per view`);
  console.table(rows);
  console.log(`page weight of /ui: HTML ${rows[0].html_bytes} + CSS ${css} + JS ${js} = ${rows[0].html_bytes + css + js} bytes`);
  console.log(`daemon CPU with one live stream open and no writes: ${liveCpu.toFixed(1)} % of one core over 10 s`);
  if (paint) console.log(`first contentful paint of /ui in headless Chromium: median ${paint.median.toFixed(0)} ms (${paint.runs.map((r) => r.toFixed(0)).join(', ')})`);
} finally {
  child.kill('SIGTERM');
  stopDaemon(sandbox.dataDir);
  sandbox.cleanup();
}

async function load(base, start, end) {
  const day = 86_400_000;
  const observations = [];
  const sessions = new Map();
  for (let i = start; i < end; i++) {
    const w = (k) => WORDS[(i * 7 + k * 13) % WORDS.length];
    const at = new Date(Date.UTC(2026, 0, 1) + (i % 300) * day + i).toISOString();
    const session = `bench-session-${Math.floor(i / 50)}`;
    sessions.set(session, at);
    observations.push({
      sync_id: `bench-${i}`,
      session_id: session,
      type: TYPES[i % TYPES.length],
      title: `${w(1)} ${w(2)} note ${i}`,
      content: `${w(3)} ${w(4)} ${w(5)}: memory ${i} about the ${w(6)} and the ${w(7)}. `.repeat(4),
      project: `project-${i % 8}`,
      scope: 'project',
      created_at: at,
      updated_at: at,
      revision_count: 1,
      duplicate_count: 1,
    });
  }
  const body = {
    version: '0.1.0',
    exported_at: new Date().toISOString(),
    sessions: [...sessions].map(([id, at]) => ({ id, project: 'project-0', directory: '/tmp', started_at: at })),
    observations,
    prompts: [],
  };
  const res = await fetch(`${base}/import`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`import: ${res.status} ${await res.text()}`);
}

/** The daemon's CPU (user + system, % of one core) over 10 s while one page's live stream is open. */
async function cpuWithLiveStream(base, pid) {
  const ticks = () => {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime, in clock ticks (100 Hz)
  };
  const controller = new AbortController();
  const res = await fetch(`${base}/ui/live`, { signal: controller.signal });
  const reader = res.body.getReader();
  const draining = (async () => {
    try {
      while (!(await reader.read()).done);
    } catch {
      // aborted
    }
  })();
  await new Promise((r) => setTimeout(r, 1_000));
  const before = ticks();
  await new Promise((r) => setTimeout(r, 10_000));
  const used = ticks() - before;
  controller.abort();
  await draining;
  return used / 10; // 1,000 ticks (10 s at 100 Hz) are 100 % of one core
}

function pct(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return Number(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))].toFixed(2));
}

async function firstPaint(url) {
  if (!existsSync('/usr/bin/chromium')) return null;
  const { chromium } = await import('playwright-core');
  const profile = makeTempDir('cairn-bench-chromium-');
  const browser = await chromium.launchPersistentContext(profile.path, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    const runs = [];
    for (let i = 0; i < 5; i++) {
      const page = await browser.newPage();
      await page.goto(url, { waitUntil: 'load' });
      const fcp = await page.evaluate(
        () =>
          new Promise((resolve) => {
            const seen = (entries) => entries.find((e) => e.name === 'first-contentful-paint');
            const now = seen(performance.getEntriesByType('paint'));
            if (now) return resolve(now.startTime);
            new PerformanceObserver((list) => {
              const entry = seen(list.getEntries());
              if (entry) resolve(entry.startTime);
            }).observe({ type: 'paint', buffered: true });
            setTimeout(() => resolve(NaN), 5_000);
          }),
      );
      runs.push(fcp);
      await page.close();
    }
    return { median: pct(runs, 50), runs };
  } finally {
    await browser.close();
    profile.cleanup();
  }
}
