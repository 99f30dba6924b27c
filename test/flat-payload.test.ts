import 'reflect-metadata';
import { Exclude, Expose, Transform, instanceToPlain, plainToInstance } from 'class-transformer';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FlatPayloads } from '../src/core/flat-payload';

class Plain {
  id = '';
  [key: string]: unknown;
}

class WithMethodsAndGetters {
  id = '';
  label(): string {
    return `label ${this.id}`;
  }
  get shout(): string {
    return this.id.toUpperCase();
  }
  get settable(): string {
    return this.stored;
  }
  set settable(value: string) {
    this.stored = `set:${value}`;
  }
  stored = '';
}

class Base {
  @Exclude()
  secret = 's';
}
class InheritsDecorators extends Base {
  id = '';
}

class Renamed {
  @Expose({ name: 'ident' })
  id = '';
}

class Transformed {
  id = '';
  @Transform(({ value }) => (typeof value === 'number' ? value * 2 : value))
  n = 0;
}

const primitive = fc.oneof(fc.string(), fc.double(), fc.integer(), fc.boolean(), fc.constant(null), fc.constant(undefined));
/** Keys a payload may have: anything but the names class-transformer cannot round-trip (refused at enqueue). */
const key = fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !(k in Object.prototype) && k !== '__proto__');
const flatRecord = fc.dictionary(key, primitive, { maxKeys: 8 });

/** What the stored JSON would be: both paths are compared as they reach Redis. */
const json = (value: unknown) => JSON.stringify(value);

describe('flat payloads take a shortcut that stores and rebuilds exactly what class-transformer would', () => {
  const flat = new FlatPayloads();

  it('gives the same plain form as instanceToPlain for undecorated classes with primitive fields', () => {
    fc.assert(
      fc.property(flatRecord, (fields) => {
        const event = Object.assign(new Plain(), fields);
        const fast = flat.toPlain(event);
        expect(fast).toBeDefined();
        expect(json(fast)).toBe(json(instanceToPlain(event)));
      }),
      { numRuns: 500 },
    );
  });

  it('builds the same instance as plainToInstance, leaving methods and setter-less getters alone', () => {
    const withExtras = fc.record({ label: primitive, shout: primitive, settable: fc.string(), id: fc.string() });
    fc.assert(
      fc.property(flatRecord, withExtras, (fields, extras) => {
        const plain = JSON.parse(JSON.stringify({ ...fields, ...extras })) as Record<string, unknown>;
        const fast = flat.toInstance(WithMethodsAndGetters, plain);
        const reference = plainToInstance(WithMethodsAndGetters, plain);
        expect(fast).toBeInstanceOf(WithMethodsAndGetters);
        expect({ ...fast }).toEqual({ ...reference });
        expect(fast!.label()).toBe(reference.label());
        expect(fast!.shout).toBe(reference.shout);
      }),
      { numRuns: 500 },
    );
  });

  it('leaves decorated classes, their subclasses and nested values to class-transformer', () => {
    expect(flat.toPlain(Object.assign(new InheritsDecorators(), { id: 'a' }))).toBeUndefined();
    expect(flat.toPlain(Object.assign(new Renamed(), { id: 'a' }))).toBeUndefined();
    expect(flat.toPlain(Object.assign(new Transformed(), { id: 'a', n: 2 }))).toBeUndefined();
    expect(flat.toInstance(Transformed, { id: 'a', n: 2 })).toBeUndefined();
    expect(flat.toPlain(Object.assign(new Plain(), { id: 'a', at: new Date(0) }))).toBeUndefined();
    expect(flat.toPlain(Object.assign(new Plain(), { id: 'a', tags: ['x'] }))).toBeUndefined();
    expect(flat.toInstance(Plain, { id: 'a', nested: { x: 1 } })).toBeUndefined();
    expect(flat.toInstance(Plain, ['a'] as unknown as Record<string, unknown>)).toBeUndefined();
  });
});
