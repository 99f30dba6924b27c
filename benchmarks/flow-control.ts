/**
 * Flow control, side by side with BullMQ where it has the same thing (its
 * Worker `limiter` and `Queue.setGlobalConcurrency`), on one private
 * redis-server: two consuming instances each, all events due at once.
 *
 * - a rate limit of 500 calls a second: calls per second reached, and the most
 *   calls that started within any 1-second window (by the handlers' clocks);
 * - a global concurrency of 8 over handlers that take 5 ms: the most calls
 *   running at once (a ledger of start and end times) and calls per second;
 * - batch handlers against single calls, when a call costs 2 ms whatever it
 *   carries (a bulk API or one database write), and when it costs nothing.
 *
 *   npm run bench:flow      (writes benchmarks/FLOW-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { DelayedEvent, DelayedEventService } from '../src';
import { RedisServer } from '../test/support/redis-server';

@DelayedEvent('bench.tenant')
class TenantEvent {
  constructor(
    readonly id: string = '',
    readonly tenant: string = '',
  ) {}
}

/**
 * A hot tenant's backlog of `hot` events, all due, then one event of a cold
 * tenant due just after: how long the cold one waits, with per-key fairness
 * (ours, `key` and `perKey`) and without (a plain FIFO, as every peer has).
 */
async function fairness(url: string, hot: number, keyed: boolean): Promise<{ coldWaitMs: number; hotBefore: number }> {
  const prefix = `fair${Math.random().toString(36).slice(2, 8)}`;
  const producer = new DelayedEventService({ redis: url, prefix, logger: false });
  await firstValueFrom(producer.enqueueBatch(Array.from({ length: hot }, (_, n) => ({ event: new TenantEvent(`h${n}`, 'hot'), delay: 0 }))));
  const consumers = Array.from({ length: 2 }, () => new DelayedEventService({ redis: url, prefix, logger: false }));
  let handledHot = 0;
  let cold: { at: number; hotBefore: number } | undefined;
  let sentAt = 0;
  for (const c of consumers) {
    c.addHandler(
      TenantEvent,
      async (e) => {
        await sleep(1);
        if (e.tenant === 'cold') cold = { at: performance.now(), hotBefore: handledHot };
        else handledHot++;
      },
      16,
      keyed ? { key: (e) => e.tenant, perKey: { globalConcurrency: 8 } } : {},
    );
  }
  while (handledHot < 100) await sleep(1);
  sentAt = performance.now();
  await producer.enqueue(new TenantEvent('c0', 'cold'), 0);
  while (!cold) await sleep(1);
  await Promise.all([...consumers, producer].map((s) => s.close()));
  return { coldWaitMs: cold.at - sentAt, hotBefore: cold.hotBefore };
}

@DelayedEvent('bench.flow')
class FlowEvent {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
  ) {}
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Run {
  readonly starts: number[];
  readonly ledger: Array<[number, number]>;
  readonly ms: number;
}

function busiestWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

