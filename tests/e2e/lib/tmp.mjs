// Temp dirs that the test suite removes afterwards (unless CAIRN_E2E_KEEP=1, for debugging).

import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function makeTempDir(prefix = 'cairn-e2e-') {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  return {
    path: dir,
    cleanup() {
      if (process.env.CAIRN_E2E_KEEP === '1') {
        process.stderr.write(`# kept ${dir} (CAIRN_E2E_KEEP=1)\n`);
        return;
      }
      rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    },
  };
}
