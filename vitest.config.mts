import { defineConfig } from 'vitest/config';

/**
 * Behaviour that must hold on a Redis Cluster too (schedule and state machine: scripts
 * reach bucket keys they derive, in their slot): these files run a second time
 * against a real 3-master cluster. Not here: outage and durability (they restart
 * or replicate one server; failover is their cluster counterpart, in cluster.test.ts),
 * cluster.test.ts itself, tls and memory-limit (they set up one server: TLS, a
 * memory limit), lost-reply (a TCP proxy in front of one server), package and
 * examples (they pack or run programs once), cli (it runs the CLI, a program,
 * against one server), typed-errors (it freezes and kills one server), and retry-policy, fifo-timeouts,
 * flat-payload and embedded-lua (no Redis).
 */
const onClusterToo = [
  'delivery',
  'enqueue',
  'enqueue-batch',
  'windows',
  'windows-model',
  'flows',
  'flows-model',
  'conformance',
  'schedule-policies',
  'schedule-policies-processes',
  'schedule-protocol-model',
  'python-producer',
  'validation',
  'retry',
  'decode',
  'context',
  'concurrency',
  'metrics',
  'close',
  'partitions',
  'crash',
  'snooze',
  'housekeeping',
  'event-attempts',
  'outcomes',
  'priority',
  'timeout',
  'isolation',
  'schedule',
  'lease',
  'state-machine',
  'dead-retention-model',
  'idempotency',
  'fan-out',
  'handler-results',
  'inspection',
  'recurring',
  'activity',
  'dashboard-api',
  'prefetch',
  'fencing',
  'self-heal',
  'inspector',
  'operators',
  'versions',
  'repartition',
  'flow-control',
  'batch-handler',
  'held-ahead',
  'holds',
  'unknown-options',
  'heartbeat',
  'heartbeat-model',
  'call-reports',
  'outcome-events',
  'explain',
  'key-visibility',
  'quiet-looks',
  'parked-queues',
].map((name) => `test/${name}.test.ts`);

export default defineConfig({
  test: {
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: two test files at a time, each with its own Redis.
    maxWorkers: 2,
    reporters: ['default'],
    projects: [
      { extends: true, test: { name: 'single', include: ['test/*.test.ts'], env: { REDIS_TOPOLOGY: 'single' } } },
      { extends: true, test: { name: 'cluster', include: onClusterToo, env: { REDIS_TOPOLOGY: 'cluster' } } },
    ],
  },
});
