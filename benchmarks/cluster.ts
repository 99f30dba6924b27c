/**
 * npm run bench:cluster: events handled per second with a partitioned type on
 * one redis-server against a 3-master Redis Cluster (with 3 replicas), in one
 * run. Writes benchmarks/CLUSTER-RESULTS.md.
 */
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom } from 'rxjs';
import { DelayedEvent, DelayedEventService } from '../src';
import { RedisCluster } from '../test/support/redis-cluster';
import { RedisServer } from '../test/support/redis-server';
import { median } from './report';

const PARTITIONS = 6;
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const INSTANCES = 2;
const PARALLELISM = 32;
const REPEATS = process.argv.includes('--quick') ? 1 : 3;

@DelayedEvent('bench.hot', { partitions: PARTITIONS })
class HotEvent {
  constructor(
    readonly id: string = '',
    readonly n: number = 0,
    readonly s: string = '',
  ) {}
}

type Connect = () => ConstructorParameters<typeof DelayedEventService>[0]['redis'];

/** 20,000 events all due, then INSTANCES services start handling: events per second until all are handled. */
async function handledPerSecond(connect: Connect, prefix: string): Promise<number> {
  const producer = new DelayedEventService({ redis: connect(), prefix });
  const entries = Array.from({ length: EVENTS }, (_, n) => ({ event: new HotEvent(`${n}`, n, 'x'.repeat(20)), delay: 200 }));
  for (let i = 0; i < entries.length; i += 1_000) await firstValueFrom(producer.enqueueBatch(entries.slice(i, i + 1_000)));
  await new Promise((resolve) => setTimeout(resolve, 300));
  let handled = 0;
  const started = performance.now();
  const services = Array.from({ length: INSTANCES }, () => new DelayedEventService({ redis: connect(), prefix }));
  for (const service of services) service.addHandler(HotEvent, () => (handled++, true), PARALLELISM);
  while (handled < EVENTS) await new Promise((resolve) => setTimeout(resolve, 2));
  const rate = EVENTS / ((performance.now() - started) / 1000);
  await Promise.all([producer, ...services].map((s) => s.close()));
  return rate;
}

async function main(): Promise<void> {
  const single = await RedisServer.start();
  const cluster = await RedisCluster.start();
  // Clients handed to a service stay the caller's: the service never quits them.
  const clients: Array<ReturnType<RedisCluster['client']>> = [];
  const clusterClient = () => {
    const client = cluster.client();
    clients.push(client);
    return client;
  };
  const results: Record<string, number[]> = { '1 master': [], '3 masters': [] };
  try {
    for (let r = 0; r < REPEATS; r++) {
      results['1 master']!.push(await handledPerSecond(() => single.url, `single${r}`));
      results['3 masters']!.push(await handledPerSecond(clusterClient, `cluster${r}`));
      console.log(`run ${r + 1}: 1 master ${results['1 master']!.at(-1)!.toFixed(0)}/s, 3 masters ${results['3 masters']!.at(-1)!.toFixed(0)}/s`);
    }
  } finally {
    for (const client of clients) client.disconnect();
    await single.stop();
    await cluster.stop();
  }
  const cell = (values: number[]) =>
    `${Math.round(median(values)).toLocaleString('en')} (${Math.round(Math.min(...values)).toLocaleString('en')}–${Math.round(Math.max(...values)).toLocaleString('en')})`;
  const ratio = median(results['3 masters']!) / median(results['1 master']!);
  const table = `| Redis | events handled/s, median (min–max) |\n|---|---|\n| 1 master (redis-server) | ${cell(results['1 master']!)} |\n| 3 masters + 3 replicas (Redis Cluster) | ${cell(results['3 masters']!)} |\n| 3 masters ÷ 1 master | ${ratio.toFixed(2)}× |`;
  writeFileSync(
    join(__dirname, 'CLUSTER-RESULTS.md'),
    `# One master against three\n\nWritten by \`npm run bench:cluster\` on ${new Date().toISOString().slice(0, 10)}: ${EVENTS.toLocaleString('en')} events of a type with ${PARTITIONS} partitions, all due, then ${INSTANCES} service instances in one Node process (parallelism ${PARALLELISM} each, no-op handler) handle them; ${REPEATS} runs. Both Redis setups run on this same ${cpus().length}-core machine, alongside Node.\n\n${table}\n\nOn one small machine the Node process, not Redis, is the limit (see benchmarks/README.md), so three masters cannot show their capacity here: this measures that a partitioned type runs on a cluster at the same pace, not how far it scales. Spreading a type over masters pays where each master has cores of its own and several application hosts consume.\n`,
  );
  console.log(table);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
