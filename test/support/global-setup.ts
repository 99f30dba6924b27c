import { ensureDashboardAssets } from '../../scripts/build-dashboard-ui.mjs';

/**
 * The dashboard's page is built, never committed (scripts/build-dashboard-ui.mjs):
 * written here before any test imports the dashboard, so `npx vitest` on a
 * fresh clone works as `npm test` does.
 */
export default async function setup(): Promise<void> {
  await ensureDashboardAssets();
}
