// Installing cairn's OpenCode plugin into a sandbox the way `cairn setup opencode` does: the
// single file plugins/opencode/cairn.ts into OpenCode's global plugin dir
// (<XDG_CONFIG_HOME>/opencode/plugins/, auto-discovered by opencode 1.18.33), with the cairn
// binary's path baked into its one BAKED_CAIRN_BIN line.
// (Once `cairn setup opencode` exists, this helper is replaced by running it.)

import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT } from './cairn.mjs';

export const PLUGIN_SOURCE = path.join(REPO_ROOT, 'plugins', 'opencode', 'cairn.ts');
const BAKED_LINE = 'const BAKED_CAIRN_BIN: string | null = null; // cairn setup writes the binary\'s path here';

/** Write the plugin into `<configHome>/opencode/plugins/cairn.ts` with `bin` baked in. */
export function installCairnPlugin({ configHome, bin }) {
  const source = readFileSync(PLUGIN_SOURCE, 'utf8');
  if (source.split(BAKED_LINE).length !== 2) throw new Error(`${PLUGIN_SOURCE}: the BAKED_CAIRN_BIN line must appear exactly once`);
  const baked = source.replace(BAKED_LINE, `const BAKED_CAIRN_BIN: string | null = ${JSON.stringify(bin)};`);
  const dir = path.join(configHome, 'opencode', 'plugins');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'cairn.ts');
  writeFileSync(file, baked);
  return file;
}
