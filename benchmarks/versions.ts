/**
 * What versioned event classes cost: verifyStored, upgradeStored and
 * versions over 1,000,000 stored events (the check a CI job runs against a
 * staging Redis before a deploy, and the rewrite after it), and the Redis
 * memory of a pending event stored by an unversioned class against the same
 * payload stored at version 3. One private redis-server.
 *
 *   npm run bench:versions      (writes benchmarks/VERSIONS-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { DelayedEvent, DelayedEventService } from '../src';
import { RedisServer } from '../test/support/redis-server';
import { OrderCheckV1, OrderCheckV3 } from '../test/support/versioned-events';
import { usedMemory } from './scenarios';

const EVENTS = Number(process.env.EVENTS ?? 1_000_000);
const MEMORY_EVENTS = 100_000;
const BATCH = 10_000;

@DelayedEvent('bench.memory')
class Unversioned {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
    readonly s: string = '',
  ) {}
}

@DelayedEvent('bench.memory', { version: 3, upcast: { 1: (v) => v, 2: (v) => v } })
class Versioned {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
    readonly s: string = '',
  ) {}
}

async function timed<R>(work: () => Promise<R>): Promise<{ ms: number; result: R }> {
  const start = performance.now();
  const result = await work();
  return { ms: performance.now() - start, result };
}

async function store(service: DelayedEventService, count: number, make: (i: number) => object): Promise<void> {
  for (let i = 0; i < count; i += BATCH) {
    await firstValueFrom(service.enqueueBatch(Array.from({ length: Math.min(BATCH, count - i) }, (_, k) => ({ event: make(i + k) as { id: string }, delay: 86_400_000 }))));
  }
}

/** Redis memory per pending event: all of it (used_memory), and the meta hash's alone (MEMORY USAGE, where the version is). */
async function memoryPerEvent(redis: Redis, service: DelayedEventService, make: (i: number) => object): Promise<{ all: number; meta: number }> {
  await redis.flushall();
  const before = await usedMemory(redis);
  await store(service, MEMORY_EVENTS, make);
  const all = ((await usedMemory(redis)) - before) / MEMORY_EVENTS;
  const meta = Number(await redis.call('MEMORY', 'USAGE', 'bench:{bench.memory}:m', 'SAMPLES', '0')) / MEMORY_EVENTS;
  return { all, meta };
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const redis = new Redis(server.port, '127.0.0.1');
  const service = new DelayedEventService({ redis: server.url, prefix: 'bench', logger: false });

  const unversioned = await memoryPerEvent(redis, service, (i) => new Unversioned(`m${i}`, i, 'x'.repeat(20)));
  const versioned = await memoryPerEvent(redis, service, (i) => new Versioned(`m${i}`, i, 'x'.repeat(20)));

  await redis.flushall();
  const stored = await timed(() => store(service, EVENTS, (i) => new OrderCheckV1(`e${i}`, i)));
  const verify = await timed(() => service.verifyStored(OrderCheckV3));
  const versions = await timed(() => service.versions(OrderCheckV3));
  const upgrade = await timed(() => service.upgradeStored(OrderCheckV3));
  const again = await timed(() => service.upgradeStored(OrderCheckV3));
  const verifyAfter = await timed(() => service.verifyStored(OrderCheckV3));
  if (verify.result.checked !== EVENTS || upgrade.result.upgraded !== EVENTS || again.result.upgraded !== 0 || verifyAfter.result.failures.length !== 0) {
    throw new Error(`unexpected results: ${JSON.stringify({ verify: verify.result.checked, upgraded: upgrade.result.upgraded, again: again.result.upgraded })}`);
  }
  await service.close();
  redis.disconnect();
  await server.stop();

  const perSecond = (ms: number) => Math.round(EVENTS / (ms / 1_000)).toLocaleString('en-US');
  const row = (what: string, t: { ms: number }) => `| ${what} | ${(t.ms / 1_000).toFixed(1)} s | ${perSecond(t.ms)} |`;
  const lines = [
    '# Versioned event classes: what the checks and the upgrade cost',
    '',
    `Written by \`npm run bench:versions\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}, one private redis-server on the same machine. ${EVENTS.toLocaleString('en-US')} events stored by a version-1 class (\`{ amount }\`), read by a version-3 class through two upcasters (the shapes of test/support/versioned-events.ts); one run each.`,
    '',
    '| call | time | events per second |',
    '|---|---|---|',
    row('verifyStored (v1 bodies, through 2 upcasters)', verify),
    row('versions (counts by version, no class)', versions),
    row('upgradeStored (rewrites every body)', upgrade),
    row('upgradeStored again (nothing to rewrite)', again),
    row('verifyStored (v3 bodies)', verifyAfter),
    '',
    `Storing them took ${(stored.ms / 1_000).toFixed(1)} s (enqueueBatch of ${BATCH.toLocaleString('en-US')}).`,
    '',
    `Redis memory per pending event (${MEMORY_EVENTS.toLocaleString('en-US')} events, payload \`{ n, s: 'x'.repeat(20) }\`):`,
    '',
    '| class | all (used_memory) | meta hash (MEMORY USAGE) |',
    '|---|---|---|',
    `| unversioned (version 1) | ${unversioned.all.toFixed(1)} B | ${unversioned.meta.toFixed(1)} B |`,
    `| version 3 (body starts \`3|\`) | ${versioned.all.toFixed(1)} B | ${versioned.meta.toFixed(1)} B |`,
    '',
    'A version-1 class writes its bodies byte for byte as before, so the pending-event row of RESULTS.md is unchanged; a later version adds its digits and a bar to each body, which the allocator may or may not round up.',
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  writeFileSync(join(__dirname, 'VERSIONS-RESULTS.md'), lines.join('\n'));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
