import { Redis } from 'ioredis';
import type { BenchQueue, BenchQueueFactory } from './adapters/bench-queue';

export interface Lateness {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

let queues = 0;

/** A fresh queue on an emptied Redis, closed after `body`. */
export async function withQueue<T>(factory: BenchQueueFactory, port: number, body: (queue: BenchQueue, redis: Redis) => Promise<T>): Promise<T> {
  const redis = new Redis(port, '127.0.0.1');
  await redis.flushall();
  const queue = await factory.create(port, `bench${++queues}`);
  try {
    return await body(queue, redis);
  } finally {
    await queue.close();
    redis.disconnect();
  }
}

const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls Redis until the queue holds no event; resolves to the number of `pending()` calls it made. */
export async function waitUntilDrained(queue: BenchQueue, timeoutMs = 300_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let polls = 1;
  while ((await queue.pending()) > 0) {
    if (Date.now() > deadline) throw new Error(`${queue.library}: not drained within ${timeoutMs} ms`);
    await sleep(2);
    polls++;
  }
  return polls;
}

/**
 * Waits in this process, without a command to Redis, until the handlers have
 * started `count` events, then polls Redis until it holds none (the last
 * completions landing): the measurement's own commands stay a handful, so
 * they barely load Redis while the libraries work. Resolves to the number of
 * `pending()` calls made.
 */
export async function waitUntilHandled(queue: BenchQueue, handled: () => number, count: number, timeoutMs = 300_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (handled() < count) {
    if (Date.now() > deadline) throw new Error(`${queue.library}: ${handled()} of ${count} handled within ${timeoutMs} ms`);
    await sleep(1);
  }
  return waitUntilDrained(queue, Math.max(1, deadline - Date.now()));
}

export type EnqueueMode = 'one at a time' | '64 in flight' | 'bulk 1,000 per call';

/** Scenario 1: events stored per second. */
export async function enqueueRate(queue: BenchQueue, mode: EnqueueMode, count: number, delayMs = 60_000, first = 0): Promise<number> {
  const ns = range(first, count);
  const started = performance.now();
  if (mode === 'one at a time') {
    for (const n of ns) await queue.add(n, delayMs);
  } else if (mode === '64 in flight') {
    let next = 0;
    await Promise.all(
      range(0, 64).map(async () => {
        while (next < ns.length) await queue.add(ns[next++]!, delayMs);
      }),
    );
  } else {
    await queue.addBulk(ns, delayMs);
  }
  return count / ((performance.now() - started) / 1000);
}

/** Scenario 2: bytes of Redis memory per pending event. */
export async function memoryPerEvent(queue: BenchQueue, redis: Redis, count: number): Promise<number> {
  const before = await usedMemory(redis);
  await queue.addBulk(range(0, count), 86_400_000);
  return ((await usedMemory(redis)) - before) / count;
}

export async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]);
}

/** Scenario 3: `count` events all due, then handlers start; events handled per second until Redis holds none. */
export async function endToEnd(queue: BenchQueue, count: number, parallelism: number, first = 0): Promise<number> {
  const dueIn = 200;
  const added = Date.now();
  await queue.addBulk(range(first, count), dueIn);
  await sleep(Math.max(0, added + dueIn + 50 - Date.now()));
  let handled = 0;
  const start = await queue.prepareWorker(parallelism, () => handled++);
  const started = performance.now();
  start();
  await waitUntilHandled(queue, () => handled, count);
  return count / ((performance.now() - started) / 1000);
}

/** What handling costs, per handled event, measured over scenario 3's window. */
export interface HandlingCost {
  /** Events handled per second. */
  readonly rate: number;
  /** Redis CPU (used_cpu_sys + used_cpu_user), µs per event. */
  readonly redisCpuMicros: number;
  /** This Node process's CPU (user + system), µs per event: every library runs in it, one at a time. */
  readonly nodeCpuMicros: number;
  /** Redis commands (script calls and the commands they run), per event. */
  readonly commands: number;
}

