import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DelayedEvent, DelayedEventService, InvalidArgumentError, InvalidEventError, InvalidOptionError } from '../src';
import { badEventId, isGroupName, isTypeName } from '../src/core/names';
import { RedisLayout, type TypeKeys } from '../src/redis/redis-layout';

/** The keys a (type, partition, group) queue owns: a named group shares bodies, pending counts, pause and marks with its type by design. */
function ownKeys(keys: TypeKeys): string[] {
  const own = [keys.meta, keys.schedule, keys.legacySchedule, keys.ready, keys.inFlight, keys.dead, keys.errors, `${keys.claimLogPrefix}reader`];
  if (keys.group === 'default') own.push(keys.groups, keys.pending, keys.paused, keys.recurring, keys.recent, keys.slotGuard);
  return own;
}

/** Redis Cluster's hash tag of a key: what it hashes for its slot. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
}

// Names drawn from every kind of character, with the separators the layout uses made likely.
const nameChars = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('a', 'b', '.', '-', '_', '/', ':', '#', '|', '{', '}', '*', '?', '[', '\\', ' ', '\u0000', '\u200b', '\ud800', '@', '1') },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
);
const name = fc.array(nameChars, { minLength: 0, maxLength: 8 }).map((chars) => chars.join(''));
const queue = fc.record({ type: name, partition: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }), group: fc.oneof(fc.constant('default'), name) });

describe('key spaces that cannot collide', () => {
  it("no two distinct (type, partition, group) share a key or a cache entry, and every key stays in its type's slot (property)", () => {
    fc.assert(
      fc.property(fc.uniqueArray(queue, { minLength: 2, maxLength: 12, selector: (q) => JSON.stringify(q) }), (queues) => {
        const accepted = queues.filter((q) => isTypeName(q.type) && (q.group === 'default' || isGroupName(q.group)));
        const layout = new RedisLayout('app');
        const owner = new Map<string, string>();
        const tags = new Map<string, string>();
        for (const q of accepted) {
          const base = layout.forType(q.type, q.partition);
          const keys = layout.forGroup(base, q.group);
          const who = JSON.stringify(q);
          expect(keys.type).toBe(q.type);
          expect(keys.group).toBe(q.group);
          expect(tags.get(keys.tag) ?? who).toBe(who);
          tags.set(keys.tag, who);
          for (const key of ownKeys(keys)) {
            expect(owner.get(key) ?? who).toBe(who);
            owner.set(key, who);
            // One slot per queue: every key of a type's partition, its groups' too, hashes by that queue's tag.
            expect(hashTag(key)).toBe(q.partition === undefined ? q.type : `${q.type}#${q.partition}`);
          }
        }
      }),
      { numRuns: 500 },
    );
  });

  it("a type named like another type's group gets its own keys", () => {
    const layout = new RedisLayout('app');
    const group = layout.forGroup(layout.forType('orders'), 'billing');
    const type = layout.forType('orders/billing');
    expect(type).not.toBe(group);
    expect(type.meta).toBe('app:{orders/billing}:m');
    expect(group.meta).toBe('app:{orders}:g:billing:m');
    // Asked in the other order, each still gets its own.
    const fresh = new RedisLayout('app');
    expect(fresh.forType('orders/billing').meta).toBe('app:{orders/billing}:m');
    expect(fresh.forGroup(fresh.forType('orders'), 'billing').meta).toBe('app:{orders}:g:billing:m');
  });

  it('accepted ids are distinct in Redis whenever they are distinct in JavaScript (property)', () => {
    const id = fc
      .array(fc.oneof(fc.constantFrom('a', '\ud800', '\udc00', '\ud83d\ude00', '\ufffd'), fc.string({ unit: 'binary', maxLength: 2 })), { minLength: 1, maxLength: 4 })
      .map((parts) => parts.join(''));
    fc.assert(
      fc.property(id, id, (a, b) => {
        fc.pre(a !== b && a.length > 0 && b.length > 0 && badEventId(a) === undefined && badEventId(b) === undefined);
        expect(Buffer.from(a, 'utf8').equals(Buffer.from(b, 'utf8'))).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });

  it('refuses, with a typed error naming what is allowed, the names and ids that could collide', () => {
    for (const bad of ['orders*', 'or?ders', 'or[ders]', 'back\\slash', 'nul\u0000', 'zero\u200bwidth', 'lone\ud800', 'has space', 'br{ace}', 'pi|pe', 'ha#sh', '']) {
      expect(() => DelayedEvent(bad), JSON.stringify(bad)).toThrow(InvalidArgumentError);
    }
    expect(() => DelayedEvent('bad*')).toThrow(/type name must be 1-200 characters without braces, '\|', '#', '\*', '\?'/);
    // Names accepted before stay accepted.
    for (const good of ['payment.check', 'orders/billing', 'billing:invoice-due', 'émission_1', 'a@b', 'Ünïcødé']) expect(() => DelayedEvent(good), good).not.toThrow();

    const service = new DelayedEventService({ redis: 'redis://127.0.0.1:1', prefix: 'names', logger: false });
    @DelayedEvent('names.check')
    class Check {
      constructor(readonly id: string = '') {}
    }
    for (const group of ['.', '..', 'has space', 'a/b', '']) expect(() => service.addHandler(Check, () => true, 1, { group }), group).toThrow(InvalidOptionError);
    expect(() => service.addHandler(Check, () => true, 1, { group: '.hidden' })).not.toThrow();

    // An id that Redis would store as another, or that takes a recurring occurrence's shape.
    return Promise.all([
      expect(service.enqueue(new Check('lone\ud800'), 0)).rejects.toThrow(InvalidEventError),
      expect(service.enqueue(new Check('daily-report@1790000000000'), 0)).rejects.toThrow(/recurring schedules' occurrences/),
      expect(service.cancel(Check, 'lone\udc00')).rejects.toThrow(InvalidArgumentError),
    ]).finally(() => service.close());
  });
});
