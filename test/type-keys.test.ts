import { describe, expect, it } from 'vitest';
import { RedisLayout } from '../src/redis/redis-layout';

/**
 * The Inspector finds the types in use by SCAN (src/redis/type-scan.ts): the
 * keys it recognises are those RedisLayout names, for a type, a partition and
 * a type whose name holds the characters a tag may.
 */
describe('the keys that say a type is in use', () => {
  const layout = new RedisLayout('rde-test');

  it.each([
    ['Order', undefined],
    ['Order', 3],
    ['billing/Invoice.v2:x', undefined],
  ] as const)('of %s (partition %s) are its meta hash, groups, pause flag and history index', (type, partition) => {
    const keys = layout.forType(type, partition);
    expect(layout.typeKeyOf(keys.meta)).toEqual({ tag: keys.tag, kind: 'm' });
    expect(layout.typeKeyOf(keys.groups)).toEqual({ tag: keys.tag, kind: 'groups' });
    expect(layout.typeKeyOf(keys.paused)).toEqual({ tag: keys.tag, kind: 'p' });
    expect(layout.typeKeyOf(keys.handledIndex)).toEqual({ tag: keys.tag, kind: 'hi' });
    for (const other of [keys.ready, keys.schedule, keys.flow, keys.handled, keys.marker, layout.forGroup(keys, 'audit').ready]) {
      expect(layout.typeKeyOf(other), other).toBeUndefined();
    }
  });

  it('are not those of another prefix', () => {
    expect(new RedisLayout('other').typeKeyOf(layout.forType('Order').meta)).toBeUndefined();
  });
});
