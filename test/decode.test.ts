import { expandLua } from '../scripts/embed-lua.mjs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { METRIC } from '../src';
import { parseEnvelope } from '../src/core/envelope';
import { PaymentCheck } from './support/events';
import { counter, recordMetrics, useRedis, waitForDeadLetters } from './support/harness';
import { waitFor } from './support/wait-for';

describe('stored events that cannot be decoded', () => {
  const redis = useRedis();

  it.each([
    ['no header at all', () => 'garbage without header', /not JSON/],
    ['a body that is not JSON', (due: number) => `0|${due}|{"t":1,"p":{"id":`, /not JSON/],
    ['a body without a payload', (due: number) => `0|${due}|{"t":1}`, /no event payload object/],
    ['a body array without a payload', (due: number) => `0|${due}|[1]`, /no event payload object/],
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

  it('keeps the id once, as the hash field, and hands it back in the event', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const id = 'payment-7f3a9c';
    await service.enqueue(new PaymentCheck(id, 42), 0, { context: { tenant: 't9' } });
    expect(await redis.client().hget(`${prefix}:{test.payment-check}:m`, id)).not.toContain(id);
    const seen: Array<[string, number, string | undefined]> = [];
    service.addHandler(PaymentCheck, (e) => (seen.push([e.id, e.amount, service.currentContext()?.tenant]), true), 1);
    await waitFor(() => seen.length === 1, 'the event handled');
    expect(seen).toEqual([[id, 42, 't9']]);
  });

  it('reads bodies as 0.1 wrote them: an object with the id inside its payload', async () => {
    const prefix = redis.prefix();
    const client = redis.client();
    const service = redis.service({ prefix });
    await service.enqueue(new PaymentCheck('old', 1), 300);
    const envelope = (await client.hget(`${prefix}:{test.payment-check}:m`, 'old'))!;
    const header = /^\d+\|\d+\|/.exec(envelope)![0];
    await client.hset(`${prefix}:{test.payment-check}:m`, 'old', `${header}{"t":5,"c":{"tenant":"t1"},"p":{"id":"old","amount":13}}`);
    const seen: Array<[string, number, string | undefined]> = [];
    service.addHandler(PaymentCheck, (e) => (seen.push([e.id, e.amount, service.currentContext()?.tenant]), true), 1);
    await waitFor(() => seen.length === 1, 'the event handled');
    expect(seen).toEqual([['old', 13, 't1']]);
  });
});

describe('envelopes read back by the service', () => {
  const redis = useRedis();

  // The scripts split envelopes with envelope_parse; the claim hands them to the
  // service whole, which must read every value, well-formed or not, the same way.
  it('are split as the scripts split them, headers missing or malformed included', async () => {
    const values = ['0|123|{"a":1}', '12|0|', '3|45|x|y|z', '01|002|b', '5|6|line\nbreak', '|1|b', '1||b', 'a1|2|b', '5|6', '', 'plain', '7|8|ü€😀'];
    const script = expandLua(
      join(__dirname, '..', 'lua'),
      `-- @include envelope-parse
      local out = {}
      for i, value in ipairs(ARGV) do
        local attempt, due, body = envelope_parse(value)
        out[i] = {attempt, tonumber(due), body}
      end
      return out`,
    );
    const split = (await redis.client().eval(script, 0, ...values)) as Array<[number, number, string]>;
    expect(values.map((v) => parseEnvelope(v))).toEqual(split.map(([attempt, dueAt, body]) => ({ attempt, dueAt, body })));
  });
});
