import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, InvalidOptionError, fixedBackoff } from '../src';
import { planHandler } from '../src/service/handler-plan';
import { checkArgumentKeys, checkOptionKeys } from '../src/core/option-keys';
import { resolveOptions } from '../src/service/service-options';

/**
 * The option checks every call and constructor runs, without Redis (the fast
 * tier, npm run check): test/unknown-options.test.ts checks the same through
 * every public call, against Redis, that nothing is stored.
 */
describe('option checks', () => {
  const allowed = { delayMs: true, replace: true, context: true } as const;

  it('name an unknown key, the key it likely misspells (a swap, a letter, a case) and every key allowed', () => {
    for (const [typo, meant] of [
      ['replcae', 'replace'],
      ['delaymS', 'delayMs'],
      ['contxt', 'context'],
    ] as const) {
      expect(() => checkArgumentKeys({ [typo]: 1 }, allowed, 'enqueue')).toThrow(new RegExp(`"${typo}" \\(did you mean ${meant}\\?\\); its options are delayMs, replace, context`));
    }
    expect(() => checkArgumentKeys({ colour: 1 }, allowed, 'enqueue')).toThrow(/has no option "colour"; its options/);
  });

  it('refuse a key set to undefined and a non-object, with the error of their kind: a call, or a constructor or handler', () => {
    expect(() => checkArgumentKeys({ priority: undefined }, allowed, 'enqueue')).toThrow(InvalidArgumentError);
    expect(() => checkOptionKeys({ priority: undefined }, allowed, 'addHandler')).toThrow(InvalidOptionError);
    expect(() => checkArgumentKeys([], allowed, 'enqueue')).toThrow(/got an array/);
    expect(() => checkOptionKeys(null, allowed, 'addHandler')).toThrow(/got null/);
    expect(() => checkArgumentKeys(undefined, allowed, 'enqueue')).not.toThrow();
    // Inherited and symbol keys are not the caller's options.
    expect(() => checkArgumentKeys(Object.create({ stray: 1 }), allowed, 'enqueue')).not.toThrow();
  });

  it('check the constructor options as a whole, before anything connects', () => {
    expect(() => resolveOptions({ redis: 'redis://127.0.0.1:1', pollIntervalMS: 10 } as never)).toThrow(/"pollIntervalMS" \(did you mean pollIntervalMs\?\)/);
    expect(() => resolveOptions({ redis: 'redis://127.0.0.1:1', pollIntervalMs: -1 })).toThrow(InvalidOptionError);
    expect(resolveOptions({ redis: 'redis://127.0.0.1:1' }).pollIntervalMs).toBeGreaterThan(0);
  });

  it('check the options since 0.6: a misspelt key is named, a value out of range refused, the ends of each range taken', () => {
    const redis = 'redis://127.0.0.1:1';
    expect(() => resolveOptions({ redis, priorityAging: 1 } as never)).toThrow(/"priorityAging" \(did you mean priorityAgingMs\?\)/);
    for (const bad of [-1, 1.5, 30 * 24 * 3_600_000 + 1])
      expect(() => resolveOptions({ redis, priorityAgingMs: bad }), String(bad)).toThrow(/priorityAgingMs: must be an integer from 0 to 2592000000/);
    expect(resolveOptions({ redis }).priorityAgingMs).toBe(60_000);
    expect(resolveOptions({ redis, priorityAgingMs: 0 }).priorityAgingMs).toBe(0);

    const route = { type: 'orders.created', partitions: 1 };
    const defaults = { handlerTimeoutMs: 30_000, leaseGraceMs: 5_000, retry: fixedBackoff(3, 10), priorityAgingMs: 5_000 };
    expect(() => planHandler(route, 1, { maxSnooze: 3 } as never, defaults)).toThrow(/"maxSnooze" \(did you mean maxSnoozes\?\)/);
    expect(() => planHandler(route, 1, { priorityAgeingMs: 3 } as never, defaults)).toThrow(/did you mean priorityAgingMs/);
    for (const bad of [-1, 2.5, 1_000_001]) expect(() => planHandler(route, 1, { maxSnoozes: bad }, defaults), String(bad)).toThrow(/maxSnoozes: must be an integer from 0 to 1000000/);
    for (const bad of [-1, 2.5]) expect(() => planHandler(route, 1, { priorityAgingMs: bad }, defaults), String(bad)).toThrow(InvalidOptionError);
    // The defaults: 1,000 snoozes; the service's aging unless the handler gives its own.
    expect(planHandler(route, 1, {}, defaults)).toMatchObject({ maxSnoozes: 1_000, priorityAgingMs: 5_000 });
    expect(planHandler(route, 1, { maxSnoozes: 0, priorityAgingMs: 0 }, defaults)).toMatchObject({ maxSnoozes: 0, priorityAgingMs: 0 });
    expect(planHandler(route, 1, { maxSnoozes: 1_000_000 }, defaults).maxSnoozes).toBe(1_000_000);
    // A batch handler takes them too (its own list of keys).
    expect(planHandler(route, 1, { maxSnoozes: 7 } as never, defaults, { maxBatch: 10, maxWaitMs: 50, calls: 1 }).maxSnoozes).toBe(7);
  });

  it('check heartbeatMs (since 0.6): service and handler, 250 to 60,000 or false; the handler overrides; the lease is three heartbeats', () => {
    const redis = 'redis://127.0.0.1:1';
    expect(() => resolveOptions({ redis, heartbeatMS: 1_000 } as never)).toThrow(/"heartbeatMS" \(did you mean heartbeatMs\?\)/);
    for (const bad of [249, 60_001, 1.5, 0, -1, true, '1000'])
      expect(() => resolveOptions({ redis, heartbeatMs: bad as never }), String(bad)).toThrow(/heartbeatMs: must be an integer from 250 to 60000/);
    expect(resolveOptions({ redis }).heartbeatMs).toBe(5_000);
    expect(resolveOptions({ redis, heartbeatMs: 250 }).heartbeatMs).toBe(250);
    expect(resolveOptions({ redis, heartbeatMs: 60_000 }).heartbeatMs).toBe(60_000);
    expect(resolveOptions({ redis, heartbeatMs: false }).heartbeatMs).toBe(false);

    const route = { type: 'orders.created', partitions: 1 };
    const defaults = { handlerTimeoutMs: 30_000, leaseGraceMs: 5_000, retry: fixedBackoff(3, 10), heartbeatMs: 5_000 as number | false };
    expect(() => planHandler(route, 1, { heartbeat: 1_000 } as never, defaults)).toThrow(/"heartbeat" \(did you mean heartbeatMs\?\)/);
    expect(() => planHandler(route, 1, { heartbeatMs: 100 }, defaults)).toThrow(InvalidOptionError);
    expect(() => planHandler(route, 1, { heartbeatMs: 100 } as never, defaults, { maxBatch: 10, maxWaitMs: 50, calls: 1 })).toThrow(/heartbeatMs/);
    expect(planHandler(route, 1, {}, defaults)).toMatchObject({ heartbeatMs: 5_000, heartbeatLeaseMs: 15_000 });
    expect(planHandler(route, 1, { heartbeatMs: 1_000 }, defaults)).toMatchObject({ heartbeatMs: 1_000, heartbeatLeaseMs: 3_000 });
    expect(planHandler(route, 1, { heartbeatMs: false }, defaults)).toMatchObject({ heartbeatMs: 0, heartbeatLeaseMs: 0 });
    expect(planHandler(route, 1, { heartbeatMs: 250 }, { ...defaults, heartbeatMs: false })).toMatchObject({ heartbeatMs: 250 });
    expect(planHandler(route, 1, {}, { ...defaults, heartbeatMs: false })).toMatchObject({ heartbeatMs: 0 });
  });
});
