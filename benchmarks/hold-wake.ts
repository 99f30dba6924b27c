/**
 * How soon after a hold ends (a handler's delivery.rateLimited(ms)) the event
 * runs again: two instances in one process, readers idle between holds, one
 * private redis-server. Each hold is set by one instance; the event runs again
 * on whichever instance claims it first. Lateness is on Redis's clock: from
 * the hold's end as rate-limited.lua wrote it to the second run's start, read
 * by the handler (a round trip late, never early).
 *
 *   npm run bench:holds      (writes benchmarks/HOLDS-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DelayedEvent, DelayedEventService } from '../src';
import { RedisServer } from '../test/support/redis-server';

@DelayedEvent('bench.held')
class Held {
  constructor(readonly id: string = '') {}
}

const HOLDS = 200;
const HOLD_MS = 100;
const PREFIX = 'holds';

const percentile = (values: readonly number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil((p / 100) * values.length) - 1)]!;

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const client = new Redis(server.url);
  const redisNow = async () => {
    const [seconds, micros] = await client.time();
    return Number(seconds) * 1_000 + Number(micros) / 1_000;
  };
  // Idle readers look by themselves every 5 s (the default): only the hold's end brings the event back sooner.
  const services = [0, 1].map(() => new DelayedEventService({ redis: server.url, prefix: PREFIX, logger: false }));
  const runs = new Map<string, number>();
  const second = new Map<string, Promise<number>>();
  for (const service of services) {
    service.addHandler(
      Held,
      (event, _context, delivery) => {
        const seen = runs.get(event.id) ?? 0;
        runs.set(event.id, seen + 1);
        if (seen === 0) delivery.rateLimited(HOLD_MS);
        else if (seen === 1) second.set(event.id, redisNow());
      },
      2,
    );
  }
  const flow = `${PREFIX}:{bench.held}:fc`;
  const late: number[] = [];
  for (let i = 0; i < HOLDS; i++) {
    const id = `h${i}`;
    await services[i % 2]!.enqueue(new Held(id), 0);
    let holdEnd: string | null = null;
    while (holdEnd === null) {
      holdEnd = await client.hget(flow, 'hold');
      if (holdEnd === null) await new Promise((resolve) => setTimeout(resolve, 1));
    }
    while (!second.has(id)) await new Promise((resolve) => setTimeout(resolve, 1));
    late.push((await second.get(id)!) - Number(holdEnd));
  }
  await Promise.all(services.map((s) => s.close()));
  client.disconnect();
  await server.stop();
  const ms = (v: number) => `${v.toFixed(1)} ms`;
  const lines = [
    '# A hold ends: how soon the event runs again',
    '',
    `Written by \`npm run bench:holds\` on ${new Date().toISOString().slice(0, 10)}: ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}, one private redis-server on the same machine. Two instances in one process, \`readerBlockMs\` at its default (5 s); ${HOLDS} holds of ${HOLD_MS} ms, one after another, each set by one instance; the event runs again on either. From the hold's end (as Redis wrote it) to the second run's start (Redis's clock, read by the handler).`,
    '',
    '| p50 | p99 | max |',
    '|---|---|---|',
    `| ${ms(percentile(late, 50))} | ${ms(percentile(late, 99))} | ${ms(Math.max(...late))} |`,
    '',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  writeFileSync(join(__dirname, 'HOLDS-RESULTS.md'), lines.join('\n'));
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
