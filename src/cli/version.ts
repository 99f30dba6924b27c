import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * The package's version, from its package.json: the nearest one above this
 * file that is this package's (two folders up from src/cli/ and from
 * dist/cli/, where the built program lives).
 */
export const PACKAGE_VERSION: string = (() => {
  for (let dir = __dirname, up = 0; up < 8; dir = dirname(dir), up++) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'reactive-delayed-events' && manifest.version) return manifest.version;
    } catch {
      // No package.json here: one folder up.
    }
  }
  return 'unknown';
})();
