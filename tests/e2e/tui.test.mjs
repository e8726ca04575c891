// `cairn tui` in a real terminal: tmux runs it in a pane of its own (a private tmux server),
// keys are sent as a user types them and the screen is read back with `capture-pane`.
// Over a data dir with saved memories: `/`, a query, Enter, open a result, its detail is on
// screen, `q` quits and the terminal is given back (cooked mode, main screen, no mouse mode).
// Also: a title holding escape sequences changes nothing in the terminal, and a terminal too
// small gets a message.

import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { findCairnBin, makeCairnSandbox } from './lib/cairn.mjs';

const found = findCairnBin();
let sandbox;
let socket;

function tmux(...args) {
  const r = spawnSync('tmux', ['-S', socket, ...args], { encoding: 'utf8', timeout: 10_000 });
  if (r.error) throw new Error(`tmux ${args[0]}: ${r.error.message} (is tmux installed? apt-get install tmux)`);
  if (r.status !== 0) throw new Error(`tmux ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

const screen = (pane = 'tui') => tmux('capture-pane', '-p', '-t', pane);
const paneFlag = (name, pane = 'tui') => tmux('display-message', '-p', '-t', pane, `#{${name}}`).trim();
let script;

/** `cairn tui` in a new tmux session named `name`, then the shell's report on the terminal. */
function startTui(name) {
  tmux('new-session', '-d', '-s', name, '-x', '100', '-y', '30', `sh ${script}`);
}

/** Wait until the screen satisfies `check` (a string it holds, or a predicate). */
async function waitForScreen(check, what, timeoutMs = 20_000, pane = 'tui') {
  const ok = typeof check === 'string' ? (s) => s.includes(check) : check;
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    last = screen(pane);
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`timed out waiting for ${what}; the screen:\n${last}`);
}

function cairn(args) {
  const r = spawnSync(found.bin, args, { encoding: 'utf8', env: { ...process.env, ...sandbox.env }, timeout: 60_000 });
  assert.equal(r.status, 0, `cairn ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

before(async () => {
  assert.ok(found.bin, found.reason);
  sandbox = await makeCairnSandbox({ projectName: 'tui-shop' });
  socket = path.join(sandbox.root, 'tmux.sock');
  const save = (title, content) =>
    cairn(['save', title, content, '--type', 'decision', '--project', 'tui-shop']);
  save('Auth uses JWT in cookies', 'We keep the token in an httpOnly cookie; refresh rotates it.');
  save('Database is Postgres 16', 'Chosen for JSONB and row-level security.');
  // A hostile title: it would clear the screen and rename the terminal if written raw.
  save('\u001b[2J\u001b]2;pwned\u0007 Hostile title', 'escape sequences in a title');

  // The pane's shell: the TUI, then what the test reads to see the terminal given back.
  script = path.join(sandbox.root, 'run-tui.sh');
  const exports = Object.entries(sandbox.env)
    .map(([k, v]) => `export ${k}='${String(v).replaceAll("'", "'\\''")}'`)
    .join('\n');
  writeFileSync(
    script,
    `${exports}\nexport TERM=xterm-256color\n'${found.bin}' tui\necho "TUI-EXIT=$?"\nstty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon' | sed 's/^/MODE=/'\nsleep 600\n`,
  );
  tmux('-f', '/dev/null', 'start-server', ';', 'set-option', '-g', 'exit-empty', 'off');
  startTui('tui');
});

after(() => {
  if (socket) spawnSync('tmux', ['-S', socket, 'kill-server'], { timeout: 10_000 });
  sandbox?.cleanup();
});

test('cairn tui finds and opens a memory, then q gives the terminal back', async () => {
  await waitForScreen('Recent activity (3)', 'the dashboard');
  let s = screen();
  assert.match(s, /sync: off/);
  assert.match(s, /read-only/);
  assert.match(s, /␛\[2J␛]2;pwned␇ Hostile title/, 'escape sequences are shown, not obeyed');
  assert.notEqual(paneFlag('pane_title'), 'pwned', 'the title escape did not reach the terminal');
  assert.equal(paneFlag('alternate_on'), '1', 'the interface draws on the alternate screen');

  tmux('send-keys', '-t', 'tui', '/');
  await waitForScreen('type to search', 'the search field');
  tmux('send-keys', '-t', 'tui', '-l', 'cookie');
  tmux('send-keys', '-t', 'tui', 'Enter');
  s = await waitForScreen('Results (1)', 'one result');
  assert.match(s, /Auth uses JWT in cookies/);

  tmux('send-keys', '-t', 'tui', 'Enter');
  // The detail's parts arrive as their answers do (memory, revisions, relations, timeline).
  s = await waitForScreen((t) => t.includes('httpOnly cookie') && t.includes('── Timeline'), "the memory with its timeline");
  assert.match(s, /── Revisions \(0\)/);

  // Too small: a message, and the detail again once it is big enough.
  tmux('resize-window', '-t', 'tui', '-x', '40', '-y', '10');
  await waitForScreen('Terminal too small', 'the too-small message');
  tmux('resize-window', '-t', 'tui', '-x', '100', '-y', '30');
  await waitForScreen('httpOnly cookie', 'the detail after growing back');

  tmux('send-keys', '-t', 'tui', 'q');
  s = await waitForScreen('MODE=', 'the shell after the interface');
  assert.match(s, /TUI-EXIT=0/);
  assert.match(s, /MODE=icanon/, 'cooked mode is back (raw mode would show -icanon)');
  assert.equal(paneFlag('alternate_on'), '0', 'the main screen is back');
  assert.equal(paneFlag('mouse_any_flag'), '0', 'mouse reporting is off again');
});

test('SIGINT from outside ends cairn tui and gives the terminal back', async () => {
  startTui('sigint');
  await waitForScreen('Recent activity (3)', 'the dashboard', 20_000, 'sigint');
  const shell = paneFlag('pane_pid', 'sigint');
  const child = spawnSync('pgrep', ['-P', shell], { encoding: 'utf8' }).stdout.trim().split('\n')[0];
  assert.ok(child, 'the cairn tui process under the pane shell');
  process.kill(Number(child), 'SIGINT');
  const s = await waitForScreen('MODE=', 'the shell after SIGINT', 20_000, 'sigint');
  assert.match(s, /TUI-EXIT=0/);
  assert.match(s, /MODE=icanon/);
  assert.equal(paneFlag('alternate_on', 'sigint'), '0');
});
