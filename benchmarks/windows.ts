/**
 * What the enqueue windows cost (since 0.6): 20,000 enqueues of one hot id,
 * 64 awaited at a time, in turns on one private redis-server: a plain enqueue
 * (each a duplicate after the first), replace, debounce (with maxWaitMs),
 * leading debounce, throttle and dedupe with keepLast; and, beside them, plain
 * enqueues of distinct ids (the usual enqueue). Enqueues per second, and the
 * enqueue script's time in Redis per event (INFO commandstats: the script
 * calls' usec over the events they carried).
 *
 *   npm run bench:windows      (writes benchmarks/WINDOWS-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DelayedEvent, DelayedEventService, type EnqueueOptions } from '../src';
import { RedisServer } from '../test/support/redis-server';

@DelayedEvent('bench.window')
class Touch {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
  ) {}
}

const ROUNDS = 5;
const COUNT = 20_000;
const IN_FLIGHT = 64;
const VARIANTS: ReadonlyArray<{ label: string; options: EnqueueOptions; distinct?: true }> = [
  { label: 'plain, distinct ids (the usual enqueue)', options: {}, distinct: true },
  { label: 'plain, one id (duplicates)', options: {} },
  { label: 'replace', options: { replace: true } },
  { label: 'debounce { maxWaitMs: 5,000 }', options: { debounce: { maxWaitMs: 5_000 } } },
  { label: 'debounce { leading: true }', options: { debounce: { leading: true } } },
  { label: 'throttle { windowMs: 60,000 }', options: { throttle: { windowMs: 60_000 } } },
  { label: 'dedupe { keepLast: true }', options: { dedupe: { windowMs: 60_000, keepLast: true } } },
];

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** The enqueue script's calls and their time in Redis so far (evalsha and eval together). */
async function scriptTime(redis: Redis): Promise<number> {
  let usec = 0;
  for (const [, , spent] of (await redis.info('commandstats')).matchAll(/cmdstat_(evalsha|eval):calls=\d+,usec=(\d+)/g)) usec += Number(spent);
  return usec;
}

async function run(port: number, variant: (typeof VARIANTS)[number], round: number): Promise<{ rate: number; usecPerEvent: number }> {
  const redis = new Redis(port, '127.0.0.1');
  const service = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix: `bench-windows-${round}-${VARIANTS.indexOf(variant)}` });
  // Warm: the script loaded, the connection up.
  await service.enqueue(new Touch('warm'), 1_000, variant.options);
  const before = await scriptTime(redis);
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < COUNT) {
        const n = next++;
        await service.enqueue(new Touch(variant.distinct ? `e${n}` : 'hot', n), 1_000, variant.options);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1_000;
  const usec = (await scriptTime(redis)) - before;
  await service.close();
  await redis.flushall();
  redis.disconnect();
  return { rate: COUNT / seconds, usecPerEvent: usec / COUNT };
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const results = VARIANTS.map(() => ({ rate: [] as number[], usec: [] as number[] }));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, variant] of VARIANTS.entries()) {
      const { rate, usecPerEvent } = await run(server.port, variant, round);
      results[i]!.rate.push(rate);
      results[i]!.usec.push(usecPerEvent);
    }
  }
  await server.stop();
  const base = median(results[0]!.rate);
  const lines = [
    '# Enqueue windows: what they cost',
    '',
    `Written by \`npm run bench:windows\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}, one private redis-server. ${COUNT.toLocaleString('en-US')} enqueues, ${IN_FLIGHT} awaited at a time, delay 1 s; every variant but the first on one id. ${ROUNDS} rounds with the variants in turns; medians (and the range).`,
    '',
    '| variant | enqueues per second | vs plain, distinct ids | enqueue script time in Redis per event (µs) |',
    '|---|---:|---:|---:|',
    ...VARIANTS.map((v, i) => {
      const r = results[i]!;
      const rate = median(r.rate);
      return `| ${v.label} | ${Math.round(rate).toLocaleString('en-US')} (${Math.round(Math.min(...r.rate)).toLocaleString('en-US')}–${Math.round(Math.max(...r.rate)).toLocaleString('en-US')}) | ${((rate / base - 1) * 100).toFixed(0)}% | ${median(r.usec).toFixed(1)} (${Math.min(...r.usec).toFixed(1)}–${Math.max(...r.usec).toFixed(1)}) |`;
    }),
    '',
    'The windows go one event at a time through the enqueue script (lua/includes/enqueue-policy.lua), with every key named: a call gathered from many single enqueues still leaves as one script call, but each event in it costs what a replace costs, or a little more. A plain enqueue of distinct ids takes the script’s fast path. Off (no window on a call), nothing changes: the plain path is as before.',
    '',
  ];
  writeFileSync(join(__dirname, 'WINDOWS-RESULTS.md'), lines.join('\n'));
  process.stdout.write(`${lines.join('\n')}\n`);
}

void main();
