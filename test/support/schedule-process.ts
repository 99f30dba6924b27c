/**
 * A service in its own process that declares one recurring schedule (as every
 * replica of an app does at boot) and handles its occurrences, for
 * test/schedule-policies-processes.test.ts. Configured by env; reports JSON lines.
 *   REDIS_URL, or REDIS_CLUSTER_NODES (host:port,...), and PREFIX
 *   SCHEDULE    JSON { name, every, options } (options as schedule() takes them; startAt as epoch ms)
 *   HOLD_MS     how long each call takes
 */
import 'reflect-metadata';
import { Cluster } from 'ioredis';
import { DelayedEventService } from '../../src';
import { WorkItem } from './events';

const report = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
const clusterNodes = process.env.REDIS_CLUSTER_NODES?.split(',').map((node) => {
  const [host, port] = node.split(':');
  return { host: host!, port: Number(port) };
});
const service = new DelayedEventService({
  redis: clusterNodes ? new Cluster(clusterNodes) : process.env.REDIS_URL!,
  prefix: process.env.PREFIX!,
  pollIntervalMs: 100,
  readerBlockMs: 1_000,
  logger: false,
});
const { name, every, options } = JSON.parse(process.env.SCHEDULE!) as { name: string; every: number; options: Record<string, unknown> };
const hold = Number(process.env.HOLD_MS ?? 0);
service.addHandler(
  WorkItem,
  async (event, _context, delivery) => {
    const start = Date.now();
    report({ started: event.id, dueAt: delivery.dueAt, start });
    if (hold > 0) await new Promise((resolve) => setTimeout(resolve, hold));
    report({ finished: event.id, start, end: Date.now() });
    return true;
  },
  4,
);
void service
  .schedule(name, new WorkItem(''), { every }, { ...options, ...(typeof options.startAt === 'number' ? { startAt: new Date(options.startAt) } : {}) })
  .then(() => report({ ready: true }))
  .catch((error: unknown) => report({ error: String(error) }));
