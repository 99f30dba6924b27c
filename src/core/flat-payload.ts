import { Exclude } from 'class-transformer';

// class-transformer keeps its decorator registry in this module and does not
// re-export it; its type declarations live apart, under types/. A bundler that
// resolves class-transformer's `module` build gives the decorators another
// copy of it: REGISTRY_SHARED below tells, and the fast path is then never taken.
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as { defaultMetadataStorage: unknown };

/**
 * Whether the registry read here is the one class-transformer's decorators
 * write to, as the application's classes see it: a probe class decorated
 * through the public import must show up in it. Checked once, at load. When it
 * does not (a second copy of class-transformer), every class counts as
 * decorated and goes through class-transformer itself: slower, never wrong.
 * test/bundle.test.ts bundles the package resolving `module` to prove it.
 */
export const REGISTRY_SHARED: boolean = (() => {
  class Probe {
    probed = 0;
  }
  Exclude()(Probe.prototype, 'probed');
  return hasDecorators(Probe);
})();

/**
 * What class-transformer does, without class-transformer, for the common case:
 * a class that carries none of its decorators and whose fields are all
 * primitives. There its default instanceToPlain / plainToInstance reduce to
 * copying own keys, at a tenth of the cost; enqueue and claim do this for
 * every event. Anything else (a decorated class, a nested object, an array, a
 * Date, a function) returns undefined and goes through class-transformer.
 * test/flat-payload.test.ts holds the two to the same output.
 */
export class FlatPayloads {
  /** Per class: true when neither it nor an ancestor has a class-transformer decorator. */
  private readonly undecorated = new WeakMap<Function, boolean>();

  /**
   * The plain form of `event`, as instanceToPlain would give it, without the
   * key `leaveOut` if given; undefined when not flat.
   */
  toPlain(event: object, leaveOut?: string): Record<string, unknown> | undefined {
    if (!this.isUndecorated(event.constructor)) return undefined;
    const plain: Record<string, unknown> = {};
    const source = event as Record<string, unknown>;
    for (const key of Object.keys(source)) {
      // class-transformer skips these two keys in both directions.
      if (key === '__proto__' || key === 'constructor' || key === leaveOut) continue;
      const value = source[key];
      if (!isPrimitive(value)) return undefined;
      plain[key] = value;
    }
    return plain;
  }

  /** An instance of `eventClass` built from `plain`, as plainToInstance would build it; undefined when not flat. */
  toInstance<T extends object>(eventClass: new () => T, plain: Record<string, unknown>): T | undefined {
    if (Array.isArray(plain) || !this.isUndecorated(eventClass)) return undefined;
    const keys = Object.keys(plain);
    for (const key of keys) if (!isPrimitive(plain[key])) return undefined;
    const instance = new eventClass();
    const target = instance as Record<string, unknown>;
    const prototype = (instance.constructor as { prototype?: object }).prototype;
    for (const key of keys) {
      if (key === '__proto__' || key === 'constructor') continue;
      // Like class-transformer: never overwrite a method or a getter without a setter.
      const descriptor = prototype ? Object.getOwnPropertyDescriptor(prototype, key) : undefined;
      if ((descriptor && !descriptor.set) || target[key] instanceof Function) continue;
      target[key] = plain[key];
    }
    return instance;
  }

  private isUndecorated(eventClass: Function): boolean {
    if (!REGISTRY_SHARED) return false;
    let known = this.undecorated.get(eventClass);
    if (known === undefined) {
      known = true;
      // Decorators run when a class is defined, so the answer never changes.
      for (let c: unknown = eventClass; typeof c === 'function' && c !== Function.prototype; c = Object.getPrototypeOf(c)) {
        if (hasDecorators(c)) known = false;
      }
      this.undecorated.set(eventClass, known);
    }
    return known;
  }
}

/** Whether class-transformer's registry holds any decorator of `target` itself. */
function hasDecorators(target: unknown): boolean {
  const registry = defaultMetadataStorage as Record<string, unknown> | undefined;
  const maps = ['_typeMetadatas', '_transformMetadatas', '_exposeMetadatas', '_excludeMetadatas'].map((name) => registry?.[name]);
  // A class-transformer whose registry looks different: treat every class as decorated.
  return maps.some((map) => !(map instanceof Map) || map.has(target));
}

function isPrimitive(value: unknown): boolean {
  const kind = typeof value;
  return kind === 'string' || kind === 'number' || kind === 'boolean' || value === null || value === undefined;
}
