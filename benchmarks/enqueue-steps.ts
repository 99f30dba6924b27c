/**
 * Where the time of one awaited enqueue goes, step by step, beside Bee-Queue's
 * (the better peer on this row) and the floors below both: a bare round trip
 * (PING), a script that only returns, our enqueue script alone. Every loop
 * awaits one call at a time, as the row "enqueue 20,000 delayed, one at a
 * time" of npm run bench does, on one private redis-server; the loops take
 * turns, ROUNDS times, and each figure is the median of its rounds.
 *
 *   npm run bench:enqueue-steps      (writes benchmarks/ENQUEUE-STEPS-RESULTS.md)
 *   npm run bench:enqueue-steps -- --quick   (fewer events; prints, writes nothing)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import BeeQueue from 'bee-queue';
import { Redis } from 'ioredis';
import { DelayedEvent, DelayedEventService } from '../src';
import { EventCodec } from '../src/core/event-codec';
import { EventContextStore } from '../src/core/event-context';
import { loadLua } from '../src/redis/lua-scripts';
import { LUA_SOURCES } from '../src/redis/lua-sources.generated';
import { RedisLayout } from '../src/redis/redis-layout';
import { RedisServer } from '../test/support/redis-server';
import { PAYLOAD_S } from './adapters/bench-queue';

const QUICK = process.argv.includes('--quick');
const PER_ROUND = QUICK ? 2_000 : 5_000;
const ROUNDS = QUICK ? 3 : 7;
const DELAY_MS = 60_000;

@DelayedEvent('bench.steps')
class StepEvent {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
    readonly s: string = '',
  ) {}
}

async function microsPerCall(count: number, call: (i: number) => Promise<unknown> | unknown): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < count; i++) await call(i);
  return ((performance.now() - started) * 1_000) / count;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

type Step = 'ping' | 'emptyScript' | 'ourScript' | 'prepare' | 'ours' | 'beeQueue';

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const port = server.port;
  const redis = new Redis(port, '127.0.0.1');
  const layout = new RedisLayout('steps-floor');
  const keys = layout.forType('bench.steps');
  const emptySha = (await redis.script('LOAD', 'return 1')) as string;
  const enqueueSha = (await redis.script('LOAD', loadLua('enqueue').lua)) as string;
  const plain = loadLua('enqueue').variants.plain!;
  const fields = keys as unknown as Record<string, string>;
  const plainKeys = plain.map((k) => fields[k]!);
  const body = (n: number) => JSON.stringify([Date.now(), { n, s: PAYLOAD_S }]);
  const scriptArgs = (n: number) =>
    LUA_SOURCES.enqueue.encode({ mode: '', modeMs: 0, wakeChannel: 'steps:nobody-listens', wakeTag: keys.tag, events: [{ id: `f${n}`, body: body(n), due: `+${DELAY_MS}` }] }, [...plainKeys]);

  // What the service does in this process before the call leaves: check and serialize the event, capture the context.
  const codec = new EventCodec(512 * 1024);
  const contexts = new EventContextStore();

  const service = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix: 'steps-ours', logger: false, recordActivity: false });
  await service.waitUntilReady();
  const bee = new BeeQueue<{ n: number; s: string }>('steps-bee', { redis: { host: '127.0.0.1', port }, isWorker: false, getEvents: false, storeJobs: false, removeOnSuccess: true });
  await bee.ready();

  const rounds: Record<Step, number[]> = { ping: [], emptyScript: [], ourScript: [], prepare: [], ours: [], beeQueue: [] };
  let next = 0;
  const loops: Record<Step, () => Promise<number>> = {
    ping: () => microsPerCall(PER_ROUND, () => redis.ping()),
    emptyScript: () => microsPerCall(PER_ROUND, () => redis.evalsha(emptySha, plainKeys.length, ...scriptArgs(next++))),
    ourScript: () => microsPerCall(PER_ROUND, () => redis.evalsha(enqueueSha, plainKeys.length, ...scriptArgs(next++))),
    prepare: () => microsPerCall(PER_ROUND * 4, (i) => codec.encode(new StepEvent(`p${i}`, i, PAYLOAD_S), contexts.current(), Date.now())),
    ours: () => microsPerCall(PER_ROUND, () => service.enqueue(new StepEvent(`o${next}`, next++, PAYLOAD_S), DELAY_MS)),
    beeQueue: () =>
      microsPerCall(PER_ROUND, () =>
        bee
          .createJob({ n: next++, s: PAYLOAD_S })
          .delayUntil(Date.now() + DELAY_MS)
          .save(),
      ),
  };
  // A warm-up round of each, not counted.
  for (const loop of Object.values(loops)) await loop();
  for (let r = 0; r < ROUNDS; r++) {
    for (const step of Object.keys(loops) as Step[]) rounds[step].push(await loops[step]());
  }
  const ratios = rounds.ours.map((ours, i) => rounds.beeQueue[i]! / ours);
  await service.close();
  await bee.close();
  redis.disconnect();
  await server.stop();

  const m = Object.fromEntries(Object.entries(rounds).map(([k, v]) => [k, median(v)])) as Record<Step, number>;
  const around = m.ours - m.ourScript - m.prepare;
  const fmt = (x: number) => x.toFixed(1);
  const range = (v: readonly number[]) => `${fmt(Math.min(...v))}–${fmt(Math.max(...v))}`;
  const lines = [
    '# One awaited enqueue, step by step',
    '',
    `Written by \`npm run bench:enqueue-steps\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}, one private redis-server on the same machine. ${ROUNDS} rounds of ${PER_ROUND.toLocaleString('en-US')} awaited calls per loop, the loops taking turns; medians (min–max of the rounds).`,
    '',
    '| step | µs per enqueue | rounds |',
    '|---|---|---|',
    `| a bare round trip (PING) | ${fmt(m.ping)} | ${range(rounds.ping)} |`,
    `| a script that only returns, with our arguments (EVALSHA) | ${fmt(m.emptyScript)} | ${range(rounds.emptyScript)} |`,
    `| our enqueue script alone (EVALSHA, plain: 4 keys) | ${fmt(m.ourScript)} | ${range(rounds.ourScript)} |`,
    `| in this process before the call: check, serialize, capture the context (no Redis) | ${fmt(m.prepare)} | ${range(rounds.prepare)} |`,
    `| the rest of the service around the script: batching tick, call deadline, metrics, settling | ${fmt(around)} | |`,
    `| **ours: \`await service.enqueue(event, 60_000)\`** | **${fmt(m.ours)}** | ${range(rounds.ours)} |`,
    `| **Bee-Queue: \`await queue.createJob(data).delayUntil(at).save()\`** | **${fmt(m.beeQueue)}** | ${range(rounds.beeQueue)} |`,
    '',
    `Ours against Bee-Queue, per round (above 1: ours faster): median ${median(ratios).toFixed(2)}× (${ratios.map((r) => r.toFixed(2)).join(', ')}).`,
    '',
    `Our script alone costs ${fmt(m.ourScript - m.emptyScript)} µs more than a script that only returns, and a script call ${fmt(m.emptyScript - m.ping)} µs more than a PING: the round trip is most of every enqueue, ours and Bee-Queue's.`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  if (!QUICK) writeFileSync(join(__dirname, 'ENQUEUE-STEPS-RESULTS.md'), lines.join('\n'));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
