import 'reflect-metadata';
import { firstValueFrom } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { DelayedEvent, InvalidArgumentError, METRIC, fixedBackoff } from '../src';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { OrderCheckV1, OrderCheckV2, OrderCheckV3, OrderCheckV3Broken, VERSIONED_TYPE, orderCheck } from './support/versioned-events';
import { waitFor } from './support/wait-for';
import { Worker, type WorkerLine } from './support/worker';

const metaKey = (prefix: string) => `${prefix}:{${VERSIONED_TYPE}}:m`;

describe('versioned event classes', () => {
  const redis = useRedis();
  const workers: Worker[] = [];
  const deploy = (version: 1 | 2 | 3, prefix: string, env: Record<string, string>) => {
    const worker = new Worker({ ...redis.workerEnv(), PREFIX: prefix, VERSION: String(version), ...env }, 'versioned-process.ts');
    workers.push(worker);
    return worker;
  };
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.kill()));
  });
  const handled = (worker: Worker) => worker.lines.filter((l): l is WorkerLine & { handled: string; attempt: number; cents: number } => typeof l.handled === 'string');

  it('stores a version-1 body as before (no byte more) and a later version behind its number', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    await service.enqueue(new OrderCheckV1('a', 5), 60_000);
    await service.enqueue(new OrderCheckV3('b', { cents: 5, currency: 'EUR' }), 60_000);
    const client = redis.client();
    expect(await client.hget(metaKey(prefix), 'a')).toMatch(/^0\|\d+\|\[\d+,\{"amount":5\}\]$/);
    expect(await client.hget(metaKey(prefix), 'b')).toMatch(/^0\|\d+\|3\|\[\d+,\{"money":\{"cents":5,"currency":"EUR"\}\}\]$/);
  });

  it('refuses a version or upcasters that cannot work, saying what to fix', () => {
    expect(() => DelayedEvent('test.bad', { version: 0 })).toThrow(InvalidArgumentError);
    expect(() => DelayedEvent('test.bad', { version: 2.5 })).toThrow(/version must be an integer from 1/);
    expect(() => DelayedEvent('test.bad', { version: 2, upcast: { 2: (v) => v } })).toThrow(/upcast\[2\].*from 1 to 1/);
    expect(() => DelayedEvent('test.bad', { version: 2, upcast: { 1: 'nope' as never } })).toThrow(/upcast\[1\] must be a function/);
  });

  it('a version-3 consumer, in its own process, handles what version 1 stored, through the upcasters', async () => {
    const prefix = redis.prefix();
    const producer = deploy(1, prefix, { PRODUCE: '50' });
    await producer.waitForLine((l) => l.produced === 50);
    const consumer = deploy(3, prefix, { HANDLE: '1' });
    await waitFor(() => new Set(handled(consumer).map((l) => l.handled)).size === 50, 'all v1 events handled by v3', 30_000);
    for (const line of handled(consumer)) expect(line.cents).toBe(Number(line.handled.slice('v1-'.length)));
    expect(handled(consumer).every((l) => l.attempt === 1)).toBe(true);
    const inspector = redis.service({ prefix });
    await waitFor(async () => (await inspector.counts(OrderCheckV3))?.inFlight === 0, 'all completed');
    expect(await inspector.counts(OrderCheckV3)).toEqual({ scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
  });

  it('a version-2 consumer beside a version-3 producer leaves the v3 events alone, spending no attempt, until a v3 consumer takes them', async () => {
    const prefix = redis.prefix();
    const older = deploy(2, prefix, { HANDLE: '1' });
    await older.waitForLine((l) => l.ready === true);
    const producer = deploy(3, prefix, { PRODUCE: '30' });
    await producer.waitForLine((l) => l.produced === 30);
    const v2producer = deploy(2, prefix, { PRODUCE: '10' });
    await v2producer.waitForLine((l) => l.produced === 10);
    const inspector = redis.service({ prefix });
    // The v2 events are handled by v2; the v3 ones wait, counted, for an instance that reads them.
    await waitFor(() => handled(older).length === 10, 'v2 events handled by v2', 30_000);
    await waitFor(async () => (await inspector.counts(OrderCheckV3))?.awaitingNewerVersion === 30, 'v3 events left for a v3 reader', 30_000);
    expect(handled(older).every((l) => l.handled.startsWith('v2-'))).toBe(true);
    await older.waitForLine((l) => l.metric === METRIC.leftForNewerVersion);
    const waiting = await inspector.find(OrderCheckV3, 'v3-7');
    expect(waiting).toMatchObject({ state: 'ready', attempt: 0 });
    expect(waiting?.event).toEqual(new OrderCheckV3('v3-7', { cents: 7, currency: 'EUR' }));
    expect(await inspector.deadLetters(OrderCheckV3)).toEqual([]);

    const newer = deploy(3, prefix, { HANDLE: '1' });
    await waitFor(() => new Set(handled(newer).map((l) => l.handled)).size === 30, 'v3 events handled by v3', 30_000);
    expect(handled(newer).every((l) => l.handled.startsWith('v3-') && l.attempt === 1 && l.cents === Number(l.handled.slice(3)))).toBe(true);
    expect(handled(older).some((l) => l.handled.startsWith('v3-'))).toBe(false);
    await waitFor(async () => (await inspector.counts(OrderCheckV3))?.inFlight === 0, 'all completed');
    expect(await inspector.counts(OrderCheckV3)).toEqual({ scheduled: 0, ready: 0, inFlight: 0, dead: 0, waiting: 0 });
  });

  it('health() warns of events no running instance can read, once they waited newerVersionWarnMs, and stops once one reads them', async () => {
    const prefix = redis.prefix();
    const older = redis.service({ prefix, newerVersionWarnMs: 200 });
    older.addHandler(OrderCheckV2, () => true);
    const producer = redis.service({ prefix });
    for (let i = 0; i < 3; i++) await producer.enqueue(new OrderCheckV3(`n${i}`, { cents: i, currency: 'EUR' }), 0);
    const warned = await waitFor(async () => (await older.health()).awaitingNewerVersion, 'the warning');
    expect(warned).toEqual([{ type: VERSIONED_TYPE, group: 'default', version: 3, events: 3, waitingMs: expect.any(Number) }]);
    expect(warned[0]!.waitingMs).toBeGreaterThanOrEqual(200);
    expect((await older.health()).ready).toBe(true);
    const newer = redis.service({ prefix });
    const seen: string[] = [];
    newer.addHandler(OrderCheckV3, (e) => {
      seen.push(e.id);
      return true;
    });
    await waitFor(() => seen.length === 3, 'read by the newer instance');
    await waitFor(async () => (await older.health()).awaitingNewerVersion === undefined, 'the warning gone');
  });

  it('an event left for a newer version can be run now, rescheduled or cancelled, also after upgradeStored rewrote it, and leaves nothing behind', async () => {
    const prefix = redis.prefix();
    const older = redis.service({ prefix });
    older.addHandler(OrderCheckV1, () => true);
    const v2 = redis.service({ prefix });
    for (const id of ['a', 'b', 'c']) await v2.enqueue(new OrderCheckV2(id, 5), 0);
    await waitFor(async () => (await older.counts(OrderCheckV2))?.awaitingNewerVersion === 3, 'left for v2');
    expect((await v2.upgradeStored(OrderCheckV3)).upgraded).toBe(3);
    expect((await v2.find(OrderCheckV3, 'a'))?.state).toBe('ready');
    expect(await v2.cancel(OrderCheckV3, 'a')).toBe(true);
    expect(await v2.reschedule(OrderCheckV3, 'b', 3_600_000)).toBe(true);
    expect((await v2.find(OrderCheckV3, 'b'))?.state).toBe('scheduled');
    expect(await v2.counts(OrderCheckV3)).toMatchObject({ scheduled: 1, awaitingNewerVersion: 1 });
    // Left again after it falls due: the v1 reader cannot read it; the newer reader takes it.
    const seen: string[] = [];
    const newer = redis.service({ prefix });
    newer.addHandler(OrderCheckV3, (e) => {
      seen.push(e.id);
      return true;
    });
    await waitFor(() => seen.includes('c'), 'the waiting one handled');
    expect(await v2.runNow(OrderCheckV3, 'b')).toBe(true);
    await waitFor(() => seen.includes('b'), 'run now, handled');
    expect(seen.sort()).toEqual(['b', 'c']);
    await waitFor(async () => (await redis.keys(`${prefix}:{${VERSIONED_TYPE}}:v*`)).length === 0, 'no list left behind');
  });

  it('verifyStored reads every state and the schedule templates, finds a planted incompatible body, and changes nothing', async () => {
    const prefix = redis.prefix();
    const v1 = redis.service({ prefix });
    const v2 = redis.service({ prefix });
    for (let i = 0; i < 20; i++) await v1.enqueue(new OrderCheckV1(`s${i}`, i), 60_000);
    await v2.enqueue(new OrderCheckV2('due', 3), 0);
    await v2.enqueue(new OrderCheckV2('bad', 0), 60_000);
    await v1.schedule('nightly', new OrderCheckV1('', 9), { every: { hours: 1 } });
    // What a buggy v2 writer stored: amountCents not a number, which the v2 -> v3 step refuses.
    const client = redis.client();
    const stored = (await client.hget(metaKey(prefix), 'bad'))!;
    await client.hset(metaKey(prefix), 'bad', stored.replace('"amountCents":0', '"amountCents":"zero"'));
    const before = await redis.snapshot(prefix);
    const checker = redis.service({ prefix });
    const report = await checker.verifyStored(OrderCheckV3);
    expect(report.checked).toBe(23);
    expect(report.byVersion).toEqual({ 1: 21, 2: 2 });
    expect(report.failures).toEqual([{ id: 'bad', state: 'scheduled', version: 2, error: expect.stringMatching(/upcast\[2\].*amountCents must be a number/) }]);
    expect(await checker.verifyStored(OrderCheckV3, { limit: 5 })).toMatchObject({ byVersion: expect.any(Object) });
    expect((await checker.verifyStored(OrderCheckV3, { limit: 5 })).checked).toBe(6);
    // A deploy without its upcasters would read none of them.
    const broken = await checker.verifyStored(OrderCheckV3Broken);
    expect(broken.failures.length).toBe(23);
    expect(broken.failures.find((f) => f.id === 'nightly')).toEqual({ id: 'nightly', state: 'template', version: 1, error: expect.stringMatching(/no upcast\[1\]/) });
    expect(await redis.snapshot(prefix)).toEqual(before);
    await expect(checker.verifyStored(OrderCheckV3, { limit: 0 })).rejects.toThrow(InvalidArgumentError);
    await expect(checker.verifyStored(OrderCheckV3, { group: '..' })).rejects.toThrow(InvalidArgumentError);
    expect(await checker.versions(VERSIONED_TYPE)).toEqual({ events: 22, byVersion: { 1: 20, 2: 2 }, schedules: { 1: 1 } });
  });

  it('upgradeStored rewrites older bodies and templates at the current version, keeping state and attempts, and is idempotent', async () => {
    const prefix = redis.prefix();
    const v1 = redis.service({ prefix, retry: fixedBackoff(1, 0) });
    for (let i = 0; i < 30; i++) await v1.enqueue(new OrderCheckV1(`s${i}`, i), 60_000);
    await v1.schedule('nightly', new OrderCheckV1('', 9), { every: { hours: 1 } });
    await v1.enqueue(new OrderCheckV1('fails', 8), 0);
    v1.addHandler(OrderCheckV1, () => false);
    await waitForDeadLetters(v1, OrderCheckV1);
    await v1.removeHandler(OrderCheckV1);
    const v3 = redis.service({ prefix });
    const report = await v3.upgradeStored(OrderCheckV3);
    expect(report).toEqual({ checked: 32, upgraded: 32, failures: [] });
    expect(await v3.versions(VERSIONED_TYPE)).toEqual({ events: 31, byVersion: { 3: 31 }, schedules: { 3: 1 } });
    expect((await v3.find(OrderCheckV3, 's7'))?.event).toEqual(new OrderCheckV3('s7', { cents: 7, currency: 'EUR' }));
    expect(await v3.counts(OrderCheckV3)).toEqual({ scheduled: 30, ready: 0, inFlight: 0, dead: 1, waiting: 0 });
    const [letter] = await v3.deadLetters(OrderCheckV3);
    expect(letter).toMatchObject({ id: 'fails', attempts: 1, event: new OrderCheckV3('fails', { cents: 8, currency: 'EUR' }) });
    expect(await v3.upgradeStored(OrderCheckV3)).toEqual({ checked: 32, upgraded: 0, failures: [] });
    // The template's occurrences are written at version 3 now.
    const template = JSON.parse((await redis.client().hget(`${prefix}:{${VERSIONED_TYPE}}:sched`, 'nightly'))!) as { eventVersion: number; payload: unknown };
    expect(template).toMatchObject({ eventVersion: 3, payload: { money: { cents: 9, currency: 'EUR' } } });
  });

  it('upgradeStored, killed midway while handlers run, leaves every event readable once; run again, it finishes the rest', async () => {
    const prefix = redis.prefix();
    const total = 40_000;
    const producer = redis.service({ prefix });
    for (let i = 0; i < total; i += 5_000) {
      await firstValueFrom(producer.enqueueBatch(Array.from({ length: 5_000 }, (_, k) => ({ event: new OrderCheckV1(`e${i + k}`, i + k), delay: 3_600_000 }))));
    }
    // Load: v3 handlers take events falling due while their bodies are rewritten.
    const handler = redis.service({ prefix });
    const seen = new Map<string, number>();
    handler.addHandler(
      OrderCheckV3,
      (e) => {
        seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
        if (e.cents() !== Number(e.id.slice(1))) throw new Error(`read ${e.cents()} for ${e.id}`);
        return true;
      },
      8,
    );
    const due = Array.from({ length: 200 }, (_, k) => `e${k * 97}`);
    const upgrader = deploy(3, prefix, { UPGRADE: '1' });
    for (const id of due) await producer.runNow(OrderCheckV1, id);
    const client = redis.client();
    await waitFor(
      async () => {
        const sample = (await client.hrandfield(metaKey(prefix), 200, 'WITHVALUES')) as string[];
        return sample.some((value, i) => i % 2 === 1 && /^\d+\|\d+\|3\|/.test(value));
      },
      'some bodies upgraded',
      30_000,
      5,
    );
    await upgrader.kill('SIGKILL');
    expect(upgrader.lines.some((l) => l.upgraded !== undefined)).toBe(false);
    const midway = await handler.versions(VERSIONED_TYPE);
    expect(midway?.byVersion[1]).toBeGreaterThan(0);
    expect(midway?.byVersion[3]).toBeGreaterThan(0);
    await waitFor(() => due.every((id) => seen.has(id)), 'the due events handled', 30_000);
    const after = await handler.verifyStored(OrderCheckV3);
    expect(after.failures).toEqual([]);
    expect(after.checked).toBe(total - due.length);
    const rest = await handler.upgradeStored(OrderCheckV3);
    expect(rest.failures).toEqual([]);
    expect(rest.upgraded).toBeGreaterThan(0);
    expect(rest.upgraded).toBeLessThan(total);
    expect(await handler.versions(VERSIONED_TYPE)).toEqual({ events: total - due.length, byVersion: { 3: total - due.length } });
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    expect(seen.size).toBe(due.length);
    expect((await handler.find(OrderCheckV3, 'e12345'))?.event).toEqual(new OrderCheckV3('e12345', { cents: 12345, currency: 'EUR' }));
  });

  it('dead-letters an event its class cannot read with the body and version kept; replay after a fixed deploy reads it through the upcasters', async () => {
    const prefix = redis.prefix();
    const v1 = redis.service({ prefix });
    await v1.enqueue(new OrderCheckV1('old', 42), 0);
    const brokenDeploy = redis.service({ prefix });
    brokenDeploy.addHandler(OrderCheckV3Broken, () => true);
    const [letter] = await waitForDeadLetters(brokenDeploy, OrderCheckV3Broken);
    expect(letter).toMatchObject({ id: 'old', event: undefined, error: expect.stringMatching(/undecodable: stored at version 1.*no upcast\[1\]/) });
    expect(letter!.body).toMatch(/^\[\d+,\{"amount":42\}\]$/);
    await brokenDeploy.close();

    const fixed = redis.service({ prefix });
    const seen: number[] = [];
    fixed.addHandler(OrderCheckV3, (e) => {
      seen.push(e.cents());
      return true;
    });
    expect((await fixed.deadLetters(OrderCheckV3))[0]?.event).toEqual(new OrderCheckV3('old', { cents: 42, currency: 'EUR' }));
    expect(await fixed.replayDeadLetters(OrderCheckV3)).toBe(1);
    await waitFor(() => seen.length === 1, 'the replayed event handled');
    expect(seen).toEqual([42]);
  });

  it('an upcaster that throws anything, or returns no object, fails only that event', async () => {
    const hostile = new Proxy(
      {},
      {
        get: () => {
          throw new Error('trap');
        },
        getPrototypeOf: () => {
          throw new Error('trap');
        },
      },
    );
    @DelayedEvent(VERSIONED_TYPE, {
      version: 2,
      upcast: {
        1: () => {
          throw hostile;
        },
      },
    })
    class Throws {
      constructor(readonly id: string = '') {}
    }
    @DelayedEvent(VERSIONED_TYPE, { version: 2, upcast: { 1: () => null as never } })
    class ReturnsNull {
      constructor(readonly id: string = '') {}
    }
    const prefix = redis.prefix();
    const v1 = redis.service({ prefix });
    await v1.enqueue(new OrderCheckV1('x', 1), 60_000);
    const checker = redis.service({ prefix });
    expect((await checker.verifyStored(Throws)).failures).toEqual([{ id: 'x', state: 'scheduled', version: 1, error: expect.stringMatching(/upcast\[1\].*threw/) }]);
    expect((await checker.verifyStored(ReturnsNull)).failures).toEqual([{ id: 'x', state: 'scheduled', version: 1, error: expect.stringMatching(/returned null/) }]);
    const metrics = recordMetrics(checker);
    checker.addHandler(Throws, () => true);
    await v1.runNow(OrderCheckV1, 'x');
    await waitFor(() => counter(metrics, METRIC.deadLettered, { reason: 'decode' }) === 1, 'dead-lettered for decode');
  });

  it('orderCheck builds each version', () => {
    expect(orderCheck(2, 'a', 1)).toEqual(new OrderCheckV2('a', 1));
  });
});