async function redisCpuSeconds(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  return Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]) + Number(/used_cpu_user:([\d.]+)/.exec(info)![1]);
}

/** Commands Redis ran so far (a script call and every command it runs each count), INFO and CONFIG left out. */
async function commandCalls(redis: Redis): Promise<number> {
  let calls = 0;
  for (const [, command, n] of (await redis.info('commandstats')).matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
    if (command !== 'info' && command !== 'config') calls += Number(n);
  }
  return calls;
}

/**
 * Commands one `pending()` call of this library costs Redis (a library's count
 * may be a pipeline or a script of several), measured while nothing else runs
 * and rounded to a whole number: what the measurement's own polling adds to a
 * window, to take off.
 */
async function commandsPerPoll(queue: BenchQueue, redis: Redis): Promise<number> {
  const polls = 10;
  const before = await commandCalls(redis);
  for (let i = 0; i < polls; i++) await queue.pending();
  return Math.round(((await commandCalls(redis)) - before) / polls);
}

/**
 * Scenario 3 with its costs: `count` events all due, then handlers start;
 * events handled per second until Redis holds none, and Redis CPU, Node CPU
 * and Redis commands over that window, per event. The window waits on the
 * handlers in this process and polls Redis only once they have started every
 * event (waitUntilHandled); the commands of those few polls are taken off.
 */
export async function endToEndCost(queue: BenchQueue, redis: Redis, count: number, parallelism: number): Promise<HandlingCost> {
  const dueIn = 200;
  const added = Date.now();
  await queue.addBulk(range(0, count), dueIn);
  await sleep(Math.max(0, added + dueIn + 50 - Date.now()));
  const perPoll = await commandsPerPoll(queue, redis);
  let handled = 0;
  const start = await queue.prepareWorker(parallelism, () => handled++);
  const [redisCpu, calls] = [await redisCpuSeconds(redis), await commandCalls(redis)];
  const nodeCpu = process.cpuUsage();
  const started = performance.now();
  start();
  const polls = await waitUntilHandled(queue, () => handled, count);
  const seconds = (performance.now() - started) / 1000;
  const node = process.cpuUsage(nodeCpu);
  const [redisCpuAfter, callsAfter] = [await redisCpuSeconds(redis), await commandCalls(redis)];
  return {
    rate: count / seconds,
    redisCpuMicros: ((redisCpuAfter - redisCpu) * 1e6) / count,
    nodeCpuMicros: (node.user + node.system) / count,
    commands: (callsAfter - calls - polls * perPoll) / count,
  };
}

/**
 * Scenario 4b: handlers running at parallelism 64; `count` events with delays
 * of 1-40 ms added all at once (every add call started together); lateness =
 * handler start - (add call time + delay).
 */
export async function burstLateness(queue: BenchQueue, count: number): Promise<Lateness & { storedMs: number }> {
  const due = new Array<number>(count);
  const late: number[] = [];
  await queue.startWorker(64, (n) => late.push(Date.now() - due[n]!));
  const adds: Array<Promise<void>> = [];
  const started = performance.now();
  for (let n = 0; n < count; n++) {
    const delay = 1 + Math.floor(Math.random() * 40);
    due[n] = Date.now() + delay;
    adds.push(queue.add(n, delay));
  }
  await Promise.all(adds);
  // Until every add was confirmed: an event due before its own add was confirmed is late by at least the difference.
  const storedMs = performance.now() - started;
  await waitUntilHandled(queue, () => late.length, count);
  return { ...percentiles(late), storedMs };
}

function percentiles(values: number[]): Lateness {
  const sorted = values.sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { p50: at(0.5), p99: at(0.99), max: sorted[sorted.length - 1]! };
}

