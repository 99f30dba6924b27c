/**
 * What one instance costs per handled type while idle: Redis connections,
 * commands per second and RSS, with 10, 100 and 1,000 event types each with
 * a handler, on one private redis-server. Nothing is enqueued: this is the
 * floor every instance pays for its handlers.
 *
 *   npm run bench:many-types        (writes benchmarks/MANY-TYPES-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DelayedEvent, DelayedEventService, type EventClass } from '../src';
import { RedisServer } from '../test/support/redis-server';

const COUNTS = [10, 100, 1_000];
const SETTLE_MS = 5_000;
const WINDOW_MS = 10_000;

/** A class per type name: each handler needs its own @DelayedEvent class. */
function eventClass(name: string): EventClass {
  class Event {
    constructor(readonly id: string = '') {}
  }
  DelayedEvent(name)(Event);
  return Event;
}

async function info(redis: Redis, section: string, field: string): Promise<number> {
  const text = await redis.info(section);
  const line = text.split('\r\n').find((l) => l.startsWith(`${field}:`));
  return Number(line?.split(':')[1] ?? NaN);
}

interface Row {
  readonly types: number;
  readonly connections: number;
  readonly idleCommandsPerSecond: number;
  readonly rssMb: number;
}

async function measure(port: number, types: number): Promise<Row> {
  const probe = new Redis(port, '127.0.0.1');
  const baseConnections = await info(probe, 'clients', 'connected_clients');
  global.gc?.();
  const baseRss = process.memoryUsage().rss;
  const service = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix: `many${types}`, logger: false });
  for (let t = 0; t < types; t++) service.addHandler(eventClass(`many${types}.type${t}`), () => true, 1);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const connections = (await info(probe, 'clients', 'connected_clients')) - baseConnections;
  const before = await info(probe, 'stats', 'total_commands_processed');
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
  // The probe's own INFO calls are two of them.
  const commands = (await info(probe, 'stats', 'total_commands_processed')) - before - 2;
  const rssMb = (process.memoryUsage().rss - baseRss) / 1_048_576;
  await service.close();
  probe.disconnect();
  return { types, connections, idleCommandsPerSecond: commands / (WINDOW_MS / 1_000), rssMb };
}

async function main(): Promise<void> {
  const server = await RedisServer.start([]);
  const rows: Row[] = [];
  try {
    for (const types of COUNTS) {
      const row = await measure(server.port, types);
      console.log(JSON.stringify(row));
      rows.push(row);
    }
  } finally {
    await server.stop();
  }
  const machine = `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}`;
  const table = rows
    .map((r) => `| ${r.types.toLocaleString('en-US')} | ${r.connections.toLocaleString('en-US')} | ${Math.round(r.idleCommandsPerSecond).toLocaleString('en-US')} | ${r.rssMb.toFixed(0)} |`)
    .join('\n');
  const text = `# Idle cost per handled type

Written by \`npm run bench:many-types\` on ${new Date().toISOString().slice(0, 10)}, ${machine}, one private redis-server.

One service instance with N event types, each with a handler (parallelism 1), nothing enqueued; after
${SETTLE_MS / 1_000} s to settle, Redis's connected clients, the commands Redis processed per second over
${WINDOW_MS / 1_000} s, and the growth of the process's RSS. Default options (pollIntervalMs 1 s, readerBlockMs 5 s).

| handled types | Redis connections | idle commands/s | RSS growth, MB |
|---|---|---|---|
${table}

Redis counts the commands its scripts run as well as the calls (a dispatch is one call of about ten
commands). The RSS growth of the first row is within the garbage collector's noise.

Readers hold no connection of their own: an instance opens three (commands, handlers, wake-ups)
whatever it handles. 0.4.0, whose readers each blocked in Redis on a connection of their own, opened
1,003 for 1,000 types. Each type's dispatcher still looks once per pollIntervalMs, so idle commands
grow with the number of handled types.
`;
  writeFileSync(join(__dirname, 'MANY-TYPES-RESULTS.md'), text);
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
