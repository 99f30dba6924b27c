/**
 * A service handling 'test.work' under fleet-wide limits, in its own
 * process. Reports JSON lines {started, at} and {ended, at} (Date.now()).
 *   REDIS_URL or REDIS_CLUSTER_NODES, PREFIX
 *   RATE_MAX, RATE_PER_MS   rateLimit
 *   CONCURRENCY             globalConcurrency
 *   PARALLELISM             calls at once in this process (default 4)
 *   HANDLER_MS              how long each call takes (default 0)
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
});
const handlerMs = Number(process.env.HANDLER_MS ?? 0);
service.addHandler(
  WorkItem,
  async (event) => {
    report({ started: event.id, at: Date.now() });
    if (handlerMs > 0) await new Promise((resolve) => setTimeout(resolve, handlerMs));
    report({ ended: event.id, at: Date.now() });
  },
  Number(process.env.PARALLELISM ?? 4),
  {
    ...(process.env.RATE_MAX ? { rateLimit: { max: Number(process.env.RATE_MAX), perMs: Number(process.env.RATE_PER_MS) } } : {}),
    ...(process.env.CONCURRENCY ? { globalConcurrency: Number(process.env.CONCURRENCY) } : {}),
  },
);
report({ ready: true });
