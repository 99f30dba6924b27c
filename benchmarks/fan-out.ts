/**
 * Fan-out figures: Redis memory per pending event and end-to-end throughput
 * with 1, 3 and 5 subscriber groups, on one private redis-server. No peer has
 * fan-out, so the baseline is the single default group of the same run.
 *
 *   npm run bench:fan-out            (writes benchmarks/FAN-OUT-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus } from 'node:os';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { DelayedEvent, DelayedEventService } from '../src';
import { RedisServer } from '../test/support/redis-server';
import { PAYLOAD_S, chunks } from './adapters/bench-queue';
import { usedMemory } from './scenarios';

@DelayedEvent('bench.fan')
class FanEvent {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
    readonly s: string = '',
  ) {}
}

const PENDING = 100_000;
const HANDLED = 20_000;
const PARALLELISM = 32;
const REPEATS = 3;

const groupNames = (count: number) => (count === 1 ? [undefined] : Array.from({ length: count }, (_, g) => `g${g}`));

async function enqueueAll(service: DelayedEventService, count: number, delayMs: number): Promise<void> {
  const ns = Array.from({ length: count }, (_, n) => n);
  for (const chunk of chunks(ns)) await firstValueFrom(service.enqueueBatch(chunk.map((n) => ({ event: new FanEvent(`${n}`, n, PAYLOAD_S), delay: delayMs }))));
}

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 300_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Bytes per event: scheduled (not yet due), and delivered and waiting in every group's ready list. */
export async function fanOutMemory(port: number, groups: number, prefix: string): Promise<{ scheduled: number; delivered: number }> {
  const redis = new Redis(port, '127.0.0.1');
  const service = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix });
  try {
    // Register the groups with handlers that never get an event (removed at once), so delivered events wait.
    for (const group of groupNames(groups)) service.addHandler(FanEvent, () => true, 1, { group });
    for (const group of groupNames(groups)) await service.removeHandler(FanEvent, group);
    const base = await usedMemory(redis);
    await enqueueAll(service, PENDING, 500);
    const scheduled = ((await usedMemory(redis)) - base) / PENDING;
    // A dispatcher of a stopped handler is gone: move them with one that claims nothing.
    const mover = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix, dispatchBatchSize: 5_000 });
    const firstGroup = groupNames(groups)[0];
    mover.addHandler(FanEvent, () => new Promise<boolean>(() => undefined), 1, { group: firstGroup, timeoutMs: 600_000 });
    const readyKey = firstGroup === undefined ? `${prefix}:{bench.fan}:r` : `${prefix}:{bench.fan}:g:${firstGroup}:r`;
    await waitFor(async () => (await redis.llen(readyKey)) >= PENDING - 1);
    const delivered = ((await usedMemory(redis)) - base) / PENDING;
    await mover.close();
    return { scheduled, delivered };
  } finally {
    await service.close();
    await redis.flushall();
    redis.disconnect();
  }
}

/** Events handled per second in every group: HANDLED events all due, then each group's handler starts. */
export async function fanOutEndToEnd(port: number, groups: number, prefix: string): Promise<number> {
  const redis = new Redis(port, '127.0.0.1');
  const services = groupNames(groups).map(() => new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix }));
  try {
    let handled = 0;
    const names = groupNames(groups);
    // Registered (handlers stopped) before the events fall due, so each group gets all of them.
    names.forEach((group, i) => services[i]!.addHandler(FanEvent, () => true, 1, { group }));
    for (let i = 0; i < names.length; i++) await services[i]!.removeHandler(FanEvent, names[i]);
    await enqueueAll(services[0]!, HANDLED, 0);
    const started = performance.now();
    names.forEach((group, i) => services[i]!.addHandler(FanEvent, () => (handled++, true), PARALLELISM, { group }));
    await waitFor(async () => handled >= HANDLED * groups && (await redis.hlen(`${prefix}:{bench.fan}:m`)) === 0);
    return (HANDLED * groups) / ((performance.now() - started) / 1000);
  } finally {
    await Promise.all(services.map((s) => s.close()));
    await redis.flushall();
    redis.disconnect();
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const rows: string[] = [];
  try {
    const runs = new Map<string, number[]>();
    const add = (key: string, value: number) => runs.set(key, [...(runs.get(key) ?? []), value]);
    for (let r = 0; r < REPEATS; r++) {
      for (const groups of [1, 3, 5]) {
        const m = await fanOutMemory(server.port, groups, `m${r}x${groups}`);
        add(`scheduled ${groups}`, m.scheduled);
        add(`delivered ${groups}`, m.delivered);
        add(`e2e ${groups}`, await fanOutEndToEnd(server.port, groups, `e${r}x${groups}`));
        console.log(`repetition ${r + 1}, ${groups} group(s) done`);
      }
    }
    const cell = (key: string) => {
      const values = runs.get(key)!;
      return `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
    };
    rows.push('| measure | unit | 1 group (default) | 3 groups | 5 groups |', '|---|---|---|---|---|');
    rows.push(`| Redis memory per pending event, not yet due (${fmt(PENDING)} events) | bytes | ${cell('scheduled 1')} | ${cell('scheduled 3')} | ${cell('scheduled 5')} |`);
    rows.push(`| Redis memory per event delivered and waiting in every group | bytes | ${cell('delivered 1')} | ${cell('delivered 3')} | ${cell('delivered 5')} |`);
    rows.push(`| end-to-end, ${fmt(HANDLED)} events due, parallelism ${PARALLELISM} per group | deliveries handled/s (events × groups) | ${cell('e2e 1')} | ${cell('e2e 3')} | ${cell('e2e 5')} |`);
  } finally {
    await server.stop();
  }
  const machine = `${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), Node ${process.version}, ${(await versionOfRedis()).trim()}`;
  const text = [
    '# Fan-out figures',
    '',
    `Generated by \`npm run bench:fan-out\` (benchmarks/fan-out.ts) on ${machine}. Median of ${REPEATS} repetitions (min–max).`,
    'One private redis-server; every group of a run is registered before its events fall due.',
    '',
    ...rows,
    '',
  ].join('\n');
  writeFileSync(join(__dirname, 'FAN-OUT-RESULTS.md'), text);
  console.log(text);
}

async function versionOfRedis(): Promise<string> {
  const { execFileSync } = await import('node:child_process');
  return execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).split(' sha=')[0] ?? 'Redis';
}

// Run by npm run bench:fan-out; imported by run.ts for its fan-out rows.
if (require.main === module) void main();
