/**
 * What keeping running work in view costs (since 0.6): end-to-end handling of
 * 20,000 due events at parallelism 32, in turns on one private redis-server,
 * with heartbeat leases off (`heartbeatMs: false`, as 0.5) and on (the
 * default), with outcome events on, with each call reporting progress and a
 * log line, and with each call recording a result: handled per second and
 * Redis CPU per handled event. Renewals themselves are one script call per
 * handler and queue every heartbeatMs, whatever the number of calls: not
 * measurable in a run of a second.
 *
 *   npm run bench:running-work      (writes benchmarks/RUNNING-WORK-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { Delivery } from '../src';
import { RedisServer } from '../test/support/redis-server';
import { oursWith } from './adapters/ours';
import { endToEndCost, withQueue } from './scenarios';

const ROUNDS = 5;
const COUNT = 20_000;
const report = (d: Delivery, n: number) => {
  d.progress(n);
  d.log(`step ${n}`);
};
const result = (d: Delivery, n: number) => d.result({ n });
const VARIANTS = [
  { label: 'heartbeatMs: false (0.5 leases)', options: { heartbeatMs: false as const } },
  { label: 'heartbeats on (default)', options: {} },
  { label: 'outcomes: {}', options: { outcomes: {} } },
  { label: 'progress + log per call', options: {}, inCall: report },
  { label: 'result per call, outcomes: {}', options: { outcomes: {} }, inCall: result },
] as const;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const results = VARIANTS.map(() => ({ rate: [] as number[], cpu: [] as number[] }));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, variant] of VARIANTS.entries()) {
      const factory = oursWith(variant.options, `ours ${variant.label}`, {}, 'inCall' in variant ? variant.inCall : undefined);
      const cost = await withQueue(factory, server.port, (q, r) => endToEndCost(q, r, COUNT, 32));
      results[i]!.rate.push(cost.rate);
      results[i]!.cpu.push(cost.redisCpuMicros);
    }
  }
  await server.stop();
  const off = results[0]!;
  const lines = [
    '# Running work in view: what it costs',
    '',
    `Written by \`npm run bench:running-work\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}, one private redis-server. End-to-end: ${COUNT.toLocaleString('en-US')} events due at once, handled at parallelism 32, ${ROUNDS} rounds with the variants in turns; medians (and the range).`,
    '',
    '| variant | handled per second | Redis CPU per handled event (µs) | vs heartbeats off |',
    '|---|---|---|---|',
    ...VARIANTS.map((v, i) => {
      const r = results[i]!;
      const range = `${Math.min(...r.cpu).toFixed(2)}–${Math.max(...r.cpu).toFixed(2)}`;
      return `| ${v.label} | ${Math.round(median(r.rate)).toLocaleString('en-US')} | ${median(r.cpu).toFixed(2)} (${range}) | ${i === 0 ? '' : `${((median(r.cpu) / median(off.cpu) - 1) * 100).toFixed(0)}% Redis CPU`} |`;
    }),
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  writeFileSync(join(__dirname, 'RUNNING-WORK-RESULTS.md'), lines.join('\n'));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
