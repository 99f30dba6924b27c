import { describe, expect, it } from 'vitest';
import { InvalidArgumentError, InvalidOptionError } from '../src';
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
});
