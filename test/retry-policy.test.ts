import { describe, expect, it } from 'vitest';
import { InvalidOptionError, customBackoff, exponentialBackoff, fixedBackoff } from '../src';

describe('retry policies', () => {
  it('exponential backoff grows by the factor, stays within its jitter band, and is capped', () => {
    const policy = exponentialBackoff({ maxAttempts: 20, initialMs: 100, factor: 3, maxMs: 5_000, jitter: 0.25 });
    for (let round = 0; round < 200; round++) {
      for (const [attempt, base] of [
        [1, 100],
        [2, 300],
        [3, 900],
        [4, 2_700],
        [5, 5_000],
        [12, 5_000],
      ] as const) {
        const ms = policy.backoffMs(attempt);
        expect(ms).toBeGreaterThanOrEqual(base * 0.75);
        expect(ms).toBeLessThanOrEqual(base);
      }
    }
  });

  it('jitter spreads the waits of instances that fail together', () => {
    const policy = exponentialBackoff({ maxAttempts: 5, initialMs: 10_000 });
    const waits = new Set(Array.from({ length: 50 }, () => policy.backoffMs(1)));
    expect(waits.size).toBeGreaterThan(10);
  });

  it('fixed and custom policies return what they are given', () => {
    expect(fixedBackoff(3, 250).backoffMs(2)).toBe(250);
    expect(customBackoff(4, (attempt) => attempt ** 4 * 1_000 + 15_000).backoffMs(2)).toBe(31_000);
  });

  it('rejects policies that make no sense', () => {
    expect(() => fixedBackoff(0, 10)).toThrow(InvalidOptionError);
    expect(() => exponentialBackoff({ maxAttempts: 3, initialMs: -1 })).toThrow(/initialMs/);
    expect(() => exponentialBackoff({ maxAttempts: 3, initialMs: 10, jitter: 2 })).toThrow(/jitter/);
    expect(() => exponentialBackoff({ maxAttempts: 3, initialMs: 10, factor: 0.5 })).toThrow(/factor/);
  });
});
