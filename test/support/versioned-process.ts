/**
 * One deploy of an app with event class 'test.versioned' at VERSION (1, 2 or
 * 3; test/support/versioned-events.ts), in its own process. Reports JSON lines.
 *   REDIS_URL or REDIS_CLUSTER_NODES, PREFIX, VERSION
 *   PRODUCE=<n>   enqueues n events 'v<VERSION>-<i>' worth i cents, due in DELAY_MS (default 0), then reports {produced}
 *   HANDLE=1      handles events, reporting {handled, attempt, cents}
 *   HANG=1        with HANDLE=1: reports {started} and never finishes the call
 *   HANDLER_TIMEOUT_MS, LEASE_GRACE_MS  the service's (the lease is their sum)
 *   UPGRADE=1     runs upgradeStored once and reports {upgraded: report}
 */
import 'reflect-metadata';
import { Cluster } from 'ioredis';
import { DelayedEventService, type EventClass, METRIC, fixedBackoff } from '../../src';
import { VERSIONS, orderCheck } from './versioned-events';

const report = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const version = Number(process.env.VERSION) as 1 | 2 | 3;
const versionedClass = VERSIONS[version] as EventClass<{ readonly id: string; cents(): number }>;

const clusterNodes = process.env.REDIS_CLUSTER_NODES?.split(',').map((node) => {
  const [host, port] = node.split(':');
  return { host: host!, port: Number(port) };
});

const service = new DelayedEventService({
  redis: clusterNodes ? new Cluster(clusterNodes) : process.env.REDIS_URL!,
  prefix: process.env.PREFIX!,
  pollIntervalMs: 100,
  readerBlockMs: 1_000,
  retry: fixedBackoff(3, 100),
  ...(process.env.HANDLER_TIMEOUT_MS ? { handlerTimeoutMs: Number(process.env.HANDLER_TIMEOUT_MS) } : {}),
  ...(process.env.LEASE_GRACE_MS ? { leaseGraceMs: Number(process.env.LEASE_GRACE_MS) } : {}),
});
service.metrics$.subscribe((metric) => {
  if (metric.name === METRIC.leftForNewerVersion || metric.name === METRIC.deadLettered) report({ metric: metric.name, value: metric.value, tags: metric.tags });
});

async function main(): Promise<void> {
  if (process.env.HANDLE === '1') {
    service.addHandler(
      versionedClass,
      (event, _context, delivery) => {
        if (process.env.HANG === '1') {
          report({ started: event.id, attempt: delivery.attempt });
          return new Promise<boolean>(() => undefined);
        }
        report({ handled: event.id, attempt: delivery.attempt, cents: event.cents() });
        return true;
      },
      4,
    );
  }
  const produce = Number(process.env.PRODUCE ?? 0);
  if (produce > 0) {
    const delay = Number(process.env.DELAY_MS ?? 0);
    for (let i = 0; i < produce; i += 100) {
      await Promise.all(Array.from({ length: Math.min(100, produce - i) }, (_, k) => service.enqueue(orderCheck(version, `v${version}-${i + k}`, i + k), delay)));
    }
    report({ produced: produce });
  }
  if (process.env.UPGRADE === '1') report({ upgraded: await service.upgradeStored(versionedClass) });
  report({ ready: true });
}

main().catch((error: unknown) => {
  report({ error: String(error) });
  process.exitCode = 1;
});
