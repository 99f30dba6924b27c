import { describe, expect, it } from 'vitest';
import { InvalidOptionError, exponentialBackoff, fixedBackoff } from '../src';
import { DEFAULT_PREFETCH } from '../src/service/handler-options';
import { planHandler } from '../src/service/handler-plan';

/**
 * What addHandler and addBatchHandler decide from their options alone, before
 * any loop starts: checked here without Redis (the fast tier, npm run check).
 */
describe('a handler plan', () => {
  const defaults = { handlerTimeoutMs: 30_000, leaseGraceMs: 5_000, retry: exponentialBackoff({ maxAttempts: 5, initialMs: 1_000 }) };
  const route = { type: 'orders.created', partitions: 1 };

  it('takes the defaults: one call at a time, events claimed ahead, a lease of the timeout and the grace', () => {
    const plan = planHandler(route, undefined, {}, defaults);
    expect(plan).toMatchObject({
      type: 'orders.created',
      group: 'default',
      parallelism: 1,
      slots: 1,
      prefetch: DEFAULT_PREFETCH,
      timeoutMs: 30_000,
      leaseMs: 35_000,
      limited: false,
      countsRunning: false,
    });
    expect(plan.retry).toBe(defaults.retry);
    expect(plan.partitionLimits).toEqual([{}]);
  });

  it('gives a batch event a lease that covers gathering and waiting behind every running call, and claims nothing ahead', () => {
    const plan = planHandler(route, 3, { timeoutMs: 2_000 }, defaults, { maxBatch: 50, maxWaitMs: 500, calls: 3 });
    expect(plan.leaseMs).toBe((3 + 1) * 2_000 + 500 + 5_000);
    expect(plan.slots).toBe(150);
    expect(plan.prefetch).toBe(0);
  });

  it('claims only for free slots under limits, and shares them between partitions', () => {
    const plan = planHandler({ type: 'orders.created', partitions: 2 }, 4, { rateLimit: { max: 10, perMs: 1_000 }, globalConcurrency: 4, prefetch: 100, retry: fixedBackoff(2, 10) }, defaults);
    expect(plan).toMatchObject({ prefetch: 0, limited: true, countsRunning: true });
    expect(plan.retry.maxAttempts).toBe(2);
    expect(plan.partitionLimits).toEqual([
      { rate: { max: 5, perMs: 1_000 }, concurrency: 2 },
      { rate: { max: 5, perMs: 1_000 }, concurrency: 2 },
    ]);
  });

  it('asks about the group before the other options: a second handler in a group is refused as such, whatever else it says', () => {
    const taken = new Error('already registered');
    const checkGroup = (group: string) => {
      if (group === 'audit') throw taken;
    };
    expect(() => planHandler(route, 1, { group: 'audit', timeoutMs: -1 }, defaults, undefined, checkGroup)).toThrow(taken);
    expect(() => planHandler(route, 1, { group: 'billing', timeoutMs: -1 }, defaults, undefined, checkGroup)).toThrow(InvalidOptionError);
    // The group's own name is checked first: a bad name is an option error, not a registration.
    expect(() => planHandler(route, 1, { group: '' }, defaults, undefined, checkGroup)).toThrow(InvalidOptionError);
  });

  it('refuses what it cannot honour, naming the option: bounds, an unknown or misspelt key, a limit too small to share', () => {
    const refused = (parallelism: number | undefined, options: object, partitions = 1) => {
      try {
        planHandler({ type: 'orders.created', partitions }, parallelism, options, defaults);
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidOptionError);
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(refused(0, {})).toMatch(/parallelism.*integer from 1 to 10000, got 0/);
    expect(refused(1, { prefetch: -1 })).toMatch(/prefetch.*integer from 0 to 10000/);
    expect(refused(1, { timeoutMs: 0 })).toMatch(/timeoutMs.*finite number > 0/);
    expect(refused(1, { prefech: 10 })).toMatch(/prefech.*prefetch/);
    expect(refused(1, { group: 'a b' })).toMatch(/group/);
    expect(refused(1, { globalConcurrency: 1 }, 2)).toMatch(/globalConcurrency/);
    expect(refused(1, { retry: {} })).toMatch(/retry.*RetryPolicy/);
  });
});