function mostAtOnce(ledger: ReadonlyArray<readonly [number, number]>): number {
  const edges = ledger.flatMap(([s, e]) => [[s, 1] as const, [e, -1] as const]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let running = 0;
  let most = 0;
  for (const [, step] of edges) most = Math.max(most, (running += step));
  return most;
}

async function ours(url: string, count: number, options: { rate?: number; concurrency?: number; handlerMs: number; batch?: number }): Promise<Run> {
  const prefix = `ours${Math.random().toString(36).slice(2, 8)}`;
  const producer = new DelayedEventService({ redis: url, prefix, logger: false });
  await firstValueFrom(producer.enqueueBatch(Array.from({ length: count }, (_, n) => ({ event: new FlowEvent(`e${n}`, n), delay: 0 }))));
  const starts: number[] = [];
  const ledger: Array<[number, number]> = [];
  const consumers = Array.from({ length: 2 }, () => new DelayedEventService({ redis: url, prefix, logger: false }));
  const began = performance.now();
  const limits = { ...(options.rate ? { rateLimit: { max: options.rate, perMs: 1_000 } } : {}), ...(options.concurrency ? { globalConcurrency: options.concurrency } : {}) };
  for (const c of consumers) {
    if (options.batch) {
      c.addBatchHandler(
        FlowEvent,
        async (events) => {
          const start = performance.now();
          for (let i = 0; i < events.length; i++) starts.push(Date.now());
          if (options.handlerMs > 0) await sleep(options.handlerMs);
          ledger.push([start, performance.now()]);
        },
        { maxBatch: options.batch, maxWaitMs: 5, parallelism: 4, ...limits },
      );
    } else {
      c.addHandler(
        FlowEvent,
        async () => {
          const start = performance.now();
          starts.push(Date.now());
          if (options.handlerMs > 0) await sleep(options.handlerMs);
          ledger.push([start, performance.now()]);
        },
        16,
        limits,
      );
    }
  }
  while (starts.length < count) await sleep(5);
  const ms = performance.now() - began;
  await Promise.all([...consumers, producer].map((s) => s.close()));
  return { starts, ledger, ms };
}

async function bull(port: number, count: number, options: { rate?: number; concurrency?: number; handlerMs: number }): Promise<Run> {
  const connection = { host: '127.0.0.1', port };
  const name = `bull${Math.random().toString(36).slice(2, 8)}`;
  const queue = new Queue(name, { connection });
  if (options.concurrency) await queue.setGlobalConcurrency(options.concurrency);
  for (let i = 0; i < count; i += 1_000) await queue.addBulk(Array.from({ length: Math.min(1_000, count - i) }, (_, k) => ({ name: 'e', data: { n: i + k } })));
  const starts: number[] = [];
  const ledger: Array<[number, number]> = [];
  const began = performance.now();
  const workers = Array.from(
    { length: 2 },
    () =>
      new Worker(
        name,
        async () => {
          const start = performance.now();
          starts.push(Date.now());
          if (options.handlerMs > 0) await sleep(options.handlerMs);
          ledger.push([start, performance.now()]);
        },
        { connection, concurrency: 16, removeOnComplete: { count: 0 }, ...(options.rate ? { limiter: { max: options.rate, duration: 1_000 } } : {}) },
      ),
  );
  while (starts.length < count) await sleep(5);
  const ms = performance.now() - began;
  await Promise.all(workers.map((w) => w.close()));
  await queue.obliterate({ force: true });
  await queue.close();
  return { starts, ledger, ms };
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const redis = new Redis(server.port, '127.0.0.1');
  const perSecond = (r: Run, n: number) => Math.round(n / (r.ms / 1_000)).toLocaleString('en-US');
  const span = (r: Run) => `${((Math.max(...r.starts) - Math.min(...r.starts)) / 1_000).toFixed(2)} s`;

  const RATE = 500;
  const RATED = 3_000;
  const rateOurs = await ours(server.url, RATED, { rate: RATE, handlerMs: 0 });
  await redis.flushall();
  const rateBull = await bull(server.port, RATED, { rate: RATE, handlerMs: 0 });
  await redis.flushall();

  const CONC = 8;
  const CONCURRENT = 2_000;
  const concOurs = await ours(server.url, CONCURRENT, { concurrency: CONC, handlerMs: 5 });
  await redis.flushall();
  const concBull = await bull(server.port, CONCURRENT, { concurrency: CONC, handlerMs: 5 });
  await redis.flushall();

  const HOT = 20_000;
  const fifo = await fairness(server.url, HOT, false);
  await redis.flushall();
  const fair = await fairness(server.url, HOT, true);
  await redis.flushall();

  const BATCHED = 20_000;
  const singleCostly = await ours(server.url, 4_000, { handlerMs: 2 });
  await redis.flushall();
  const batchCostly = await ours(server.url, 4_000, { handlerMs: 2, batch: 100 });
  await redis.flushall();
  const singleFree = await ours(server.url, BATCHED, { handlerMs: 0 });
  await redis.flushall();
  const batchFree = await ours(server.url, BATCHED, { handlerMs: 0, batch: 100 });
  redis.disconnect();
  await server.stop();

  const lines = [
    '# Flow control: what it holds to and what it costs',
    '',
    `Written by \`npm run bench:flow\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}, one private redis-server on the same machine; BullMQ at its documented settings (Worker \`limiter\`, \`Queue.setGlobalConcurrency\`). Two consuming instances in one process, 16 calls at once each, all events due at once; one run each.`,
    '',
    `## Rate limit: ${RATE} calls a second, ${RATED.toLocaleString('en-US')} events`,
    '',
    `At the limit, the ${RATED.toLocaleString('en-US')} calls start in ${RATED / RATE - 1} s plus the first window's burst: the last starts ${RATED / RATE - 1} s after the first.`,
    '',
    '| library | first to last start | most started in any 1-s window | in any 0.98-s window |',
    '|---|---|---|---|',
    `| ours (\`rateLimit: { max: ${RATE}, perMs: 1000 }\`) | ${span(rateOurs)} | ${busiestWindow(rateOurs.starts, 1_000)} | ${busiestWindow(rateOurs.starts, 980)} |`,
    `| bullmq (\`limiter: { max: ${RATE}, duration: 1000 }\`) | ${span(rateBull)} | ${busiestWindow(rateBull.starts, 1_000)} | ${busiestWindow(rateBull.starts, 980)} |`,
    '',
    'Starts are timed in the handlers, a few ms after their claims (which Redis counts on its own clock); calls come in bursts at the window edges, so a window measured here can catch part of two bursts: the 0.98-s column allows 20 ms of that jitter.',
    '',
    `## Global concurrency: ${CONC}, handlers of 5 ms, ${CONCURRENT.toLocaleString('en-US')} events`,
    '',
    '| library | most calls running at once | calls per second |',
    '|---|---|---|',
    `| ours (\`globalConcurrency: ${CONC}\`) | ${mostAtOnce(concOurs.ledger)} | ${perSecond(concOurs, CONCURRENT)} |`,
    `| bullmq (\`setGlobalConcurrency(${CONC})\`) | ${mostAtOnce(concBull.ledger)} | ${perSecond(concBull, CONCURRENT)} |`,
    '',
    '## Batch handlers against single calls (ours)',
    '',
    '| handler | a call costs | events per second |',
    '|---|---|---|',
    `| \`addHandler\`, 16 calls at once an instance | 2 ms | ${perSecond(singleCostly, 4_000)} |`,
    `| \`addBatchHandler\`, \`maxBatch: 100\`, 4 calls at once an instance | 2 ms | ${perSecond(batchCostly, 4_000)} |`,
    `| \`addHandler\`, 16 calls at once an instance | nothing | ${perSecond(singleFree, BATCHED)} |`,
    `| \`addBatchHandler\`, \`maxBatch: 100\`, 4 calls at once an instance | nothing | ${perSecond(batchFree, BATCHED)} |`,
    '',
    `## Fairness per key: one cold tenant's event behind ${HOT.toLocaleString('en-US')} of a hot tenant's`,
    '',
    'The hot backlog is due and being handled (two instances, 16 calls at once each, 1-ms handlers); then one event of a cold tenant falls due. How long it waits:',
    '',
    '| handler | cold event handled after | hot events handled before it (of those after it fell due) |',
    '|---|---|---|',
    `| plain (FIFO, as the peers' queues) | ${Math.round(fifo.coldWaitMs).toLocaleString('en-US')} ms | ${(fifo.hotBefore - 100).toLocaleString('en-US')} |`,
    `| \`key: (e) => e.tenant, perKey: { globalConcurrency: 8 }\` | ${Math.round(fair.coldWaitMs).toLocaleString('en-US')} ms | ${(fair.hotBefore - 100).toLocaleString('en-US')} |`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  writeFileSync(join(__dirname, 'FLOW-RESULTS.md'), lines.join('\n'));
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
