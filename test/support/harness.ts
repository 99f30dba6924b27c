import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { type DeadLetter, type DelayedEventInstance, DelayedEventService, type DelayedEventServiceOptions, type EventClass, type Metric } from '../../src';
import { RedisServer } from './redis-server';
import { waitFor } from './wait-for';

/**
 * One private redis-server per test file, a fresh prefix per service, and
 * every service and client closed after each test.
 */
export function useRedis(serverArgs: string[] = []) {
  let server: RedisServer | undefined;
  const services: DelayedEventService[] = [];
  const clients: Redis[] = [];
  let prefixes = 0;

  beforeAll(async () => {
    server = await RedisServer.start(serverArgs);
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    for (const c of clients.splice(0)) c.disconnect();
  });
  afterAll(async () => {
    await server?.stop();
  });

  const harness = {
    get server(): RedisServer {
      if (!server) throw new Error('redis-server not started');
      return server;
    },
    /** A fresh key prefix, so tests in one file never see each other's events. */
    prefix(): string {
      return `t${++prefixes}`;
    },
    /** A service with test-friendly timings; pass `prefix` to share a queue between services. */
    service(options: Partial<DelayedEventServiceOptions> = {}): DelayedEventService {
      const service = new DelayedEventService({
        redis: harness.server.url,
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
    /** A plain client to look at (or tamper with) the keys. */
    client(): Redis {
      const client = new Redis(harness.server.url);
      clients.push(client);
      return client;
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
  return metrics
    .filter((m) => m.name === name && m.kind === 'counter' && Object.entries(tags).every(([k, v]) => m.tags[k] === v))
    .reduce((sum, m) => sum + m.value, 0);
}

/** Waits until the type's dead-letter set holds exactly `count` events, and returns them. */
export function waitForDeadLetters<T extends DelayedEventInstance>(service: DelayedEventService, eventClass: EventClass<T>, count = 1): Promise<Array<DeadLetter<T>>> {
  return waitFor(async () => {
    const letters = await service.deadLetters(eventClass);
    return letters.length === count && letters;
  }, `${count} dead letter(s)`);
}
