/**
 * What priorities cost: a backlog of READY events handled end to end by one
 * instance (a no-op handler, parallelism 1 and 32), with every event at
 * priority 0 (`plain`: as a type that never uses them) and with priorities
 * 0 to 9 mixed (`mixed`: nine in ten wait in the priority set). One private
 * redis-server; the backlog is stored while the type is paused, then resumed.
 *
 *   npm run bench:priorities [-- --plain] [--events=N] [--rounds=N]
 *
 * Prints one JSON line per row (events per second, median of the rounds).
 * `--plain` runs the plain rows only, which also run on a release without
 * priorities: the A/B of benchmarks/README.md runs it on both trees.
 */
import 'reflect-metadata';
import { firstValueFrom } from 'rxjs';
import { DelayedEvent, DelayedEventService } from '../src';
import { RedisServer } from '../test/support/redis-server';

@DelayedEvent('bench.prioritized')
class Job {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
  ) {}
}

const argument = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const EVENTS = Number(argument('events') ?? 20_000);
const ROUNDS = Number(argument('rounds') ?? 3);
const plainOnly = process.argv.includes('--plain');
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function round(url: string, prefix: string, mixed: boolean, parallelism: number): Promise<number> {
  const service = new DelayedEventService({ redis: url, prefix, logger: false, pollIntervalMs: 50 });
  await service.pause(Job);
  for (let first = 0; first < EVENTS; first += 1_000) {
    const entries = Array.from({ length: Math.min(1_000, EVENTS - first) }, (_, i) => {
      const n = first + i;
      // With `mixed`, priorities 0 to 9 in turn; the option is left out for 0, as a plain enqueue leaves it.
      return { event: new Job(`j${n}`, n), delay: 0, ...(mixed && n % 10 > 0 ? { priority: n % 10 } : {}) };
    });
    await firstValueFrom(service.enqueueBatch(entries));
  }
  let handled = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  service.addHandler(
    Job,
    () => {
      if (++handled === EVENTS) done();
    },
    parallelism,
  );
  const started = performance.now();
  await service.resume(Job);
  await all;
  const seconds = (performance.now() - started) / 1_000;
  await service.close();
  return EVENTS / seconds;
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  try {
    let n = 0;
    for (const mixed of plainOnly ? [false] : [false, true]) {
      for (const parallelism of [1, 32]) {
        const rates: number[] = [];
        for (let r = 0; r < ROUNDS; r++) rates.push(await round(server.url, `prio-${n++}`, mixed, parallelism));
        console.log(JSON.stringify({ row: `${mixed ? 'mixed' : 'plain'}, parallelism ${parallelism}`, events: EVENTS, eventsPerSecond: Math.round(median(rates)), rounds: rates.map(Math.round) }));
      }
    }
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
