/**
 * Latency of the inspection calls (counts, find, list, types) with 1,000,000
 * events pending: `npm run bench:inspection`. Starts a private redis-server,
 * fills it with enqueueBatch (due times spread over a day, so the schedule is
 * ~20,000 buckets), then times each call 20 times and prints the median (and
 * the slowest) as a markdown table. Results: benchmarks/INSPECTION-RESULTS.md.
 *
 * EVENTS=100000 npm run bench:inspection runs it on fewer events.
 */
import 'reflect-metadata';
import { arch, cpus } from 'node:os';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { type BatchEntry, DelayedEvent, DelayedEventService } from '../src';
import { RedisServer } from '../test/support/redis-server';

@DelayedEvent('bench.inspect')
class Reminder {
  constructor(
    readonly id: string = '',
    readonly userId: number = 0,
  ) {}
}

const EVENTS = Number(process.env.EVENTS ?? 1_000_000);
const RUNS = 20;
const FILL_CHUNK = 10_000;
const DAY_MS = 86_400_000;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function time(call: () => Promise<unknown>): Promise<{ median: number; max: number }> {
  await call(); // warm: scripts loaded, connection up
  const ms: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await call();
    ms.push(performance.now() - started);
  }
  return { median: median(ms), max: Math.max(...ms) };
}

export type InspectionTimings = Array<[string, { median: number; max: number }]>;

/** Fills `events` pending events into a fresh prefix on the server at `port`, then times each inspection call. */
export async function inspectionLatency(port: number, events: number, prefix = 'bench'): Promise<{ rows: InspectionTimings; buckets: number; fillSeconds: number; version: string }> {
  const url = `redis://127.0.0.1:${port}`;
  const service = new DelayedEventService({ redis: url, prefix });
  try {
    const EVENTS = events;
    const filling = performance.now();
    // A fixed pseudo-random spread (LCG): runs compare.
    let seed = 42;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648) / 2_147_483_648;
    for (let from = 0; from < EVENTS; from += FILL_CHUNK) {
      const entries: BatchEntry[] = [];
      for (let i = from; i < Math.min(EVENTS, from + FILL_CHUNK); i++) entries.push({ event: new Reminder(`r${i}`, i), delay: 60_000 + Math.floor(random() * DAY_MS) });
      await lastValueFrom(service.enqueueBatch(entries));
    }
    const fillSeconds = (performance.now() - filling) / 1_000;
    const counts = await service.counts(Reminder);
    if (counts?.scheduled !== EVENTS) throw new Error(`expected ${EVENTS} scheduled, counted ${JSON.stringify(counts)}`);
    const middle = `r${Math.floor(EVENTS / 2)}`;

    const rows: InspectionTimings = [
      ['`counts(EventClass)`', await time(() => service.counts(Reminder))],
      ['`counts(typeName)` (resolves the name: 1 EXISTS)', await time(() => service.counts('bench.inspect'))],
      ['`find(EventClass, id)`, scheduled', await time(() => service.find(Reminder, middle))],
      ['`find(typeName, id)`, scheduled', await time(() => service.find('bench.inspect', middle))],
      ["`list(EventClass, 'scheduled')`, first page of 100", await time(() => service.list(Reminder, 'scheduled', { limit: 100 }))],
      ["`list(EventClass, 'scheduled')`, first page of 1,000", await time(() => service.list(Reminder, 'scheduled', { limit: 1_000 }))],
      [`\`list(EventClass, 'scheduled')\`, page of 100 at offset ${(EVENTS / 2).toLocaleString('en-US')}`, await time(() => service.list(Reminder, 'scheduled', { offset: EVENTS / 2, limit: 100 }))],
      ['`types()` (SCAN of the whole keyspace)', await time(() => service.types())],
    ];
    const client = new Redis(url);
    const buckets = await client.zcard(`${prefix}:{bench.inspect}:b`);
    const version = /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? '?';
    await client.flushall();
    client.disconnect();
    return { rows, buckets, fillSeconds, version };
  } finally {
    await service.close();
  }
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  try {
    const { rows, buckets, fillSeconds, version } = await inspectionLatency(server.port, EVENTS);
    console.log(`${EVENTS.toLocaleString('en-US')} events pending in one type (${buckets.toLocaleString('en-US')} schedule buckets), filled in ${fillSeconds.toFixed(1)} s;`);
    console.log(`${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}, ${arch()}), Node ${process.version}, Redis ${version}; median of ${RUNS} calls each.\n`);
    console.log('| call | median (ms) | slowest of 20 (ms) |');
    console.log('|---|---:|---:|');
    for (const [name, t] of rows) console.log(`| ${name} | ${t.median.toFixed(2)} | ${t.max.toFixed(2)} |`);
  } finally {
    await server.stop();
  }
}

// Run by npm run bench:inspection; imported by run.ts for its inspection rows.
if (require.main === module) void main();
