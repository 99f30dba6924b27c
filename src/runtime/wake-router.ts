import { Observable, type Subscriber, type Subscription } from 'rxjs';
import { WAKE_ALL, WAKE_LOST, type Wake } from './wake-listener';

/**
 * Hands each wake-up to the dispatchers of its tag alone, and the ones for
 * all (WAKE_ALL, WAKE_LOST) to every dispatcher. Subscribed one by one to the
 * shared wake-ups, every dispatcher of the instance was called for every
 * message, the beacons every instance publishes each second among them: with
 * 10,000 handled types, 10,000 calls a message. One subscription routes them.
 */
export class WakeRouter {
  private readonly byTag = new Map<string, Set<Subscriber<Wake>>>();
  private readonly everyone = new Set<Subscriber<Wake>>();
  private source: Subscription | undefined;

  constructor(private readonly wakes$: Observable<Wake>) {}

  /** The wake-ups of these tags, and those for all; subscribed, it listens while any subscriber does. */
  of(tags: readonly string[]): Observable<Wake> {
    const own = [...new Set(tags)];
    return new Observable<Wake>((subscriber) => {
      this.everyone.add(subscriber);
      for (const tag of own) {
        let set = this.byTag.get(tag);
        if (!set) this.byTag.set(tag, (set = new Set()));
        set.add(subscriber);
      }
      if (!this.source) {
        const source = this.wakes$.subscribe({
          next: (wake) => this.route(wake),
          error: (error: unknown) => this.end((s) => s.error(error)),
          complete: () => this.end((s) => s.complete()),
        });
        // Ended already (the listener stopped): the next subscriber subscribes again, and is ended at once too.
        this.source = source.closed ? undefined : source;
      }
      return () => {
        this.everyone.delete(subscriber);
        for (const tag of own) {
          const set = this.byTag.get(tag);
          set?.delete(subscriber);
          if (set?.size === 0) this.byTag.delete(tag);
        }
        if (this.everyone.size === 0) this.end(() => undefined);
      };
    });
  }

  private route(wake: Wake): void {
    const to = wake.tag === WAKE_ALL || wake.tag === WAKE_LOST ? this.everyone : this.byTag.get(wake.tag);
    if (to) for (const subscriber of [...to]) subscriber.next(wake);
  }

  /** The source ended (the listener stopped) or nobody listens: the source subscription goes, and the next subscriber makes a new one. */
  private end(tell: (subscriber: Subscriber<Wake>) => void): void {
    const source = this.source;
    this.source = undefined;
    const subscribers = [...this.everyone];
    this.everyone.clear();
    this.byTag.clear();
    for (const subscriber of subscribers) tell(subscriber);
    source?.unsubscribe();
  }
}
