import { type Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { type DeadLetter, type DelayedEventInstance, DelayedEventService, type DelayedEventServiceOptions, type EventClass, type Metric } from '../../src';
import { RedisCluster } from './redis-cluster';
import { RedisServer } from './redis-server';
import { waitFor } from './wait-for';

export type Topology = 'single' | 'cluster';

/** Which Redis the behaviour tests run on: the vitest project sets REDIS_TOPOLOGY (vitest.config.mts). */
export const TOPOLOGY: Topology = process.env.REDIS_TOPOLOGY === 'cluster' ? 'cluster' : 'single';

/**
 * One private Redis per test file (a redis-server, or a 3-master cluster when
 * REDIS_TOPOLOGY=cluster), a fresh prefix per service, and every service and
 * client closed after each test.
 */
export function useRedis(serverArgs: string[] = []) {
  let server: RedisServer | undefined;
  let cluster: RedisCluster | undefined;
  const services: DelayedEventService[] = [];
  const clients: Array<Redis | Cluster> = [];
  let prefixes = 0;

  beforeAll(async () => {
    if (TOPOLOGY === 'cluster') cluster = await RedisCluster.start();
    else server = await RedisServer.start(serverArgs);
  }, 60_000);
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    for (const c of clients.splice(0)) c.disconnect();
  });
  afterAll(async () => {
    await server?.stop();
    await cluster?.stop();
  });

  const track = <C extends Redis | Cluster>(client: C): C => {
    clients.push(client);
    return client;
  };

  const harness = {
    topology: TOPOLOGY,
    /** The single redis-server; tests that kill, restart or proxy it run on a single server only. */
    get server(): RedisServer {
      if (!server) throw new Error('this test needs a single redis-server (REDIS_TOPOLOGY=single)');
      return server;
    },
    /** A fresh key prefix, so tests in one file never see each other's events. */
    prefix(): string {
      return `t${++prefixes}`;
    },
    /** What a service connects with: the server's URL, or a new Cluster client. */
    connection(): string | Cluster {
      return cluster ? track(cluster.client()) : harness.server.url;
    },
    /** A service with test-friendly timings; pass `prefix` to share a queue between services. */
    service(options: Partial<DelayedEventServiceOptions> = {}): DelayedEventService {
      const service = new DelayedEventService({
        redis: harness.connection(),
        prefix: harness.prefix(),
        pollIntervalMs: 200,
        readerBlockMs: 1_000,
        watchdogGraceMs: 1_000,
        closeTimeoutMs: 5_000,
        ...options,
      });
      services.push(service);
      return service;
    },
    /** Environment for a service in a child process (test/support/worker-process.ts) to reach this Redis. */
    workerEnv(): Record<string, string> {
      return cluster ? { REDIS_CLUSTER_NODES: cluster.startupNodes.map((n) => `${n.host}:${n.port}`).join(',') } : { REDIS_URL: harness.server.url };
    },
    /** A plain client to look at (or tamper with) the keys of one type; on a cluster it routes by key. */
    client(): Redis {
      // Both expose the same key commands; the tests only use commands on keys of one slot.
      return (cluster ? track(cluster.client()) : track(new Redis(harness.server.url))) as Redis;
    },
    /** A client on each master: the single server, or every master of the cluster. */
    async masters(): Promise<Redis[]> {
      if (!cluster) return [track(new Redis(harness.server.url))];
      const client = track(cluster.client());
      // Before 'ready' the node list still holds startup connections the slot refresh replaces.
      if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
      return client.nodes('master');
    },
    /** Empties Redis's script cache on every master, as a restart or a failover to a fresh replica does. */
    async flushScripts(): Promise<void> {
      await Promise.all((await harness.masters()).map((master) => master.script('FLUSH')));
    },
    /**
     * Every key under `prefix` with its DUMP: equal snapshots mean nothing
     * changed. The activity counts (`:a:<slot>`) are left out: running
     * services add to them in the background every 10 s; so are the heartbeat
     * sets (`:hl`), which running calls' instances renew every heartbeatMs.
     */
    async snapshot(prefix: string): Promise<Record<string, string>> {
      const client = harness.client();
      const keys = (await harness.keys(`${prefix}:*`)).filter((key) => !/:a:\d+$/.test(key) && !key.endsWith(':hl'));
      const dumps = await Promise.all(keys.map((key) => client.dumpBuffer(key)));
      return Object.fromEntries(keys.map((key, i) => [key, dumps[i]?.toString('hex') ?? '']));
    },
    /** Every key matching `pattern`, from every master on a cluster. */
    async keys(pattern: string): Promise<string[]> {
      const perMaster = await Promise.all((await harness.masters()).map((master) => master.keys(pattern)));
      return perMaster.flat().sort();
    },
  };
  return harness;
}

/** Collects every metric a service emits while the test runs. */
export function recordMetrics(service: DelayedEventService): Metric[] {
  const seen: Metric[] = [];
  service.metrics$.subscribe((m) => seen.push(m));
  return seen;
}

export function counter(metrics: readonly Metric[], name: string, tags: Record<string, string> = {}): number {
  return metrics.filter((m) => m.name === name && m.kind === 'counter' && Object.entries(tags).every(([k, v]) => m.tags[k] === v)).reduce((sum, m) => sum + m.value, 0);
}

/** Waits until the type's dead-letter set holds exactly `count` events, and returns them. */
export function waitForDeadLetters<T extends DelayedEventInstance>(service: DelayedEventService, eventClass: EventClass<T>, count = 1): Promise<Array<DeadLetter<T>>> {
  return waitFor(async () => {
    const letters = await service.deadLetters(eventClass);
    return letters.length === count && letters;
  }, `${count} dead letter(s)`);
}
