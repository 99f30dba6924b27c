import { describe, expect, it } from 'vitest';
import { METRIC } from '../src';
import { PaymentCheck } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';

describe('stored events that cannot be decoded', () => {
  const redis = useRedis();

  it.each([
    ['no header at all', () => 'garbage without header', /not JSON/],
    ['a body that is not JSON', (due: number) => `0|${due}|{"t":1,"p":{"id":`, /not JSON/],
    ['a body without a payload', (due: number) => `0|${due}|{"t":1}`, /no event payload object/],
    ['a payload whose id is not the stored id', (due: number) => `0|${due}|{"t":1,"p":{"id":"other"}}`, /does not match stored id/],
  ])('with %s go to the dead-letter set with the reason, and the reader goes on', async (_name, corrupt, reason) => {
    const prefix = redis.prefix();
    const client = redis.client();
    const service = redis.service({ prefix });
    const metrics = recordMetrics(service);
    const handled: string[] = [];
    // Corrupt the first of three events by hand; the two after it must still be handled.
    for (const id of ['bad', 'good-1', 'good-2']) await service.enqueue(new PaymentCheck(id), 300);
    await client.hset(`${prefix}:{test.payment-check}:m`, 'bad', corrupt(Date.now()));
    service.addHandler(PaymentCheck, (e) => (handled.push(e.id), true), 1);

    await waitFor(() => handled.length === 2, 'the good events');
    const [letter] = await waitForDeadLetters(service, PaymentCheck);
    expect(letter!.id).toBe('bad');
    expect(letter!.event).toBeUndefined();
    expect(letter!.error).toMatch(/^undecodable: /);
    expect(letter!.error).toMatch(reason);
    expect(handled.sort()).toEqual(['good-1', 'good-2']);
    expect(counter(metrics, METRIC.deadLettered, { reason: 'decode' })).toBe(1);
  });
});
