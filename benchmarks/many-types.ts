/**
 * What one instance costs per handled type while idle: Redis connections,
 * commands per second, heap and RSS, with 10, 1,000 and 10,000 event types
 * each with a handler, on one private redis-server. Nothing is enqueued: this
 * is the floor every instance pays for its handlers. It runs the built
 * package (dist/, as users get it), not the sources through tsx.
 *
 *   npm run bench:many-types        (writes benchmarks/MANY-TYPES-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { EventClass } from '../src';
import { QUIET_AFTER_MS, QUIET_LOOK_MS } from '../src/runtime/quiet-looks';
import { RedisServer } from '../test/support/redis-server';

import { built } from './built-package';

const { DelayedEvent, DelayedEventService } = built;

const COUNTS = (process.env.COUNTS ?? '10,1000,10000').split(',').map(Number);
/** Until every queue went quiet and made its first quiet look. */
const SETTLE_MS = QUIET_AFTER_MS + QUIET_LOOK_MS + 5_000;
const WINDOW_MS = 60_000;

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
  /** Script calls per second among them. */
  readonly scriptCallsPerSecond: number;
  readonly heapKbPerType: number;
  readonly rssKbPerType: number;
  /** This process's CPU time over the window, as a share of one core. */
  readonly cpuPercent: number;
}

async function scriptCalls(redis: Redis): Promise<number> {
  const text = await redis.info('commandstats');
  let calls = 0;
  for (const match of text.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)) calls += Number(match[1]);
  return calls;
}

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
}

async function measure(port: number, types: number): Promise<Row> {
  const probe = new Redis(port, '127.0.0.1');
  const baseConnections = await info(probe, 'clients', 'connected_clients');
  gc();
  const base = process.memoryUsage();
  const service = new DelayedEventService({ redis: `redis://127.0.0.1:${port}`, prefix: `many${types}`, logger: false });
  for (let t = 0; t < types; t++) service.addHandler(eventClass(`many${types}.type${t}`), () => true, 1);
  await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
  const connections = (await info(probe, 'clients', 'connected_clients')) - baseConnections;
  const before = await info(probe, 'stats', 'total_commands_processed');
  const scriptsBefore = await scriptCalls(probe);
  const cpuBefore = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, WINDOW_MS));
  const cpu = process.cpuUsage(cpuBefore);
  // The probe's own INFO calls are three of them.
  const commands = (await info(probe, 'stats', 'total_commands_processed')) - before - 3;
  const scripts = (await scriptCalls(probe)) - scriptsBefore;
  gc();
  const after = process.memoryUsage();
  await service.close();
  probe.disconnect();
  const seconds = WINDOW_MS / 1_000;
  return {
    types,
    connections,
    idleCommandsPerSecond: commands / seconds,
    scriptCallsPerSecond: scripts / seconds,
    heapKbPerType: (after.heapUsed - base.heapUsed) / 1_024 / types,
    rssKbPerType: (after.rss - base.rss) / 1_024 / types,
    cpuPercent: ((cpu.user + cpu.system) / 1_000 / WINDOW_MS) * 100,
  };
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
    .map(
      (r) =>
        `| ${r.types.toLocaleString('en-US')} | ${r.connections.toLocaleString('en-US')} | ${Math.round(r.idleCommandsPerSecond).toLocaleString('en-US')} | ${r.scriptCallsPerSecond.toFixed(1)} | ${r.heapKbPerType.toFixed(1)} | ${r.rssKbPerType.toFixed(1)} | ${r.cpuPercent.toFixed(1)} |`,
    )
    .join('\n');
  const text = `# Idle cost per handled type

Written by \`npm run bench:many-types\` on ${new Date().toISOString().slice(0, 10)}, ${machine}, one private redis-server, the built package (dist/).

One service instance with N event types, each with a handler (parallelism 1), nothing enqueued; after
${SETTLE_MS / 1_000} s (every queue quiet, src/runtime/quiet-looks.ts), Redis's connected clients, the commands Redis
processed per second over ${WINDOW_MS / 1_000} s (the commands its scripts run counted too, as Redis counts them),
the script calls among them, the growth of the process's heap (after a full GC) and RSS per type, and
the CPU time the process spent meanwhile.
Default options (pollIntervalMs 1 s, readerBlockMs 5 s).

| handled types | Redis connections | idle commands/s | script calls/s | heap per type, KB | RSS per type, KB | process CPU, % of a core |
|---|---|---|---|---|---|---|
${table}

An idle queue looks by itself once per ${QUIET_LOOK_MS / 1_000} s (spread over its second half): five commands on a queue
that holds nothing, with the default options (keepHandled.ageMs and a named group here each add one)
(the script call, TIME, one EXISTS for the pause flag and the group registry, one for the schedule, the leases,
the heartbeats and the idempotency marks, one for the ready list and the priority set; up to 0.6's first
builds, about ten: each head read apart).
The instance's beacon is one PUBLISH a second whatever it handles, and each type's partitions check (the
repartitioner) about four commands a minute. Up to 0.5, each type's dispatcher looked every pollIntervalMs and
each reader every readerBlockMs: 13,001 commands/s at 1,000 types on this machine.

At 10 types the per-type figures are mostly the instance's own fixed cost (its first handler, its
connections) divided by 10; RSS moves with what the allocator keeps, and can shrink. Since 0.6's last
builds an idle handler's loops are parked (src/service/queue-loops.ts): its dispatchers, reader and
consumer are stopped and dropped once quiet, and one scheduler of the instance makes their looks
(src/runtime/parked-looks.ts), so an idle type costs its registration alone. A heap snapshot diff
between 100 and 1,100 parked types (V8's own accounting, after a full GC) puts it at ~7 KB per type, of
which ~1 KB is the event class this benchmark makes per type (a class, its decorator's metadata) and
the rest the registration: its plan and options, its partition's looks and flow sweep, its partitions
sweep (a timer), the parked look's timer, and its entries in the instance's maps. Until then a handled
type kept its loops suspended with their signals, timers and closures, and ~50 key names per queue
(now made when asked, src/redis/queue-key-names.ts): ~25 KB (0.6's first builds: 70 KB, then 29).
The process's CPU at idle is the looks (one script call each: a socket write and a reply). Until 0.6's
last builds each look also made a pass over every handler of the instance to find its type's groups:
with 10,000 idle types, 101-104% of a core against 19-23% once indexed, in two paired runs of one 20 s
measurement taken 45 s after start.
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