/** Scenario 4: handlers running; events added at `rate`/s with delays of 100-2,000 ms; lateness = handler start - due. */
export async function lateness(queue: BenchQueue, count: number, rate: number): Promise<Lateness> {
  const due = new Array<number>(count);
  const late: number[] = [];
  await queue.startWorker(32, (n) => late.push(Date.now() - due[n]!));
  const started = Date.now();
  const adds: Array<Promise<void>> = [];
  let sent = 0;
  while (sent < count) {
    const target = Math.min(count, Math.floor(((Date.now() - started) / 1000) * rate) + 1);
    for (; sent < target; sent++) {
      const delay = 100 + Math.floor(Math.random() * 1_900);
      due[sent] = Date.now() + delay;
      adds.push(queue.add(sent, delay));
    }
    await sleep(1);
  }
  await Promise.all(adds);
  await waitUntilHandled(queue, () => late.length, count);
  return percentiles(late);
}

/** Scenario 6: Redis commands (script calls and the commands they run) per handled event, enqueue included. */
export async function commandsPerEvent(queue: BenchQueue, redis: Redis, count: number): Promise<number> {
  await redis.config('RESETSTAT');
  // Waits on handler calls, not on Redis, so the measurement adds no commands of its own.
  await queue.addBulk(range(0, count), 100);
  let handled = 0;
  await queue.startWorker(32, () => handled++);
  while (handled < count) await sleep(5);
  await sleep(500); // the last acknowledgements land
  const stats = await redis.info('commandstats');
  let calls = 0;
  for (const [, command, n] of stats.matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g)) {
    if (command !== 'info' && command !== 'config') calls += Number(n);
  }
  return calls / count;
}

export interface AtScale {
  readonly enqueue: number;
  readonly endToEnd: number;
  readonly memory: number;
}

/**
 * Rounds run after the fill and before the measured ones, for every library.
 * Filling to a backlog grows Redis's hash tables past a power of two, and a
 * hash object (unlike the keyspace) is only rehashed one bucket per operation
 * on it: right after a fill of 5,000,000 our meta hash is mid-rehash, and every
 * lookup looks in both tables for three or four rounds more here
 * (benchmarks/README.md, item 15). That one-off cost of the growth is
 * reported apart, as the first round after the fill; the promise is about
 * what an operation costs with the backlog in place.
 */
export const SETTLE_ROUNDS = 3;

/**
 * Scenario 5: with `backlog` events pending far in the future, the rates of
 * scenarios 1 and 3 for a small batch: `repeats` rounds after SETTLE_ROUNDS
 * unrecorded ones, all after one fill (filling is what takes long; each small
 * measurement alone is noisy), and the first round after the fill apart.
 */
export async function atScale(queue: BenchQueue, redis: Redis, backlog: number, repeats: number): Promise<{ settled: AtScale[]; afterFill: AtScale }> {
  const prefill = 10_000_000;
  for (let start = 0; start < backlog; start += 100_000) await queue.addBulk(range(prefill + start, Math.min(100_000, backlog - start)), 86_400_000 * 30);
  const firstDue = 20_000_000;
  let handled = 0;
  await queue.startWorker(32, (n) => n >= firstDue && handled++);
  const rounds: AtScale[] = [];
  for (let r = 0; r < SETTLE_ROUNDS + repeats; r++) {
    // As many as scenario 1: fewer lasted ~50 ms here, too short to measure steadily.
    const enqueue = await enqueueRate(queue, '64 in flight', 20_000, 86_400_000, r * 20_000);
    // 2,000 events due at once while the backlog waits: time from their due time until all were handled.
    const count = 2_000;
    const before = handled;
    const added = Date.now();
    await queue.addBulk(range(firstDue + r * count, count), 200);
    await sleep(Math.max(0, added + 200 - Date.now()));
    const started = performance.now();
    while (handled - before < count) await sleep(1);
    const endToEnd = count / ((performance.now() - started) / 1000);
    rounds.push({ enqueue, endToEnd, memory: await usedMemory(redis) });
  }
  return { settled: rounds.slice(SETTLE_ROUNDS), afterFill: rounds[0]! };
}
