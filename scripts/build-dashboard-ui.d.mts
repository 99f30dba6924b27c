// Types of scripts/build-dashboard-ui.mjs, for test/dashboard-assets.test.ts.
export declare const ROOT: string;
/** src/dashboard/ui-assets.generated.ts, relative to the root. */
export declare const GENERATED: string;
/** The text of src/dashboard/ui-assets.generated.ts for the page under `root`/src/dashboard/ui. */
export declare function buildDashboardAssets(root?: string): Promise<string>;
/** Writes the module when it is missing or out of date. */
export function ensureDashboardAssets(root?: string): Promise<void>;
