/**
 * What the history of what ran (keepHandled) costs: end-to-end handling of
 * 20,000 due events at parallelism 32 with it off (the default) and with
 * `{ count: 1,000 }` and `{ count: 100,000 }`, in turns on one private
 * redis-server: handled per second and Redis CPU per handled event; and the
 * Redis memory each kept event takes.
 *
 *   npm run bench:history      (writes benchmarks/HISTORY-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RedisServer } from '../test/support/redis-server';
import { oursWith } from './adapters/ours';
import { endToEndCost, usedMemory, withQueue } from './scenarios';

const ROUNDS = 3;
const COUNT = 20_000;
const VARIANTS = [
  { label: 'off (default)', options: {} },
  { label: '{ count: 1,000 }', options: { keepHandled: { count: 1_000 } } },
  { label: '{ count: 100,000 }', options: { keepHandled: { count: 100_000 } } },
] as const;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const redis = new Redis(server.port, '127.0.0.1');
  const results = VARIANTS.map(() => ({ rate: [] as number[], cpu: [] as number[] }));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, variant] of VARIANTS.entries()) {
      const cost = await withQueue(oursWith(variant.options, `ours ${variant.label}`), server.port, (q, r) => endToEndCost(q, r, COUNT, 32));
      results[i]!.rate.push(cost.rate);
      results[i]!.cpu.push(cost.redisCpuMicros);
    }
  }
  // Memory per kept event: 20,000 handled with room for all of them, against the same handled without history.
  await redis.flushall();
  const before = await usedMemory(redis);
  await withQueue(oursWith({ keepHandled: { count: 100_000 } }, 'ours kept'), server.port, (q, r) => endToEndCost(q, r, COUNT, 32));
  const kept = await usedMemory(redis);
  await redis.flushall();
  const baseline = await usedMemory(redis);
  await withQueue(oursWith({}, 'ours'), server.port, (q, r) => endToEndCost(q, r, COUNT, 32));
  const notKept = await usedMemory(redis);
  const bytesPerKept = (kept - before - (notKept - baseline)) / COUNT;
  redis.disconnect();
  await server.stop();

  const off = results[0]!;
  const lines = [
    '# History of what ran (keepHandled): what it costs',
    '',
    `Written by \`npm run bench:history\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}, one private redis-server. End-to-end: ${COUNT.toLocaleString('en-US')} events due at once, handled at parallelism 32 (payload \`{ n, s: 'x'.repeat(20) }\`), ${ROUNDS} rounds with the variants in turns; medians.`,
    '',
    '| keepHandled | handled per second | Redis CPU per handled event (µs) | vs off |',
    '|---|---|---|---|',
    ...VARIANTS.map((v, i) => {
      const r = results[i]!;
      return `| ${v.label} | ${Math.round(median(r.rate)).toLocaleString('en-US')} | ${median(r.cpu).toFixed(2)} | ${i === 0 ? '' : `${((median(r.cpu) / median(off.cpu) - 1) * 100).toFixed(0)}% Redis CPU`} |`;
    }),
    '',
    `Redis memory per kept event (this payload): ${Math.round(bytesPerKept)} bytes.`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  writeFileSync(join(__dirname, 'HISTORY-RESULTS.md'), lines.join('\n'));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
