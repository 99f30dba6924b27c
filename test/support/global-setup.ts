import { ensureDashboardAssets } from '../../scripts/build-dashboard-ui.mjs';
import { ensureEmbeddedLua } from '../../scripts/embed-lua.mjs';

/**
 * The dashboard's page and the embedded Lua scripts are built, never committed
 * (scripts/build-dashboard-ui.mjs, scripts/embed-lua.mjs): written here before
 * any test imports them, so `npx vitest` on a fresh clone works as `npm test` does.
 */
export default async function setup(): Promise<void> {
  ensureEmbeddedLua();
  await ensureDashboardAssets();
}
