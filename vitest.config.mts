import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 30_000,
    // Two cores: two test files at a time, each with its own redis-server.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
