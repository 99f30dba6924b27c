/**
 * A service instance in its own process, for tests that kill processes or stall
 * an event loop. Configured by env; reports on stdout as JSON lines.
 *   REDIS_URL, or REDIS_CLUSTER_NODES (host:port,...), and PREFIX
 *   MODE=hang   every handler call never finishes, but for ids starting 'warm' (they teach it a quick pace)
 *   MAX_ATTEMPTS  attempts per event (default 10)
 *   GROUP       the subscriber group to join (default: the default group)
 *   MODE=stall  attempt 1 blocks the whole event loop for STALL_MS, then succeeds; later attempts succeed at once
 *   MODE=snooze every event is snoozed for SNOOZE_MS on its first delivery, then succeeds
 *   MODE=until-aborted  every call runs until its delivery.signal aborts, reports the reason's code, then succeeds (a late result)
 *   MODE=report  every call reports progress and logs 150 lines in a loop (2 ms apart), then runs until its signal aborts
 *   MODE=succeed  every call succeeds at once, but attempt 1 of ids starting 'flaky' fails
 *   OUTCOMES  the outcomes option's maxLen (outcomes on)
 *   HEARTBEAT_MS  the heartbeatMs option ('off': false; default: the service's default)
 *   BATCH=<n>   a batch handler of up to n events instead (MODE=hang: its calls never finish)
 */
import 'reflect-metadata';
import { Cluster } from 'ioredis';
import { DelayedEventService, METRIC, fixedBackoff } from '../../src';
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
  handlerTimeoutMs: Number(process.env.HANDLER_TIMEOUT_MS ?? 1_000),
  leaseGraceMs: Number(process.env.LEASE_GRACE_MS ?? 300),
  readerBlockMs: 1_000,
  retry: fixedBackoff(Number(process.env.MAX_ATTEMPTS ?? 10), 100),
  ...(process.env.OUTCOMES ? { outcomes: { maxLen: Number(process.env.OUTCOMES) } } : {}),
  ...(process.env.HEARTBEAT_MS ? { heartbeatMs: process.env.HEARTBEAT_MS === 'off' ? false : Number(process.env.HEARTBEAT_MS) } : {}),
});

service.metrics$.subscribe((metric) => {
  if (metric.name === METRIC.staleResults || metric.name === METRIC.handled) report({ metric: metric.name, tags: metric.tags });
});

if (process.env.BATCH) {
  service.addBatchHandler(
    WorkItem,
    (events) => {
      for (const event of events) report({ started: event.id, attempt: 1 });
      return new Promise<void>(() => undefined);
    },
    { maxBatch: Number(process.env.BATCH), maxWaitMs: 20 },
  );
} else
  service.addHandler(
    WorkItem,
    async (event, _context, delivery) => {
      report({ started: event.id, attempt: delivery.attempt });
      if (process.env.MODE === 'succeed') return !(event.id.startsWith('flaky') && delivery.attempt === 1);
      if (process.env.MODE === 'report') {
        for (let i = 0; i < 150; i++) {
          delivery.progress({ done: i, of: 150 });
          delivery.log(`line ${i}`);
          // A pause between reports (about a third of a second in all): each could be written on its own.
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        report({ reported: event.id });
        const signal = delivery.signal;
        return new Promise<boolean>((resolve) => signal.addEventListener('abort', () => resolve(false)));
      }
      if (process.env.MODE === 'until-aborted') {
        const signal = delivery.signal;
        return new Promise<boolean>((resolve) =>
          signal.addEventListener('abort', () => {
            report({ aborted: event.id, code: (signal.reason as { code?: string }).code });
            resolve(true);
          }),
        );
      }
      if (process.env.MODE === 'snooze') return delivery.snoozes === 0 ? delivery.snooze(Number(process.env.SNOOZE_MS ?? 500)) : true;
      if (process.env.MODE === 'stall') {
        if (delivery.attempt > 1) return true;
        const until = Date.now() + Number(process.env.STALL_MS);
        while (Date.now() < until) {
          // Deliberately blocks the event loop, as a long GC pause or a CPU-bound handler would.
        }
        report({ finished: event.id, attempt: delivery.attempt });
        return true;
      }
      if (event.id.startsWith('warm')) return true;
      return new Promise<boolean>(() => undefined);
    },
    4,
    { group: process.env.GROUP },
  );
report({ ready: true });
