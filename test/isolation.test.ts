import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { METRIC, RedisConnectionError, fixedBackoff } from '../src';
import { PaymentCheck } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';

/** The ACL the README documents for a service with prefix `app`, read from the README itself, so the two cannot drift apart. */
const ACL_FOR_APP = (() => {
  const line = readFileSync(join(__dirname, '..', 'README.md'), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('ACL SETUSER app-service on >PASSWORD '));
  if (!line) throw new Error("README.md lost its 'ACL SETUSER app-service' line");
  return line.slice('ACL SETUSER app-service on >PASSWORD '.length).trim();
})();

describe('isolation', () => {
  const redis = useRedis();

  it('services with different prefixes never see each other’s events', async () => {
    const a = redis.service({ prefix: 'tenant-a' });
    const b = redis.service({ prefix: 'tenant-b' });
    const seenByA: number[] = [];
    const seenByB: number[] = [];
    a.addHandler(PaymentCheck, (e) => (seenByA.push(e.amount), true), 2);
    b.addHandler(PaymentCheck, (e) => (seenByB.push(e.amount), true), 2);
    // The same type and id in both: they are different events.
    await a.enqueue(new PaymentCheck('same', 1), 0);
    await b.enqueue(new PaymentCheck('same', 2), 200);
    await b.enqueue(new PaymentCheck('only-b', 3), 60_000);
    expect(await a.cancel(PaymentCheck, 'only-b')).toBe(false);
    await waitFor(() => seenByA.length === 1 && seenByB.length === 1, 'each handled once');
    expect(seenByA).toEqual([1]);
    expect(seenByB).toEqual([2]);
  });

  // The ACL is set on one server; a cluster needs it on every node, which this test does not do.
  it.skipIf(redis.topology === 'cluster')('runs under a Redis ACL user limited to its prefix, and that user is refused outside it', async () => {
    const admin = redis.client();
    await admin.call('ACL', 'SETUSER', 'app-service', 'reset', 'on', '>s3cret', ...ACL_FOR_APP.split(' '));
    const url = `redis://app-service:s3cret@127.0.0.1:${redis.server.port}`;
    const service = redis.service({ redis: url, prefix: 'app', retry: fixedBackoff(1, 10), gaugeIntervalMs: 100, keepHandled: { count: 100 } });
    // A readiness probe built on it passes with the README's ACL.
    await service.waitUntilReady({ timeoutMs: 5_000 });
    // The checks before a deploy read every stored event (HSCAN) under it too.
    await service.enqueue(new PaymentCheck('early', 1), 60_000);
    expect(await service.verifyStored(PaymentCheck)).toEqual({ checked: 1, byVersion: { 1: 1 }, failures: [] });
    await service.cancel(PaymentCheck, 'early');
    const metrics = recordMetrics(service);
    const handled: string[] = [];
    service.addHandler(PaymentCheck, (e) => (e.id === 'fails' ? false : (handled.push(e.id), true)), 2);

    await service.enqueue(new PaymentCheck('ok'), 10);
    await service.enqueue(new PaymentCheck('fails'), 10);
    await service.enqueue(new PaymentCheck('later'), 60_000);
    await service.enqueue(new PaymentCheck('later', 5), 60_000, { replace: true });
    expect(await service.cancel(PaymentCheck, 'later')).toBe(true);
    await waitForDeadLetters(service, PaymentCheck);
    await waitFor(() => handled.includes('ok'), 'the good event');
    expect(await service.purgeDeadLetters(PaymentCheck)).toBe(1);
    // The inspection and control calls need no command beyond the list either.
    await service.enqueue(new PaymentCheck('inspected'), 60_000);
    expect(await service.counts('test.payment-check')).toMatchObject({ scheduled: 1 });
    expect((await service.find(PaymentCheck, 'inspected'))?.state).toBe('scheduled');
    expect(await service.list(PaymentCheck, 'scheduled')).toHaveLength(1);
    expect(await service.reschedule(PaymentCheck, 'inspected', 120_000)).toBe(true);
    expect(await service.pause(PaymentCheck)).toBe(true);
    expect((await service.types()).map((t) => [t.type, t.paused])).toEqual([['test.payment-check', true]]);
    expect(await service.resume(PaymentCheck)).toBe(true);
    // Subscriber groups and recurring schedules too.
    const grouped: string[] = [];
    service.addHandler(PaymentCheck, (e) => void grouped.push(e.id), 2, { group: 'audit' });
    await waitFor(async () => (await admin.hexists('app:{test.payment-check}:groups', 'audit')) === 1, 'the group registered');
    await service.enqueue(new PaymentCheck('fanned'), 0);
    await service.schedule('often', new PaymentCheck(''), { every: 100 });
    await waitFor(() => grouped.includes('fanned') && handled.includes('fanned') && grouped.some((id) => id.startsWith('often@')), 'a fanned-out event, and an occurrence');
    expect(await service.unschedule(PaymentCheck, 'often')).toBe(true);
    await waitFor(() => metrics.some((m) => m.name === METRIC.scheduledCount), 'a gauge sample');
    // What the dashboard reads, and the activity every instance writes (at the latest when it closes).
    expect((await service.dueTimeline(PaymentCheck))!.slots).toHaveLength(60);
    // The history, the failures and the live instances need nothing beyond the list either.
    expect((await service.list(PaymentCheck, 'handled')).map((e) => e.id)).toContain('ok');
    expect((await service.find(PaymentCheck, 'ok'))?.state).toBe('handled');
    expect((await service.instances()).map((i) => i.pid)).toEqual([process.pid]);
    await service.close();
    expect((await admin.keys('app:*:a:*')).length).toBeGreaterThan(0);
    const reader = redis.service({ redis: url, prefix: 'app' });
    expect((await reader.activity(PaymentCheck)).reduce((n, slot) => n + slot.handled, 0)).toBeGreaterThan(0);
    expect(counter(metrics, METRIC.redisErrors)).toBe(0);
    expect(await admin.call('ACL', 'LOG')).toEqual([]);

    const outsider = redis.service({ redis: url, prefix: 'other' });
    await expect(outsider.enqueue(new PaymentCheck('x'), 10)).rejects.toThrow(/may not run .*NOPERM/);
    expect(await admin.keys('other:*')).toEqual([]);
  });

  // Redis keeps what a script wrote before a command it refuses: each of these once half-applied a change.
  for (const [missing, what] of [
    ['zadd', 'the schedule entry'],
    ['publish', 'the wake-up'],
    ['hsetnx', 'the envelope'],
  ] as const) {
    it.skipIf(redis.topology === 'cluster')(`an enqueue refused for want of +${missing} (${what}) stores nothing and says what to grant`, async () => {
      const admin = redis.client();
      const user = `no-${missing}`;
      const prefix = `app${missing}`;
      await admin.call('ACL', 'SETUSER', user, 'reset', 'on', '>pw', ...ACL_FOR_APP.replace(/app:/g, `${prefix}:`).split(' '), `-${missing}`);
      const service = redis.service({ redis: `redis://${user}:pw@127.0.0.1:${redis.server.port}`, prefix });
      const error = await service.enqueue(new PaymentCheck(`refused-${missing}`), 60_000).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(RedisConnectionError);
      expect((error as RedisConnectionError).reason).toBe('permission');
      expect((error as Error).message).toContain(missing.toUpperCase());
      expect(await admin.keys(`${prefix}:*`)).toEqual([]);
      // health() says why the service cannot work, though Redis answers.
      const health = await service.health();
      expect(health.ready).toBe(false);
      expect(health.redis).toBe('up');
      expect(health.problem?.reason).toBe('permission');
      expect(health.problem?.message).toContain(missing.toUpperCase());
      // Granted, the same enqueue goes through: the refusal was not remembered past the next check.
      await admin.call('ACL', 'SETUSER', user, `+${missing}`);
      await service.close();
      const again = redis.service({ redis: `redis://${user}:pw@127.0.0.1:${redis.server.port}`, prefix });
      expect(await again.enqueue(new PaymentCheck(`refused-${missing}`), 60_000)).toBe('scheduled');
      await again.cancel(PaymentCheck, `refused-${missing}`);
    });
  }

  it.skipIf(redis.topology === 'cluster')('without +subscribe or +pexpire it says once what it does without, and still handles events', async () => {
    const admin = redis.client();
    await admin.call('ACL', 'SETUSER', 'no-extras', 'reset', 'on', '>pw', ...ACL_FOR_APP.replace(/app:/g, 'appdeg:').split(' '), '-subscribe', '-pexpire');
    const warnings: Array<{ fields: Record<string, unknown>; message: string }> = [];
    const logger = { warn: (fields: object, message: string) => warnings.push({ fields: fields as Record<string, unknown>, message }), error: () => undefined };
    const service = redis.service({ redis: `redis://no-extras:pw@127.0.0.1:${redis.server.port}`, prefix: 'appdeg', pollIntervalMs: 100, logger });
    const handled: string[] = [];
    service.addHandler(PaymentCheck, (e) => void handled.push(e.id), 1);
    for (let i = 0; i < 3; i++) await service.enqueue(new PaymentCheck(`p${i}`), 0);
    await waitFor(() => handled.length === 3, 'events handled by polling');
    await waitFor(() => warnings.some((w) => w.fields.feature === 'wake-ups'), 'the missing subscription said');
    await service.close();
    expect(warnings.filter((w) => w.fields.feature === 'wake-ups')).toHaveLength(1);
    // The activity counts are written on close: refused, and said once.
    expect(warnings.filter((w) => w.fields.feature === 'activity')).toHaveLength(1);
    expect(warnings.find((w) => w.fields.feature === 'wake-ups')?.message).toMatch(/\+subscribe/);
  });

  it.skipIf(redis.topology === 'cluster')('without +evalsha health() is not ready, naming the command, and says so in one log record', async () => {
    const admin = redis.client();
    await admin.call('ACL', 'SETUSER', 'no-evalsha', 'reset', 'on', '>pw', ...ACL_FOR_APP.replace(/app:/g, 'appsha:').split(' '), '-evalsha');
    const records: Array<{ fields: Record<string, unknown>; message: string }> = [];
    const record = (fields: object, message: string) => void records.push({ fields: fields as Record<string, unknown>, message });
    const logger = { warn: record, error: record };
    const service = redis.service({ redis: `redis://no-evalsha:pw@127.0.0.1:${redis.server.port}`, prefix: 'appsha', pollIntervalMs: 100, logger });
    service.addHandler(PaymentCheck, () => true, 1);
    await waitFor(async () => (await service.health()).problem?.reason === 'permission', 'the refusal seen by health()');
    const health = await service.health();
    expect(health.ready).toBe(false);
    expect(health.redis).toBe('up');
    expect(health.problem?.message).toMatch(/EVALSHA/i);
    // Its loops keep retrying (polling every 100 ms), yet the refusal is said once.
    const refusals = () => records.filter((r) => r.fields.reason === 'permission' && /EVALSHA/i.test(String(r.fields.error)));
    await waitFor(() => refusals().length > 0, 'the refusal logged');
    const until = Date.now() + 1_000;
    while (Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(refusals()).toHaveLength(1);
    await service.close();
  });

  it.skipIf(redis.topology === 'cluster')('a claim refused for want of +set neither runs the handler nor dead-letters the event', async () => {
    const admin = redis.client();
    await admin.call('ACL', 'SETUSER', 'no-set', 'reset', 'on', '>pw', ...ACL_FOR_APP.replace(/app:/g, 'appset:').split(' '), '-set');
    const producer = redis.service({ prefix: 'appset' });
    await producer.enqueue(new PaymentCheck('waits'), 0);
    const service = redis.service({ redis: `redis://no-set:pw@127.0.0.1:${redis.server.port}`, prefix: 'appset', retry: fixedBackoff(1, 10) });
    const metrics = recordMetrics(service);
    let called = false;
    service.addHandler(PaymentCheck, () => (called = true), 1);
    await waitFor(() => counter(metrics, METRIC.redisErrors) > 0, 'its scripts refused');
    expect(called).toBe(false);
    // Still stored, not in flight (a lease written before the refusal would have been): scheduled or ready.
    expect(['scheduled', 'ready']).toContain((await producer.find(PaymentCheck, 'waits'))?.state);
    expect(await producer.deadLetters(PaymentCheck)).toEqual([]);
    await service.close();
    await producer.cancel(PaymentCheck, 'waits');
  });
});
