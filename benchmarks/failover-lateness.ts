/**
 * How late delayed events fire while a Cluster master is killed and its
 * replica promoted: a real 3-master cluster with a replica each
 * (cluster-node-timeout 2 s), 8 handled types over the masters, a producer
 * enqueueing durably (WAIT for one replica) an event every 10 ms due 2 s
 * later, for 30 s. At 10 s the master of the first type's slot is killed.
 * Lateness is the handler's start minus the due time Redis stored, per event, grouped by the
 * time it was asked for: due before the kill
 * (quiet), due on the killed master's types within 15 s of the kill, and due
 * on the other masters meanwhile. Acknowledged events never handled count as
 * lost. Built package (benchmarks/built-package.ts); 3 runs, medians.
 *
 *   npm run bench:failover        (writes benchmarks/FAILOVER-RESULTS.md)
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { EventClass } from '../src';
import { RedisCluster } from '../test/support/redis-cluster';
import { built } from './built-package';

const { DelayedEvent, DelayedEventService } = built;

const TYPES = 8;
const EVERY_MS = 10;
const DELAY_MS = 2_000;
const RUN_MS = 30_000;
const KILL_AT_MS = 10_000;
const FAILOVER_WINDOW_MS = 15_000;
const RUNS = Number(process.env.RUNS ?? 3);

function eventClass(name: string): EventClass {
  class Event {
    constructor(readonly id: string = '') {}
  }
  DelayedEvent(name)(Event);
  return Event;
}
const classes = Array.from({ length: TYPES }, (_, t) => eventClass(`failover.t${t}`));

interface Group {
  readonly lateness: number[];
  lost: number;
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function once(run: number): Promise<Record<'quiet' | 'failover' | 'others', Group>> {
  const cluster = await RedisCluster.start();
  const prefix = `fo${run}`;
  const service = new DelayedEventService({ redis: cluster.client(), prefix, logger: false });
  const producer = new DelayedEventService({ redis: cluster.client(), prefix, logger: false, durableEnqueue: { replicas: 1, timeoutMs: 1_000 } });
  try {
    // Lateness from the due time Redis stored (same host, same clock), not from when the producer asked.
    const lateness = new Map<string, number>();
    for (const eventClass of classes)
      service.addHandler(eventClass, (event, _context, delivery) => void lateness.set(`${eventClass.name}|${(event as { id: string }).id}`, Math.max(0, Date.now() - delivery.dueAt)), 16);
    const admin = cluster.client();
    await new Promise((resolve) => admin.once('ready', resolve));
    const slot = Number(await admin.cluster('KEYSLOT', `${prefix}:{failover.t0}:m`));
    const slots = (await admin.cluster('SLOTS')) as unknown as Array<[number, number, [string, number]]>;
    const ownerOf = async (type: string) => {
      const s = Number(await admin.cluster('KEYSLOT', `${prefix}:{${type}}:m`));
      return slots.find(([from, to]) => s >= from && s <= to)![2][1];
    };
    const victimPort = slots.find(([from, to]) => slot >= from && slot <= to)![2][1];
    const onVictim = new Set<number>();
    for (let t = 0; t < TYPES; t++) if ((await ownerOf(`failover.t${t}`)) === victimPort) onVictim.add(t);
    admin.disconnect();

    const sent: Array<{ key: string; type: number; dueAt: number; acknowledged: boolean }> = [];
    const start = Date.now();
    let killedAt = 0;
    const pending: Array<Promise<void>> = [];
    for (let i = 0; Date.now() - start < RUN_MS; i++) {
      const type = i % TYPES;
      const eventClass = classes[type]!;
      const entry = { key: `${eventClass.name}|e${i}`, type, dueAt: Date.now() + DELAY_MS, acknowledged: false };
      sent.push(entry);
      pending.push(
        producer.enqueue(new (eventClass as unknown as new (id: string) => { id: string })(`e${i}`), DELAY_MS).then(
          () => void (entry.acknowledged = true),
          () => undefined,
        ),
      );
      if (!killedAt && Date.now() - start >= KILL_AT_MS) {
        killedAt = Date.now();
        void cluster.nodes.find((node) => node.port === victimPort)!.kill();
      }
      await new Promise((resolve) => setTimeout(resolve, EVERY_MS));
    }
    await Promise.all(pending);
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && sent.some((s) => s.acknowledged && !lateness.has(s.key))) await new Promise((resolve) => setTimeout(resolve, 200));
    const groups = { quiet: { lateness: [], lost: 0 }, failover: { lateness: [], lost: 0 }, others: { lateness: [], lost: 0 } } as Record<'quiet' | 'failover' | 'others', Group>;
    for (const s of sent) {
      if (!s.acknowledged) continue;
      const name = s.dueAt < killedAt ? 'quiet' : s.dueAt > killedAt + FAILOVER_WINDOW_MS ? undefined : onVictim.has(s.type) ? 'failover' : 'others';
      if (!name) continue;
      const late = lateness.get(s.key);
      if (late === undefined) groups[name].lost++;
      else groups[name].lateness.push(late);
    }
    for (const g of Object.values(groups)) g.lateness.sort((a, b) => a - b);
    console.log(
      JSON.stringify({
        run,
        onVictim: [...onVictim],
        ...Object.fromEntries(
          Object.entries(groups).map(([k, g]) => [k, { n: g.lateness.length, p50: percentile(g.lateness, 50), p99: percentile(g.lateness, 99), max: g.lateness.at(-1), lost: g.lost }]),
        ),
      }),
    );
    return groups;
  } finally {
    await Promise.all([service.close(), producer.close()]);
    await cluster.stop();
  }
}

async function main(): Promise<void> {
  const runs: Array<Record<'quiet' | 'failover' | 'others', Group>> = [];
  for (let run = 0; run < RUNS; run++) runs.push(await once(run));
  const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const row = (label: string, key: 'quiet' | 'failover' | 'others') => {
    const of = (p: number) => median(runs.map((r) => percentile(r[key].lateness, p)));
    const max = median(runs.map((r) => r[key].lateness.at(-1) ?? Number.NaN));
    const count = median(runs.map((r) => r[key].lateness.length));
    const lost = runs.reduce((sum, r) => sum + r[key].lost, 0);
    return `| ${label} | ${count.toLocaleString('en-US')} | ${of(50)} | ${of(99)} | ${max} | ${lost} |`;
  };
  const machine = `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}`;
  const text = `# Lateness during a Cluster failover

Written by \`npm run bench:failover\` on ${new Date().toISOString().slice(0, 10)}, ${machine}; a real Redis Cluster of
3 masters and 3 replicas on this machine (\`cluster-node-timeout\` 2 s), the built package, default options.

${TYPES} handled types spread over the masters; a producer enqueues an event every ${EVERY_MS} ms due ${DELAY_MS / 1_000} s later,
durably (\`durableEnqueue: { replicas: 1 }\`), for ${RUN_MS / 1_000} s; ${KILL_AT_MS / 1_000} s in, the master of one type's slot is
killed (SIGKILL) and its replica is promoted by the cluster. Lateness is the handler's start minus the due
time, in ms: median over ${RUNS} runs of each run's p50, p99 and max. "Lost" counts events whose enqueue was
acknowledged and that were never handled within a minute, over all runs.

| events due | events per run | p50, ms | p99, ms | max, ms | lost |
|---|---|---|---|---|---|
${row('before the kill (quiet)', 'quiet')}
${row(`on the killed master's types, within ${FAILOVER_WINDOW_MS / 1_000} s of the kill`, 'failover')}
${row('on the other masters, meanwhile', 'others')}

An event due while its master is down is handled once the replica took over (the cluster notices the
master's silence after \`cluster-node-timeout\`, then elects): its lateness is about that wait. Events due
on the other masters kept a p50 of a few ms, but their p99 rose to under a second: the service's loops share
one Cluster client, and while it waits on the failed master, some of their calls to the others wait behind
it (not looked into further yet). No peer we compare with publishes how late its delayed jobs fire.
`;
  writeFileSync(join(__dirname, 'FAILOVER-RESULTS.md'), text);
}

void main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
