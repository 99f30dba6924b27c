/**
 * What flows cost (since 0.6), on one private redis-server, in turns:
 *  - flows per second: 500 flows of a parent with 10 children (three types),
 *    stored with enqueueFlow (16 calls awaited at a time), then handled end
 *    to end (parallelism 16 per type): flows stored per second, and flows done
 *    per second from the first call to the last parent handled;
 *  - the cost added to a child's completion: 10,000 events handled as plain
 *    events, and 10,000 handled as children of 1,000 parents (their notices
 *    applied, the parents released and handled too): handled per second, and
 *    Redis's script time per child handled (INFO commandstats, every script).
 *
 *   npm run bench:flows      (writes benchmarks/FLOWS-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DelayedEvent, DelayedEventService } from '../src';
import { RedisServer } from '../test/support/redis-server';

@DelayedEvent('bench.flow-parent')
class Parent {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('bench.flow-child')
class Child {
  constructor(readonly id: string = '') {}
}

@DelayedEvent('bench.flow-other')
class Other {
  constructor(readonly id: string = '') {}
}

const ROUNDS = 3;
const FLOWS = 500;
const CHILDREN = 10;
const EVENTS = 10_000;
const IN_FLIGHT = 16;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function scriptTime(redis: Redis): Promise<number> {
  let usec = 0;
  for (const [, , spent] of (await redis.info('commandstats')).matchAll(/cmdstat_(evalsha|eval):calls=\d+,usec=(\d+)/g)) usec += Number(spent);
  return usec;
}

async function inTurns(count: number, call: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < count) await call(next++);
    }),
  );
}

function untilCount(target: () => number, count: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (target() >= count) {
        clearInterval(timer);
        resolve();
      }
    }, 5);
  });
}

function serviceOn(port: number, prefix: string): DelayedEventService {
  return new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix, pollIntervalMs: 100, readerBlockMs: 100 });
}

async function flowsPerSecond(port: number, round: number): Promise<{ stored: number; done: number }> {
  const service = serviceOn(port, `bench-flows-${round}`);
  let parents = 0;
  service.addHandler(Parent, () => void parents++, { parallelism: IN_FLIGHT });
  service.addHandler(Child, () => undefined, { parallelism: IN_FLIGHT });
  service.addHandler(Other, () => undefined, { parallelism: IN_FLIGHT });
  await service.waitUntilReady();
  const started = performance.now();
  await inTurns(FLOWS, (i) =>
    service.enqueueFlow({
      event: new Parent(`p${i}`),
      children: Array.from({ length: CHILDREN }, (_, c) => ({ event: c % 2 === 0 ? new Child(`p${i}-c${c}`) : new Other(`p${i}-c${c}`) })),
    }),
  );
  const storedIn = performance.now() - started;
  await untilCount(() => parents, FLOWS);
  const doneIn = performance.now() - started;
  await service.close();
  return { stored: (FLOWS / storedIn) * 1_000, done: (FLOWS / doneIn) * 1_000 };
}

async function completions(port: number, round: number, asChildren: boolean): Promise<{ rate: number; usecPerChild: number }> {
  const redis = new Redis(port, '127.0.0.1');
  const service = serviceOn(port, `bench-completion-${round}-${asChildren ? 'child' : 'plain'}`);
  let handled = 0;
  let parents = 0;
  service.addHandler(Child, () => void handled++, { parallelism: IN_FLIGHT });
  service.addHandler(Parent, () => void parents++, { parallelism: IN_FLIGHT });
  await service.pause(Child);
  // Stored paused, so that the handling alone is timed.
  if (asChildren) {
    await inTurns(EVENTS / CHILDREN, (i) => service.enqueueFlow({ event: new Parent(`p${i}`), children: Array.from({ length: CHILDREN }, (_, c) => ({ event: new Child(`p${i}-c${c}`) })) }));
  } else {
    await inTurns(EVENTS / 250, (i) => service.enqueueMany(Array.from({ length: 250 }, (_, c) => ({ event: new Child(`e${i}-${c}`) }))));
  }
  const before = await scriptTime(redis);
  const started = performance.now();
  await service.resume(Child);
  await untilCount(() => handled, EVENTS);
  if (asChildren) await untilCount(() => parents, EVENTS / CHILDREN);
  const elapsed = performance.now() - started;
  const usec = (await scriptTime(redis)) - before;
  await service.close();
  redis.disconnect();
  return { rate: (EVENTS / elapsed) * 1_000, usecPerChild: usec / EVENTS };
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const rows: Record<string, number[]> = {};
  const add = (label: string, value: number) => (rows[label] ??= []).push(value);
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const flows = await flowsPerSecond(server.port, round);
      add('flows stored per second (enqueueFlow, a parent and 10 children)', flows.stored);
      add('flows done per second (stored and handled, 11 events each)', flows.done);
      for (const asChildren of round % 2 === 0 ? [false, true] : [true, false]) {
        const result = await completions(server.port, round, asChildren);
        add(asChildren ? 'children handled per second (and their 1,000 parents)' : 'plain events handled per second', result.rate);
        add(asChildren ? 'Redis script µs per child handled (its notice and its share of the parent included)' : 'Redis script µs per plain event handled', result.usecPerChild);
      }
      process.stdout.write(`round ${round + 1} of ${ROUNDS} done\n`);
    }
  } finally {
    await server.stop();
  }
  const lines = [
    '# Flows: what they cost',
    '',
    `Measured by \`npm run bench:flows\` on ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}, one private redis-server; median of ${ROUNDS} rounds (the rounds in brackets).`,
    '',
    '| measure | median | rounds |',
    '|---|---|---|',
    ...Object.entries(rows).map(
      ([label, values]) => `| ${label} | ${median(values).toFixed(label.startsWith('Redis') ? 1 : 0)} | ${values.map((v) => v.toFixed(label.startsWith('Redis') ? 1 : 0)).join(', ')} |`,
    ),
    '',
  ];
  writeFileSync(join(__dirname, 'FLOWS-RESULTS.md'), lines.join('\n'));
  process.stdout.write(lines.join('\n'));
}

void main();
