import type { TypeKeys } from '../redis/redis-layout';

/**
 * When the holds this instance set end (a handler said its provider
 * rate-limited it, lua/rate-limited.lua): one timer per queue, for the
 * latest end, so the readers of every instance look again then rather than
 * at their next readerBlockMs. Nothing else wakes a reader that went idle
 * during a hold; should this instance stop first, the others look within
 * readerBlockMs.
 */
export class HoldEnds {
  private readonly timers = new Map<TypeKeys, { readonly endsAt: number; readonly timer: NodeJS.Timeout }>();
  private stopped = false;

  constructor(private readonly onEnd: (keys: TypeKeys) => void) {}

  /** The queue is held for `ms` more (Redis's word, a longer hold set earlier included). */
  set(keys: TypeKeys, ms: number): void {
    if (this.stopped) return;
    const endsAt = performance.now() + ms;
    const running = this.timers.get(keys);
    if (running && running.endsAt >= endsAt) return;
    if (running) clearTimeout(running.timer);
    // A millisecond past the end: a claim at the very end would still find the hold.
    const timer = setTimeout(
      () => {
        this.timers.delete(keys);
        this.onEnd(keys);
      },
      Math.max(0, Math.ceil(ms)) + 1,
    );
    timer.unref();
    this.timers.set(keys, { endsAt, timer });
  }

  /** A hold set here has yet to end: its wake-ups are still to come. */
  get pending(): boolean {
    return this.timers.size > 0;
  }

  /** Stopping: no more wake-ups from here, from the holds set so far or any set later. */
  stop(): void {
    this.stopped = true;
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }
}
