import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, type DelayedEventService, fixedBackoff } from '../src';
import { LuaScripts } from '../src/redis/lua-scripts';
import { RedisLayout, partitionOf } from '../src/redis/redis-layout';
import { useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';
import { busiestWindow } from './support/windows';

const TYPE = 'test.resized';

// The same event type as three deploys declare it: unpartitioned, then over 8 partitions, then back.
@DelayedEvent(TYPE)
class Resized1 {
  constructor(readonly id: string = '') {}
}
@DelayedEvent(TYPE, { partitions: 8 })
class Resized8 {
  constructor(readonly id: string = '') {}
}
@DelayedEvent(TYPE)
class ResizedBack {
  constructor(readonly id: string = '') {}
}

// A type with a rate limit, as two deploys declare it: 1 partition, then 4.
const LIMITED = 'test.limited-resized';
@DelayedEvent(LIMITED)
class Limited1 {
  constructor(readonly id: string = '') {}
}
@DelayedEvent(LIMITED, { partitions: 4 })
class Limited4 {
  constructor(readonly id: string = '') {}
}

/** A handler that records each call, fails ids starting 'dead', and holds ids starting 'slow' until released. */
function recorder() {
  const calls: string[] = [];
  const held: Array<() => void> = [];
  const handle = (e: { id: string }) => {
    calls.push(e.id);
    if (e.id.startsWith('dead')) return false;
    if (e.id.startsWith('slow')) return new Promise<boolean>((resolve) => held.push(() => resolve(true)));
    return true;
  };
  return { calls, held, handle };
}

describe('changing a type’s partitions without draining', () => {
  const redis = useRedis();

  async function expectAllThere(service: DelayedEventService, eventClass: typeof Resized1 | typeof Resized8, scheduled: number, dead: number) {
    await waitFor(
      async () => {
        const c = await service.counts(eventClass);
        return c?.scheduled === scheduled && c.dead === dead && c.ready === 0 && c.inFlight === 0;
      },
      `${scheduled} scheduled and ${dead} dead in the new partitions`,
      30_000,
    );
    for (let i = 0; i < scheduled; i += 7) expect((await service.find(eventClass, `later${i}`))?.state).toBe('scheduled');
  }

  it('moves events in every state from 1 partition to 8 and back, none lost, none handled twice', async () => {
    const prefix = redis.prefix();
    const options = { prefix, retry: fixedBackoff(1, 0), handlerTimeoutMs: 30_000 };
    // Deploy 1: one partition. Scheduled events, dead letters, one in flight and some ready behind it.
    const one = redis.service(options);
    const first = recorder();
    for (let i = 0; i < 40; i++) await one.enqueue(new Resized1(`later${i}`), 3_600_000);
    await one.schedule('hourly', new Resized1(''), { every: { hours: 1 } });
    for (let i = 0; i < 5; i++) await one.enqueue(new Resized1(`dead${i}`), 0);
    one.addHandler(Resized1, first.handle, 1, { prefetch: 0 });
    await waitForDeadLetters(one, Resized1, 5);
    await one.enqueue(new Resized1('slow0'), 0);
    await waitFor(() => first.held.length === 1, 'the slow event running');
    for (let i = 0; i < 10; i++) await one.enqueue(new Resized1(`ready${i}`), 0);
    await waitFor(async () => (await one.counts(Resized1))?.ready === 10, 'ten ready behind it');

    // Deploy 2 starts beside it with 8 partitions: it moves everything not in flight, and handles the ready ones.
    const eight = redis.service(options);
    const second = recorder();
    eight.addHandler(Resized8, second.handle, 4);
    await waitFor(() => second.calls.filter((id) => id.startsWith('ready')).length === 10, 'the ready events handled after their move', 30_000);
    first.held.splice(0).forEach((release) => release());
    await one.close();
    await expectAllThere(eight, Resized8, 40, 5);
    expect((await eight.deadLetters(Resized8)).map((d) => d.id).sort()).toEqual(['dead0', 'dead1', 'dead2', 'dead3', 'dead4']);
    await waitFor(async () => (await eight.schedules(Resized8)).map((s) => s.name).join() === 'hourly', 'the schedule moved with them');

    // Deploy 3 goes back to one partition while deploy 2 still runs.
    const back = redis.service(options);
    const third = recorder();
    back.addHandler(ResizedBack, third.handle, 4);
    for (let i = 0; i < 10; i++) await eight.enqueue(new Resized8(`late${i}`), 0);
    await waitFor(() => [...second.calls, ...third.calls].filter((id) => id.startsWith('late')).length === 10, 'events of the old setting handled');
    await eight.close();
    await expectAllThere(back, ResizedBack, 40, 5);
    await waitFor(async () => (await back.schedules(ResizedBack)).map((s) => s.name).join() === 'hourly', 'the schedule moved back');

    const all = [...first.calls, ...second.calls, ...third.calls];
    const handled = all.filter((id) => !id.startsWith('later'));
    expect(new Set(handled).size).toBe(handled.length);
    expect(all.filter((id) => id.startsWith('later'))).toEqual([]);
    expect(handled.sort()).toEqual(
      [...['dead0', 'dead1', 'dead2', 'dead3', 'dead4'], ...Array.from({ length: 10 }, (_, i) => `late${i}`), ...Array.from({ length: 10 }, (_, i) => `ready${i}`), 'slow0'].sort(),
    );
    // Nothing stays in the partitions no one reads.
    const client = redis.client();
    for (let p = 0; p < 8; p++) expect(await client.exists(`${prefix}:{${TYPE}#${p}}:m`, `${prefix}:{${TYPE}#${p}}:mv`)).toBe(0);
  });
});

describe('the steps of a move', () => {
  const redis = useRedis();

  it('stores a move once, however often it is sent, even after the event was handled; drops only its own moving records', async () => {
    const prefix = redis.prefix();
    const producer = redis.service({ prefix });
    await producer.enqueue(new Resized1('x'), 3_600_000);
    const client = redis.client();
    const layout = new RedisLayout(prefix);
    const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 5_000, onStuck: () => undefined }, 300_000);
    const source = layout.forType(TYPE);
    const target = layout.forType(TYPE, partitionOf('x', 8));
    const [taken] = await scripts.migrateOut(source, 'T1', ['x']);
    expect(taken?.id).toBe('x');
    expect(await client.hexists(source.meta, 'x')).toBe(0);
    expect(await scripts.migrateIn(target, 'T1', [taken!.record])).toBe(1);
    // Handled there meanwhile (its record and mark gone), then the same move sent again: nothing comes back.
    await client.hdel(target.meta, 'x');
    await client.del(target.schedule);
    expect(await scripts.migrateIn(target, 'T1', [taken!.record])).toBe(0);
    expect(await client.hexists(target.meta, 'x')).toBe(0);
    // A newer move of the same id keeps its record when the older move's is dropped.
    await client.hset(source.moving, 'x', `T2|${Date.now()}|{}`);
    expect(await scripts.migrateDone(source, 'T1', ['x'])).toBe(0);
    expect(await client.hget(source.moving, 'x')).toMatch(/^T2\|/);
    expect(await scripts.migrateDone(source, 'T2', ['x'])).toBe(1);
  });

  it('an id handled or cancelled in its new partition within the window is a duplicate there', async () => {
    const prefix = redis.prefix();
    const producer = redis.service({ prefix });
    await producer.enqueue(new Resized1('y'), 3_600_000);
    const client = redis.client();
    const layout = new RedisLayout(prefix);
    const scripts = new LuaScripts(client, layout.wakeChannel, { ms: 5_000, onStuck: () => undefined }, 300_000);
    const target = layout.forType(TYPE, partitionOf('y', 8));
    await client.zadd(target.recent, Date.now() + 60_000, 'y');
    const [taken] = await scripts.migrateOut(layout.forType(TYPE), 'T3', ['y']);
    expect(await scripts.migrateIn(target, 'T3', [taken!.record])).toBe(0);
  });
  it('a rate limit holds in every 1-s window while instances of both settings run and events move', async () => {
    const prefix = redis.prefix();
    const limits = { rateLimit: { max: 4, perMs: 1_000 } };
    // Redis's own ledger of starts (each claim's time, lua/includes/limit-keys.lua), in every queue of both
    // settings; a member stays at least a window long, so reading every 100 ms misses none.
    const ledgers = [`${prefix}:{${LIMITED}}:rl`, ...[0, 1, 2, 3].map((p) => `${prefix}:{${LIMITED}#${p}}:rl`)];
    const startedAt = new Map<string, number>();
    let sampling = true;
    const sampleOnce = async () => {
      for (const ledger of ledgers) {
        const flat = await redis.client().zrange(ledger, '0', '-1', 'WITHSCORES');
        for (let i = 0; i < flat.length; i += 2) startedAt.set(`${ledger} ${flat[i]}`, Number(flat[i + 1]));
      }
    };
    const sampler = (async () => {
      while (sampling) {
        await sampleOnce();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const handledBy = { one: 0, four: 0 };
    const one = redis.service({ prefix, pollIntervalMs: 200 });
    one.addHandler(Limited1, () => void handledBy.one++, 8, limits);
    for (let i = 0; i < 40; i++) await one.enqueue(new Limited1(`a${i}`), 0);
    await waitFor(() => handledBy.one >= 4, 'the old setting handling at its limit');
    // The new setting starts while the old one claims at its full budget, and both keep getting new events.
    const four = redis.service({ prefix, pollIntervalMs: 200 });
    four.addHandler(Limited4, () => void handledBy.four++, 8, limits);
    for (let i = 0; i < 20; i++) {
      await one.enqueue(new Limited1(`b${i}`), 0);
      await four.enqueue(new Limited4(`c${i}`), 0);
    }
    await waitFor(() => handledBy.four >= 8, 'the new setting handling once the old one is paused', 20_000);
    sampling = false;
    await sampler;
    await sampleOnce();
    const starts = [...startedAt.values()];
    expect(starts.length).toBeGreaterThanOrEqual(12);
    // Every call that started was counted in a ledger: none bypassed the limits.
    expect(starts.length).toBeGreaterThanOrEqual(handledBy.one + handledBy.four);
    expect(busiestWindow(starts, 1_000)).toBeLessThanOrEqual(4);
    await one.close();
    await four.close();
  }, 60_000);
});
