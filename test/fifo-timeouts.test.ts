import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FifoTimeouts } from '../src/runtime/fifo-timeouts';

describe('handler timeouts sharing one timer', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  it('fires each timeout after its own full duration, in start order', () => {
    const timeouts = new FifoTimeouts(100);
    const fired: Array<[string, number]> = [];
    timeouts.start(() => fired.push(['a', performance.now()]));
    vi.advanceTimersByTime(30);
    timeouts.start(() => fired.push(['b', performance.now()]));
    vi.advanceTimersByTime(69);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired.map(([name]) => name)).toEqual(['a']);
    vi.advanceTimersByTime(29);
    expect(fired.map(([name]) => name)).toEqual(['a']);
    vi.advanceTimersByTime(1);
    expect(fired.map(([name]) => name)).toEqual(['a', 'b']);
    expect(fired[1]![1] - fired[0]![1]).toBe(30);
  });

  it('never fires a cancelled timeout, and a cancelled earlier one does not delay later ones', () => {
    const timeouts = new FifoTimeouts(100);
    const fired: string[] = [];
    const cancelA = timeouts.start(() => fired.push('a'));
    vi.advanceTimersByTime(10);
    timeouts.start(() => fired.push('b'));
    cancelA();
    vi.advanceTimersByTime(100);
    expect(fired).toEqual(['b']);
  });

  it('lets go of calls that ended before the oldest one still running, long before the timeout', () => {
    const timeouts = new FifoTimeouts(600_000);
    const running: Array<() => void> = [];
    let fired = 0;
    for (let i = 0; i < 100_000; i++) {
      running.push(timeouts.start(() => fired++));
      if (running.length > 32) running.shift()!();
    }
    expect(timeouts.held).toBeLessThanOrEqual(33);
    vi.advanceTimersByTime(600_000);
    expect(fired).toBe(32);
    expect(timeouts.held).toBe(0);
  });

  it('keeps working after going idle and across many starts', () => {
    const timeouts = new FifoTimeouts(5);
    let fired = 0;
    for (let round = 0; round < 3; round++) {
      const cancels = Array.from({ length: 3_000 }, () => timeouts.start(() => fired++));
      cancels.forEach((cancel, i) => i % 2 === 0 && cancel());
      vi.advanceTimersByTime(5);
    }
    expect(fired).toBe(3 * 1_500);
  });
});
