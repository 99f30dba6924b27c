import { describe, expect, it } from 'vitest';
import { type DelayedEventService, fixedBackoff } from '../src';
import { LuaScripts, loadLua } from '../src/redis/lua-scripts';
import { LUA_SOURCES } from '../src/redis/lua-sources.generated';
import { RedisLayout } from '../src/redis/redis-layout';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { leaseScore, leasedIds } from './support/leases';
import { ScheduleView } from './support/schedule';
import { waitFor } from './support/wait-for';

/** The lease of an in-flight event holds its attempt; see lua/includes/lease-constants.lua and docs/redis-layout.md. */
describe('leases', () => {
  const redis = useRedis();

  it('a claim writes only the lease: the stored envelope stays as enqueued while the handler runs', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const keys = `${prefix}:{test.work}`;
    const service = redis.service({ prefix, handlerTimeoutMs: 10_000, leaseGraceMs: 1_000 });
    await service.enqueue(new WorkItem('held', 1), 0);
    const stored = await client.hget(`${keys}:m`, 'held');
    let release!: () => void;
    const started = new Promise<void>((resolve) => {
      service.addHandler(WorkItem, () => (resolve(), new Promise<boolean>((done) => (release = () => done(true)))), 1);
    });
    await started;
    const claimedAt = Date.now();
    expect(await client.hget(`${keys}:m`, 'held')).toBe(stored);
    const score = Number(await client.zscore(`${keys}:f`, 'held'));
    // Claimed for a free slot, the lease is written started (its last bit).
    expect(score % 2).toBe(1);
    // Leased for the handler timeout plus the grace, on Redis's clock (the same host here).
    expect(Math.floor(score / 1_000)).toBeGreaterThan(claimedAt + 10_000);
    expect(Math.floor(score / 1_000)).toBeLessThanOrEqual(claimedAt + 11_000);
    release();
    await waitFor(async () => (await client.hlen(`${keys}:m`)) === 0, 'the event completed');
  });

  it('a lease left by 0.2 (its expiry alone, the attempt in the envelope) expires and is redelivered as the next attempt', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const keys = `${prefix}:{test.work}`;
    const service = redis.service({ prefix });
    await service.enqueue(new WorkItem('upgraded', 4), 60_000);
    // 0.2's claim wrote the attempt it started into the envelope, and the lease expiry as the score.
    const envelope = (await client.hget(`${keys}:m`, 'upgraded'))!;
    await client.hset(`${keys}:m`, 'upgraded', envelope.replace(/^\d+\|/, '1|'));
    await new ScheduleView(client, keys).remove('upgraded');
    await client.zadd(`${keys}:f`, Date.now() - 1, 'upgraded');
    const attempts: number[] = [];
    service.addHandler(WorkItem, (e, _c, d) => (attempts.push(d.attempt), e.n === 4), 1);
    await waitFor(async () => (await client.hlen(`${keys}:m`)) === 0, 'the event redelivered and completed');
    expect(attempts).toEqual([2]);
  });

  it('an unexpired lease left by 0.2 is not redelivered early, and a newer lease behind it still expires on time', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const keys = `${prefix}:{test.work}`;
    // A poll interval longer than the test: the dispatcher must wake for the lease expiry it was told of.
    const service = redis.service({ prefix, pollIntervalMs: 60_000 });
    await service.enqueue(new WorkItem('old', 1), 60_000);
    await service.enqueue(new WorkItem('new', 2), 60_000);
    const view = new ScheduleView(client, keys);
    await view.remove('old');
    await view.remove('new');
    const envelope = (await client.hget(`${keys}:m`, 'old'))!;
    await client.hset(`${keys}:m`, 'old', envelope.replace(/^\d+\|/, '1|'));
    const now = Number((await client.time())[0]) * 1_000;
    await client.zadd(`${keys}:f`, now + 60_000, 'old', leaseScore(now + 1_500), 'new');
    const handled: string[] = [];
    service.addHandler(WorkItem, (e) => (handled.push(e.id), true), 1);
    await waitFor(() => handled.length === 1, 'the newer lease expired and was redelivered', 10_000);
    expect(handled).toEqual(['new']);
    expect(await client.zscore(`${keys}:f`, 'old')).toBe(String(now + 60_000));
  });

  it('5,000 expired leases come back in one dispatch of 5,000', async () => {
    const layout = new RedisLayout(redis.prefix());
    const keys = layout.forType('test.work');
    const scripts = new LuaScripts(redis.client(), layout.wakeChannel, { ms: 10_000, onStuck: () => undefined }, 0);
    for (let from = 0; from < 5_000; from += 250) {
      await scripts.enqueue(
        keys,
        Array.from({ length: 250 }, (_, i) => ({ id: `e${from + i}`, body: '[0,{}]', due: { atMs: 1 }, requestedAt: 0 })),
        false,
      );
    }
    expect((await scripts.dispatchDue(keys, 5_000)).movedDue).toBe(5_000);
    // Claimed by a worker that died: every lease has expired already.
    for (let i = 0; i < 5; i++) expect((await scripts.completeAndClaim(keys, [], 1_000, -1_000, 5)).claimed).toHaveLength(1_000);
    expect((await scripts.dispatchDue(keys, 5_000)).movedExpired).toBe(5_000);
    expect(await redis.client().llen(keys.ready)).toBe(5_000);
  });

  it('keeps the leases of events in flight in a skiplist-encoded set, and removes the set with the last lease', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const inFlight = `${prefix}:{test.work}:f`;
    const service = redis.service({ prefix });
    const releases: Array<() => void> = [];
    service.addHandler(WorkItem, () => new Promise<boolean>((done) => releases.push(() => done(true))), 3);
    for (const id of ['a', 'b', 'c']) await service.enqueue(new WorkItem(id), 0);
    await waitFor(() => releases.length === 3, 'three handlers running');
    expect((await leasedIds(client, inFlight)).sort()).toEqual(['a', 'b', 'c']);
    // A listpack would be scanned for every lease a claim adds or a completion removes.
    expect(await client.object('ENCODING', inFlight)).toBe('skiplist');
    releases.forEach((release) => release());
    await waitFor(async () => (await client.hlen(`${prefix}:{test.work}:m`)) === 0, 'all three completed');
    expect(await client.exists(inFlight)).toBe(0);
  });

  const leaseEndings: Array<[string, (service: DelayedEventService) => Promise<unknown>]> = [
    ['the event is cancelled', (service) => service.cancel(WorkItem, 'held')],
    ['the event is replaced', (service) => service.enqueue(new WorkItem('held', 2), 60_000, { replace: true })],
  ];
  it.each(leaseEndings)('removes the in-flight set with its last lease when %s while its handler runs', async (_, end) => {
    const prefix = redis.prefix();
    const client = redis.client();
    const inFlight = `${prefix}:{test.work}:f`;
    const service = redis.service({ prefix });
    let release: (() => void) | undefined;
    service.addHandler(WorkItem, () => new Promise<boolean>((done) => (release = () => done(true))), 1);
    await service.enqueue(new WorkItem('held', 1), 0);
    await waitFor(() => release !== undefined, 'the handler running');
    expect(await leasedIds(client, inFlight)).toEqual(['held']);
    await end(service);
    expect(await client.exists(inFlight)).toBe(0);
    release!();
  });

  it.each([
    ['retried', 3, async (_service: DelayedEventService, client: ReturnType<typeof redis.client>, keys: string) => (await client.hget(`${keys}:e`, 'failing')) !== null],
    ['dead-lettered', 1, async (service: DelayedEventService) => (await service.deadLetters(WorkItem)).length === 1],
  ] as const)('removes the in-flight set with its last lease when a failed event is %s', async (_, attempts, settled) => {
    const prefix = redis.prefix();
    const client = redis.client();
    const keys = `${prefix}:{test.work}`;
    const service = redis.service({ prefix, retry: fixedBackoff(attempts, 60_000) });
    service.addHandler(WorkItem, () => false, 1);
    await service.enqueue(new WorkItem('failing'), 0);
    await waitFor(() => settled(service, client, keys), 'the failure recorded');
    expect(await client.exists(`${keys}:f`)).toBe(0);
  });

  it('removes the in-flight set when its last lease expires and goes back to ready', async () => {
    const client = redis.client();
    const keys = `${redis.prefix()}:{test.work}`;
    const now = Number((await client.time())[0]) * 1_000;
    await client.hset(`${keys}:m`, 'stalled', `0|${now}|[0,{"n":0}]`);
    // As a claim leaves it: the pin first, then a lease that has expired since.
    const { lua, numberOfKeys } = loadLua('complete-and-claim');
    await client.rpush(`${keys}:r`, 'stalled');
    await client.eval(
      lua,
      numberOfKeys,
      `${keys}:r`,
      `${keys}:f`,
      `${keys}:m`,
      `${keys}:d`,
      `${keys}:e`,
      `${keys}:guard`,
      `${keys}:i`,
      `${keys}:c:test`,
      `${keys}:n`,
      `${keys}:m`,
      `${keys}:p`,
      `${keys}:el`,
      `${keys}:h`,
      `${keys}:hi`,
      `${keys}:hl`,
      `${keys}:o`,
      ...LUA_SOURCES['complete-and-claim'].encode({
        most: 1,
        leaseMs: -1_000,
        maxAttempts: 5,
        windowMs: 0,
        token: '',
        startNow: 1,
        keepCount: 0,
        keepAge: 0,
        maxVersion: 1,
        sortsByKey: false,
        agingMs: 60_000,
        heartbeatLeaseMs: 0,
        outcomesMaxLen: 0,
        started: [],
        confirmations: [],
        successes: [],
        results: [],
      }),
    );
    expect(await leasedIds(client, `${keys}:f`)).toEqual(['stalled']);
    const dispatch = loadLua('dispatch-due');
    await client.eval(
      dispatch.lua,
      dispatch.numberOfKeys,
      `${keys}:b`,
      `${keys}:f`,
      `${keys}:r`,
      `${keys}:s`,
      `${keys}:m`,
      `${keys}:guard`,
      `${keys}:i`,
      `${keys}:groups`,
      `${keys}:n`,
      `${keys}:p`,
      `${keys}:e`,
      `${keys}:here`,
      `${keys}:h`,
      `${keys}:hi`,
      `${keys}:m`,
      `${keys}:d`,
      `${keys}:el`,
      `${keys}:gone`,
      `${keys}:hl`,
      ...LUA_SOURCES['dispatch-due'].encode({
        limit: 100,
        defaultHere: false,
        newMarker: '',
        wakeChannel: '',
        queueTag: '',
        markerSeen: false,
        keepAgeMs: 0,
        keepDeadCount: 0,
        keepDeadAge: 0,
        groups: [],
      }),
    );
    expect(await client.lrange(`${keys}:r`, 0, -1)).toEqual(['stalled']);
    expect(await client.exists(`${keys}:f`)).toBe(0);
  });
});
