import 'reflect-metadata';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DelayedEvent, DelayedEventError, DelayedEventService, PayloadTooLargeError, fixedBackoff } from '../../src';
import { RedisServer } from '../support/redis-server';

type Behaviour = 'ok' | 'throw' | 'hang' | 'garbage' | 'false';

@DelayedEvent('fault.poison')
class PoisonEvent {
  constructor(
    readonly id: string = '',
    readonly behaviour: Behaviour = 'ok',
    readonly data: unknown = null,
  ) {}
}

const LIMIT = 4_096;
const BEHAVIOURS: Behaviour[] = ['throw', 'hang', 'garbage', 'false', 'ok', 'ok', 'ok', 'ok', 'ok', 'ok'];

describe('fault injection: poison input', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await RedisServer.start();
    redis = new Redis(server.port, '127.0.0.1');
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  it('4. random payload shapes, bad handlers, sizes at and over the limit and corrupted envelopes: each ends handled or dead-lettered with a reason', async () => {
    const prefix = 'poison';
    const service = new DelayedEventService({
      redis: server.url,
      prefix,
      maxPayloadBytes: LIMIT,
      handlerTimeoutMs: 200,
      leaseGraceMs: 500,
      retry: fixedBackoff(2, 10),
      pollIntervalMs: 100,
    });
    const handled = new Map<string, unknown>();
    service.addHandler(
      PoisonEvent,
      (event) => {
        switch (event.behaviour) {
          case 'throw':
            throw new Error(`poison ${event.id}`);
          case 'hang':
            return new Promise<boolean>(() => undefined);
          case 'garbage':
            return { not: 'a boolean' } as unknown as boolean;
          case 'false':
            return false;
          default:
            handled.set(event.id, event.data);
            return true;
        }
      },
      64,
    );

    // 10,000 JSON shapes from a fixed seed (reproducible), with unicode and binary-looking strings.
    const shapes = fc.sample(fc.jsonValue({ maxDepth: 4 }), { numRuns: 10_000, seed: 20261120 });
    shapes.push('\u0000\u0001\uffff', '💥'.repeat(100), 'a\u0000b', '\ud83d');
    const sent = new Map<string, { behaviour: Behaviour; data: unknown }>();
    const rejected = new Map<string, string>();
    const events = shapes.map((data, i) => new PoisonEvent(`p${i}`, BEHAVIOURS[i % BEHAVIOURS.length]!, data));
    // Exactly at the limit, and one byte over it.
    const padding = (extra: number) => {
      // The stored body: [enqueued at, payload without its id] (docs/redis-layout.md).
      const base = Buffer.byteLength(JSON.stringify([Date.now(), { behaviour: 'ok', data: '' }]));
      return 'x'.repeat(LIMIT - base + extra);
    };
    events.push(new PoisonEvent('edge-0', 'ok', padding(0)), new PoisonEvent('edge-1', 'ok', padding(1)));

    for (let i = 0; i < events.length; i += 64) {
      await Promise.all(
        events.slice(i, i + 64).map((event) =>
          service.enqueue(event, 0).then(
            () => sent.set(event.id, { behaviour: event.behaviour, data: event.data }),
            (error: unknown) => {
              // Rejected at the call with a typed error: never accepted, so nothing to handle.
              expect(error).toBeInstanceOf(DelayedEventError);
              rejected.set(event.id, (error as Error).message);
            },
          ),
        ),
      );
    }
    expect(sent.has('edge-0')).toBe(true);
    expect(rejected.get('edge-1')).toMatch(new PayloadTooLargeError('fault.poison', LIMIT + 1, LIMIT).message.slice(0, 40));

    // Corrupt 20 stored envelopes by hand, as a bad migration or a stray client would:
    // events due in 2 s, so none is handled before it is corrupted.
    const corrupted = Array.from({ length: 20 }, (_, i) => `c${i}`);
    for (const id of corrupted) {
      await service.enqueue(new PoisonEvent(id, 'ok', { fine: true }), 2_000);
      sent.set(id, { behaviour: 'ok', data: { fine: true } });
      await redis.hset(`${prefix}:{fault.poison}:m`, id, `not an envelope ${id}`);
    }

    const deadIds = async () => new Set(await redis.zrange(`${prefix}:{fault.poison}:d`, '0', '-1'));
    const deadline = Date.now() + 120_000;
    for (;;) {
      const dead = await deadIds();
      const open = [...sent.keys()].filter((id) => !handled.has(id) && !dead.has(id));
      if (open.length === 0) break;
      if (Date.now() > deadline) throw new Error(`${open.length} accepted events neither handled nor dead-lettered, e.g. ${open.slice(0, 5).join(', ')}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

    const dead = await deadIds();
    const reasons = await redis.hmget(`${prefix}:{fault.poison}:e`, ...dead);
    expect(reasons.every((reason) => typeof reason === 'string' && reason.length > 0)).toBe(true);
    for (const id of corrupted) expect(dead.has(id)).toBe(true);
    // Every handled payload came back as it went in (JSON-equal).
    const mismatched = [...handled].filter(([id, data]) => JSON.stringify(data) !== JSON.stringify(sent.get(id)!.data)).map(([id]) => id);
    expect(mismatched).toEqual([]);
    // Failing behaviours ended dead, succeeding ones handled.
    for (const [id, { behaviour }] of sent) {
      if (corrupted.includes(id)) continue;
      expect(behaviour === 'ok' ? handled.has(id) : dead.has(id)).toBe(true);
    }

    // No reader was stopped by any of it: a fresh event is still handled promptly.
    await service.enqueue(new PoisonEvent('after', 'ok', 'fine'), 0);
    const until = Date.now() + 5_000;
    while (!handled.has('after') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(handled.has('after')).toBe(true);
    console.log(
      `FIGURES poison input: ${JSON.stringify({ generated: events.length, accepted: sent.size, rejectedAtCall: rejected.size, handled: handled.size, deadLettered: dead.size, corrupted: corrupted.length, lost: 0 })}`,
    );
    await service.close();
  }, 300_000);
});
