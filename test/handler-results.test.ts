import { EMPTY, of, throwError } from 'rxjs';
import { describe, expect, it, vi } from 'vitest';
import { type ContextHandler, type Delivery, type EventContext, type EventHandler, type HandlerResult, METRIC, PermanentFailure, customBackoff, fixedBackoff } from '../src';
import { PaymentCheck } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';

// Checked by tsc: a string is not a HandlerResult; only nothing (undefined) joins true and false.
// @ts-expect-error
const notAHandler: EventHandler<PaymentCheck> = () => 'yes';
void notAHandler;

describe('what a handler answers: nothing is success, PermanentFailure fails for good, the backoff sees the failure', () => {
  const redis = useRedis();

  it.each<[string, () => HandlerResult]>([
    ['an async function that returns nothing', async () => {}],
    ['a function that returns nothing', () => {}],
    ['a Promise of undefined', () => Promise.resolve(undefined)],
    ['an Observable that completes empty', () => EMPTY],
    ['an Observable whose first value is undefined', () => of(undefined)],
  ])('%s succeeds: the event is completed once and not retried', async (_name, answer) => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix, retry: fixedBackoff(5, 10) });
    const metrics = recordMetrics(service);
    let calls = 0;
    service.addHandler(PaymentCheck, () => (calls++, answer()), 1);
    await service.enqueue(new PaymentCheck('nothing'), 0);
    await waitFor(() => counter(metrics, METRIC.handled) >= 1, 'the first handler call');
    expect(counter(metrics, METRIC.handled, { outcome: 'success' })).toBe(1);
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.payment-check}:m`)) === 0, 'the event completed and gone');
    expect(calls).toBe(1);
    expect(counter(metrics, METRIC.retries)).toBe(0);
    expect(await service.deadLetters(PaymentCheck)).toEqual([]);
  });

  it('through a context handler, a handler that returns nothing makes next() resolve true', async () => {
    const prefix = redis.prefix();
    const results: unknown[] = [];
    const service = redis.service({
      prefix,
      retry: fixedBackoff(5, 10),
      contextHandler: async (_context, _delivery, next) => {
        const ok = await next();
        results.push(ok);
        return ok;
      },
    });
    service.addHandler(PaymentCheck, async () => {}, 1);
    await service.enqueue(new PaymentCheck('wrapped'), 0);
    await waitFor(() => results.length >= 1, 'the wrapped call');
    await waitFor(async () => (await redis.client().hlen(`${prefix}:{test.payment-check}:m`)) === 0, 'the event completed and gone');
    expect(results).toEqual([true]);
  });

  it('a context handler that resolves undefined (forgot to return next()) fails the attempt, saying so', async () => {
    // As plain JavaScript would have it; TypeScript asks for Promise<boolean>.
    const forgetful = async (_context: EventContext, _delivery: Delivery, next: () => Promise<boolean>) => {
      await next();
    };
    const service = redis.service({ retry: fixedBackoff(1, 10), contextHandler: forgetful as unknown as ContextHandler });
    service.addHandler(PaymentCheck, () => false, 1);
    await service.enqueue(new PaymentCheck('forgot'), 0);
    const [letter] = await waitForDeadLetters(service, PaymentCheck);
    expect(letter!.error).toMatch(/contextHandler resolved undefined; it must return \(or resolve to\) the result of next\(\)/);
  });

  it.each<[string, () => HandlerResult]>([
    [
      'throws',
      () => {
        throw new PermanentFailure('card declined');
      },
    ],
    [
      'rejects',
      async () => {
        throw new PermanentFailure('card declined', { cause: new Error('HTTP 402') });
      },
    ],
    ['errors an Observable', () => throwError(() => new PermanentFailure('card declined'))],
  ])('a handler that %s with a PermanentFailure on attempt 1 of 5 is dead-lettered at once, with its reason', async (_name, fail) => {
    const service = redis.service({ retry: fixedBackoff(5, 10) });
    const metrics = recordMetrics(service);
    let calls = 0;
    service.addHandler(PaymentCheck, () => (calls++, fail()), 1);
    await service.enqueue(new PaymentCheck('declined', 42), 0);
    const [letter] = await waitForDeadLetters(service, PaymentCheck);
    expect(letter!.error).toBe('permanent failure: card declined (attempt 1 of 5)');
    expect(letter!.attempts).toBe(1);
    expect(letter!.event).toEqual(new PaymentCheck('declined', 42));
    await waitFor(() => counter(metrics, METRIC.deadLettered, { type: 'test.payment-check', reason: 'permanent' }) === 1, 'the dead letter counted as permanent');
    expect(counter(metrics, METRIC.deadLettered, { reason: 'attempts-exhausted' })).toBe(0);
    expect(counter(metrics, METRIC.retries)).toBe(0);
    expect(calls).toBe(1);
  });

  it('a PermanentFailure from another copy of the package (ESM beside CommonJS) is recognised by its brand', async () => {
    vi.resetModules();
    const copy = await import('../src/core/errors');
    const CopiedPermanentFailure = copy.PermanentFailure;
    expect(new CopiedPermanentFailure('x')).not.toBeInstanceOf(PermanentFailure);
    const service = redis.service({ retry: fixedBackoff(5, 10) });
    let calls = 0;
    service.addHandler(
      PaymentCheck,
      () => {
        calls++;
        throw new CopiedPermanentFailure('unknown account');
      },
      1,
    );
    await service.enqueue(new PaymentCheck('copied'), 0);
    const [letter] = await waitForDeadLetters(service, PaymentCheck);
    expect(letter!.error).toBe('permanent failure: unknown account (attempt 1 of 5)');
    expect(calls).toBe(1);
  });

  it('customBackoff gets the failed attempt, what it failed with and the event, and its wait is used', async () => {
    const service = redis.service({ retry: fixedBackoff(10, 10) });
    const seen: Array<{ attempt: number; error: unknown; event: PaymentCheck }> = [];
    const gatewayDown = new Error('gateway down');
    const startedAt: number[] = [];
    service.addHandler(
      PaymentCheck,
      (_e, _c, delivery) => {
        startedAt.push(Date.now());
        if (delivery.attempt === 1) throw gatewayDown;
        if (delivery.attempt === 2) return false;
        if (delivery.attempt === 3) return new Promise<boolean>(() => undefined);
        return true;
      },
      1,
      {
        timeoutMs: 150,
        retry: customBackoff(4, (attempt, error, event: PaymentCheck) => {
          seen.push({ attempt, error, event });
          return attempt === 1 ? 400 : 1;
        }),
      },
    );
    await service.enqueue(new PaymentCheck('flaky', 7), 0);
    await waitFor(() => startedAt.length === 4, 'attempt 4');
    expect(seen.map((s) => s.attempt)).toEqual([1, 2, 3]);
    expect(seen[0]!.error).toBe(gatewayDown);
    expect(seen[1]!.error).toBeInstanceOf(Error);
    expect((seen[1]!.error as Error).message).toBe('handler returned false');
    expect((seen[2]!.error as Error).message).toMatch(/handler did not finish within 150 ms \(attempt 3\)/);
    for (const { event } of seen) {
      expect(event).toBeInstanceOf(PaymentCheck);
      expect(event).toEqual(new PaymentCheck('flaky', 7));
    }
    // The policy's 400 ms, not the service's 10 ms, came between attempts 1 and 2.
    expect(startedAt[1]! - startedAt[0]!).toBeGreaterThanOrEqual(400 - 5);
  });

  it('a customBackoff that throws does not strand the event: it is retried at once', async () => {
    const service = redis.service();
    const attempts: number[] = [];
    service.addHandler(PaymentCheck, (_e, _c, delivery) => (attempts.push(delivery.attempt), delivery.attempt > 1), 1, {
      retry: customBackoff(3, (_attempt, error) => {
        // A policy that assumes every error has a status.
        return (error as { status: { retryAfterMs: number } }).status.retryAfterMs;
      }),
    });
    await service.enqueue(new PaymentCheck('bad-policy'), 0);
    await waitFor(() => attempts.length === 2, 'attempt 2');
    expect(attempts).toEqual([1, 2]);
  });
});
