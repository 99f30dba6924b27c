import { defineConfig } from 'vitest/config';

/** npm run test:faults: the fault-injection scenarios (test/faults), one at a time, with real processes. */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    // Builds the embedded Lua scripts and the dashboard's page, as for npm test.
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 600_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    reporters: ['default'],
  },
});
