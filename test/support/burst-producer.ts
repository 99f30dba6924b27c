/**
 * A producer in its own process: COUNT enqueues of one id ('hot') with a
 * debounce window, a few ms apart. Reports {enqueued: n, status} per call and
 * {done: true} at the end. Payload n = PRODUCER * 100,000 + the call's index.
 *   REDIS_URL or REDIS_CLUSTER_NODES, PREFIX
 *   MODE            'trailing' or 'leading' (leading + trailing)
 *   COUNT, DELAY_MS, MAX_WAIT_MS, PRODUCER, GAP_MS (most ms between calls)
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
const service = new DelayedEventService({ redis: clusterNodes ? new Cluster(clusterNodes) : process.env.REDIS_URL!, prefix: process.env.PREFIX! });
const leading = process.env.MODE === 'leading';
const count = Number(process.env.COUNT);
const producer = Number(process.env.PRODUCER);
const gapMs = Number(process.env.GAP_MS ?? 20);

async function main(): Promise<void> {
  report({ ready: true });
  for (let i = 0; i < count; i++) {
    const n = producer * 100_000 + i;
    const status = await service.enqueue(new WorkItem('hot', n), Number(process.env.DELAY_MS), {
      debounce: { maxWaitMs: Number(process.env.MAX_WAIT_MS), ...(leading ? { leading: true } : {}) },
    });
    report({ enqueued: n, status });
    await new Promise((resolve) => setTimeout(resolve, Math.random() * gapMs));
  }
  await service.close();
  report({ done: true });
}
void main();
