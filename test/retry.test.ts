import { throwError } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { type DelayedEventService, type HandlerResult, METRIC, customBackoff, exponentialBackoff, fixedBackoff } from '../src';
import { DEAD_LETTER_CHUNK } from '../src/service/inspection-types';
import { PaymentCheck } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { ScheduleView } from './support/schedule';
import { waitFor } from './support/wait-for';

describe('retries and dead letters', () => {
  const redis = useRedis();

  /** A service whose handler fails the one attempt it has, once `ids` are its dead letters. */
  async function serviceWithDeadLetters(prefix: string, ids: readonly string[]): Promise<DelayedEventService> {
    const service = redis.service({ prefix, retry: fixedBackoff(1, 10) });
    service.addHandler(PaymentCheck, () => false, 2);
    for (const id of ids) await service.enqueue(new PaymentCheck(id), 0);
    await waitForDeadLetters(service, PaymentCheck, ids.length);
    return service;
  }

  it.each<[string, () => HandlerResult, RegExp]>([
    ['returns false', () => false, /handler returned false/],
    [
      'throws',
      () => {
        throw new Error('boom');
      },
      /Error: boom/,
    ],
    ['rejects', () => Promise.reject(new Error('async boom')), /async boom/],
    ['errors as an Observable', () => throwError(() => new Error('stream boom')), /stream boom/],
    ['returns null', () => null as unknown as boolean, /returned null; expected true or false/],
    ['returns garbage', () => 'yes' as unknown as boolean, /returned yes; expected true or false/],
  ])('a handler that %s is retried, and succeeds on a later attempt', async (_name, fail, lastError) => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(5, 10) });
    const attempts: number[] = [];
    let errorSeenByLastAttempt: string | null = null;
    service.addHandler(
      PaymentCheck,
      (_e, _c, delivery) => {
        attempts.push(delivery.attempt);
        if (delivery.attempt < 3) return fail();
        // The last error is kept while the event is retried (success clears it).
        return redis
          .client()
          .hget(`${prefix}:{test.payment-check}:e`, 'f')
          .then((error) => {
            errorSeenByLastAttempt = error;
            return true;
          });
      },
      1,
    );
    await service.enqueue(new PaymentCheck('f'), 0);
    await waitFor(async () => attempts.length === 3 && (await redis.client().hlen(`${prefix}:{test.payment-check}:m`)) === 0, 'success on attempt 3');
    expect(errorSeenByLastAttempt).toMatch(lastError);
    expect(attempts).toEqual([1, 2, 3]);
  });

  it('waits the backoff of the policy between attempts', async () => {
    const service = redis.service({ retry: customBackoff(3, (attempt) => attempt * 400) });
    const startedAt: number[] = [];
    service.addHandler(PaymentCheck, () => (startedAt.push(Date.now()), startedAt.length === 3), 1);
    await service.enqueue(new PaymentCheck('b'), 0);
    await waitFor(() => startedAt.length === 3, 'three attempts');
    expect(startedAt[1]! - startedAt[0]!).toBeGreaterThanOrEqual(400 - 5);
    expect(startedAt[2]! - startedAt[1]!).toBeGreaterThanOrEqual(800 - 5);
  });

  it('a per-handler policy overrides the service policy', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(10, 10) });
    let calls = 0;
    service.addHandler(PaymentCheck, () => (calls++, false), 1, { retry: fixedBackoff(2, 10) });
    await service.enqueue(new PaymentCheck('p'), 0);
    await waitForDeadLetters(service, PaymentCheck);
    expect(calls).toBe(2);
  });

  it('parks an event in the dead-letter set with its last error when attempts run out', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: exponentialBackoff({ maxAttempts: 3, initialMs: 10, jitter: 0 }) });
    const metrics = recordMetrics(service);
    let calls = 0;
    service.addHandler(
      PaymentCheck,
      () => {
        calls++;
        throw new Error(`failure ${calls}`);
      },
      1,
    );
    await service.enqueue(new PaymentCheck('dead', 13), 0, { context: { tenant: 't1' } });
    const [letter] = await waitForDeadLetters(service, PaymentCheck);
    expect(letter!.id).toBe('dead');
    expect(letter!.event).toBeInstanceOf(PaymentCheck);
    expect(letter!.event!.amount).toBe(13);
    expect(letter!.context).toEqual({ tenant: 't1' });
    expect(letter!.attempts).toBe(3);
    expect(letter!.error).toMatch(/failure 3 \(attempt 3 of 3\)/);
    expect(calls).toBe(3);
    expect(counter(metrics, METRIC.retries, { type: 'test.payment-check' })).toBe(2);
    expect(counter(metrics, METRIC.deadLettered, { type: 'test.payment-check', reason: 'attempts-exhausted' })).toBe(1);
    expect(counter(metrics, METRIC.handled, { outcome: 'failure' })).toBe(3);
    // Nothing left scheduled or in flight: it is parked, not retried forever.
    expect((await new ScheduleView(redis.client(), `${prefix}:{test.payment-check}`).entries()).size).toBe(0);
    expect(await redis.client().zcard(`${prefix}:{test.payment-check}:f`)).toBe(0);
  });

  it('replays dead letters (one, or all) back to scheduled with fresh attempts', async () => {
    const service = redis.service({ retry: fixedBackoff(1, 10) });
    let healthy = false;
    const succeeded: string[] = [];
    service.addHandler(
      PaymentCheck,
      (e, _c, delivery) => {
        if (!healthy) return false;
        expect(delivery.attempt).toBe(1);
        succeeded.push(e.id);
        return true;
      },
      2,
    );
    for (const id of ['a', 'b', 'c']) await service.enqueue(new PaymentCheck(id), 0);
    await waitForDeadLetters(service, PaymentCheck, 3);
    healthy = true;
    expect(await service.replayDeadLetters(PaymentCheck, ['b', 'not-dead'])).toBe(1);
    await waitFor(() => succeeded.includes('b'), 'b handled after replay');
    expect((await service.deadLetters(PaymentCheck)).map((l) => l.id).sort()).toEqual(['a', 'c']);
    expect(await service.replayDeadLetters(PaymentCheck)).toBe(2);
    await waitFor(() => succeeded.length === 3, 'all handled after replay');
    expect(await service.deadLetters(PaymentCheck)).toEqual([]);
  });

  it('replays the other dead letters when one lost its envelope (deleted by hand), and drops that one', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(1, 10) });
    let healthy = false;
    const succeeded: string[] = [];
    service.addHandler(PaymentCheck, (e) => healthy && (succeeded.push(e.id), true), 2);
    for (const id of ['a', 'b', 'c']) await service.enqueue(new PaymentCheck(id), 0);
    await waitForDeadLetters(service, PaymentCheck, 3);
    const queue = `${prefix}:{test.payment-check}`;
    await redis.client().hdel(`${queue}:m`, 'b');
    healthy = true;
    expect(await service.replayDeadLetters(PaymentCheck)).toBe(2);
    await waitFor(() => succeeded.length === 2, 'a and c handled after replay');
    expect(succeeded.sort()).toEqual(['a', 'c']);
    expect(await redis.client().zcard(`${queue}:d`)).toBe(0);
    expect(await redis.client().hlen(`${queue}:e`)).toBe(0);
  });

  it('replays a long list of ids in several script calls, so Redis is never held by one long script', async () => {
    const prefix = redis.prefix();
    await (await serviceWithDeadLetters(prefix, ['x0', 'x1', 'x2'])).close();
    // No handler here: the only scripts while it replays are its own.
    const service = redis.service({ prefix });
    const ids = Array.from({ length: 2 * DEAD_LETTER_CHUNK + 500 }, (_, i) => `absent${i}`);
    ids[0] = 'x0';
    ids[DEAD_LETTER_CHUNK + 200] = 'x1';
    ids[ids.length - 1] = 'x2';
    const scriptCalls = async () => {
      const stats = await Promise.all((await redis.masters()).map((master) => master.info('commandstats')));
      return stats.reduce((sum, text) => sum + Number(/cmdstat_evalsha:calls=(\d+)/.exec(text)?.[1] ?? 0), 0);
    };
    const before = await scriptCalls();
    expect(await service.replayDeadLetters(PaymentCheck, ids)).toBe(3);
    expect(await scriptCalls()).toBe(before + 3);
    expect(await service.deadLetters(PaymentCheck)).toEqual([]);
  });

  it('purges dead letters for good', async () => {
    const prefix = redis.prefix();
    const service = await serviceWithDeadLetters(prefix, ['a', 'b', 'c']);
    expect(await service.purgeDeadLetters(PaymentCheck, ['a'])).toBe(1);
    expect((await service.deadLetters(PaymentCheck)).map((l) => l.id).sort()).toEqual(['b', 'c']);
    expect(await service.purgeDeadLetters(PaymentCheck)).toBe(2);
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
  });
});
