import { Subject } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { WAKE_ALL, WAKE_LOST, type Wake } from '../src/runtime/wake-listener';
import { WakeRouter } from '../src/runtime/wake-router';

// Each dispatcher must still hear its own queue's wake-ups and the ones for all (a lost subscription, a look
// everywhere), and nothing else: a dispatcher that missed its own would wait up to pollIntervalMs, or its quiet look.
describe('wake-ups routed to the dispatchers of their tag', () => {
  it('gives each subscriber its tags and the wake-ups for all, once each, and stops listening when the last one goes', () => {
    const source = new Subject<Wake>();
    const router = new WakeRouter(source);
    const heardA: Wake[] = [];
    const heardB: Wake[] = [];
    const a = router.of(['a', 'a']).subscribe((w) => heardA.push(w));
    const b = router.of(['b', 'a|audit']).subscribe((w) => heardB.push(w));
    source.next({ tag: 'a', due: 5 });
    source.next({ tag: 'a|audit', due: 6 });
    source.next({ tag: '#alive:x', due: 1 });
    source.next({ tag: WAKE_ALL, due: 0 });
    source.next({ tag: WAKE_LOST, due: 0 });
    expect(heardA).toEqual([
      { tag: 'a', due: 5 },
      { tag: WAKE_ALL, due: 0 },
      { tag: WAKE_LOST, due: 0 },
    ]);
    expect(heardB).toEqual([
      { tag: 'a|audit', due: 6 },
      { tag: WAKE_ALL, due: 0 },
      { tag: WAKE_LOST, due: 0 },
    ]);

    a.unsubscribe();
    source.next({ tag: 'a', due: 7 });
    expect(heardA).toHaveLength(3);
    b.unsubscribe();
    expect(source.observed).toBe(false);

    // A later subscriber listens again.
    const later: Wake[] = [];
    router.of(['a']).subscribe((w) => later.push(w));
    source.next({ tag: 'a', due: 8 });
    expect(later).toEqual([{ tag: 'a', due: 8 }]);
  });

  it('lets a subscriber leave while it is told a wake-up, and passes an error on to every subscriber', () => {
    const source = new Subject<Wake>();
    const router = new WakeRouter(source);
    const heard: string[] = [];
    const leaving = router.of(['a']).subscribe(() => {
      heard.push('leaving');
      leaving.unsubscribe();
    });
    router.of(['a']).subscribe({ next: () => heard.push('staying'), error: () => heard.push('ended') });
    source.next({ tag: 'a', due: 1 });
    source.next({ tag: 'a', due: 2 });
    expect(heard).toEqual(['leaving', 'staying', 'staying']);
    const errors: unknown[] = [];
    router.of(['b']).subscribe({ error: (e: unknown) => errors.push(e) });
    source.error(new Error('gone'));
    expect(errors).toEqual([new Error('gone')]);
    expect(heard.at(-1)).toBe('ended');
  });

  it('ends every subscriber when the wake-ups end (the listener stopped)', () => {
    const source = new Subject<Wake>();
    const router = new WakeRouter(source);
    let ended = 0;
    router.of(['a']).subscribe({ complete: () => ended++ });
    router.of(['b']).subscribe({ complete: () => ended++ });
    source.complete();
    expect(ended).toBe(2);
    router.of(['c']).subscribe({ complete: () => ended++ });
    expect(ended).toBe(3);
  });
});
