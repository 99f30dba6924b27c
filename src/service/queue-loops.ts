import type { DelayedEventInstance } from '../core/delayed-event.decorator';
import type { TypeKeys } from '../redis/redis-layout';
import type { Consumer } from '../runtime/consumer';
import type { DispatchLook, Dispatcher } from '../runtime/dispatcher';
import type { ParkedLooks, ParkedQueue } from '../runtime/parked-looks';
import type { ReadyReader } from '../runtime/ready-reader';
import type { PartitionSpec } from './partition-wiring';

/** How often the instance looks for quiet handlers to park. */
export const PARK_PASS_MS = 2_000;

/** A queue whose next look comes sooner than this is not parked: it would be made again at once. */
export const PARK_AFTER_MS = 1_000;

/** A handler's loops while its queues are active: the consumer, the dispatchers it runs, its readers (by queue tag, for nudges). */
export interface LiveLoops {
  readonly consumer: Consumer<DelayedEventInstance>;
  readonly dispatchers: readonly Dispatcher[];
  readonly readers: ReadonlyArray<{ readonly queueTag: string; readonly reader: ReadyReader }>;
}

/** What the loops of every handler are told to (one for the instance). */
export interface QueueLoopsHost {
  readonly parked: ParkedLooks;
  /** Its readers take nudges (listed) or no longer do (unlisted). */
  listed(live: LiveLoops): void;
  unlisted(live: LiveLoops): void;
  /** How long a parked queue's next look must be away for parking to be worth it. */
  readonly parkAfterMs: number;
  /** The longest an idle consumer's stop may take (closeTimeoutMs): it has no call to wait for. */
  readonly stopTimeoutMs: number;
}

/**
 * The loops of one handler (since 0.6), running or parked. Once every
 * dispatcher of its queues is quiet (src/runtime/quiet-looks.ts), its readers
 * wait for a nudge alone holding nothing, and no event of it is handled here,
 * the loops are stopped and dropped: the instance's ParkedLooks makes their
 * looks, and a look that finds work, a wake-up or a nudge for its queues makes
 * them again. Stopped, it never parks nor wakes again.
 */
export class QueueLoops implements ParkedQueue {
  live: LiveLoops | undefined;
  readonly looks: readonly DispatchLook[];
  /** The wake-up tags of its queues: a wake-up for one of them wakes it. */
  readonly tags: readonly string[];
  /** The queues its readers claim from. */
  readonly queueTags: readonly string[];
  readonly readerKeys: readonly TypeKeys[];
  private parking: Promise<void> | undefined;
  private wakeWanted = false;
  private stopped = false;

  constructor(
    private readonly specs: readonly PartitionSpec[],
    /** Makes the loops and starts them. */
    private readonly build: () => LiveLoops,
    private readonly host: QueueLoopsHost,
  ) {
    // Exact-size arrays: kept as long as the handler, by every handled type.
    this.looks = specs.length === 1 ? specs[0]!.looks : [...specs.flatMap((spec) => spec.looks)];
    this.tags = [...new Set(specs.flatMap(({ shared, keys }) => [shared.tag, shared.queueTag, keys.tag, keys.queueTag]))];
    this.queueTags = specs.map(({ keys }) => keys.queueTag);
    this.readerKeys = specs.map(({ keys }) => keys);
    this.live = build();
    host.listed(this.live);
  }

  get parked(): boolean {
    return this.live === undefined;
  }

  /** Calls running now. */
  get running(): number {
    return this.live?.consumer.running ?? 0;
  }

  /** The loops it runs, parked ones counted: they still watch their queues. */
  get loopCounts(): { dispatchers: number; readers: number } {
    return { dispatchers: this.looks.length, readers: this.specs.length };
  }

  pokeFlows(): void {
    for (const spec of this.specs) spec.flows.poke();
  }

  /** A wake-up for one of its queues with a due time (or a resume): parked, it looks now; its dispatchers get the wake-up themselves. */
  lookSoon(): void {
    if (this.stopped || this.live) return;
    if (this.parking) this.wakeWanted = true;
    else this.host.parked.lookNow(this);
  }

  async afterLooks(): Promise<void> {
    for (const spec of this.specs) await spec.flows.ifPoked();
  }

  /** Parks its loops if they are all quiet and nothing of its handler is under way here; else nothing. */
  tryPark(): void {
    const live = this.live;
    if (!live || this.parking || this.stopped) return;
    let at = Number.POSITIVE_INFINITY;
    for (const dispatcher of live.dispatchers) {
      const next = dispatcher.quietUntilNextLook();
      if (next === undefined) return;
      at = Math.min(at, next);
    }
    if (at - performance.now() < this.host.parkAfterMs) return;
    if (!live.consumer.idle || !live.readers.every(({ reader }) => reader.parkable)) return;
    this.live = undefined;
    this.host.unlisted(live);
    const mark = this.host.parked.mark();
    // Idle, they stop at once: no call runs, nothing is held, the dispatchers wait.
    // Settled, each of them: a stop that fails does not leave the others running unawaited.
    const stopped = Promise.allSettled([...live.dispatchers.map((d) => d.stop()), live.consumer.stop(this.host.stopTimeoutMs)]);
    this.parking = stopped.then(() => {
      this.parking = undefined;
      if (this.stopped) return;
      if (!this.wakeWanted) return this.host.parked.park(this, at, mark);
      // Every queue was asked to look meanwhile: the loops made again sweep the flow notices too.
      if (mark !== this.host.parked.mark()) this.pokeFlows();
      this.wake();
    });
  }

  /**
   * Events may be ready in the queue of `tag`: its loops again if its readers
   * claim there (the default group's), else a parked look first (a named
   * group's readers claim from its own list, which that look reads).
   */
  nudged(tag: string): void {
    if (this.live || this.stopped) return;
    if (this.readerKeys.some((keys) => keys.tag === tag)) this.wake();
    else this.lookSoon();
  }

  /** Its loops again, now (a wake-up or a nudge for its queues, or a parked look found work). */
  wake(): void {
    if (this.stopped || this.live) return;
    if (this.parking) {
      this.wakeWanted = true;
      return;
    }
    this.wakeWanted = false;
    void this.host.parked.forget(this);
    this.live = this.build();
    this.host.listed(this.live);
  }

  /** Stops for good: no look, no claim, no dispatch once it resolves; running calls get up to `timeoutMs`. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopped = true;
    await Promise.all([this.host.parked.forget(this), this.parking]);
    const live = this.live;
    this.live = undefined;
    if (!live) return;
    this.host.unlisted(live);
    // Stopped together: the dispatchers' stops resolve once their looks in flight are answered.
    await Promise.all([...live.dispatchers.map((dispatcher) => dispatcher.stop()), live.consumer.stop(timeoutMs)]);
  }
}
