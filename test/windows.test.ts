import { describe, expect, it } from 'vitest';
import { WorkItem } from './support/events';
import { useRedis } from './support/harness';
import { waitFor } from './support/wait-for';

describe('windows', () => {
  const redis = useRedis();

  it('smoke', async () => {
    const prefix = redis.prefix();
    const service = redis.service({ prefix });
    const seen: Array<{ id: string; n: number; at: number }> = [];
    const t0 = Date.now();
    service.addHandler(WorkItem, (e) => {
      seen.push({ id: e.id, n: e.n, at: Date.now() - t0 });
      return true;
    });
    expect(await service.enqueue(new WorkItem('d', 1), 500, { debounce: { maxWaitMs: 800 } })).toBe('scheduled');
    expect(await service.enqueue(new WorkItem('d', 2), 500, { debounce: { maxWaitMs: 800 } })).toBe('debounced');
    expect(await service.enqueue(new WorkItem('t', 1), 0, { throttle: { windowMs: 2000 } })).toBe('scheduled');
    expect(await service.enqueue(new WorkItem('t', 2), 0, { throttle: { windowMs: 2000 } })).toBe('throttled');
    expect(await service.enqueue(new WorkItem('k', 1), 300, { dedupe: { windowMs: 5000, keepLast: true } })).toBe('scheduled');
    expect(await service.enqueue(new WorkItem('k', 2), 300, { dedupe: { windowMs: 5000, keepLast: true } })).toBe('duplicate');
    expect(await service.enqueue(new WorkItem('l', 1), 600, { debounce: { leading: true } })).toBe('scheduled');
    expect(await service.enqueue(new WorkItem('l', 2), 600, { debounce: { leading: true } })).toBe('debounced');
    expect(await service.enqueue(new WorkItem('l', 3), 600, { debounce: { leading: true } })).toBe('debounced');
    await waitFor(() => seen.length >= 5, 'five calls', 5000);
    console.log(seen);
    expect(await service.enqueue(new WorkItem('k', 3), 0, { dedupe: { windowMs: 5000 } })).toBe('duplicate');
  });
});
