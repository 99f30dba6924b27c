import { readFileSync, readdirSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

/**
 * npm run check, the fast tier: every test file that needs no Redis (none of
 * the harness, the private server or cluster, the proxy or worker processes),
 * found by what it imports, so a new fast test joins by itself. npm test runs
 * them too, with the rest.
 */
const NEEDS_REDIS = /useRedis|RedisServer|RedisCluster|TcpProxy|worker-process|redis-server/;
const fast = readdirSync('test')
  .filter((file) => file.endsWith('.test.ts'))
  .filter((file) => !NEEDS_REDIS.test(readFileSync(`test/${file}`, 'utf8')))
  .map((file) => `test/${file}`);

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    include: fast,
    reporters: ['default'],
  },
});
