import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GENERATED, ROOT, buildDashboardAssets } from '../scripts/build-dashboard-ui.mjs';

/**
 * The dashboard serves the page script and styles compiled into
 * src/dashboard/ui-assets.generated.ts, never src/dashboard/ui/ itself. The
 * module is git-ignored and built by `npm test`, `npm run build` and the tests'
 * global setup: what is served must be what the page's sources build to now.
 */
describe('the dashboard page built into the package', () => {
  it('is what src/dashboard/ui/ builds to now', async () => {
    const committed = readFileSync(join(ROOT, GENERATED), 'utf8');
    if (committed !== (await buildDashboardAssets(ROOT))) {
      expect.fail(`${GENERATED} does not match src/dashboard/ui/: run \`npm run build-dashboard-ui\` (npm test and npm run build do it too)`);
    }
  });
});
