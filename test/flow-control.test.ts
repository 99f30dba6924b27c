import 'reflect-metadata';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayedEvent, type Delivery, InvalidOptionError, METRIC, RateLimited } from '../src';
import { WorkItem } from './support/events';
import { counter, recordMetrics, useRedis } from './support/harness';
import { waitFor } from './support/wait-for';
import { Worker } from './support/worker';

@DelayedEvent('test.spread', { partitions: 4 })
class Spread {
  constructor(readonly id: string = '') {}
}

/** The most events of `times` (ms) within any window of `windowMs`. */
function busiestWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i]! - sorted[j]! >= windowMs) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** The most calls running at once, from a ledger of [start, end] times. */
function mostAtOnce(ledger: ReadonlyArray<readonly [number, number]>): number {
  const edges = ledger.flatMap(([start, end]) => [[start, 1] as const, [end, -1] as const]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let running = 0;
  let most = 0;
  for (const [, step] of edges) {
    running += step;
    most = Math.max(most, running);
  }
  return most;
}

describe('flow control across the fleet', () => {
  const redis = useRedis();
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });

  it('a rate limit holds across 4 instances in their own processes for 10 s, and the limit is reached', async () => {
    const prefix = redis.prefix();
    for (let i = 0; i < 4; i++) workers.push(new Worker({ ...redis.workerEnv(), PREFIX: prefix, RATE_MAX: '20', RATE_PER_MS: '1000', PARALLELISM: '8' }, 'flow-process.ts'));
    await Promise.all(workers.map((w) => w.waitForLine((l) => l.ready === true)));
    const producer = redis.service({ prefix });
    // Redis's own ledger of the window: each call started, by its clock at the claim (lua/includes/limit-keys.lua).
    // A member stays at least a window long, so reading it every 100 ms misses none.
    const claimedAt = new Map<string, number>();
    let sampling = true;
    const ledger = redis.client();
    const sampler = (async () => {
      while (sampling) {
        const flat = await ledger.zrange(`${prefix}:{test.work}:rl`, '0', '-1', 'WITHSCORES');
        for (let i = 0; i < flat.length; i += 2) claimedAt.set(flat[i]!, Number(flat[i + 1]));
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    await firstValueFrom(producer.enqueueBatch(Array.from({ length: 400 }, (_, i) => ({ event: new WorkItem(`r${i}`), delay: 0 }))));
    const started = () => workers.flatMap((w) => w.lines.filter((l) => typeof l.started === 'string').map((l) => l.at as number));
    const first = await waitFor(() => started().length > 0 && Math.min(...started()), 'the first call');
    await waitFor(() => started().some((at) => at >= first + 11_000), 'over ten seconds of calls', 20_000);
    sampling = false;
    await sampler;
    // By the clock that enforces it, never more than 20 in any second, and the limit reached: 190 to 200 in the
    // first ten seconds. (Starts timed in each process come a few ms after their claims, later still on a loaded
    // machine: they would blur the windows' edges.)
    const claims = [...claimedAt.values()].sort((a, b) => a - b);
    expect(busiestWindow(claims, 1_000)).toBeLessThanOrEqual(20);
    const within = claims.filter((at) => at < claims[0]! + 10_000);
    expect(within.length).toBeGreaterThanOrEqual(190);
    expect(within.length).toBeLessThanOrEqual(200);
    // Every instance took part.
    expect(workers.every((w) => w.lines.some((l) => typeof l.started === 'string'))).toBe(true);
  }, 60_000);

  it('global concurrency is never exceeded across instances (a ledger of start and end times), and room freed wakes them at once', async () => {
    const prefix = redis.prefix();
    const ledger: Array<[number, number]> = [];
    const services = Array.from({ length: 3 }, () => redis.service({ prefix, readerBlockMs: 60_000, pollIntervalMs: 60_000 }));
    for (const service of services) {
      service.addHandler(
        WorkItem,
        async () => {
          const start = performance.now();
          await new Promise((resolve) => setTimeout(resolve, 30));
          ledger.push([start, performance.now()]);
        },
        5,
        { globalConcurrency: 4 },
      );
    }
    const producer = redis.service({ prefix });
    const began = performance.now();
    await firstValueFrom(producer.enqueueBatch(Array.from({ length: 120 }, (_, i) => ({ event: new WorkItem(`c${i}`), delay: 0 }))));
    await waitFor(() => ledger.length === 120, 'every event handled', 20_000);
    expect(mostAtOnce(ledger)).toBeLessThanOrEqual(4);
    expect(mostAtOnce(ledger)).toBe(4);
    // A call's lease goes when its success is written, riding on its reader's next call: a moment after the handler ends.
    await waitFor(async () => (await producer.limits(WorkItem))?.default?.running === 0, 'every lease released');
    expect(await producer.limits(WorkItem)).toEqual({ default: { concurrency: 4, running: 0 } });
    // 30 batches of 4 at 30 ms: no instance waited out its 60-second poll, so wake-ups came when room freed.
    expect(performance.now() - began).toBeLessThan(10_000);
  });

  it('a handler that says its provider rate-limited it holds every instance off, and the event keeps its attempt', async () => {
    const prefix = redis.prefix();
    const starts: Array<{ id: string; attempt: number; at: number }> = [];
    let said = false;
    const services = Array.from({ length: 2 }, () => redis.service({ prefix }));
    const metrics = services.map((s) => recordMetrics(s));
    for (const service of services) {
      service.addHandler(
        WorkItem,
        (event, _context, delivery: Delivery) => {
          starts.push({ id: event.id, attempt: delivery.attempt, at: performance.now() });
          if (!said) {
            said = true;
            delivery.rateLimited(1_500);
            return true;
          }
        },
        2,
      );
    }
    const producer = redis.service({ prefix });
    await producer.enqueue(new WorkItem('first'), 0);
    await waitFor(() => starts.length === 1, 'the first call');
    // From the moment the hold is recorded (the call's result), no instance starts a call.
    await waitFor(async () => (await producer.limits(WorkItem))?.default?.heldForMs !== undefined, 'the hold recorded');
    for (let i = 0; i < 6; i++) await producer.enqueue(new WorkItem(`later${i}`), 0);
    await waitFor(() => starts.length === 8, 'everything handled after the hold', 10_000);
    const heldFrom = starts[0]!.at;
    expect(await producer.limits(WorkItem)).toEqual({});
    expect(starts.slice(1).every((s) => s.at - heldFrom >= 1_400)).toBe(true);
    expect(starts.filter((s) => s.id === 'first').map((s) => s.attempt)).toEqual([1, 1]);
    expect(metrics.reduce((n, m) => n + counter(m, METRIC.rateLimited), 0)).toBe(1);
  });

  it('throwing RateLimited with retryAfterMs does the same; a hold is never negative or endless', async () => {
    const prefix = redis.prefix();
    const starts: number[] = [];
    const service = redis.service({ prefix });
    service.addHandler(WorkItem, (_event, _c, delivery) => {
      starts.push(performance.now());
      if (delivery.attempt === 1 && starts.length === 1) throw new RateLimited(800);
      expect(delivery.attempt).toBe(1);
    });
    await service.enqueue(new WorkItem('429'), 0);
    await waitFor(() => starts.length === 2, 'handled after the hold', 10_000);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(700);
    expect(RateLimited.holdOf(new RateLimited(-5))).toBe(1_000);
    expect(RateLimited.holdOf(new RateLimited(Number.POSITIVE_INFINITY))).toBe(1_000);
    expect(RateLimited.holdOf(new RateLimited(10 * 86_400_000))).toBe(1_000);
    expect(RateLimited.holdOf(new Error('x'))).toBeUndefined();
  });

  it('refuses limits that cannot work, saying what to fix; the limits registered last are the ones enforced', async () => {
    const service = redis.service();
    expect(() => service.addHandler(WorkItem, () => true, 1, { rateLimit: { max: 0, perMs: 1_000 } })).toThrow(InvalidOptionError);
    expect(() => service.addHandler(WorkItem, () => true, 1, { rateLimit: { max: 5, perMs: 0 } })).toThrow(/rateLimit.perMs/);
    expect(() => service.addHandler(WorkItem, () => true, 1, { rateLimit: null as never })).toThrow(/must be \{ max, perMs \}/);
    expect(() => service.addHandler(WorkItem, () => true, 1, { globalConcurrency: 1.5 })).toThrow(/globalConcurrency/);
    // Each partition enforces its share: a limit below the partitions could not be kept.
    expect(() => service.addHandler(Spread, () => true, 1, { globalConcurrency: 3 })).toThrow(/below the type's 4 partitions/);
    expect(() => service.addHandler(Spread, () => true, 1, { rateLimit: { max: 2, perMs: 1_000 } })).toThrow(/rateLimit.max/);
    const prefix = redis.prefix();
    const logged: string[] = [];
    const first = redis.service({ prefix });
    first.addHandler(WorkItem, () => true, 1, { globalConcurrency: 2 });
    await waitFor(async () => (await redis.client().hget(`${prefix}:{test.work}:fc`, 'conc')) === '2', 'the first limits stored');
    const second = redis.service({ prefix, logger: { warn: (_f: object, m: string) => logged.push(m), error: () => undefined } });
    second.addHandler(WorkItem, () => true, 1, { globalConcurrency: 3 });
    await waitFor(async () => (await redis.client().hget(`${prefix}:{test.work}:fc`, 'conc')) === '3', 'the last limits stored');
    await waitFor(() => logged.some((m) => /other flow limits/.test(m)), 'the change said');
  });
});

@DelayedEvent('test.tenant-job')
class TenantJob {
  constructor(
    readonly id: string = '',
    readonly tenant: string = '',
  ) {}
}

describe('fair sharing per key', () => {
  const redis = useRedis();

  it("a hot key's backlog does not starve a cold key, and each key stays within its own limits", async () => {
    const prefix = redis.prefix();
    const ledger: Array<{ tenant: string; start: number; end: number }> = [];
    const order: string[] = [];
    const services = Array.from({ length: 2 }, () => redis.service({ prefix }));
    for (const service of services) {
      service.addHandler(
        TenantJob,
        async (job) => {
          const start = performance.now();
          order.push(job.tenant);
          await new Promise((resolve) => setTimeout(resolve, 2));
          ledger.push({ tenant: job.tenant, start, end: performance.now() });
        },
        4,
        { key: (job) => job.tenant, perKey: { globalConcurrency: 2 } },
      );
    }
    const producer = redis.service({ prefix });
    await firstValueFrom(producer.enqueueBatch(Array.from({ length: 3_000 }, (_, i) => ({ event: new TenantJob(`hot${i}`, 'hot'), delay: 0 }))));
    await producer.enqueue(new TenantJob('cold0', 'cold'), 0);
    await waitFor(() => order.includes('cold'), 'the cold key handled', 30_000);
    // Behind 3,000 of the hot key's events, the cold one waited for a few turns at most.
    const hotBefore = order.indexOf('cold');
    expect(hotBefore).toBeLessThan(300);
    await waitFor(() => ledger.length === 3_001, 'everything handled', 60_000);
    const hot = ledger.filter((l) => l.tenant === 'hot').map((l) => [l.start, l.end] as [number, number]);
    expect(mostAtOnce(hot)).toBeLessThanOrEqual(2);
    expect(await producer.counts(TenantJob)).toMatchObject({ scheduled: 0, ready: 0, dead: 0 });
  }, 90_000);

  it('instances without the key option still handle new events once the instances that shared them out per key stopped', async () => {
    const prefix = redis.prefix();
    const handled: string[] = [];
    const plain = redis.service({ prefix });
    plain.addHandler(TenantJob, (job) => void handled.push(job.id), 4);
    await plain.enqueue(new TenantJob('probe', 'a'), 0);
    await waitFor(() => handled.includes('probe'), 'the instance without the key option handling');
    // Started last, so its setting is the one stored: the queue is shared out per key.
    const keyed = redis.service({ prefix });
    keyed.addHandler(TenantJob, (job) => void handled.push(job.id), 4, { key: (job) => job.tenant, perKey: { globalConcurrency: 1 } });
    await waitFor(async () => (await plain.limits(TenantJob))?.default?.perKey !== undefined, 'the per-key setting stored');
    await keyed.close();
    for (let i = 0; i < 5; i++) await plain.enqueue(new TenantJob(`t${i}`, 'a'), 0);
    await waitFor(() => handled.filter((id) => id.startsWith('t')).length === 5, 'the new events handled by the instance left', 10_000);
  });

  it('counts, finds and cancels an event waiting in its key’s list', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const held: Array<() => void> = [];
    service.addHandler(TenantJob, () => new Promise<boolean>((resolve) => held.push(() => resolve(true))), 4, { key: (job) => job.tenant, perKey: { globalConcurrency: 1 } });
    const firstStored = Date.now();
    for (let i = 0; i < 3; i++) await service.enqueue(new TenantJob(`a${i}`, 'a'), 0);
    await waitFor(async () => held.length === 1 && (await service.counts(TenantJob))?.ready === 2, 'one running, two waiting in the key');
    expect((await service.find(TenantJob, 'a2'))?.state).toBe('ready');
    // The ready list itself is empty: how long the oldest has waited comes from its key's list.
    const waited = (await service.counts(TenantJob))?.oldestReadyMs;
    expect(waited).toBeGreaterThanOrEqual(0);
    expect(waited).toBeLessThanOrEqual(Date.now() - firstStored + 50);
    expect(await service.limits(TenantJob)).toEqual({ default: { perKey: { concurrency: 1 }, running: 1, keysWaiting: 1, keys: [{ key: 'a', waiting: 2, running: 1 }] } });
    expect(await service.cancel(TenantJob, 'a2')).toBe(true);
    expect((await service.counts(TenantJob))?.ready).toBe(1);
    held.splice(0).forEach((release) => release());
    await waitFor(() => held.length === 1, 'the next of the key started once the first ended');
    held.splice(0).forEach((release) => release());
    await waitFor(async () => (await service.counts(TenantJob))?.inFlight === 0, 'done');
    expect(await service.counts(TenantJob)).toEqual({ scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
  });

  it('refuses perKey without key, and a key that is not a function', () => {
    const service = redis.service();
    expect(() => service.addHandler(TenantJob, () => true, 1, { perKey: { globalConcurrency: 1 } })).toThrow(/perKey.*needs key/);
    expect(() => service.addHandler(TenantJob, () => true, 1, { key: 'tenant' as never })).toThrow(/key.*must be a function/);
    expect(() => service.addHandler(TenantJob, () => true, 1, { key: (j) => j.tenant, perKey: { globalConcurrency: 0 } })).toThrow(/perKey.globalConcurrency/);
  });
});
